//! `instantstart node list|get|capacity|reboot|replace|delete|health-check`: the nodes of a
//! cluster's HyperPod cluster. `capacity` is the at-a-glance table: GPUs (and Neuron devices and
//! cores) total, allocated, free and unavailable per cluster and instance group, then every node
//! with its health and the workloads on it. `health-check` starts deep health checks on demand (`--group` whole
//! groups, or `--node` ids of one group; `--check stress,connectivity`); with `--wait` the
//! operation's output names each node's result (passed, failed, replaced).
//!
//! For an unhealthy node the ladder is investigate → reboot → replace: look first (`node list`,
//! `cluster get`; HyperPod's auto-recovery may already be acting), then `reboot` (the instance
//! and its local data stay), then `replace` (a new instance; the node's local volumes are lost).
//! `replace` and `delete` need `--yes-lose-local-data`, sent as the API's
//! `acknowledge_local_data_loss`; without it the server refuses the request (exit 2) and the
//! CLI names the flag.

use crate::app::Globals;
use crate::exit::{self, Exit};
use crate::mutation::{self, MutationArgs};
use crate::output::{self, Table};
use clap::{Args, Subcommand};
use instantstart_client::Client;
use instantstart_core::api::capacity::{AcceleratorCount, Accelerators, NodeHealth};
use instantstart_core::provider::NodeAction;

/// The escalation ladder for unhealthy nodes, shown in help texts and hints.
pub const LADDER: &str = "investigate → reboot → replace";

#[derive(Subcommand, Debug)]
pub enum NodeCommand {
    /// List nodes with instance group, type, status and AZ (investigate first).
    List(ListArgs),
    /// Show one node in detail: status and message, launch time, placement, private address,
    /// capacity and interface type, lifecycle script, AMI.
    Get(GetArgs),
    /// GPU capacity and node health at a glance: accelerators total, allocated, free and
    /// unavailable per instance group, and every node with its health and workloads.
    Capacity(ListArgs),
    /// Reboot nodes: the instances and their local data stay (the step after investigating).
    Reboot(RebootArgs),
    /// Replace nodes with new instances: their local volumes are lost (after a reboot did not help).
    Replace(LossyArgs),
    /// Delete nodes: their group shrinks and their local volumes are lost.
    Delete(LossyArgs),
    /// Run deep health checks on demand (accelerated instance groups; connectivity needs EFA).
    HealthCheck(HealthCheckArgs),
}

/// A deep health check, as a flag value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckName {
    /// Accelerator stress test (InstanceStress).
    Stress,
    /// EFA connectivity test (InstanceConnectivity).
    Connectivity,
}

#[derive(Args, Debug)]
pub struct HealthCheckArgs {
    /// Cluster name.
    pub cluster: String,
    /// Instance groups to check (comma-separated or repeated; every node of each).
    #[arg(long = "group", value_name = "GROUP", value_delimiter = ',', required = true)]
    pub groups: Vec<String>,
    /// Only these nodes (i-…) of the one `--group` given.
    #[arg(long = "node", value_name = "NODE_ID", value_delimiter = ',')]
    pub nodes: Vec<String>,
    /// The checks to run [default: stress].
    #[arg(long = "check", value_name = "stress|connectivity", value_delimiter = ',', hide_possible_values = true)]
    pub checks: Vec<CheckName>,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Cluster name.
    pub cluster: String,
    /// Only the nodes of this instance group.
    #[arg(long)]
    pub group: Option<String>,
}

#[derive(Args, Debug)]
pub struct GetArgs {
    /// Cluster name.
    pub cluster: String,
    /// Instance id (i-…) as listed by `node list`.
    #[arg(value_name = "NODE_ID")]
    pub node: String,
}

