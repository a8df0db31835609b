//! What jobs, model downloads and endpoints share as nouns: the caller's reach into a
//! cluster's Kubernetes, submitting a workload operation with the workload it acts on, and the
//! delete-by-name rule (find the namespace, then delete; replay a delete whose workload is
//! gone).
//!
//! # Guarantees
//!
//! - Every workload request carries the caller's access in `acting_as`, replacing whatever a
//!   client sent: the workflow checks the namespace against it and its Kubernetes calls
//!   impersonate the caller's identity, also after a restart ([`with_access`]).
//! - An accepted workload operation names the workload it acts on (its real name and namespace,
//!   e.g. the deterministic name of a download Job) as recorded in the operation
//!   ([`workload_of`]), so every noun answers the same `WorkloadAccepted` shape.
//! - A delete names its workload's namespace as the cluster has it: the namespace is looked up
//!   before anything is recorded, never guessed.
//! - Idempotency (ARCHITECTURE invariant 4) holds for a delete whose workload is gone by now:
//!   the same `Idempotency-Key` with the same kind and name returns the original operation;
//!   anything else about a missing workload is a `404` ([`delete`]).

use super::error::ReadError;
use crate::diff::Plan;
use crate::engine::{DryRun, Engine, EngineError, Outcome, Submission};
use crate::kube_access::KubeAccess;
use crate::operation::{Actor, Operation, OperationKind};
use crate::provider::KubeTarget;
use crate::store::Store;
use crate::workflow::workloads::{DeleteWorkloadRequest, StoredWorkload};
use crate::workload::WorkloadKind;
use serde_json::Value;

pub use crate::workload::WorkloadRef;

/// The answer to a workload mutation, before the faces render it.
#[derive(Debug)]
pub enum Submitted {
    /// `?dry_run=true`: what would be done.
    DryRun(DryRun),
    /// The real state already matches: nothing was recorded.
    NoChange(Plan),
    /// Recorded (or replayed): the operation and the workload it acts on.
    Accepted { submission: Submission, workload: Option<WorkloadRef> },
}

/// The caller's view of a registered cluster's Kubernetes: the target impersonating the
/// access's identity and the namespace a read is confined to (a requested namespace outside the
/// access is `403`; without one, the access's only namespace if it has exactly one).
pub fn cluster_as(
    store: &dyn Store,
    cluster: &str,
    access: &KubeAccess,
    namespace: Option<&str>,
) -> Result<(KubeTarget, Option<String>), EngineError> {
    let (_, target, namespace) = crate::workload::read::cluster_kube_as(store, cluster, access, namespace)?;
    Ok((target, namespace))
}

/// A `?namespace=` a read names must be a namespace name (DNS-1123 label): a 400 naming
/// `namespace` otherwise, before anything is asked of the cluster.
pub fn check_namespace(namespace: Option<&str>) -> Result<(), ReadError> {
    match namespace.map(crate::names::dns1123_label) {
        Some(Err(rule)) => Err(crate::validate::ValidationError::invalid("namespace", rule).into()),
        _ => Ok(()),
    }
}

/// The workload an operation acts on: the rendered name and namespace of an apply, the
/// named one of a delete.
pub fn workload_of(op: &Operation) -> Option<WorkloadRef> {
    if let Ok(stored) = serde_json::from_value::<StoredWorkload>(op.request.clone()) {
        return Some(WorkloadRef { name: stored.rendered.name, namespace: stored.rendered.namespace });
    }
    let del: DeleteWorkloadRequest = serde_json::from_value(op.request.clone()).ok()?;
    Some(WorkloadRef { name: del.name, namespace: del.namespace })
}

/// The workload request with `access` in `acting_as` (replacing whatever was there).
pub fn with_access(mut request: Value, access: &KubeAccess) -> Result<Value, EngineError> {
    let access = serde_json::to_value(access).map_err(|e| EngineError::InvalidState(e.to_string()))?;
    if let Some(obj) = request.as_object_mut() {
        obj.insert("acting_as".into(), access);
    }
    Ok(request)
}

/// Who submits: the caller's access to the cluster and the actor the audit records.
#[derive(Debug, Clone)]
pub struct Caller {
    pub access: KubeAccess,
    pub actor: Actor,
}

/// Submits workload operation `kind` (or answers its dry run) with the caller's access; the
/// answer names the workload.
pub async fn submit(
    engine: &Engine,
    kind: OperationKind,
    request: Value,
    caller: &Caller,
    dry: bool,
    key: Option<String>,
) -> Result<Submitted, EngineError> {
    let request = with_access(request, &caller.access)?;
    if dry {
        return Ok(Submitted::DryRun(engine.dry_run_checked(kind, &request).await?));
    }
    run(engine, kind, &request, caller, key).await
}

