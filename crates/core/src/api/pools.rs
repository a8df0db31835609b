//! Model pools: the warm workers of pool endpoints and what each serves, and moving a worker
//! to another endpoint of its pool (the `assign_pool_worker` operation,
//! [`crate::workflow::endpoints::AssignPoolWorkerWorkflow`]).
//!
//! # Guarantees
//!
//! - A caller confined to namespaces sees the pools with workers in them, and only those
//!   workers.
//! - An assignment changes the worker's `instantstart.io/pool` label only: the pod keeps
//!   running (same uid); an assignment that changes nothing is [`Submitted::NoChange`].

use super::error::ReadError;
use super::workloads::{Caller, Submitted};
use crate::engine::{Engine, EngineError};
use crate::kube_access::KubeAccess;
use crate::operation::OperationKind;
use crate::provider::{KubeApi, KubeTarget};
use crate::workflow::endpoints::{self as ep, AssignPoolWorkerRequest};

pub use crate::workflow::endpoints::{PoolSummary, PoolWorker};

/// The model pools of the cluster as `access` may see them.
pub async fn list(kube: &dyn KubeApi, target: &KubeTarget, access: &KubeAccess) -> Result<Vec<PoolSummary>, ReadError> {
    Ok(ep::list_pools_as(kube, target, access).await?)
}

/// Which worker to move where.
#[derive(Debug, Clone)]
pub struct Assignment {
    pub cluster: String,
    pub pool: String,
    /// Pod name of the worker.
    pub pod: String,
    /// The endpoint the worker should serve; `None` makes it idle.
    pub serving: Option<String>,
}

/// Moves a warm worker (or answers the dry run).
pub async fn assign(
    engine: &Engine,
    a: Assignment,
    caller: &Caller,
    dry: bool,
    key: Option<String>,
) -> Result<Submitted, EngineError> {
    let request = serde_json::to_value(AssignPoolWorkerRequest {
        cluster: a.cluster,
        pool: a.pool,
        pod: a.pod,
        serving: a.serving,
        resolved: None,
    })
    .map_err(|e| EngineError::InvalidState(e.to_string()))?;
    let kind = OperationKind::AssignPoolWorker;
    if dry {
        return Ok(Submitted::DryRun(engine.dry_run_checked(kind, &request).await?));
    }
    super::workloads::run(engine, kind, &request, caller, key).await
}
