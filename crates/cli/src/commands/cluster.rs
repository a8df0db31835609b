//! `instantstart cluster create|import|list|get|events|use|delete|hyperpod`.
//!
//! `create` builds the API's typed `ClusterCreateRequest` from flags (defaults are the core's,
//! filled in by deserializing), or sends a JSON/YAML file (`-f`) as is so the server reports
//! every finding with its field path. `--print-spec` prints a starting spec for `-f`.

use crate::app::Globals;
use crate::exit::{Exit, usage};
use crate::mutation::{self, MutationArgs};
use crate::output::{self, Output, Table, fields};
use clap::{Args, Subcommand};
use instantstart_client::DeleteClusterOptions;
use instantstart_core::provider::ResourceState;
use instantstart_core::spec::{CapacitySpec, ClusterCreateRequest, InstanceGroupSpec};
use ipnet::Ipv4Net;
use serde_json::{Map, Value, json};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Create a cluster: network → EKS → active → add-ons → HyperPod → storage.
    Create(CreateArgs),
    /// Import an existing EKS (and HyperPod) cluster.
    Import(ImportArgs),
    /// List clusters.
    List,
    /// Show a cluster with live EKS/HyperPod state and nodes.
    Get {
        /// Cluster name.
        name: String,
    },
    /// Show the HyperPod cluster's events, newest first (status changes of the cluster, its
    /// groups and nodes; failures, replacements, health checks).
    Events(EventsArgs),
    /// Select the active cluster.
    Use {
        /// Cluster name.
        #[arg(required_unless_present = "none")]
        name: Option<String>,
        /// Clear the active cluster.
        #[arg(long, conflicts_with = "name")]
        none: bool,
    },
    /// Delete a cluster (imported clusters are only forgotten).
    Delete(DeleteArgs),
    /// Add a HyperPod cluster to an EKS-only cluster, or remove it (EKS stays).
    #[command(subcommand)]
    Hyperpod(super::hyperpod::HyperPodCommand),
}

#[derive(Args, Debug)]
pub struct EventsArgs {
    /// Cluster name.
    pub name: String,
    /// Only the events of this instance group.
    #[arg(long)]
    pub group: Option<String>,
    /// Only the events of this node (instance id i-…).
    #[arg(long, value_name = "NODE_ID")]
    pub node: Option<String>,
    /// Only events about this kind of resource.
    #[arg(long, value_parser = ["cluster", "instance_group", "instance"])]
    pub resource: Option<String>,
    /// Only events after this time (RFC 3339, e.g. 2026-01-01T00:00:00Z).
    #[arg(long, value_name = "TIME")]
    pub after: Option<chrono::DateTime<chrono::Utc>>,
    /// Only events before this time (RFC 3339).
    #[arg(long, value_name = "TIME")]
    pub before: Option<chrono::DateTime<chrono::Utc>>,
    /// Events per page (1-100) [default: 50].
    #[arg(long)]
    pub limit: Option<u32>,
    /// The cursor a previous page printed, for the next page.
    #[arg(long)]
    pub cursor: Option<String>,
}

const GROUP_HELP: &str = "An instance group: name=NAME,type=INSTANCE_TYPE,count=N,az=AZ \
[,capacity=on_demand|spot|training_plan:<arn>][,efa-only][,stress][,connectivity][,subnet=ID][,ebs=GB]. Repeatable.";

