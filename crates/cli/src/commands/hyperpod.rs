//! `instantstart cluster hyperpod add|remove`: HyperPod on an existing EKS-only cluster.
//!
//! `add` sends the API's `AddHyperPodBody`: the `hyperpod` part of a create request built from
//! `--group` (the `cluster create` syntax) and `--node-recovery`, with `--bucket` for a cluster
//! that has none, or read from a JSON/YAML file (`-f`) and sent as is; its dry run is the plan
//! with the preflight checks. `remove` deletes the HyperPod cluster and what InstantStart made
//! for it (EKS and its add-ons stay) and asks for confirmation by name.

use super::cluster::parse_group;
use crate::app::Globals;
use crate::exit::Exit;
use crate::mutation::{self, MutationArgs};
use crate::output;
use clap::{Args, Subcommand};
use instantstart_core::spec::{HyperPodClusterSpec, InstanceGroupSpec, NodeRecovery};
use instantstart_core::workflow::hyperpod_attach::AddHyperPodBody;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum HyperPodCommand {
    /// Add a HyperPod cluster to an EKS-only cluster (created without one, or imported).
    Add(AddArgs),
    /// Remove the cluster's HyperPod cluster and what InstantStart made for it; EKS stays.
    Remove(RemoveArgs),
}

const GROUP_HELP: &str = "An instance group: name=NAME,type=INSTANCE_TYPE,count=N,az=AZ \
[,capacity=on_demand|spot|training_plan:<arn>][,efa-only][,stress][,connectivity][,subnet=ID][,ebs=GB] \
(the syntax of `cluster create --group`). Repeatable.";

#[derive(Args, Debug)]
pub struct AddArgs {
    /// Cluster name.
    pub cluster: String,
    #[arg(long = "group", value_name = "SPEC", help = GROUP_HELP, value_parser = parse_group,
          required_unless_present = "file")]
    pub groups: Vec<InstanceGroupSpec>,
    /// HyperPod node recovery: automatic or none [default: automatic].
    #[arg(long, value_name = "MODE", value_parser = parse_node_recovery)]
    pub node_recovery: Option<NodeRecovery>,
    /// S3 bucket for the lifecycle script and the s3-shared claim, when the cluster has none
    /// (an imported EKS-only cluster).
    #[arg(long)]
    pub bucket: Option<String>,
    /// Read the body (JSON or YAML: {hyperpod, bucket}) from a file, `-` for stdin.
    #[arg(short = 'f', long = "file", value_name = "FILE", conflicts_with_all = ["groups", "node_recovery", "bucket"])]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

#[derive(Args, Debug)]
pub struct RemoveArgs {
    /// Cluster name.
    pub cluster: String,
    /// Do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub yes: bool,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

fn parse_node_recovery(text: &str) -> Result<NodeRecovery, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "automatic" => Ok(NodeRecovery::Automatic),
        "none" => Ok(NodeRecovery::None),
        _ => Err("node recovery must be automatic or none".into()),
    }
}

pub async fn run(g: &Globals, cmd: HyperPodCommand) -> anyhow::Result<Exit> {
    let client = g.client()?;
    match cmd {
        HyperPodCommand::Add(args) => {
            let opts = args.mutation.options();
            let submitted = match &args.file {
                Some(path) => client.add_hyperpod_json(&args.cluster, &output::read_document(path)?, &opts).await?,
                None => {
                    let body = AddHyperPodBody {
                        hyperpod: HyperPodClusterSpec {
                            node_recovery: args.node_recovery.unwrap_or_default(),
                            instance_groups: args.groups.clone(),
                        },
                        bucket: args.bucket.clone(),
                    };
                    client.add_hyperpod(&args.cluster, &body, &opts).await?
                }
            };
            mutation::finish(g, &client, submitted, args.mutation.wait).await
        }
        HyperPodCommand::Remove(args) => {
            let confirmed = mutation::confirm_by_name(
                &args.cluster,
                args.yes,
                args.mutation.dry_run,
                &format!(
                    "removing the HyperPod cluster of {} needs confirmation: pass --yes (or --dry-run to see the plan)",
                    args.cluster
                ),
                &format!("Remove the HyperPod cluster of {} (its nodes are terminated; EKS stays)?", args.cluster),
            )?;
            if !confirmed {
                return Ok(Exit::Usage);
            }
            let submitted = client.remove_hyperpod(&args.cluster, &args.mutation.options()).await?;
            mutation::finish(g, &client, submitted, args.mutation.wait).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_recovery_parses_into_the_api_type() {
        assert_eq!(parse_node_recovery("automatic"), Ok(NodeRecovery::Automatic));
        assert_eq!(parse_node_recovery("None"), Ok(NodeRecovery::None));
        assert!(parse_node_recovery("sometimes").is_err());
    }
}
