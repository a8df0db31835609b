//! `instantstart feature get|set`: a cluster's managed HyperPod capabilities — training
//! operator, inference operator, managed tiered checkpointing, managed autoscaling, observability.
//!
//! `set` follows the explicit-diff contract: only the flags given are sent, the server compares
//! them with the real state and plans dependency-aware steps, and the diff is printed; a request
//! that matches the real state is "already in this state" (exit 0, no operation), e.g.
//! `instantstart feature set demo --training-operator on --tiered-checkpointing on --memory-percent 30 --autoscaling off`;
//! `--autoscaling on --autoscaling-group burst,spot` limits Karpenter to those instance groups;
//! `--node-recovery automatic|none` changes HyperPod node recovery (UpdateCluster `NodeRecovery`);
//! `--observability on|off` switches HyperPod's observability add-on (metrics to an Amazon Managed
//! Service for Prometheus workspace; off keeps the workspace and its history).

use crate::app::Globals;
use crate::exit::Exit;
use crate::mutation::{self, MutationArgs};
use crate::output::{self, fields};
use clap::{ArgGroup, Args, Subcommand, ValueEnum};
use instantstart_core::diff::{FeaturesPatch, TieredCheckpointingPatch};
use instantstart_core::spec::NodeRecovery;

#[derive(Subcommand, Debug)]
pub enum FeatureCommand {
    /// Show the managed features as they really are.
    Get {
        /// Cluster name.
        cluster: String,
    },
    /// Switch managed features on or off; only the flags given are sent.
    Set(SetArgs),
}

/// A feature switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Toggle {
    #[value(alias = "true")]
    On,
    #[value(alias = "false")]
    Off,
}

/// HyperPod node recovery, as a flag value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Recovery {
    Automatic,
    None,
}

impl From<Recovery> for NodeRecovery {
    fn from(r: Recovery) -> Self {
        match r {
            Recovery::Automatic => NodeRecovery::Automatic,
            Recovery::None => NodeRecovery::None,
        }
    }
}

impl Toggle {
    fn on(self) -> bool {
        self == Toggle::On
    }
}

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("feature").required(true).multiple(true)
    .args(["training_operator", "inference_operator", "tiered_checkpointing", "autoscaling", "node_recovery", "observability"])))]
pub struct SetArgs {
    /// Cluster name.
    pub cluster: String,
    /// HyperPod training operator (EKS add-on; installs its prerequisites first).
    #[arg(long, value_name = "on|off", hide_possible_values = true)]
    pub training_operator: Option<Toggle>,
    /// HyperPod inference operator (EKS add-on).
    #[arg(long, value_name = "on|off", hide_possible_values = true)]
    pub inference_operator: Option<Toggle>,
    /// Managed tiered checkpointing (on provisions its service account → IAM role → OIDC trust
    /// chain; off removes it).
    #[arg(long, value_name = "on|off", hide_possible_values = true)]
    pub tiered_checkpointing: Option<Toggle>,
    /// Share of instance memory for tiered checkpointing, 1-100 [default: the current share, else 20].
    #[arg(long, value_name = "PERCENT", requires = "tiered_checkpointing")]
    pub memory_percent: Option<u8>,
    /// Managed autoscaling: scales HyperPod instance groups only (from zero), not general EC2 capacity.
    #[arg(long, value_name = "on|off", hide_possible_values = true)]
    pub autoscaling: Option<Toggle>,
    /// With `--autoscaling on`: the instance groups Karpenter may scale (comma-separated or
    /// repeated, at most 10) [default: every group, and groups added later].
    #[arg(long = "autoscaling-group", value_name = "GROUP", value_delimiter = ',', requires = "autoscaling")]
    pub autoscaling_groups: Vec<String>,
    /// HyperPod node recovery: `automatic` replaces or reboots faulty nodes, `none` leaves them
    /// to you (managed autoscaling needs `automatic`).
    #[arg(long, value_name = "automatic|none", hide_possible_values = true)]
    pub node_recovery: Option<Recovery>,
    /// HyperPod observability (EKS add-on writing metrics to an Amazon Managed Service for
    /// Prometheus workspace, with its IAM role and Pod Identity); off keeps the workspace.
    #[arg(long, value_name = "on|off", hide_possible_values = true)]
    pub observability: Option<Toggle>,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

fn on_off(on: bool) -> String {
    if on { "on".into() } else { "off".into() }
}

pub async fn run(g: &Globals, cmd: FeatureCommand) -> anyhow::Result<Exit> {
    let client = g.client()?;
    match cmd {
        FeatureCommand::Get { cluster } => {
            let f = client.features(&cluster).await?;
            output::emit(g.output, &f, || {
                let tiered = match f.features.tiered_checkpointing {
                    Some(t) => format!("on ({}% of instance memory)", t.memory_percent),
                    None => "off".into(),
                };
                fields(&[
                    ("Training operator", on_off(f.features.training_operator)),
                    ("Inference operator", on_off(f.features.inference_operator)),
                    ("Tiered checkpointing", tiered),
                    ("Managed autoscaling", on_off(f.features.managed_autoscaling)),
                    (
                        "Node recovery",
                        match f.features.node_recovery {
                            NodeRecovery::Automatic => "automatic".into(),
                            NodeRecovery::None => "none".into(),
                        },
                    ),
                    ("Observability", on_off(f.features.observability)),
                    ("Autoscaling scope", f.autoscaling_scope.clone()),
                    (
                        "Autoscaled groups",
                        f.autoscaling_instance_groups.as_ref().map_or_else(|| "-".into(), |g| g.join(", ")),
                    ),
                ])
            })?;
            Ok(Exit::Ok)
        }
        FeatureCommand::Set(args) => {
            let patch = FeaturesPatch {
                training_operator: args.training_operator.map(Toggle::on),
                inference_operator: args.inference_operator.map(Toggle::on),
                tiered_checkpointing: args
                    .tiered_checkpointing
                    .map(|t| TieredCheckpointingPatch { enabled: t.on(), memory_percent: args.memory_percent }),
                managed_autoscaling: args.autoscaling.map(Toggle::on),
                autoscaling_instance_groups: (!args.autoscaling_groups.is_empty())
                    .then(|| args.autoscaling_groups.clone()),
                node_recovery: args.node_recovery.map(NodeRecovery::from),
                observability: args.observability.map(Toggle::on),
            };
            mutation::submit_diff(g, &client, &args.mutation, |opts| {
                let (client, patch, cluster) = (&client, &patch, &args.cluster);
                async move { client.set_features(cluster, patch, &opts).await }
            })
            .await
        }
    }
}
