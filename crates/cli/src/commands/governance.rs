//! `instantstart governance get|set`: a cluster's HyperPod task governance — priority classes,
//! fair share, and teams with guaranteed compute per instance type that they lend and borrow.
//!
//! `get` shows the real state (and each team's namespace and Kueue queue); `set` sends the whole
//! desired state from a JSON or YAML file (`-f`, `-` for stdin; the shape `get -o yaml` prints
//! under `governance`), or `--off` to remove it. The server plans against the real state and
//! the diff is printed; an equal state is "already in this state" (exit 0, no operation).

use crate::app::Globals;
use crate::exit::Exit;
use crate::mutation::{self, MutationArgs};
use crate::output::{self, Table, fields};
use clap::{ArgGroup, Args, Subcommand};
use serde_json::json;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum GovernanceCommand {
    /// Show task governance as it really is: priority classes, fair share, teams and quotas.
    Get {
        /// Cluster name.
        cluster: String,
    },
    /// Set the whole task governance of a cluster (teams left out lose their quota).
    Set(SetArgs),
}

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("spec").required(true).args(["file", "off"])))]
pub struct SetArgs {
    /// Cluster name.
    pub cluster: String,
    /// The desired governance (JSON or YAML: `priority_classes`, `fair_share`, `teams`), `-` for stdin.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Remove task governance: every team's quota, the scheduler config, then the add-on.
    #[arg(long)]
    pub off: bool,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

pub async fn run(g: &Globals, cmd: GovernanceCommand) -> anyhow::Result<Exit> {
    let client = g.client()?;
    match cmd {
        GovernanceCommand::Get { cluster } => {
            let v = client.governance(&cluster).await?;
            output::emit(g.output, &v, || {
                let spec = &v.governance;
                let classes: Vec<String> =
                    spec.priority_classes.iter().map(|c| format!("{} ({})", c.name, c.weight)).collect();
                let mut out = fields(&[
                    ("Task governance", if spec.enabled { "on".into() } else { "off".into() }),
                    (
                        "Add-on",
                        format!("{} ({})", v.addon, if v.addon_installed { "installed" } else { "not installed" }),
                    ),
                    ("Scheduler config", v.scheduler_config_status.clone().unwrap_or_else(|| "-".into())),
                    ("Fair share", if spec.fair_share { "on".into() } else { "off (first come, first served)".into() }),
                    ("Priority classes", if classes.is_empty() { "-".into() } else { classes.join(", ") }),
                    ("Managed by InstantStart", if v.managed { "yes".into() } else { "no".into() }),
                ]);
                let mut t = Table::new(&["TEAM", "QUOTA", "SHARING", "BORROW %", "WEIGHT", "QUEUE", "STATUS"]);
                for team in &spec.teams {
                    let quota: Vec<String> = team
                        .quotas
                        .iter()
                        .map(|q| match (q.count, q.accelerators) {
                            (Some(c), _) => format!("{c} × {}", q.instance_type),
                            (_, Some(a)) => format!("{a} accelerators of {}", q.instance_type),
                            _ => q.instance_type.clone(),
                        })
                        .collect();
                    let placement = v.teams.iter().find(|p| p.team == team.name);
                    t.row(vec![
                        team.name.clone(),
                        if quota.is_empty() { "-".into() } else { quota.join(", ") },
                        team.sharing.as_str().into(),
                        team.borrow_limit.map_or_else(|| "-".into(), |l| l.to_string()),
                        team.fair_share_weight.to_string(),
                        placement.map_or_else(|| "-".into(), |p| p.queue.clone()),
                        placement.map_or_else(|| "-".into(), |p| p.status.clone()),
                    ]);
                }
                out.push('\n');
                out.push_str(&t.render_or("No teams."));
                out
            })?;
            Ok(Exit::Ok)
        }
        GovernanceCommand::Set(args) => {
            let spec = match &args.file {
                Some(path) => output::read_document(path)?,
                None => json!({ "enabled": false }),
            };
            mutation::submit_diff(g, &client, &args.mutation, |opts| {
                let (client, spec, cluster) = (&client, &spec, &args.cluster);
                async move { client.set_governance_json(cluster, spec, &opts).await }
            })
            .await
        }
    }
}