/// Records and starts operation `kind` of `request` as is (no dry run): the answer names the
/// workload when the operation acts on one.
pub async fn run(
    engine: &Engine,
    kind: OperationKind,
    request: &Value,
    caller: &Caller,
    key: Option<String>,
) -> Result<Submitted, EngineError> {
    Ok(match engine.submit_checked(kind, request, caller.actor.clone(), key).await? {
        Outcome::Submitted(s) => {
            let workload = workload_of(&s.operation);
            Submitted::Accepted { submission: *s, workload }
        }
        Outcome::NoChange(plan) => Submitted::NoChange(plan),
    })
}

/// What a delete by name acts on.
#[derive(Debug, Clone, Copy)]
pub struct DeleteTarget<'a> {
    /// `delete_job`, `delete_download` or `delete_endpoint`.
    pub kind: OperationKind,
    pub workload: WorkloadKind,
    pub cluster: &'a str,
    pub name: &'a str,
}

/// Deletes workload `target.name`, whose namespace the caller looked up (`found`): with the
/// namespace, the delete is submitted; when the lookup found nothing, a replayed delete (same
/// `Idempotency-Key`, same kind and name) returns its original operation, and anything else is
/// the lookup's error (`404` for a missing workload).
#[allow(clippy::too_many_arguments)]
pub async fn delete(
    engine: &Engine,
    store: &dyn Store,
    target: DeleteTarget<'_>,
    found: Result<String, ReadError>,
    caller: &Caller,
    dry: bool,
    key: Option<String>,
) -> Result<Submitted, ReadError> {
    let request = match found {
        Ok(namespace) => serde_json::to_value(DeleteWorkloadRequest {
            cluster: target.cluster.to_string(),
            kind: target.workload,
            name: target.name.to_string(),
            namespace,
            acting_as: None,
        })
        .map_err(|e| EngineError::InvalidState(e.to_string()))?,
        Err(not_found) => {
            match replayed_delete(store, target.kind, Some(target.cluster), target.name, &not_found, key.as_deref())? {
                Some(op) => op.request,
                None => return Err(not_found),
            }
        }
    };
    Ok(submit(engine, target.kind, request, caller, dry, key).await?)
}

/// The operation a replayed delete of a gone workload returns, if this is one: the lookup found
/// nothing ([`ReadError::Missing`]) and `key` belongs to an operation of the same kind on the
/// same workload name (and `cluster`, when given).
pub fn replayed_delete(
    store: &dyn Store,
    kind: OperationKind,
    cluster: Option<&str>,
    name: &str,
    not_found: &ReadError,
    key: Option<&str>,
) -> Result<Option<Operation>, ReadError> {
    let (ReadError::Missing(_), Some(key)) = (not_found, key) else { return Ok(None) };
    Ok(store.find_by_idempotency_key(key)?.filter(|op| {
        op.kind == kind
            && workload_of(op).is_some_and(|w| w.name == name)
            && cluster.is_none_or(|c| op.request.get("cluster").and_then(Value::as_str) == Some(c))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_workload_of_an_operation_is_the_rendered_one_or_the_deleted_one() {
        let op = |request: Value| {
            let mut o: Operation = serde_json::from_value(json!({
                "id": "op-1", "kind": "delete_job", "target": "cluster/demo/job/a", "status": "running",
                "actor": { "face": "api", "principal": "t" }, "request": {}, "idempotency_key": null,
                "request_hash": "h", "steps": [], "error": null, "created_at": "2026-01-01T00:00:00Z",
                "updated_at": "2026-01-01T00:00:00Z", "finished_at": null
            }))
            .expect("an operation");
            o.request = request;
            o
        };
        let del = json!({ "cluster": "demo", "kind": "training_job", "name": "a", "namespace": "ml" });
        assert_eq!(workload_of(&op(del)), Some(WorkloadRef { name: "a".into(), namespace: "ml".into() }));
        assert_eq!(workload_of(&op(json!({ "cluster": "demo" }))), None);
    }

    #[test]
    fn a_namespace_query_is_a_namespace_name() {
        assert!(check_namespace(None).is_ok());
        assert!(check_namespace(Some("team-a")).is_ok());
        let Err(ReadError::Validation(v)) = check_namespace(Some("Team_A")) else { panic!("a 400") };
        assert_eq!(v.findings[0].field, "namespace");
    }
}
