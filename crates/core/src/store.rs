//! The store trait: durable state of the control plane (operations, steps, audit log, the
//! cluster registry and settings).
//!
//! Every method is one short synchronous transaction; the engine relies on each phase change
//! being durable when the call returns (see the invariants in ARCHITECTURE.md). The SQLite
//! implementation lives in `instantstart-store`.

use crate::operation::{
    AuditEntry, NewOperation, Operation, OperationId, OperationKind, OperationStatus, Step, StepUpdate,
};
use crate::page::{Order, Page, PageRequest, page_in_memory};
use crate::spec::ClusterCreateRequest;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// Another mutating operation on the same target is still running.
    #[error("operation {running} is already changing {target}; wait for it to finish or cancel it")]
    Conflict { target: String, running: OperationId },
    /// The idempotency key was used before with a different request.
    #[error("idempotency key {key:?} was already used by operation {operation} with a different request")]
    IdempotencyMismatch { key: String, operation: OperationId },
    #[error("{what} not found")]
    NotFound { what: String },
    /// A record with this unique name already exists.
    #[error("{what} already exists")]
    AlreadyExists { what: String },
    /// A page cursor whose shape is right but whose position is not (a forged cursor).
    #[error("cursor: not a cursor of this list: use the `next` link of a previous page")]
    BadCursor,
    #[error("store backend error: {0}")]
    Backend(String),
}

/// Result of inserting an operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Inserted {
    /// A new operation was recorded.
    New(Operation),
    /// The idempotency key matched an earlier identical request: that operation is returned.
    Existing(Operation),
}

impl Inserted {
    pub fn operation(&self) -> &Operation {
        match self {
            Inserted::New(op) | Inserted::Existing(op) => op,
        }
    }

    pub fn into_operation(self) -> Operation {
        match self {
            Inserted::New(op) | Inserted::Existing(op) => op,
        }
    }
}

/// Filter for listing operations; newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OperationFilter {
    pub target: Option<String>,
    pub status: Option<OperationStatus>,
    pub limit: Option<u32>,
}

/// An operation without its request and steps: what a list of many targets needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OperationHead {
    pub id: OperationId,
    pub kind: OperationKind,
    pub target: String,
    pub status: OperationStatus,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl From<&Operation> for OperationHead {
    fn from(op: &Operation) -> Self {
        OperationHead {
            id: op.id.clone(),
            kind: op.kind,
            target: op.target.clone(),
            status: op.status,
            error: op.error.clone(),
            created_at: op.created_at,
            updated_at: op.updated_at,
            finished_at: op.finished_at,
        }
    }
}

/// Where a cluster in the registry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClusterSource {
    Created,
    Imported,
}

/// A cluster known to the control plane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterRecord {
    pub name: String,
    pub region: String,
    pub source: ClusterSource,
    pub eks_cluster: String,
    pub hyperpod_cluster: Option<String>,
    pub vpc_id: Option<String>,
    pub bucket: Option<String>,
    pub kubernetes_version: Option<String>,
    /// The create request, for clusters created through InstantStart.
    pub request: Option<ClusterCreateRequest>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Durable state. Implementations must make every call atomic and durable on return.
