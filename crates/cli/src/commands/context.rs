//! `instantstart context [zones|instance-types|eks-clusters]`: what the control plane runs as and what a
//! region offers (inspect before create).

use crate::app::Globals;
use crate::exit::Exit;
use crate::output::{self, Table, fields, s};
use clap::{Args, Subcommand};
use serde_json::Value;

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ContextArgs {
    #[command(subcommand)]
    pub command: Option<ContextCommand>,
}

#[derive(Subcommand, Debug)]
pub enum ContextCommand {
    /// Availability Zones of a region.
    Zones {
        /// AWS region [default: the server's default region].
        #[arg(long)]
        region: Option<String>,
    },
    /// Every HyperPod instance type, with EC2's specs and the AZs of a region that offer it.
    InstanceTypes {
        /// AWS region [default: the server's default region].
        #[arg(long)]
        region: Option<String>,
    },
    /// EKS clusters of a region: their HyperPod clusters, which InstantStart manages, and whether
    /// the control plane has access (what `cluster import` can take).
    EksClusters {
        /// AWS region [default: the server's default region].
        #[arg(long)]
        region: Option<String>,
    },
}

pub async fn run(g: &Globals, args: ContextArgs) -> anyhow::Result<Exit> {
    let client = g.client()?;
    match args.command {
        None => {
            let ctx = client.context().await?;
            output::emit(g.output, &ctx, || {
                let mut provider = s(&ctx, "provider");
                if let Some(speed) = ctx["sim_speed"].as_f64() {
                    provider = format!("{provider} (simulated cloud, speed {speed}x)");
                }
                let identity = match ctx.get("identity").filter(|v| !v.is_null()) {
                    Some(id) => format!("{} ({})", s(id, "arn"), s(id, "account")),
                    None => format!("unavailable: {}", s(&ctx, "identity_error")),
                };
                fields(&[
                    ("Server", client.base_url().as_str().trim_end_matches('/').to_string()),
                    ("Provider", provider),
                    ("Identity", identity),
                    ("Default region", s(&ctx, "default_region")),
                    ("Active cluster", s(&ctx, "active_cluster")),
                    ("Server version", s(&ctx, "version")),
                ])
            })?;
        }
        Some(ContextCommand::Zones { region }) => {
            let zones = client.zones(region.as_deref()).await?;
            output::emit(g.output, &zones, || {
                let mut t = Table::new(&["ZONE", "ZONE ID"]);
                for z in &zones {
                    t.row(vec![z.name.clone(), z.zone_id.clone()]);
                }
                t.render_or("No Availability Zones.")
            })?;
        }
        Some(ContextCommand::EksClusters { region }) => {
            let clusters = client.eks_clusters(region.as_deref()).await?;
            output::emit(g.output, &clusters, || {
                let mut t =
                    Table::new(&["EKS CLUSTER", "VERSION", "STATE", "AUTH MODE", "HYPERPOD", "MANAGED AS", "ACCESS"]);
                for c in &clusters {
                    let hyperpod: Vec<&str> = c["hyperpod_clusters"]
                        .as_array()
                        .map(|a| a.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    let managed: Vec<String> = c["managed_as"]
                        .as_array()
                        .map(|a| a.iter().map(|m| format!("{} ({})", s(m, "name"), s(m, "source"))).collect())
                        .unwrap_or_default();
                    let managed = if managed.is_empty() { "-".to_string() } else { managed.join(", ") };
                    let access = match c["control_plane_access"].as_bool() {
                        Some(true) => "entry",
                        Some(false) => "none",
                        None => "?",
                    };
                    let state = match &c["state"] {
                        Value::String(s) => s.clone(),
                        Value::Object(o) => o.keys().next().cloned().unwrap_or_default(),
                        _ => "?".into(),
                    };
                    t.row(vec![
                        s(c, "name"),
                        s(c, "version"),
                        state,
                        s(c, "authentication_mode"),
                        if hyperpod.is_empty() { "-".into() } else { hyperpod.join(",") },
                        managed,
                        access.into(),
                    ]);
                }
                t.render_or("No EKS clusters in this region.")
            })?;
        }
        Some(ContextCommand::InstanceTypes { region }) => {
            let types = client.instance_types(region.as_deref()).await?;
            output::emit(g.output, &types, || {
                let mut t = Table::new(&["INSTANCE TYPE", "ACCELERATORS", "VCPUS", "MEMORY", "EFA", "ZONES"]);
                for it in &types {
                    let info = &it["info"];
                    let accel = match info["accelerators"].as_u64() {
                        Some(0) => "-".into(),
                        Some(n) => format!("{n}× {}", s(info, "accelerator")),
                        None => "?".into(),
                    };
                    let efa = match (info["efa_interfaces"].as_u64(), info["efa_only_supported"].as_bool()) {
                        (Some(0), _) => "-".into(),
                        (Some(n), Some(true)) => format!("{n} (EFA-only ok)"),
                        (Some(n), _) => n.to_string(),
                        _ => "?".into(),
                    };
                    let memory = info["memory_gib"].as_u64().map(|m| format!("{m} GiB")).unwrap_or_else(|| "?".into());
                    let zones: Vec<&str> = it["availability_zones"]
                        .as_array()
                        .map(|a| a.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    t.row(vec![s(it, "instance_type"), accel, s(info, "vcpus"), memory, efa, zones.join(",")]);
                }
                t.render_or("No instance types.")
            })?;
        }
    }
    Ok(Exit::Ok)
}
