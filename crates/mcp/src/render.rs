//! Tool results: what an agent reads back.
//!
//! Every result is JSON, sent both as structured content and as its text. Mutations name the
//! status tool that decides completion; failures are tool results with `isError: true` whose
//! `error` carries the server's problem document — every finding with its field path and rule —
//! plus a `hint` saying what to do next. Protocol errors are kept for malformed tool calls.

use instantstart_client::{Accepted, Error, Plan, Submitted};
use instantstart_core::operation::{Operation, OperationStatus, Step, StepPhase};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

/// The terminal statuses, as an agent should read them.
pub const TERMINAL: &str = "succeeded, failed, needs_attention or cancelled";

/// A successful result.
pub fn ok(value: Value) -> CallToolResult {
    CallToolResult::structured(value)
}

/// A serializable value as a successful result.
pub fn ok_serialize(value: &impl serde::Serialize) -> CallToolResult {
    match serde_json::to_value(value) {
        Ok(v) => ok(v),
        Err(e) => failure(&Error::Decode { url: "(result)".into(), message: e.to_string() }),
    }
}

/// A failed call, as a tool result with `isError: true`.
pub fn failure(e: &Error) -> CallToolResult {
    CallToolResult::structured_error(error_body(e))
}

/// The JSON of a failure: the problem document and a hint.
pub fn error_body(e: &Error) -> Value {
    match e {
        Error::Api { status, problem } => {
            let hint = match status {
                400 => "The request broke the rules listed in `findings` (field path + rule). Nothing was \
                        changed. Fix every listed field and call again."
                    .to_string(),
                422 => "The request is well-formed but cannot be applied as it stands (see `findings`: e.g. \
                        the instance type is not offered in that Availability Zone, a quota is too low, a name \
                        is taken, or an immutable field would change). Nothing was changed. Each rule says the \
                        remedy: explain it, ask the user for the decision it needs (another zone, type, count \
                        or a quota increase), then call again."
                    .to_string(),
                409 => match &problem.operation_id {
                    Some(op) => format!(
                        "Conflict with operation {op}: either another mutation of the same target is running \
                         (follow it with operation_wait id={op} before trying again) or this idempotency key \
                         was already used with other arguments (use a new key)."
                    ),
                    None => "Conflict with the current state (e.g. the step is not failed, or the operation \
                             already finished). Read it with operation_get before trying again."
                        .to_string(),
                },
                404 => "Not found. List what exists first (cluster_list, operation_list).".to_string(),
                401 => "The control plane rejected the token. Set INSTANTSTART_TOKEN (or run `instantstart \
                        login`) and restart the MCP server."
                    .to_string(),
                403 => "The token lacks the scope for this action (a read-only token cannot change anything). \
                        Ask the user for an operate-scoped token; do not retry."
                    .to_string(),
                500..=599 => "The control plane or the cloud provider failed (e.g. throttling). Read the state \
                              (operation_list, cluster_get), then repeat the call after a short pause with the \
                              same idempotency_key — it cannot start a second operation. If it keeps failing, \
                              report the detail to the user."
                    .to_string(),
                _ => "The control plane refused the request.".to_string(),
            };
            json!({ "error": problem, "hint": hint })
        }
        Error::Connection { url, message } => json!({
            "error": { "title": "Control plane unreachable", "detail": message, "url": url },
            "hint": "The InstantStart server did not answer. Check that it runs and that INSTANTSTART_URL \
                     points at it; if a mutation was in flight, call it again with the same idempotency key \
                     (it returns the same operation) or list operations before retrying."
        }),
        other => json!({
            "error": { "title": "Client error", "detail": other.to_string() },
            "hint": "The MCP server could not complete the call; report this detail to the user."
        }),
    }
}

/// How an agent decides completion of an operation (text naming the status tools).
pub fn completion(id: &str) -> String {
    format!(
        "Not finished yet. Call operation_wait with id=\"{id}\" (blocks up to 15 minutes and reports \
         progress), or poll operation_get with id=\"{id}\" until status is {TERMINAL}. Report the outcome, \
         not the submission."
    )
}

