//! What the workload nouns (`job`, `endpoint`) share: the request tagged with its variant,
//! the dry run's manifests after the plan, the pods table of `get` and the confirmed `rm`.

use crate::app::Globals;
use crate::exit::Exit;
use crate::mutation::{self, MutationArgs};
use crate::output::{self, Output, Table, s};
use instantstart_client::{Client, Error as ClientError, MutationOptions, Submitted};
use serde_json::{Value, json};
use std::fmt::Write as _;

/// `{tag_key: tag, …params}`: a request whose variant is named by a field beside the others
/// (`runtime` of a job, `route` of an endpoint).
pub fn tagged(tag_key: &str, tag: &str, params: Value) -> Value {
    let mut body = json!({ tag_key: tag });
    if let Value::Object(map) = params {
        body.as_object_mut().expect("an object").extend(map);
    }
    body
}

/// The Kubernetes objects a dry run would apply, found in the plan's request.
pub fn manifests(plan_request: &Value) -> Vec<Value> {
    fn find(v: &Value, out: &mut Vec<Value>) {
        match v {
            Value::Object(map) => {
                if map.contains_key("apiVersion") && map.contains_key("kind") {
                    out.push(v.clone());
                    return;
                }
                map.values().for_each(|x| find(x, out));
            }
            Value::Array(items) => items.iter().for_each(|x| find(x, out)),
            _ => {}
        }
    }
    let mut out = vec![];
    find(plan_request, &mut out);
    out
}

/// Finishes a workload submission: for a dry run shown as a table, the plan followed by the
/// manifests (YAML documents) it would apply.
pub async fn finish_workload(g: &Globals, client: &Client, submitted: Submitted, wait: bool) -> anyhow::Result<Exit> {
    if let Submitted::Accepted(a) = &submitted
        && let Some(w) = a.raw.get("workload")
        && g.output == Output::Table
    {
        eprintln!("Workload: {}/{}", s(w, "namespace"), s(w, "name"));
    }
    let objects = match &submitted {
        Submitted::DryRun(plan) if g.output == Output::Table => manifests(&plan.request),
        _ => vec![],
    };
    let code = mutation::finish(g, client, submitted, wait).await?;
    if !objects.is_empty() {
        let mut out = format!("Manifests ({}):\n", objects.len());
        for o in &objects {
            let _ = write!(out, "---\n{}", serde_norway::to_string(o)?);
        }
        output::write_stdout(&out)?;
    }
    Ok(code)
}

/// Appends the pods table of a workload (`pod_list`, else `pods` when it is a list), if any.
pub fn push_pods(out: &mut String, workload: &Value) {
    let pods = workload.get("pod_list").or_else(|| workload.get("pods"));
    if let Some(pods) = pods.and_then(Value::as_array) {
        let mut t = Table::new(&["POD", "PHASE", "NODE", "RESTARTS"]);
        for p in pods {
            t.row(vec![s(p, "name"), s(p, "phase"), s(p, "node"), s(p, "restarts")]);
        }
        out.push('\n');
        out.push_str(&t.render_or("No pods."));
    }
}

/// Appends the volumes a workload's pods mount (`volumes`), if any.
pub fn push_volumes(out: &mut String, workload: &Value) {
    let Some(volumes) = workload.get("volumes").and_then(Value::as_array).filter(|v| !v.is_empty()) else { return };
    let mut t = Table::new(&["MOUNT PATH", "VOLUME", "KIND", "CLAIM", "READ-ONLY"]);
    for v in volumes {
        t.row(vec![s(v, "mount_path"), s(v, "volume"), s(v, "kind"), s(v, "claim"), s(v, "read_only")]);
    }
    out.push('\n');
    out.push_str(&t.render_or(""));
}

/// `rm` of a workload: the typed-name confirmation (skipped with `--yes` or `--dry-run`;
/// without a terminal it is refused, naming `what`), then the delete sent with the mutation
/// options and its result shown as for any mutation.
#[allow(clippy::too_many_arguments)]
pub async fn delete_workload<F, Fut>(
    g: &Globals,
    client: &Client,
    what: &str,
    name: &str,
    question: &str,
    yes: bool,
    m: &MutationArgs,
    delete: F,
) -> anyhow::Result<Exit>
where
    F: FnOnce(MutationOptions) -> Fut,
    Fut: Future<Output = Result<Submitted, ClientError>>,
{
    let refusal = format!("deleting {what} {name} needs confirmation: pass --yes (or --dry-run to see the plan)");
    if !mutation::confirm_by_name(name, yes, m.dry_run, &refusal, question)? {
        return Ok(Exit::Usage);
    }
    let submitted = delete(m.options()).await?;
    mutation::finish(g, client, submitted, m.wait).await
}

/// `true` for a job or endpoint InstantStart did not create (read-only), else `false`.
pub fn foreign(v: &Value) -> String {
    v.get("foreign").and_then(Value::as_bool).unwrap_or(false).to_string()
}

/// The line a detail view shows for a foreign job or endpoint.
pub fn foreign_note(v: &Value) -> String {
    if v.get("foreign").and_then(Value::as_bool).unwrap_or(false) {
        "true: not created by InstantStart; read-only (manage it with the tool that created it)".into()
    } else {
        "false".into()
    }
}