#[derive(Args, Debug)]
pub struct RebootArgs {
    /// Cluster name.
    pub cluster: String,
    /// Instance ids (i-…) as listed by `node list`.
    #[arg(required = true, value_name = "NODE_ID")]
    pub nodes: Vec<String>,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

#[derive(Args, Debug)]
pub struct LossyArgs {
    /// Cluster name.
    pub cluster: String,
    /// Instance ids (i-…) as listed by `node list`.
    #[arg(required = true, value_name = "NODE_ID")]
    pub nodes: Vec<String>,
    /// Acknowledge that the nodes' local volumes (instance store, /opt/dlami/nvme) are lost.
    /// Required: without it the request is refused.
    #[arg(long)]
    pub yes_lose_local_data: bool,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

pub async fn run(g: &Globals, cmd: NodeCommand) -> anyhow::Result<Exit> {
    let client = g.client()?;
    match cmd {
        NodeCommand::List(args) => list(g, &client, args).await,
        NodeCommand::Get(args) => get(g, &client, args).await,
        NodeCommand::Capacity(args) => capacity(g, &client, args).await,
        NodeCommand::Reboot(a) => act(g, &client, NodeAction::Reboot, &a.cluster, &a.nodes, false, &a.mutation).await,
        NodeCommand::Replace(a) => {
            act(g, &client, NodeAction::Replace, &a.cluster, &a.nodes, a.yes_lose_local_data, &a.mutation).await
        }
        NodeCommand::Delete(a) => {
            act(g, &client, NodeAction::Delete, &a.cluster, &a.nodes, a.yes_lose_local_data, &a.mutation).await
        }
        NodeCommand::HealthCheck(a) => health_check(g, &client, a).await,
    }
}

async fn health_check(g: &Globals, client: &Client, a: HealthCheckArgs) -> anyhow::Result<Exit> {
    use instantstart_core::provider::DeepHealthCheck;
    use instantstart_core::workflow::health_checks::HealthCheckGroup;
    if !a.nodes.is_empty() && a.groups.len() != 1 {
        eprintln!("error: --node names nodes of one instance group: give exactly one --group with it");
        return Ok(Exit::Usage);
    }
    let mut checks: Vec<DeepHealthCheck> = a
        .checks
        .iter()
        .map(|c| match c {
            CheckName::Stress => DeepHealthCheck::InstanceStress,
            CheckName::Connectivity => DeepHealthCheck::InstanceConnectivity,
        })
        .collect();
    if checks.is_empty() {
        checks.push(DeepHealthCheck::InstanceStress);
    }
    let groups: Vec<HealthCheckGroup> = a
        .groups
        .iter()
        .map(|name| HealthCheckGroup { name: name.clone(), node_ids: a.nodes.clone(), checks: checks.clone() })
        .collect();
    match client.start_health_check(&a.cluster, &groups, &a.mutation.options()).await {
        Ok(submitted) => mutation::finish(g, client, submitted, a.mutation.wait).await,
        Err(e) => Ok(exit::report(&anyhow::Error::new(e))),
    }
}

async fn list(g: &Globals, client: &Client, args: ListArgs) -> anyhow::Result<Exit> {
    let mut nodes = client.list_nodes(&args.cluster).await?;
    if let Some(group) = &args.group {
        nodes.retain(|n| &n.instance_group == group);
    }
    output::emit(g.output, &nodes, || {
        let mut t = Table::new(&["NODE", "GROUP", "TYPE", "STATUS", "AZ"]);
        for n in &nodes {
            t.row(vec![
                n.instance_id.clone(),
                n.instance_group.clone(),
                n.instance_type.clone(),
                n.status.clone(),
                n.availability_zone.clone(),
            ]);
        }
        t.render_or("No nodes.")
    })?;
    if let Some(n) = nodes.iter().find(|n| n.status != "Running")
        && g.output == output::Output::Table
    {
        eprintln!(
            "hint: node {} is {}. For an unhealthy node: {LADDER} — HyperPod auto-recovery may already be acting \
             (check `instantstart operation list --cluster {}`); then `instantstart node reboot {} {}`; \
             only if that does not help, `instantstart node replace {} {} --yes-lose-local-data`.",
            n.instance_id, n.status, args.cluster, args.cluster, n.instance_id, args.cluster, n.instance_id
        );
    }
    Ok(Exit::Ok)
}

/// `used/total` of one accelerator count, `-` when there is none of it.
fn used_of(c: &AcceleratorCount) -> String {
    if c.total == 0 && c.allocated == 0 { "-".into() } else { format!("{}/{}", c.allocated, c.total) }
}

/// The accelerator columns of a node or group: GPUs, else Neuron cores, else Neuron devices.
fn accel(a: &Accelerators) -> (&'static str, &AcceleratorCount) {
    if a.gpus.total > 0 || a.gpus.allocated > 0 {
        ("gpu", &a.gpus)
    } else if a.neuron_cores.total > 0 || a.neuron_cores.allocated > 0 {
        ("neuroncore", &a.neuron_cores)
    } else if a.neuron_devices.total > 0 || a.neuron_devices.allocated > 0 {
        ("neuron", &a.neuron_devices)
    } else {
        ("-", &a.gpus)
    }
}

fn health_counts(h: &std::collections::BTreeMap<NodeHealth, u32>) -> String {
    h.iter().map(|(k, n)| format!("{n} {}", k.as_str())).collect::<Vec<_>>().join(", ")
}

async fn capacity(g: &Globals, client: &Client, args: ListArgs) -> anyhow::Result<Exit> {
    let mut c = client.capacity(&args.cluster).await?;
    if let Some(group) = &args.group {
        c.node_list.retain(|n| n.instance_group.as_ref() == Some(group));
        c.instance_groups.retain(|x| &x.name == group);
    }
    output::emit(g.output, &c, || {
        let mut groups =
            Table::new(&["GROUP", "TYPE", "NODES", "HEALTH", "ACCEL", "USED/TOTAL", "FREE", "UNAVAILABLE"]);
        for x in &c.instance_groups {
            let (kind, n) = accel(&x.accelerators);
            groups.row(vec![
                x.name.clone(),
                x.instance_type.clone().unwrap_or_else(|| "-".into()),
                x.nodes.to_string(),
                health_counts(&x.health),
                kind.into(),
                used_of(n),
                n.free.to_string(),
                n.unavailable.to_string(),
            ]);
        }
        let gpus = &c.accelerators.gpus;
        let mut out = format!(
            "Cluster {}: {} nodes ({}); GPUs {} allocated, {} free, {} unavailable of {}",
            c.cluster,
            c.nodes,
            health_counts(&c.health),
            gpus.allocated,
            gpus.free,
            gpus.unavailable,
            gpus.total
        );
        if c.accelerators.neuron_cores.total > 0 {
            let n = &c.accelerators.neuron_cores;
            out += &format!(
                "; Neuron cores {} allocated, {} free, {} unavailable of {}",
                n.allocated, n.free, n.unavailable, n.total
            );
        }
        if c.pending_pods > 0 {
            out += &format!("; {} pods waiting for a node ({} GPUs)", c.pending_pods, c.pending_gpus);
        }
        out += "\n\n";
        out += &groups.render_or("No instance groups.");
        let mut nodes = Table::new(&["NODE", "GROUP", "TYPE", "HEALTH", "ACCEL", "USED/TOTAL", "WORKLOADS"]);
        for n in &c.node_list {
            let (kind, a) = accel(&n.accelerators);
            let mut workloads: Vec<String> =
                n.workloads.iter().map(|w| format!("{}/{} ({})", w.namespace, w.name, w.kind)).collect();
            if n.other_pods > 0 {
                workloads.push(format!("+{} other pods", n.other_pods));
            }
            nodes.row(vec![
                n.instance_id.clone().or_else(|| n.name.clone()).unwrap_or_else(|| "-".into()),
                n.instance_group.clone().unwrap_or_else(|| "-".into()),
                n.instance_type.clone().unwrap_or_else(|| "-".into()),
                n.health.as_str().into(),
                kind.into(),
                used_of(a),
                if workloads.is_empty() { "-".into() } else { workloads.join(", ") },
            ]);
        }
        out += "\n";
        out += &nodes.render_or("No nodes.");
        if let Some(e) = &c.hyperpod_error {
            out += &format!("\nHyperPod's node list could not be read: {e}");
        }
        out
    })?;
    if let Some(n) = c.node_list.iter().find(|n| !matches!(n.health, NodeHealth::Healthy | NodeHealth::Provisioning))
        && g.output == output::Output::Table
    {
        eprintln!(
            "hint: node {} is {}. Details: `instantstart node get {} {}`; for an unhealthy node: {LADDER}.",
            n.instance_id.as_deref().or(n.name.as_deref()).unwrap_or("-"),
            n.health.as_str(),
            args.cluster,
            n.instance_id.as_deref().unwrap_or("<node-id>")
        );
    }
    Ok(Exit::Ok)
}

async fn get(g: &Globals, client: &Client, args: GetArgs) -> anyhow::Result<Exit> {
    let n = client.get_node(&args.cluster, &args.node).await?;
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let time = |t: Option<chrono::DateTime<chrono::Utc>>| {
        t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)).unwrap_or_else(|| "-".into())
    };
    output::emit(g.output, &n, || {
        let mut pairs = vec![
            ("Node", n.instance_id.clone()),
            ("Instance group", n.instance_group.clone()),
            ("Type", n.instance_type.clone()),
            ("Status", n.status.clone()),
        ];
        if let Some(m) = &n.status_message {
            pairs.push(("Status message", m.clone()));
        }
        pairs.extend([
            ("Launched", time(n.launch_time)),
            ("Last software update", time(n.last_software_update_time)),
            (
                "Availability Zone",
                match (&n.availability_zone, &n.availability_zone_id) {
                    (Some(az), Some(id)) => format!("{az} ({id})"),
                    (az, _) => opt(az),
                },
            ),
            ("Private IP", opt(&n.private_ip)),
            ("Private DNS", opt(&n.private_dns)),
            ("Capacity type", opt(&n.capacity_type)),
            ("Interface type", opt(&n.interface_type)),
            ("Threads per core", n.threads_per_core.map(|t| t.to_string()).unwrap_or_else(|| "-".into())),
            (
                "Lifecycle script",
                n.lifecycle_script
                    .as_ref()
                    .map(|l| format!("{}/{}", l.source_s3_uri.trim_end_matches('/'), l.on_create))
                    .unwrap_or_else(|| "-".into()),
            ),
            ("AMI", format!("{} ({})", opt(&n.current_image_id), opt(&n.image_version_status))),
        ]);
        output::fields(&pairs)
    })?;
    if g.output == output::Output::Table {
        eprintln!(
            "hint: its events: `instantstart cluster events {} --node {}`. For an unhealthy node: {LADDER}.",
            args.cluster, n.instance_id
        );
    }
    Ok(Exit::Ok)
}

async fn act(
    g: &Globals,
    client: &Client,
    action: NodeAction,
    cluster: &str,
    nodes: &[String],
    acknowledge: bool,
    m: &MutationArgs,
) -> anyhow::Result<Exit> {
    match client.node_action(cluster, action, nodes, acknowledge, &m.options()).await {
        Ok(submitted) => mutation::finish(g, client, submitted, m.wait).await,
        Err(e) => {
            let needs_ack =
                e.problem().is_some_and(|p| p.findings.iter().any(|f| f.field == "acknowledge_local_data_loss"));
            let code = exit::report(&anyhow::Error::new(e));
            if needs_ack {
                eprintln!(
                    "hint: pass --yes-lose-local-data to acknowledge that the nodes' local volumes are lost. \
                     For an unhealthy node the ladder is {LADDER}: try `instantstart node reboot {cluster} {}` first.",
                    nodes.join(" ")
                );
            }
            Ok(code)
        }
    }
}