#[derive(Args, Debug)]
pub struct CreateArgs {
    /// Cluster name; every AWS resource name derives from it.
    #[arg(long, required_unless_present_any = ["file", "print_spec"])]
    pub name: Option<String>,
    /// AWS region [default: the server's default region].
    #[arg(long)]
    pub region: Option<String>,
    /// Availability Zone for the control plane subnets (at least two). Repeatable.
    #[arg(long = "az", value_name = "AZ")]
    pub azs: Vec<String>,
    /// Kubernetes version of the EKS control plane [default: the server's].
    #[arg(long, value_name = "VERSION")]
    pub k8s_version: Option<String>,
    /// CIDR of the new VPC [default: 10.0.0.0/16].
    #[arg(long, value_name = "CIDR")]
    pub vpc_cidr: Option<Ipv4Net>,
    #[arg(long = "group", value_name = "SPEC", help = GROUP_HELP, value_parser = parse_group)]
    pub groups: Vec<InstanceGroupSpec>,
    /// Shared S3 bucket name [default: derived from the cluster name, account and region].
    #[arg(long)]
    pub bucket: Option<String>,
    /// An internet address block that may reach the EKS API's public endpoint (repeatable),
    /// e.g. your office's for kubectl; the server adds the control plane's own [default: the
    /// server's own only, or every address when it has none].
    #[arg(long = "public-access-cidr", value_name = "CIDR")]
    pub public_access_cidrs: Vec<Ipv4Net>,
    /// Read the request (JSON or YAML, the API's ClusterCreateRequest) from a file, `-` for stdin.
    #[arg(short = 'f', long = "file", value_name = "FILE",
          conflicts_with_all = ["name", "region", "azs", "k8s_version", "vpc_cidr", "groups", "bucket", "public_access_cidrs", "print_spec"])]
    pub file: Option<PathBuf>,
    /// Print a starting spec (from the flags given, placeholders otherwise) for `-f`, and exit.
    #[arg(long, conflicts_with_all = ["dry_run", "wait"])]
    pub print_spec: bool,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// InstantStart name for the cluster.
    #[arg(long, required_unless_present = "file")]
    pub name: Option<String>,
    /// AWS region [default: the server's default region].
    #[arg(long)]
    pub region: Option<String>,
    /// Name of the existing EKS cluster.
    #[arg(long, required_unless_present = "file")]
    pub eks_cluster: Option<String>,
    /// Name of an existing HyperPod cluster orchestrated by it.
    #[arg(long)]
    pub hyperpod_cluster: Option<String>,
    /// S3 bucket to mount as the s3-shared claim (created if missing; needed by tiered
    /// checkpointing and the inference operator).
    #[arg(long)]
    pub bucket: Option<String>,
    /// Read the request (JSON or YAML) from a file, `-` for stdin.
    #[arg(short = 'f', long = "file", value_name = "FILE",
          conflicts_with_all = ["name", "region", "eks_cluster", "hyperpod_cluster", "bucket"])]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

#[derive(Args, Debug)]
pub struct DeleteArgs {
    /// Cluster name.
    pub name: String,
    /// Also delete the shared S3 bucket if InstantStart created it (default: keep the data; an
    /// S3 bucket holding objects is never deleted).
    #[arg(long)]
    pub delete_bucket: bool,
    /// Keep the MLflow tracking servers created for the cluster (default: they are deleted with
    /// it, with the IAM role InstantStart created for each; their artifacts stay in the bucket).
    #[arg(long)]
    pub keep_tracking_servers: bool,
    /// Do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub yes: bool,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

/// `on_demand`, `spot` or `training_plan:<arn>` as the API's capacity JSON.
fn capacity_json(text: &str) -> Result<Value, String> {
    Ok(match text {
        "on_demand" | "on-demand" | "ondemand" => json!({ "type": "on_demand" }),
        "spot" => json!({ "type": "spot" }),
        other => match other.split_once(':') {
            Some(("training_plan" | "training-plan", arn)) if !arn.is_empty() => {
                json!({ "type": "training_plan", "arn": arn })
            }
            _ => return Err("capacity must be on_demand, spot or training_plan:<arn>".into()),
        },
    })
}

/// Parses `on_demand|spot|training_plan:<arn>` into the API's capacity type.
pub(crate) fn parse_capacity(text: &str) -> Result<CapacitySpec, String> {
    serde_json::from_value(capacity_json(text.trim())?).map_err(|e| e.to_string())
}

/// Parses `--group name=…,type=…,count=…,az=…[,…]` into the API's instance group spec.
pub(crate) fn parse_group(text: &str) -> Result<InstanceGroupSpec, String> {
    let mut group = Map::new();
    let mut checks = Map::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = match part.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (part, None),
        };
        let need = |v: Option<&'_ str>| -> Result<String, String> {
            v.filter(|v| !v.is_empty()).map(str::to_string).ok_or_else(|| format!("{key} needs a value ({key}=…)"))
        };
        match key {
            "name" => group.insert("name".into(), json!(need(value)?)),
            "type" | "instance_type" => group.insert("instance_type".into(), json!(need(value)?)),
            "count" => {
                let n: u32 = need(value)?.parse().map_err(|_| "count must be a whole number".to_string())?;
                group.insert("count".into(), json!(n))
            }
            "az" | "availability_zone" => group.insert("availability_zone".into(), json!(need(value)?)),
            "subnet" | "subnet_id" => group.insert("subnet_id".into(), json!(need(value)?)),
            "ebs" | "ebs_volume_gb" => {
                let n: u32 = need(value)?.parse().map_err(|_| "ebs must be a size in GB".to_string())?;
                group.insert("ebs_volume_gb".into(), json!(n))
            }
            "capacity" => group.insert("capacity".into(), capacity_json(&need(value)?)?),
            "efa-only" | "efa_only" if value.is_none() => group.insert("interface_mode".into(), json!("efa_only")),
            "stress" if value.is_none() => checks.insert("stress".into(), json!(true)),
            "connectivity" if value.is_none() => checks.insert("connectivity".into(), json!(true)),
            other => return Err(format!("unknown key {other:?}")),
        };
    }
    for (key, field) in [("name", "name"), ("type", "instance_type"), ("count", "count"), ("az", "availability_zone")] {
        if !group.contains_key(field) {
            return Err(format!("missing {key}= (expected name=…,type=…,count=…,az=…)"));
        }
    }
    if !checks.is_empty() {
        group.insert("deep_health_checks".into(), Value::Object(checks));
    }
    serde_json::from_value(Value::Object(group)).map_err(|e| e.to_string())
}

