//! `instantstart context [zones|instance-types|eks-clusters|quotas|training-plans|offerings]`: what
//! the control plane runs as and what a region offers (inspect before create), including HyperPod
//! quotas with their use, training plans, and training plan offerings (a search: buying a plan is
//! done in the SageMaker console).

use crate::app::Globals;
use crate::exit::Exit;
use crate::output::{self, Table, fields};
use clap::{Args, Subcommand};
use instantstart_core::api::context::ProviderKind;
use instantstart_core::provider::ResourceState;
use instantstart_core::store::ClusterSource;

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
    /// HyperPod instance quotas ("<type> for cluster usage") with the instances in use and what
    /// is still available.
    Quotas {
        /// AWS region [default: the server's default region].
        #[arg(long)]
        region: Option<String>,
        /// Only this instance type.
        #[arg(long = "type", value_name = "INSTANCE_TYPE")]
        instance_type: Option<String>,
    },
    /// Training plans of the account: status, AZ, instance type and counts, start and end.
    TrainingPlans {
        /// AWS region [default: the server's default region].
        #[arg(long)]
        region: Option<String>,
    },
    /// Training plan offerings HyperPod clusters could reserve (a search: buy a plan in the
    /// SageMaker console, then use its ARN as an instance group's capacity).
    Offerings(OfferingsArgs),
}

#[derive(Args, Debug)]
pub struct OfferingsArgs {
    /// A type a training plan can reserve, e.g. ml.p5.48xlarge.
    #[arg(long = "type", value_name = "INSTANCE_TYPE")]
    pub instance_type: String,
    /// Instances to reserve (1-256).
    #[arg(long)]
    pub count: u32,
    /// Duration in hours (1-87600).
    #[arg(long)]
    pub hours: u32,
    /// Earliest start (RFC 3339).
    #[arg(long, value_name = "TIME")]
    pub start_after: Option<chrono::DateTime<chrono::Utc>>,
    /// Latest end (RFC 3339).
    #[arg(long, value_name = "TIME")]
    pub end_before: Option<chrono::DateTime<chrono::Utc>>,
    /// AWS region [default: the server's default region].
    #[arg(long)]
    pub region: Option<String>,
}

/// A time as the tables show it (RFC 3339, seconds), `-` when absent.
fn time(t: Option<chrono::DateTime<chrono::Utc>>) -> String {
    t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)).unwrap_or_else(|| "-".into())
}