/// The result of a mutation: the operation id and how to follow it, the dry-run plan, or
/// nothing to do.
pub fn submitted(s: &Submitted) -> CallToolResult {
    match s {
        Submitted::Accepted(a) => ok(accepted(a)),
        Submitted::DryRun(p) => ok(plan(p)),
        Submitted::NoChange(n) => ok(json!({
            "no_change": true,
            "message": n.message,
            "plan": n.raw.get("plan").cloned().unwrap_or(Value::Null),
            "completion": "Nothing to do: already in this state (the real state matches the request), so no \
                           operation was started and there is nothing to wait for. Tell the user it is already so.",
        })),
    }
}

fn accepted(a: &Accepted) -> Value {
    let op = &a.operation;
    let id = op.id.0.as_str();
    let mut v = json!({
        "operation_id": id,
        "kind": op.kind,
        "target": op.target,
        "status": op.status,
        "replayed": a.replayed,
        "steps": op.steps.iter().map(|s| json!({"key": s.key, "title": s.title, "phase": s.phase})).collect::<Vec<_>>(),
        "status_tool": "operation_wait",
        "next_call": { "tool": "operation_wait", "arguments": { "id": id } },
        "completion": completion(id),
    });
    if let Some(plan) = a.raw.get("plan").filter(|p| !p.is_null()) {
        // The explicit diff, when the server reports it with the operation.
        v["plan"] = plan.clone();
    }
    if op.status.is_terminal() {
        v["completion"] = Value::String(format!(
            "The operation already finished with status {}; read it with operation_get id=\"{id}\".",
            op.status.as_str()
        ));
    }
    if a.replayed {
        v["note"] = Value::String(
            "This idempotency key was used before with the same arguments: this is the operation it started, \
             nothing new was started."
                .into(),
        );
    }
    v
}

fn plan(p: &Plan) -> Value {
    // The server's plan as sent (request with defaults, steps, preflight checks, diff), so new
    // plan fields reach the agent without a change here.
    let mut v = match &p.raw {
        Value::Object(_) => p.raw.clone(),
        _ => json!({ "dry_run": true, "target": p.target, "request": p.request, "steps": p.steps }),
    };
    v["note"] = Value::String(if p.blocked() {
        "Dry run: nothing was changed. A preflight check failed (status fail in `checks`): the real call would be \
         refused. Explain the check's detail and remedy to the user."
            .into()
    } else {
        "Dry run: nothing was changed. Call again without dry_run (and with an idempotency_key) to apply.".into()
    });
    v
}

/// Steps that are done, counted for progress.
pub fn done_steps(op: &Operation) -> usize {
    op.steps.iter().filter(|s| s.phase.is_terminal()).count()
}

fn step_view(s: &Step) -> Value {
    let mut v = json!({ "key": s.key, "title": s.title, "phase": s.phase, "attempts": s.attempts });
    for (k, val) in [("detail", &s.detail), ("error", &s.error)] {
        if let Some(text) = val {
            v[k] = Value::String(text.clone());
        }
    }
    if let Some(r) = &s.resource {
        v["resource"] = json!(r);
    }
    v
}

/// One line of progress: how many steps are done and what is in progress.
pub fn progress_line(op: &Operation) -> String {
    let active: Vec<String> = op
        .steps
        .iter()
        .filter(|s| !s.phase.is_terminal() && s.phase != StepPhase::Pending)
        .map(|s| match &s.detail {
            Some(d) => format!("{} ({}: {d})", s.key, s.phase.as_str()),
            None => format!("{} ({})", s.key, s.phase.as_str()),
        })
        .collect();
    let mut line = format!("{}, {}/{} steps done", op.status.as_str(), done_steps(op), op.steps.len());
    if !active.is_empty() {
        line.push_str("; in progress: ");
        line.push_str(&active.join(", "));
    }
    line
}

