//! The store trait: durable state of the control plane (operations, steps, audit log, the
//! cluster registry and settings).
//!
//! Every method is one short synchronous transaction; the engine relies on each phase change
//! being durable when the call returns (see the invariants in ARCHITECTURE.md). The SQLite
//! and PostgreSQL implementations live in `instantstart-store`.
//!
//! # Leases and fencing
//! Several replicas (server processes) may share one store. Each running operation is driven
//! by the one replica holding its [`Lease`]; every write the driver makes goes through a
//! `*_fenced` method carrying the lease, checked in the same transaction, so a replica whose
//! lease moved on (it paused past the TTL and another replica took over) can never write over
//! the new holder: it gets [`StoreError::Fenced`] and stops.

use crate::operation::{
    AuditEntry, NewOperation, Operation, OperationId, OperationKind, OperationStatus, Step, StepUpdate,
};
use crate::page::{Order, Page, PageRequest, page_in_memory};
use crate::spec::ClusterCreateRequest;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

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
    /// A fenced write or a lease renewal by a replica whose lease on the operation has moved
    /// on (another replica took it over, it expired, or the operation stopped running): the
    /// caller no longer drives the operation and must stop at once.
    #[error("operation {operation}: {reason}; this replica no longer drives it")]
    Fenced { operation: OperationId, reason: String },
    /// A page cursor whose shape is right but whose position is not (a forged cursor).
    #[error("cursor: not a cursor of this list: use the `next` link of a previous page")]
    BadCursor,
    #[error("store backend error: {0}")]
    Backend(String),
}

/// The right of one replica (server process) to drive one running operation, until
/// `expires_at` unless renewed. `token` is the fencing token: it grows by one with every
/// acquisition of the operation's lease (by any replica), so a write carrying an older token
/// is refused ([`StoreError::Fenced`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Lease {
    pub operation_id: OperationId,
    /// The replica holding the lease.
    pub replica: String,
    /// The fencing token (1 for the first acquisition of this operation's lease).
    pub token: u64,
    /// When the lease lapses unless renewed, by the store's clock (PostgreSQL: the database
    /// server's, so replicas' clocks need not agree).
    pub expires_at: DateTime<Utc>,
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
    /// `None`: every operation; `Some(false)`: only those not archived (the lists the faces
    /// show); `Some(true)`: only archived ones ([`Store::archive_operations`]).
    #[serde(default)]
    pub archived: Option<bool>,
}

/// Statuses of operations [`Store::archive_operations`] may archive: finished, with nothing
/// left for anyone to do (`needs_attention` waits for a person and stays in the hot path).
pub const ARCHIVABLE: [OperationStatus; 3] =
    [OperationStatus::Succeeded, OperationStatus::Failed, OperationStatus::Cancelled];

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

/// One entry of the change feed ([`Store::publish_change`]): an operation right after a change
/// made by `replica`.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationChange {
    /// Grows with every published change, in commit order (no reader skips one).
    pub seq: u64,
    pub replica: String,
    pub operation: Operation,
}