/// An optional value as the tables show it, `-` when absent.
fn or_dash(v: Option<impl ToString>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

pub async fn run(g: &Globals, args: ContextArgs) -> anyhow::Result<Exit> {
    let client = g.client()?;
    match args.command {
        None => {
            let ctx = client.context().await?;
            output::emit(g.output, &ctx, || {
                let mut provider = match ctx.provider {
                    ProviderKind::Sim => "sim".to_string(),
                    ProviderKind::Aws => "aws".to_string(),
                };
                if let Some(speed) = ctx.sim_speed {
                    provider = format!("{provider} (simulated cloud, speed {speed}x)");
                }
                let identity = match &ctx.identity {
                    Some(id) => format!("{} ({})", id.arn, id.account),
                    None => format!("unavailable: {}", ctx.identity_error.as_deref().unwrap_or("-")),
                };
                fields(&[
                    ("Server", client.base_url().as_str().trim_end_matches('/').to_string()),
                    ("Provider", provider),
                    ("Identity", identity),
                    ("Default region", ctx.default_region.clone()),
                    ("Active cluster", ctx.active_cluster.clone().unwrap_or_else(|| "-".into())),
                    ("Server version", ctx.version.clone()),
                ])
            })?;
        }
        Some(ContextCommand::Quotas { region, instance_type }) => {
            let mut quotas = client.quotas(region.as_deref()).await?;
            if let Some(t) = &instance_type {
                quotas.retain(|q| &q.instance_type == t);
            }
            output::emit(g.output, &quotas, || {
                let mut t = Table::new(&["INSTANCE TYPE", "QUOTA", "IN USE", "AVAILABLE", "CODE"]);
                for q in &quotas {
                    t.row(vec![
                        q.instance_type.clone(),
                        q.value.to_string(),
                        q.in_use.to_string(),
                        q.available.to_string(),
                        q.code.clone(),
                    ]);
                }
                t.render_or("No HyperPod quotas reported in this region.")
            })?;
        }
        Some(ContextCommand::TrainingPlans { region }) => {
            let plans = client.training_plans(region.as_deref()).await?;
            output::emit(g.output, &plans, || {
                let mut t = Table::new(&["NAME", "STATUS", "TYPE", "AZ", "INSTANCES", "IN USE", "START", "END"]);
                for p in &plans {
                    t.row(vec![
                        p.name.clone(),
                        p.status.clone(),
                        or_dash(p.instance_type.as_deref()),
                        or_dash(p.availability_zone.as_deref()),
                        p.total_instance_count.to_string(),
                        or_dash(p.in_use_instance_count),
                        time(p.start_time),
                        time(p.end_time),
                    ]);
                }
                t.render_or("No training plans in this region.")
            })?;
        }
        Some(ContextCommand::Offerings(a)) => {
            let q = instantstart_core::provider::OfferingQuery {
                instance_type: a.instance_type,
                instance_count: a.count,
                duration_hours: a.hours,
                start_after: a.start_after,
                end_before: a.end_before,
            };
            let offerings = client.training_plan_offerings(a.region.as_deref(), &q).await?;
            output::emit(g.output, &offerings, || {
                let mut t = Table::new(&["OFFERING", "TYPE", "COUNT", "AZ", "START", "END", "HOURS", "FEE"]);
                for o in &offerings {
                    t.row(vec![
                        o.offering_id.clone(),
                        o.instance_type.clone(),
                        o.instance_count.to_string(),
                        or_dash(o.availability_zone.as_deref()),
                        time(o.start_time),
                        time(o.end_time),
                        or_dash(o.duration_hours),
                        match (&o.upfront_fee, &o.currency_code) {
                            (Some(f), Some(c)) => format!("{f} {c}"),
                            (Some(f), None) => f.clone(),
                            _ => "-".into(),
                        },
                    ]);
                }
                t.render_or("No offerings match.")
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
                    let managed: Vec<String> = c
                        .managed_as
                        .iter()
                        .map(|m| {
                            let source = match m.source {
                                ClusterSource::Created => "created",
                                ClusterSource::Imported => "imported",
                            };
                            format!("{} ({source})", m.name)
                        })
                        .collect();
                    let managed = if managed.is_empty() { "-".to_string() } else { managed.join(", ") };
                    let access = match c.control_plane_access {
                        Some(true) => "entry",
                        Some(false) => "none",
                        None => "?",
                    };
                    let state = match &c.state {
                        ResourceState::Creating => "creating",
                        ResourceState::Active => "active",
                        ResourceState::Updating => "updating",
                        ResourceState::Deleting => "deleting",
                        ResourceState::Failed { .. } => "failed",
                    };
                    t.row(vec![
                        c.name.clone(),
                        c.version.clone(),
                        state.into(),
                        c.authentication_mode.clone().unwrap_or_else(|| "-".into()),
                        if c.hyperpod_clusters.is_empty() { "-".into() } else { c.hyperpod_clusters.join(",") },
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
                    let info = it.info.as_ref();
                    let accel = match info {
                        Some(i) if i.accelerators == 0 => "-".into(),
                        Some(i) => format!("{}× {}", i.accelerators, i.accelerator),
                        None => "?".into(),
                    };
                    let efa = match info {
                        Some(i) if i.efa_interfaces == 0 => "-".into(),
                        Some(i) if i.efa_only_supported => format!("{} (EFA-only ok)", i.efa_interfaces),
                        Some(i) => i.efa_interfaces.to_string(),
                        None => "?".into(),
                    };
                    let memory = info.map(|i| format!("{} GiB", i.memory_gib)).unwrap_or_else(|| "?".into());
                    let vcpus = info.map(|i| i.vcpus.to_string()).unwrap_or_else(|| "-".into());
                    t.row(vec![it.instance_type.clone(), accel, vcpus, memory, efa, it.availability_zones.join(",")]);
                }
                t.render_or("No instance types.")
            })?;
        }
    }
    Ok(Exit::Ok)
}
