//! `instantstart operation list|get|wait|retry|cancel`.

use crate::app::Globals;
use crate::exit::{Exit, usage};
use crate::mutation;
use crate::output::{self, Table, between, fields, secs, when};
use clap::{Args, Subcommand};
use instantstart_client::{OperationQuery, PageArgs};
use instantstart_core::operation::{Operation, OperationStatus, StepPhase};

#[derive(Subcommand, Debug)]
pub enum OperationCommand {
    /// List operations, newest first.
    List(ListArgs),
    /// Show an operation with every step: phase, attempts, timing, error.
    Get {
        /// Operation id (op-…).
        id: String,
    },
    /// Follow an operation with live progress until it finishes; exit 1 unless it succeeds.
    Wait {
        /// Operation id (op-…).
        id: String,
    },
    /// Retry a failed step (it observes before it submits again, so nothing is created twice).
    Retry {
        /// Operation id (op-…).
        id: String,
        /// Step key, e.g. hyperpod_cluster [default: the failed step, when there is exactly one].
        step: Option<String>,
        /// Follow the operation until it finishes; exit 1 unless it succeeds.
        #[arg(long)]
        wait: bool,
    },
    /// Cancel a running operation (stops between provider calls; nothing is rolled back).
    Cancel {
        /// Operation id (op-…).
        id: String,
        /// Follow the operation until it stops.
        #[arg(long)]
        wait: bool,
    },
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Only operations on this target, e.g. cluster/demo.
    #[arg(long, conflicts_with = "cluster")]
    pub target: Option<String>,
    /// Only operations on this cluster (target cluster/NAME).
    #[arg(long)]
    pub cluster: Option<String>,
    /// Only operations with this status.
    #[arg(long, value_parser = parse_status)]
    pub status: Option<OperationStatus>,
    /// Page size: at most this many, newest first (1-500) [default: 100].
    #[arg(long)]
    pub limit: Option<u32>,
    /// Start after this position: the cursor printed under the previous page.
    #[arg(long)]
    pub cursor: Option<String>,
    /// Every operation, following the pages to the end.
    #[arg(long, conflicts_with_all = ["limit", "cursor"])]
    pub all: bool,
    /// The archived operations instead: those that finished before the server's retention
    /// window (`--operation-retention-days`); pages and `--all` as above.
    #[arg(long)]
    pub archived: bool,
}

fn parse_status(s: &str) -> Result<OperationStatus, String> {
    OperationStatus::parse(s).ok_or_else(|| "must be running, succeeded, failed, needs_attention or cancelled".into())
}

pub async fn run(g: &Globals, cmd: OperationCommand) -> anyhow::Result<Exit> {
    let client = g.client()?;
    match cmd {
        OperationCommand::List(args) => {
            let q = OperationQuery {
                target: args.target.or(args.cluster.map(|c| format!("cluster/{c}"))),
                status: args.status,
                limit: None,
                archived: args.archived,
            };
            let (ops, next) = if args.all {
                (client.all_operations(&q).await?, None)
            } else {
                let page = client.operations_page(&q, &PageArgs { limit: args.limit, cursor: args.cursor }).await?;
                (page.items, page.next)
            };
            output::emit(g.output, &ops, || {
                let mut t = Table::new(&["ID", "KIND", "TARGET", "STATUS", "STEPS", "ACTOR", "CREATED"]);
                for op in &ops {
                    t.row(vec![
                        op.id.0.clone(),
                        op.kind.as_str().into(),
                        op.target.clone(),
                        op.status.as_str().into(),
                        progress(op),
                        format!("{}/{}", op.actor.face.as_str(), op.actor.principal),
                        when(&op.created_at),
                    ]);
                }
                t.render_or(if args.archived { "No archived operations." } else { "No operations." })
            })?;
            output::more(next.as_deref());
            Ok(Exit::Ok)
        }
        OperationCommand::Get { id } => {
            let op = client.get_operation(&id).await?;
            output::emit(g.output, &op, || render(&op))?;
            Ok(Exit::Ok)
        }
        OperationCommand::Wait { id } => mutation::follow_and_report(g, &client, &id).await,
        OperationCommand::Retry { id, step, wait } => {
            let step = match step {
                Some(s) => s,
                None => {
                    let op = client.get_operation(&id).await?;
                    let failed: Vec<&str> = op
                        .steps
                        .iter()
                        .filter(|s| matches!(s.phase, StepPhase::Failed | StepPhase::NeedsAttention))
                        .map(|s| s.key.as_str())
                        .collect();
                    match failed.as_slice() {
                        [one] => one.to_string(),
                        [] => return Err(usage(format!("operation {id} has no failed step to retry"))),
                        many => {
                            return Err(usage(format!(
                                "operation {id} has several failed steps ({}); name the one to retry",
                                many.join(", ")
                            )));
                        }
                    }
                }
            };
            let op = client.retry_step(&id, &step).await?;
            if wait {
                return mutation::follow_and_report(g, &client, &id).await;
            }
            output::emit(g.output, &op, || {
                format!("Retrying step {step} of operation {id}.\nFollow it with: instantstart operation wait {id}")
            })?;
            Ok(Exit::Ok)
        }
        OperationCommand::Cancel { id, wait } => {
            let op = client.cancel_operation(&id).await?;
            if wait {
                return mutation::follow_and_report(g, &client, &id).await;
            }
            output::emit(g.output, &op, || {
                format!("Cancelling operation {id}: running steps stop between provider calls; nothing is rolled back.")
            })?;
            Ok(Exit::Ok)
        }
    }
}

/// `done/total` steps.
fn progress(op: &Operation) -> String {
    let done = op.steps.iter().filter(|s| s.phase == StepPhase::Succeeded).count();
    format!("{done}/{}", op.steps.len())
}

/// An operation for people: its header and one row per step.
pub fn render(op: &Operation) -> String {
    let mut pairs = vec![
        ("Operation", op.id.0.clone()),
        ("Kind", op.kind.as_str().into()),
        ("Target", op.target.clone()),
        ("Status", op.status.as_str().into()),
        ("Actor", format!("{}/{}", op.actor.face.as_str(), op.actor.principal)),
        ("Created", when(&op.created_at)),
    ];
    if let Some(f) = &op.finished_at {
        pairs.push(("Finished", format!("{} (took {})", when(f), secs(between(op.created_at, *f)))));
    }
    if let Some(e) = &op.error {
        pairs.push(("Error", e.clone()));
    }
    let mut t = Table::new(&["STEP", "PHASE", "ATTEMPTS", "TIME", "NOTE"]);
    for s in &op.steps {
        let time = match (s.started_at, s.finished_at) {
            (Some(a), Some(b)) => secs(between(a, b)),
            (Some(a), None) => format!("{}…", secs(between(a, chrono::Utc::now()))),
            _ => "-".into(),
        };
        let note = s.error.clone().or_else(|| s.detail.clone()).unwrap_or_default();
        t.row(vec![s.key.clone(), s.phase.as_str().into(), s.attempts.to_string(), time, note]);
    }
    format!("{}\n{}", fields(&pairs), t.render_or("No steps."))
}