pub async fn run(g: &Globals, cmd: ClusterCommand) -> anyhow::Result<Exit> {
    match cmd {
        ClusterCommand::Create(args) => create(g, args).await,
        ClusterCommand::Import(args) => import(g, args).await,
        ClusterCommand::List => list(g).await,
        ClusterCommand::Get { name } => get(g, &name).await,
        ClusterCommand::Events(args) => events(g, args).await,
        ClusterCommand::Use { name, none: _ } => {
            let client = g.client()?;
            let active = client.set_active_cluster(name.as_deref()).await?;
            output::emit(g.output, &json!({ "name": active }), || match &active {
                Some(n) => format!("Active cluster: {n}"),
                None => "No active cluster.".into(),
            })?;
            Ok(Exit::Ok)
        }
        ClusterCommand::Delete(args) => delete(g, args).await,
        ClusterCommand::Hyperpod(cmd) => super::hyperpod::run(g, cmd).await,
    }
}

/// The typed request from flags; placeholders for what is missing when only printing a spec.
fn request_from_flags(args: &CreateArgs, region: String, placeholders: bool) -> anyhow::Result<ClusterCreateRequest> {
    let mut req = Map::new();
    let name = args.name.clone().or_else(|| placeholders.then(|| "my-cluster".into()));
    req.insert("name".into(), json!(name));
    let azs = if args.azs.is_empty() && placeholders {
        vec![format!("{region}a"), format!("{region}b")]
    } else {
        args.azs.clone()
    };
    req.insert("availability_zones".into(), json!(azs));
    if let Some(v) = &args.k8s_version {
        req.insert("kubernetes_version".into(), json!(v));
    }
    if let Some(cidr) = &args.vpc_cidr {
        req.insert("network".into(), json!({ "mode": "new_vpc", "cidr": cidr.to_string() }));
    }
    let groups: Vec<Value> = if args.groups.is_empty() && placeholders {
        vec![json!({ "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": azs[0] })]
    } else {
        args.groups.iter().map(serde_json::to_value).collect::<Result<_, _>>()?
    };
    if !groups.is_empty() {
        req.insert("hyperpod".into(), json!({ "instance_groups": groups }));
    }
    if let Some(b) = &args.bucket {
        req.insert("storage".into(), json!({ "bucket": b }));
    } else if placeholders {
        req.insert("storage".into(), json!({}));
    }
    if !args.public_access_cidrs.is_empty() {
        let cidrs: Vec<String> = args.public_access_cidrs.iter().map(ToString::to_string).collect();
        req.insert("public_access_cidrs".into(), json!(cidrs));
    }
    req.insert("region".into(), json!(region));
    // Deserializing fills in the core's defaults (Kubernetes version, network, node recovery, …).
    Ok(serde_json::from_value(Value::Object(req))?)
}

async fn default_region(g: &Globals, given: &Option<String>) -> anyhow::Result<String> {
    if let Some(r) = given {
        return Ok(r.clone());
    }
    let ctx = g.client()?.context().await?;
    Some(ctx.default_region).filter(|r| !r.is_empty()).ok_or_else(|| usage("--region is required"))
}

async fn create(g: &Globals, args: CreateArgs) -> anyhow::Result<Exit> {
    if args.print_spec {
        let region = args.region.clone().unwrap_or_else(|| "us-east-1".into());
        let spec = request_from_flags(&args, region, true)?;
        let text = match g.output {
            Output::Json => serde_json::to_string_pretty(&spec)? + "\n",
            _ => serde_norway::to_string(&spec)?,
        };
        print!("{text}");
        return Ok(Exit::Ok);
    }
    let client = g.client()?;
    let opts = args.mutation.options();
    let submitted = match &args.file {
        Some(path) => client.create_cluster_json(&output::read_document(path)?, &opts).await?,
        None => {
            let region = default_region(g, &args.region).await?;
            client.create_cluster(&request_from_flags(&args, region, false)?, &opts).await?
        }
    };
    mutation::finish(g, &client, submitted, args.mutation.wait).await
}