/// What `operation_wait` returns: the operation's state and what to do next.
pub fn waited(op: &Operation, waited_secs: u64) -> Value {
    let id = op.id.0.as_str();
    let keys = |f: &dyn Fn(StepPhase) -> bool| -> Vec<&str> {
        op.steps.iter().filter(|s| f(s.phase)).map(|s| s.key.as_str()).collect()
    };
    let in_progress: Vec<Value> =
        op.steps.iter().filter(|s| !s.phase.is_terminal() && s.phase != StepPhase::Pending).map(step_view).collect();
    let stopped: Vec<Value> =
        op.steps.iter().filter(|s| s.phase.is_terminal() && s.phase != StepPhase::Succeeded).map(step_view).collect();
    let failed = keys(&|p| matches!(p, StepPhase::Failed | StepPhase::NeedsAttention));
    let next = match op.status {
        OperationStatus::Running => format!(
            "Still running after {waited_secs} s. Call operation_wait again with id=\"{id}\" to keep following."
        ),
        OperationStatus::Succeeded => "Done: every step succeeded. Report the result to the user.".to_string(),
        OperationStatus::Failed => format!(
            "Failed at step(s) {}. Read each step's error; diagnose read-only (skill diagnose-cluster-creation), \
             then, once the cause is fixed, operation_retry_step with id=\"{id}\" and the step key, and \
             operation_wait again.",
            failed.join(", ")
        ),
        OperationStatus::NeedsAttention => format!(
            "Step(s) {} found something they will not decide alone (e.g. a same-named resource InstantStart \
             does not own). Explain the step's error to the user and ask how to proceed; do not retry blindly.",
            failed.join(", ")
        ),
        OperationStatus::Cancelled => {
            "The operation was cancelled; resources created so far stay in place.".to_string()
        }
    };
    json!({
        "operation_id": id,
        "kind": op.kind,
        "target": op.target,
        "status": op.status,
        "terminal": op.status.is_terminal(),
        "progress": progress_line(op),
        "error": op.error,
        "steps_in_progress": in_progress,
        "steps_pending": keys(&|p| p == StepPhase::Pending),
        "steps_failed": stopped,
        "waited_secs": waited_secs,
        "next": next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use instantstart_client::Problem;
    use instantstart_core::Finding;

    #[test]
    fn validation_failures_carry_findings_and_a_hint() {
        let e = Error::Api {
            status: 400,
            problem: Problem {
                kind: "urn:instantstart:problem:validation".into(),
                title: "Invalid request".into(),
                status: 400,
                detail: "x".into(),
                findings: vec![Finding { field: "hyperpod.instance_groups[0].count".into(), rule: "too big".into() }],
                operation_id: None,
            }
            .into(),
        };
        let r = failure(&e);
        assert_eq!(r.is_error, Some(true));
        let v = r.structured_content.unwrap();
        assert_eq!(v["error"]["findings"][0]["field"], "hyperpod.instance_groups[0].count");
        assert!(v["hint"].as_str().unwrap().contains("findings"));
        let conflict = Error::Api {
            status: 409,
            problem: Problem { operation_id: Some("op-1".into()), ..Problem::from_status(409, "busy") }.into(),
        };
        assert!(error_body(&conflict)["hint"].as_str().unwrap().contains("operation_wait id=op-1"));
    }

    #[test]
    fn a_no_op_is_a_result_saying_already_in_this_state() {
        let raw = json!({ "no_change": true, "plan": { "target": "demo", "changes": [] }, "message": "demo: already in this state" });
        let r = submitted(&Submitted::NoChange(instantstart_client::NoChange {
            message: "demo: already in this state".into(),
            raw,
        }));
        assert_ne!(r.is_error, Some(true));
        let v = r.structured_content.unwrap();
        assert_eq!((v["no_change"].as_bool(), v["plan"]["target"].as_str()), (Some(true), Some("demo")));
        assert!(v["message"].as_str().unwrap().contains("already in this state"));
        assert!(v.get("operation_id").is_none() && v["completion"].as_str().unwrap().contains("no operation"));
    }
}