pub trait Store: Send + Sync {
    /// Records a new operation with its steps and an audit entry, atomically:
    /// - the same idempotency key with the same request hash returns the existing operation;
    /// - the same key with a different hash is [`StoreError::IdempotencyMismatch`];
    /// - a running operation on the same target is [`StoreError::Conflict`].
    fn insert_operation(&self, op: NewOperation) -> Result<Inserted, StoreError>;
    fn get_operation(&self, id: &OperationId) -> Result<Option<Operation>, StoreError>;
    /// The operation recorded with this idempotency key, if any.
    fn find_by_idempotency_key(&self, key: &str) -> Result<Option<Operation>, StoreError>;
    fn list_operations(&self, filter: &OperationFilter) -> Result<Vec<Operation>, StoreError>;
    /// One page of [`Store::list_operations`] (same order, `filter.limit` ignored), cursor list
    /// [`OPERATIONS_LIST`] (the rule of [`crate::page`]). Implementations seek in an index;
    /// this default reads the whole list and pages it in memory.
    fn page_operations(&self, filter: &OperationFilter, page: &PageRequest) -> Result<Page<Operation>, StoreError> {
        let all = self.list_operations(&OperationFilter { limit: None, ..filter.clone() })?;
        let key =
            |op: &Operation| vec![op.created_at.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true), op.id.0.clone()];
        Ok(page_in_memory(all, OPERATIONS_LIST, Order::Descending, key, page))
    }
    /// Operations whose status is `running` (to resume after a restart).
    fn running_operations(&self) -> Result<Vec<Operation>, StoreError>;
    /// The newest operation (the order of [`Store::list_operations`]) of each of `targets`,
    /// among `kinds` (every kind when empty), keyed by target; a target without such an
    /// operation is absent. Implementations answer in one query, whatever the number of
    /// targets; this default asks once per target.
    fn latest_operations(
        &self,
        targets: &[String],
        kinds: &[OperationKind],
    ) -> Result<BTreeMap<String, OperationHead>, StoreError> {
        let mut out = BTreeMap::new();
        for target in targets {
            let filter = OperationFilter { target: Some(target.clone()), status: None, limit: None };
            if let Some(op) =
                self.list_operations(&filter)?.iter().find(|op| kinds.is_empty() || kinds.contains(&op.kind))
            {
                out.insert(target.clone(), OperationHead::from(op));
            }
        }
        Ok(out)
    }
    /// How many operations have each status (statuses without operations are absent).
    /// Implementations count in the database; this default reads every operation.
    fn count_operations(&self) -> Result<Vec<(OperationStatus, u64)>, StoreError> {
        let mut counts: Vec<(OperationStatus, u64)> = Vec::new();
        for op in self.list_operations(&OperationFilter::default())? {
            match counts.iter_mut().find(|(s, _)| *s == op.status) {
                Some((_, n)) => *n += 1,
                None => counts.push((op.status, 1)),
            }
        }
        Ok(counts)
    }
    /// Applies `update` to one step in one transaction and returns the stored step.
    fn update_step(&self, id: &OperationId, key: &str, update: &StepUpdate) -> Result<Step, StoreError>;
    /// Sets the operation's status (and error); terminal statuses set `finished_at`.
    fn set_operation_status(
        &self,
        id: &OperationId,
        status: OperationStatus,
        error: Option<&str>,
    ) -> Result<(), StoreError>;
    /// Moves a terminal operation back to `running` (for a step retry), unless another running
    /// operation holds its target ([`StoreError::Conflict`]).
    fn reopen_operation(&self, id: &OperationId) -> Result<(), StoreError>;

    fn append_audit(&self, entry: &AuditEntry) -> Result<(), StoreError>;
    /// Newest first.
    fn list_audit(&self, target: Option<&str>, limit: u32) -> Result<Vec<AuditEntry>, StoreError>;
    /// One page of the audit log, newest first, cursor list [`AUDIT_LIST`]. Implementations
    /// seek in an index; this default reads the whole log and pages it in memory.
    fn page_audit(&self, target: Option<&str>, page: &PageRequest) -> Result<Page<AuditEntry>, StoreError> {
        let all = self.list_audit(target, u32::MAX)?;
        let n = all.len();
        // Newest first already; number the entries so equal timestamps keep their order.
        let numbered: Vec<(usize, AuditEntry)> = all.into_iter().enumerate().map(|(i, e)| (n - i, e)).collect();
        let key = |(i, e): &(usize, AuditEntry)| {
            vec![e.at.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true), format!("{i:020}")]
        };
        Ok(page_in_memory(numbered, AUDIT_LIST, Order::Descending, key, page).map(|(_, e)| e))
    }

    fn put_cluster(&self, record: &ClusterRecord) -> Result<(), StoreError>;
    fn get_cluster(&self, name: &str) -> Result<Option<ClusterRecord>, StoreError>;
    fn list_clusters(&self) -> Result<Vec<ClusterRecord>, StoreError>;
    /// One page of the registry by name, cursor list [`CLUSTERS_LIST`]. Implementations seek
    /// in the primary key; this default reads the whole registry and pages it in memory.
    fn page_clusters(&self, page: &PageRequest) -> Result<Page<ClusterRecord>, StoreError> {
        let all = self.list_clusters()?;
        Ok(page_in_memory(all, CLUSTERS_LIST, Order::Ascending, |c| vec![c.name.clone()], page))
    }
    fn delete_cluster(&self, name: &str) -> Result<(), StoreError>;

    fn get_setting(&self, key: &str) -> Result<Option<String>, StoreError>;
    fn set_setting(&self, key: &str, value: Option<&str>) -> Result<(), StoreError>;
}

/// Cursor list of [`Store::page_operations`]: key (created at, insertion order).
pub const OPERATIONS_LIST: &str = "operations";
/// Cursor list of [`Store::page_audit`]: key (at, insertion order).
pub const AUDIT_LIST: &str = "audit";
/// Cursor list of [`Store::page_clusters`]: key (name).
pub const CLUSTERS_LIST: &str = "clusters";

/// Setting key of the active cluster's name.
pub const ACTIVE_CLUSTER: &str = "active_cluster";