async fn import(g: &Globals, args: ImportArgs) -> anyhow::Result<Exit> {
    let client = g.client()?;
    let opts = args.mutation.options();
    let body = match &args.file {
        Some(path) => output::read_document(path)?,
        None => {
            let mut body = json!({
                "name": args.name,
                "region": default_region(g, &args.region).await?,
                "eks_cluster": args.eks_cluster,
                "hyperpod_cluster": args.hyperpod_cluster,
            });
            if let Some(bucket) = &args.bucket {
                body["bucket"] = json!(bucket);
            }
            body
        }
    };
    let submitted = client.import_cluster_json(&body, &opts).await?;
    mutation::finish(g, &client, submitted, args.mutation.wait).await
}

async fn delete(g: &Globals, args: DeleteArgs) -> anyhow::Result<Exit> {
    let confirmed = mutation::confirm_by_name(
        &args.name,
        args.yes,
        args.mutation.dry_run,
        &format!("deleting {} needs confirmation: pass --yes (or --dry-run to see the plan)", args.name),
        &format!("Delete cluster {} and everything InstantStart created for it?", args.name),
    )?;
    if !confirmed {
        return Ok(Exit::Usage);
    }
    let client = g.client()?;
    let what =
        DeleteClusterOptions { delete_bucket: args.delete_bucket, keep_tracking_servers: args.keep_tracking_servers };
    let submitted = client.delete_cluster(&args.name, what, &args.mutation.options()).await?;
    mutation::finish(g, &client, submitted, args.mutation.wait).await
}

async fn list(g: &Globals) -> anyhow::Result<Exit> {
    let clusters = g.client()?.list_clusters().await?;
    output::emit(g.output, &clusters, || {
        let mut t = Table::new(&["NAME", "STATUS", "ACTIVE", "REGION", "SOURCE", "HYPERPOD", "LAST OPERATION"]);
        for c in &clusters {
            let last = match &c.last_operation {
                Some(op) => format!("{} {}", op.kind.as_str(), op.status.as_str()),
                None => "-".into(),
            };
            t.row(vec![
                c.record.name.clone(),
                word(&c.status),
                if c.active { "*".into() } else { String::new() },
                c.record.region.clone(),
                word(&c.record.source),
                or_dash(c.record.hyperpod_cluster.as_deref()),
                last,
            ]);
        }
        t.render_or("No clusters. Create one with: instantstart cluster create --help")
    })?;
    Ok(Exit::Ok)
}

/// The snake_case word a serialized enum is (`ready`, `delete_failed`, `created`).
fn word<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "-".into(),
    }
}

fn or_dash(v: Option<&str>) -> String {
    v.unwrap_or("-").to_string()
}

/// A provider resource's state, with the reason of a failure.
fn state(v: &ResourceState) -> String {
    match v {
        ResourceState::Creating => "creating".into(),
        ResourceState::Active => "active".into(),
        ResourceState::Updating => "updating".into(),
        ResourceState::Deleting => "deleting".into(),
        ResourceState::Failed { reason } => format!("failed ({reason})"),
    }
}

async fn events(g: &Globals, a: EventsArgs) -> anyhow::Result<Exit> {
    use instantstart_core::provider::{ClusterEventQuery, ClusterEventResource};
    let resource_type = a.resource.as_deref().and_then(|r| {
        [ClusterEventResource::Cluster, ClusterEventResource::InstanceGroup, ClusterEventResource::Instance]
            .into_iter()
            .find(|x| x.as_snake() == r)
    });
    let q = ClusterEventQuery {
        instance_group: a.group,
        node_id: a.node,
        resource_type,
        after: a.after,
        before: a.before,
        limit: a.limit,
        cursor: a.cursor,
    };
    let page = g.client()?.cluster_events(&a.name, &q).await?;
    output::emit(g.output, &page, || {
        let mut t = Table::new(&["TIME", "LEVEL", "RESOURCE", "GROUP", "NODE", "DESCRIPTION"]);
        for e in &page.events {
            t.row(vec![
                e.time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                e.level.map(|l| l.as_aws()).unwrap_or("-").to_string(),
                e.resource_type.as_snake().to_string(),
                e.instance_group.clone().unwrap_or_else(|| "-".into()),
                e.instance_id.clone().unwrap_or_else(|| "-".into()),
                e.description.clone(),
            ]);
        }
        t.render_or("No events.")
    })?;
    if let Some(c) = &page.next_cursor
        && g.output == Output::Table
    {
        eprintln!("more: instantstart cluster events {} --cursor {c}", a.name);
    }
    Ok(Exit::Ok)
}

