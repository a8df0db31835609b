//! `instantstart instance-group list|add|scale|delete|update-software`: day-2 changes of a
//! cluster's HyperPod instance groups.
//!
//! `update-software` moves groups (`--group NAME[=RELEASE]`, every group when none is given)
//! to a HyperPod AMI release (the latest unless one is named) or to an AMI (`--image-id`),
//! rolling in batches (`--batch N` instances or `N%` of a group, `--wait-between`,
//! `--rollback-alarm`). Nodes get a new root volume, so it asks for confirmation (`--yes`); a
//! request every group already satisfies is "already in this state" (exit 0, no operation).
//! `list` shows each group's release (current → desired while an update runs) and its
//! `ImageVersionStatus`.
//!
//! `add` sends the API's `InstanceGroupSpec`, built from `--group` (the `cluster create` syntax)
//! or read from a JSON/YAML file (`-f`) and sent as is; its dry run shows the placement steps
//! and the preflight checks (quota, offering, training plan, address space) with remedies.
//! `scale` follows the explicit-diff contract: only the flags given are sent, the server compares
//! them with the real group, and a group already in that state is "already in this state"
//! (exit 0, no operation). Capacity type, interface mode, instance type and AZ are immutable:
//! they may be given to assert them, and a different value is refused (exit 2, `patch.<field>`).

use super::cluster::{parse_capacity, parse_group};
use crate::app::Globals;
use crate::exit::Exit;
use crate::mutation::{self, MutationArgs};
use crate::output::{self, Table};
use clap::{ArgGroup, Args, Subcommand};
use instantstart_core::provider::{
    BatchSize, BatchSizeKind, GroupSoftware, SoftwareUpdateDeployment, SoftwareUpdateGroup,
};
use instantstart_core::spec::{CapacitySpec, InstanceGroupSpec, InterfaceMode};
use instantstart_core::workflow::instance_groups::InstanceGroupPatch;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum InstanceGroupCommand {
    /// List the instance groups of a cluster with live current/target counts.
    List {
        /// Cluster name.
        cluster: String,
    },
    /// Add an instance group: capacity type, interface mode and placement in one operation.
    Add(AddArgs),
    /// Scale an instance group (zero allowed); only the flags given are sent.
    Scale(ScaleArgs),
    /// Delete an instance group (its nodes are terminated; the last group cannot be deleted).
    Delete(DeleteArgs),
    /// Update the HyperPod platform software (AMI) of instance groups, rolling in batches;
    /// nodes get a new root volume.
    UpdateSoftware(UpdateSoftwareArgs),
}

#[derive(Args, Debug)]
pub struct UpdateSoftwareArgs {
    /// Cluster name.
    pub cluster: String,
    /// A group to update, optionally to a named HyperPod AMI release: NAME or NAME=2025.10.1
    /// (repeated or comma-separated). None: every group, to the latest release.
    #[arg(long = "group", value_name = "NAME[=RELEASE]", value_delimiter = ',', value_parser = parse_software_group)]
    pub groups: Vec<SoftwareUpdateGroup>,
    /// An AMI (ami-…) or `default` (the latest HyperPod AMI) instead of a release.
    #[arg(long, value_name = "AMI")]
    pub image_id: Option<String>,
    /// Instances updated at a time: N instances, or N% of each group.
    #[arg(long, value_name = "N|N%", value_parser = parse_batch)]
    pub batch: Option<BatchSize>,
    /// Instances rolled back at a time (N or N%); needs --batch.
    #[arg(long, value_name = "N|N%", value_parser = parse_batch, requires = "batch")]
    pub rollback_batch: Option<BatchSize>,
    /// Seconds to wait between batches (0-3600); needs --batch.
    #[arg(long, value_name = "SECONDS", requires = "batch")]
    pub wait_between: Option<u32>,
    /// A CloudWatch alarm that rolls the update back (repeated, at most 10); needs --batch.
    #[arg(long = "rollback-alarm", value_name = "ALARM", requires = "batch")]
    pub rollback_alarms: Vec<String>,
    /// Do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub yes: bool,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

/// `NAME` or `NAME=RELEASE`.
fn parse_software_group(text: &str) -> Result<SoftwareUpdateGroup, String> {
    let (name, release) = match text.split_once('=') {
        Some((n, r)) => (n.trim(), Some(r.trim().to_string())),
        None => (text.trim(), None),
    };
    if name.is_empty() {
        return Err("a group is NAME or NAME=RELEASE".into());
    }
    Ok(SoftwareUpdateGroup { name: name.to_string(), image_release_version: release })
}

/// `N` instances or `N%` of a group.
fn parse_batch(text: &str) -> Result<BatchSize, String> {
    let text = text.trim();
    let (kind, number) = match text.strip_suffix('%') {
        Some(n) => (BatchSizeKind::CapacityPercentage, n),
        None => (BatchSizeKind::InstanceCount, text),
    };
    let value = number.trim().parse::<u32>().map_err(|_| "a batch is N (instances) or N% (of a group)".to_string())?;
    Ok(BatchSize { kind, value })
}

/// A group's software as `list` shows it: the release (or AMI), `current → desired` while an
/// update runs, and the image status.
fn software_cell(s: &GroupSoftware) -> String {
    let now = s.current_release.clone().or_else(|| s.current_image_id.clone()).unwrap_or_else(|| "-".into());
    let next = s.desired_release.clone().or_else(|| s.desired_image_id.clone());
    let moving = match next {
        Some(n) if !s.settled() => format!("{now} → {n}"),
        _ => now,
    };
    match (&s.update_status, &s.image_version_status) {
        (Some(u), _) if s.update_running() || s.update_failed() => format!("{moving} ({u})"),
        (_, Some(v)) => format!("{moving} ({v})"),
        _ => moving,
    }
}

/// Help heading of the immutable fields of `scale`.
const IMMUTABLE: &str = "Immutable fields (sent only when given, to assert them; a different value is refused)";

const GROUP_HELP: &str = "The group: name=NAME,type=INSTANCE_TYPE,count=N,az=AZ \
[,capacity=on_demand|spot|training_plan:<arn>][,efa-only][,stress][,connectivity][,subnet=ID][,ebs=GB] \
(the syntax of `cluster create --group`).";

#[derive(Args, Debug)]
pub struct AddArgs {
    /// Cluster name.
    pub cluster: String,
    #[arg(long, value_name = "SPEC", help = GROUP_HELP, value_parser = parse_group,
          required_unless_present = "file")]
    pub group: Option<InstanceGroupSpec>,
    /// Read the group (JSON or YAML, the API's InstanceGroupSpec) from a file, `-` for stdin.
    #[arg(short = 'f', long = "file", value_name = "FILE", conflicts_with = "group")]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("change").required(true).multiple(true)
    .args(["count", "capacity", "interface_mode", "instance_type", "availability_zone"])))]