/// How many changes the feed keeps (older ones are pruned as new ones arrive); a replica
/// further behind re-reads the operations instead.
pub const CHANGE_FEED_KEEP: u64 = 10_000;

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
            let filter = OperationFilter { target: Some(target.clone()), ..OperationFilter::default() };
            if let Some(op) =
                self.list_operations(&filter)?.iter().find(|op| kinds.is_empty() || kinds.contains(&op.kind))
            {
                out.insert(target.clone(), OperationHead::from(op));
            }
        }
        Ok(out)
    }
    /// How many operations have each status (statuses without operations are absent).
    /// Implementations read counts the database keeps (SQLite and PostgreSQL: a table kept by
    /// triggers, schema version 8), not the operations; this default reads every operation.
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
    /// operation holds its target ([`StoreError::Conflict`]). A reopened operation is no longer
    /// archived.
    fn reopen_operation(&self, id: &OperationId) -> Result<(), StoreError>;
    /// Archives at most `limit` operations with an [`ARCHIVABLE`] status that finished before
    /// `finished_before`, oldest first, and returns how many it archived. An archived
    /// operation is kept whole (steps, audit) and read as before by id and by
    /// [`Store::latest_operations`] (a cluster's status still comes from its newest
    /// operations), but leaves the lists of [`OperationFilter::archived`] `Some(false)`, and
    /// their indexes: the hot path of the faces' operation lists grows with the retention
    /// window, not with the history.
    fn archive_operations(&self, finished_before: DateTime<Utc>, limit: u32) -> Result<u64, StoreError>;
    /// A number that changes whenever anything this store holds may have changed (a write by
    /// this process or, as far as the backend can tell, by another), so a reader can reuse
    /// what it derived from the store while the number stays the same. `None` (the default):
    /// the backend cannot tell (e.g. other replicas write a shared database), nothing may be
    /// reused.
    fn generation(&self) -> Option<u64> {
        None
    }

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

    // --- Leases and fenced writes (several replicas on one store; docs/store.md) ---

    /// Acquires the lease of running operation `id` for `replica` for `ttl`, atomically: when
    /// no replica holds it, its holder's lease expired, or `replica` itself holds it (a
    /// restarted replica). The fencing token grows by one on every acquisition. `Ok(None)`
    /// when another replica holds a live lease or the operation is not running;
    /// [`StoreError::NotFound`] for an unknown operation.
    fn acquire_lease(&self, id: &OperationId, replica: &str, ttl: Duration) -> Result<Option<Lease>, StoreError>;
    /// Extends `lease` to `ttl` from now. [`StoreError::Fenced`] when the operation's lease has
    /// another token or holder, has expired, or the operation is no longer running.
    fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError>;
    /// Gives `lease` up (its holder stopped driving the operation); nothing when the lease has
    /// moved on already. The fencing token is kept, so the next acquisition still grows it.
    fn release_lease(&self, lease: &Lease) -> Result<(), StoreError>;
    /// The operation's current lease (also a released or expired one), if it ever had one.
    fn get_lease(&self, id: &OperationId) -> Result<Option<Lease>, StoreError>;
    /// Running operations that no replica drives: no lease, a released one or an expired one;
    /// oldest first. What a replica's sweep takes over.
    fn unleased_running_operations(&self) -> Result<Vec<OperationId>, StoreError>;
    /// [`Store::update_step`] by the holder of `lease`, in one transaction with the check
    /// that the lease is still this one (token and holder), unexpired, and the operation
    /// running; otherwise [`StoreError::Fenced`] and nothing is written.
    fn update_step_fenced(&self, lease: &Lease, key: &str, update: &StepUpdate) -> Result<Step, StoreError>;
    /// [`Store::set_operation_status`] by the holder of `lease`, fenced as
    /// [`Store::update_step_fenced`] is (the operation must still be running: a driver moves
    /// it from `running` to where it ends, and never over a cancellation made elsewhere).
    fn set_operation_status_fenced(
        &self,
        lease: &Lease,
        status: OperationStatus,
        error: Option<&str>,
    ) -> Result<(), StoreError>;

    // --- The change feed (live streams across replicas) ---

    /// Appends `operation` (its state right after a change `replica` made) to the change feed
    /// and prunes entries older than the newest [`CHANGE_FEED_KEEP`]; returns its sequence
    /// number. The default keeps no feed (a store only one process uses).
    fn publish_change(&self, _replica: &str, _operation: &Operation) -> Result<u64, StoreError> {
        Ok(0)
    }
    /// [`Store::publish_change`] by the driver holding `held`: published only while `held` is
    /// still the operation's newest grant (same token and replica; it may have expired, or
    /// the operation ended, if nobody took over since), otherwise [`StoreError::Fenced`] and
    /// nothing is published. So a replica that paused between a write and its publication
    /// never appends its older state after a newer owner's changes. Stores that keep a feed
    /// check and insert in one transaction; this default checks, then publishes.
    fn publish_change_fenced(&self, held: &Lease, operation: &Operation) -> Result<u64, StoreError> {
        match self.get_lease(&held.operation_id)? {
            Some(l) if l.token == held.token && l.replica == held.replica => {
                self.publish_change(&held.replica, operation)
            }
            other => Err(StoreError::Fenced {
                operation: held.operation_id.clone(),
                reason: match other {
                    Some(l) => format!(
                        "its lease moved on to replica {} (token {} replaces {})",
                        l.replica, l.token, held.token
                    ),
                    None => format!("lease token {} was never granted", held.token),
                },
            }),
        }
    }
    /// Up to `limit` changes with a sequence number above `after`, oldest first.
    fn changes_since(&self, _after: u64, _limit: u32) -> Result<Vec<OperationChange>, StoreError> {
        Ok(Vec::new())
    }
    /// The newest sequence number of the feed (0 when empty): where a new follower starts.
    fn latest_change_seq(&self) -> Result<u64, StoreError> {
        Ok(0)
    }
    /// A wake-up the store gives (`notify_one`) whenever some replica published a change
    /// (PostgreSQL: `LISTEN`), so a relay reads the feed at once instead of polling; `None`
    /// when the store has none (the relay then polls). A wake-up is a hint: the feed, read by
    /// sequence number, stays the truth, and a relay still reads it now and then in case one
    /// was lost.
    fn change_signal(&self) -> Option<std::sync::Arc<tokio::sync::Notify>> {
        None
    }
}

/// Cursor list of [`Store::page_operations`]: key (created at, insertion order).
pub const OPERATIONS_LIST: &str = "operations";
/// Cursor list of [`Store::page_audit`]: key (at, insertion order).
pub const AUDIT_LIST: &str = "audit";
/// Cursor list of [`Store::page_clusters`]: key (name).
pub const CLUSTERS_LIST: &str = "clusters";

/// Setting key of the active cluster's name.
pub const ACTIVE_CLUSTER: &str = "active_cluster";
