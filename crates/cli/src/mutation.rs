//! What every mutating command shares: `--dry-run`, `--wait`, `--idempotency-key`, and how
//! their results are shown (the plan with its explicit diff and preflight checks, the accepted
//! operation, "already in this state", or the followed outcome).

use crate::app::Globals;
use crate::exit::{Exit, usage};
use crate::output::{self, Output, secs};
use crate::progress;
use clap::Args;
use instantstart_client::{Client, Error as ClientError, MutationOptions, Plan, Submitted, fresh_idempotency_key};
use instantstart_core::operation::{Operation, OperationStatus, StepPhase};
use serde_json::Value;
use std::fmt::Write as _;
use std::io::IsTerminal;

/// Flags of every command that starts an operation.
#[derive(Args, Debug, Clone)]
pub struct MutationArgs {
    /// Print the plan (steps, the diff against the real state, preflight checks) and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Follow the operation with live progress; exit 1 unless it succeeds.
    #[arg(long, conflicts_with = "dry_run")]
    pub wait: bool,
    /// Idempotency key [default: a fresh random key]. Sending the same command again with the
    /// same key returns the same operation instead of starting another.
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
}

impl MutationArgs {
    pub fn options(&self) -> MutationOptions {
        MutationOptions {
            dry_run: self.dry_run,
            idempotency_key: Some(self.idempotency_key.clone().unwrap_or_else(fresh_idempotency_key)),
        }
    }
}

/// Shows a mutation's result; with `--wait`, follows the operation and returns its verdict.
pub async fn finish(g: &Globals, client: &Client, submitted: Submitted, wait: bool) -> anyhow::Result<Exit> {
    match submitted {
        Submitted::DryRun(plan) => {
            output::emit(g.output, &plan.raw, || render_plan(&plan))?;
            if plan.blocked() {
                eprintln!("error: a preflight check fails; the request would be refused");
                return Ok(Exit::Usage);
            }
            Ok(Exit::Ok)
        }
        Submitted::NoChange(none) => {
            output::emit(g.output, &none.raw, || format!("Nothing to change: {}", none.message.trim()))?;
            Ok(Exit::Ok)
        }
        Submitted::Accepted(accepted) => {
            let op = accepted.operation;
            if !wait {
                output::emit(g.output, &accepted.raw, || {
                    let mut out = String::new();
                    let how = if accepted.replayed { "already submitted with this idempotency key" } else { "started" };
                    let _ = writeln!(
                        out,
                        "Operation {} {how}: {} {} ({} steps).",
                        op.id,
                        op.kind.as_str(),
                        op.target,
                        op.steps.len()
                    );
                    let _ = writeln!(out, "Follow it with: instantstart operation wait {}", op.id);
                    out
                })?;
                return Ok(Exit::Ok);
            }
            follow_and_report(g, client, &op.id.0).await
        }
    }
}

/// Submits a change of an existing resource (explicit diff: the request carries only what the
/// user changed). For people (`-o table`) the diff the server computes against the real state
/// is printed first — it comes from a dry run of the same request, so the CLI computes
/// nothing; scripts (`-o json|yaml`) get the server's response as is. A request that matches
/// the real state prints "already in this state" and exits 0 without an operation.
pub async fn submit_diff<F, Fut>(g: &Globals, client: &Client, args: &MutationArgs, send: F) -> anyhow::Result<Exit>
where
    F: Fn(MutationOptions) -> Fut,
    Fut: Future<Output = Result<Submitted, ClientError>>,
{
    let opts = args.options();
    if !opts.dry_run && g.output == Output::Table {
        // Errors are left to the real request, which reports them the same way.
        if let Ok(Submitted::DryRun(plan)) = send(MutationOptions { dry_run: true, idempotency_key: None }).await {
            let changes = render_changes(&plan);
            if !changes.is_empty() {
                print!("Diff against the real state of {}:\n{changes}", plan.target);
            }
        }
    }
    let submitted = send(opts).await?;
    finish(g, client, submitted, args.wait).await
}

/// Asks before a destructive change: `--yes` skips the question; without a terminal the
/// command refuses (exit 2) and says which flag to pass. Returns whether to go ahead.
pub fn confirm_by_name(name: &str, yes: bool, dry_run: bool, refusal: &str, question: &str) -> anyhow::Result<bool> {
    if yes || dry_run {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        return Err(usage(refusal));
    }
    eprint!("{question} Type its name to confirm: ");
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    if answer.trim() != name {
        eprintln!("Not confirmed; nothing was changed.");
        return Ok(false);
    }
    Ok(true)
}