async fn get(g: &Globals, name: &str) -> anyhow::Result<Exit> {
    let c = g.client()?.get_cluster(name).await?;
    output::emit(g.output, &c, || {
        let r = &c.view.record;
        let mut pairs = vec![
            ("Name", format!("{}{}", r.name, if c.view.active { " (active)" } else { "" })),
            ("Status", word(&c.view.status)),
            ("Region", r.region.clone()),
            ("Source", word(&r.source)),
            ("EKS cluster", r.eks_cluster.clone()),
        ];
        if let Some(eks) = &c.eks {
            pairs.push(("EKS state", format!("{}, Kubernetes {}", state(&eks.state), eks.version)));
            pairs.push(("EKS endpoint", or_dash(eks.endpoint.as_deref())));
        }
        pairs.push(("HyperPod cluster", or_dash(r.hyperpod_cluster.as_deref())));
        if let Some(hp) = &c.hyperpod {
            pairs.push(("HyperPod state", format!("{}, node recovery {}", state(&hp.state), word(&hp.node_recovery))));
        }
        pairs.push(("VPC", or_dash(r.vpc_id.as_deref())));
        pairs.push(("Bucket", or_dash(r.bucket.as_deref())));
        if let Some(op) = &c.view.last_operation {
            pairs.push(("Last operation", format!("{} {} {}", op.id, op.kind.as_str(), op.status.as_str())));
        }
        if let Some(e) = &c.live_error {
            pairs.push(("Live state error", e.clone()));
        }
        let mut out = fields(&pairs);
        if let Some(hp) = &c.hyperpod {
            let mut t = Table::new(&["INSTANCE GROUP", "TYPE", "COUNT", "STATUS"]);
            for ig in &hp.instance_groups {
                t.row(vec![
                    ig.name.clone(),
                    ig.instance_type.clone(),
                    format!("{}/{}", ig.current_count, ig.target_count),
                    ig.status.clone(),
                ]);
            }
            out.push('\n');
            out.push_str(&t.render_or("No instance groups."));
        }
        if !c.nodes.is_empty() {
            let mut t = Table::new(&["NODE", "GROUP", "TYPE", "STATUS", "AZ"]);
            for n in &c.nodes {
                t.row(vec![
                    n.instance_id.clone(),
                    n.instance_group.clone(),
                    n.instance_type.clone(),
                    n.status.clone(),
                    n.availability_zone.clone(),
                ]);
            }
            out.push('\n');
            out.push_str(&t.render_or(""));
        }
        out
    })?;
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use instantstart_core::spec::InterfaceMode;

    #[test]
    fn group_specs_parse_into_the_api_type() {
        let g = parse_group("name=workers,type=ml.p5.48xlarge,count=2,az=us-east-1a,capacity=training_plan:arn:aws:sagemaker:us-east-1:123456789012:training-plan/p,efa-only,stress,connectivity").unwrap();
        assert_eq!((g.name.as_str(), g.count, g.interface_mode), ("workers", 2, InterfaceMode::EfaOnly));
        assert_eq!(
            g.capacity,
            CapacitySpec::TrainingPlan { arn: "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p".into() }
        );
        assert!(g.deep_health_checks.stress && g.deep_health_checks.connectivity);
        assert_eq!(g.ebs_volume_gb, 500, "the core's default");
        let spot = parse_group("name=s,type=ml.g5.2xlarge,count=0,az=us-east-1b,capacity=spot").unwrap();
        assert_eq!(spot.capacity, CapacitySpec::Spot);
        for (bad, why) in [
            ("name=a,type=t,az=z", "missing count="),
            ("name=a,type=t,count=x,az=z", "whole number"),
            ("name=a,type=t,count=1,az=z,capacity=cheap", "capacity must be"),
            ("name=a,type=t,count=1,az=z,colour=red", "unknown key"),
        ] {
            assert!(parse_group(bad).unwrap_err().contains(why), "{bad}");
        }
        assert_eq!(parse_capacity("on-demand"), Ok(CapacitySpec::OnDemand));
        assert!(parse_capacity("training_plan:").is_err());
    }
}