pub struct ScaleArgs {
    /// Cluster name.
    pub cluster: String,
    /// Instance group name.
    pub group: String,
    /// Number of instances (0 allowed: managed autoscaling scales from zero).
    #[arg(long, value_name = "N")]
    pub count: Option<u32>,
    /// Capacity type: on_demand, spot or training_plan:<arn>.
    #[arg(long, value_name = "TYPE", value_parser = parse_capacity,
          help_heading = IMMUTABLE)]
    pub capacity: Option<CapacitySpec>,
    /// Network interface mode: standard or efa_only.
    #[arg(long, value_name = "MODE", value_parser = parse_interface_mode, help_heading = IMMUTABLE)]
    pub interface_mode: Option<InterfaceMode>,
    /// Instance type, e.g. ml.g5.2xlarge.
    #[arg(long, value_name = "TYPE",
          help_heading = IMMUTABLE)]
    pub instance_type: Option<String>,
    /// Availability Zone of the group's subnet.
    #[arg(long = "az", value_name = "AZ",
          help_heading = IMMUTABLE)]
    pub availability_zone: Option<String>,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

#[derive(Args, Debug)]
pub struct DeleteArgs {
    /// Cluster name.
    pub cluster: String,
    /// Instance group name.
    pub group: String,
    /// Do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub yes: bool,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

fn parse_interface_mode(text: &str) -> Result<InterfaceMode, String> {
    serde_json::from_value(serde_json::json!(text.trim().replace('-', "_")))
        .map_err(|_| "interface mode must be standard or efa_only".to_string())
}

pub async fn run(g: &Globals, cmd: InstanceGroupCommand) -> anyhow::Result<Exit> {
    let client = g.client()?;
    match cmd {
        InstanceGroupCommand::List { cluster } => {
            let groups = client.list_instance_groups(&cluster).await?;
            output::emit(g.output, &groups, || {
                let mut t =
                    Table::new(&["NAME", "TYPE", "COUNT", "CAPACITY", "INTERFACE", "STATUS", "SOFTWARE", "SUBNETS"]);
                for ig in &groups {
                    let capacity = match &ig.capacity {
                        CapacitySpec::TrainingPlan { arn } => format!("training_plan ({arn})"),
                        other => other.label().to_string(),
                    };
                    let interface = match ig.interface_mode {
                        InterfaceMode::Standard => "standard",
                        InterfaceMode::EfaOnly => "efa_only",
                    };
                    t.row(vec![
                        ig.name.clone(),
                        ig.instance_type.clone(),
                        format!("{}/{}", ig.current_count, ig.target_count),
                        capacity,
                        interface.into(),
                        ig.status.clone(),
                        software_cell(&ig.software),
                        ig.subnet_ids.join(","),
                    ]);
                }
                t.render_or(&format!(
                    "No instance groups. Add one with: instantstart instance-group add {cluster} --group …"
                ))
            })?;
            Ok(Exit::Ok)
        }
        InstanceGroupCommand::Add(args) => {
            let opts = args.mutation.options();
            let submitted = match (&args.file, &args.group) {
                (Some(path), _) => {
                    client.add_instance_group_json(&args.cluster, &output::read_document(path)?, &opts).await?
                }
                (None, Some(group)) => client.add_instance_group(&args.cluster, group, &opts).await?,
                (None, None) => unreachable!("clap requires --group or -f"),
            };
            mutation::finish(g, &client, submitted, args.mutation.wait).await
        }
        InstanceGroupCommand::Scale(args) => {
            let patch = InstanceGroupPatch {
                count: args.count,
                capacity: args.capacity.clone(),
                interface_mode: args.interface_mode,
                instance_type: args.instance_type.clone(),
                availability_zone: args.availability_zone.clone(),
            };
            mutation::submit_diff(g, &client, &args.mutation, |opts| {
                let (client, patch, cluster, group) = (&client, &patch, &args.cluster, &args.group);
                async move { client.update_instance_group(cluster, group, patch, &opts).await }
            })
            .await
        }
        InstanceGroupCommand::Delete(args) => {
            let confirmed = mutation::confirm_by_name(
                &args.group,
                args.yes,
                args.mutation.dry_run,
                &format!(
                    "deleting instance group {} needs confirmation: pass --yes (or --dry-run to see the plan)",
                    args.group
                ),
                &format!("Delete instance group {} of {} and terminate its nodes?", args.group, args.cluster),
            )?;
            if !confirmed {
                return Ok(Exit::Usage);
            }
            let submitted = client.delete_instance_group(&args.cluster, &args.group, &args.mutation.options()).await?;
            mutation::finish(g, &client, submitted, args.mutation.wait).await
        }
        InstanceGroupCommand::UpdateSoftware(args) => {
            let which = if args.groups.is_empty() {
                "every instance group".to_string()
            } else {
                args.groups.iter().map(|g| g.name.as_str()).collect::<Vec<_>>().join(", ")
            };
            let confirmed = mutation::confirm_by_name(
                &args.cluster,
                args.yes,
                args.mutation.dry_run,
                "a software update replaces the root volume of every node it updates: pass --yes (or --dry-run to see the plan)",
                &format!(
                    "Update the software of {which} of {}? Nodes get a new root volume (data on it is lost) and are NotReady while updated.",
                    args.cluster
                ),
            )?;
            if !confirmed {
                return Ok(Exit::Usage);
            }
            let deployment = args.batch.map(|max_batch| SoftwareUpdateDeployment {
                max_batch,
                rollback_max_batch: args.rollback_batch,
                wait_interval_secs: args.wait_between,
                rollback_alarms: args.rollback_alarms.clone(),
            });
            mutation::submit_diff(g, &client, &args.mutation, |opts| {
                let (client, args, deployment) = (&client, &args, &deployment);
                async move {
                    client
                        .update_software(
                            &args.cluster,
                            &args.groups,
                            deployment.as_ref(),
                            args.image_id.as_deref(),
                            &opts,
                        )
                        .await
                }
            })
            .await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_update_flags_parse_into_the_api_types() {
        assert_eq!(parse_batch("2"), Ok(BatchSize { kind: BatchSizeKind::InstanceCount, value: 2 }));
        assert_eq!(parse_batch("25%"), Ok(BatchSize { kind: BatchSizeKind::CapacityPercentage, value: 25 }));
        assert!(parse_batch("a few").is_err());
        assert_eq!(
            parse_software_group("workers=2025.10.1"),
            Ok(SoftwareUpdateGroup { name: "workers".into(), image_release_version: Some("2025.10.1".into()) })
        );
        assert_eq!(parse_software_group("workers").unwrap().image_release_version, None);
        assert!(parse_software_group("=2025.10.1").is_err());
        let moving = GroupSoftware {
            current_release: Some("2025.10.1".into()),
            desired_release: Some("2025.11.2".into()),
            update_status: Some("InProgress".into()),
            image_version_status: Some("UpdateAvailable".into()),
            ..Default::default()
        };
        assert_eq!(software_cell(&moving), "2025.10.1 → 2025.11.2 (InProgress)");
        let settled = GroupSoftware {
            current_release: Some("2025.11.2".into()),
            desired_release: Some("2025.11.2".into()),
            update_status: Some("Succeeded".into()),
            image_version_status: Some("UpToDate".into()),
            ..Default::default()
        };
        assert_eq!(software_cell(&settled), "2025.11.2 (UpToDate)");
    }

    #[test]
    fn interface_modes_parse_into_the_api_type() {
        assert_eq!(parse_interface_mode("efa-only"), Ok(InterfaceMode::EfaOnly));
        assert_eq!(parse_interface_mode("standard"), Ok(InterfaceMode::Standard));
        assert!(parse_interface_mode("fast").is_err());
    }
}