/// Follows an operation with progress, prints the outcome, and returns the exit code.
pub async fn follow_and_report(g: &Globals, client: &Client, id: &str) -> anyhow::Result<Exit> {
    let op = progress::follow(client, id).await?;
    report_outcome(g.output, &op)
}

/// Prints a terminal operation (summary line or document) and failure details; its exit code.
pub fn report_outcome(out: Output, op: &Operation) -> anyhow::Result<Exit> {
    let took = op.finished_at.map(|f| output::between(op.created_at, f));
    output::emit(out, op, || {
        let took = took.map(|t| format!(" in {}", secs(t))).unwrap_or_default();
        format!("Operation {} {}{took}: {} {}.", op.id, op.status.as_str(), op.kind.as_str(), op.target)
    })?;
    if op.status == OperationStatus::Succeeded {
        return Ok(Exit::Ok);
    }
    eprintln!("error: operation {} {}", op.id, op.status.as_str().replace('_', " "));
    let stuck: Vec<_> =
        op.steps.iter().filter(|s| matches!(s.phase, StepPhase::Failed | StepPhase::NeedsAttention)).collect();
    if let Some(e) = op.error.as_ref().filter(|_| stuck.is_empty()) {
        eprintln!("  {e}");
    }
    for s in &stuck {
        eprintln!("  step {} {}: {}", s.key, s.phase.as_str(), s.error.as_deref().unwrap_or("no error recorded"));
    }
    if let Some(first) = stuck.first() {
        eprintln!("Retry the step with: instantstart operation retry {} {} --wait", op.id, first.key);
    }
    Ok(Exit::Failed)
}

/// The plan of a dry run: every step with what it waits for and its expected duration, the
/// explicit diff, and the preflight checks.
pub fn render_plan(plan: &Plan) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Dry run: nothing was changed. Plan for {} ({} steps):", plan.target, plan.steps.len());
    let width = plan.steps.iter().map(|s| s.key.chars().count()).max().unwrap_or(0);
    for (i, step) in plan.steps.iter().enumerate() {
        let _ = writeln!(out, "{:>3}. {:<width$}  {}", i + 1, step.key, step.title);
        let mut notes = vec![];
        if !step.depends_on.is_empty() {
            notes.push(format!("after {}", step.depends_on.join(", ")));
        }
        if let Some(e) = step.expected_secs {
            notes.push(format!("expected ~{} on AWS", secs(e as f64)));
        }
        if !notes.is_empty() {
            let _ = writeln!(out, "     {:<width$}  {}", "", notes.join(" · "));
        }
    }
    if let Some(diff) = &plan.diff {
        let changes = render_changes(plan);
        if changes.is_empty() {
            let _ = writeln!(out, "Changes: none ({}: already in this state)", output::s(diff, "target"));
        } else {
            let _ = write!(out, "Changes:\n{changes}");
        }
    }
    if !plan.checks.is_empty() {
        let count = |status: &str| plan.checks.iter().filter(|c| c["status"] == status).count();
        let _ =
            writeln!(out, "Preflight checks: {} fail, {} warn, {} pass", count("fail"), count("warn"), count("pass"));
        for c in &plan.checks {
            let field = output::s(c, "field");
            let about = if field == "-" || field.is_empty() { String::new() } else { format!(" {field}:") };
            let _ = writeln!(
                out,
                "  {:<4}  {}{about} {}",
                output::s(c, "status"),
                output::s(c, "check"),
                output::s(c, "detail")
            );
            if let Some(remedy) = c.get("remedy").and_then(Value::as_str) {
                let _ = writeln!(out, "        → {remedy}");
            }
        }
    }
    out
}

/// The explicit diff of a plan, one `  field: from → to` line per change (empty when none).
pub fn render_changes(plan: &Plan) -> String {
    let mut out = String::new();
    let changes = plan.diff.as_ref().and_then(|d| d.get("changes")).and_then(Value::as_array);
    for c in changes.into_iter().flatten() {
        let _ = writeln!(out, "  {}: {} → {}", output::s(c, "field"), c["from"], c["to"]);
    }
    out
}
