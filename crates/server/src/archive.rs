//! The operations archive's retention sweep: finished operations older than the retention
//! window are archived (`Store::archive_operations`), so the lists the faces read every few
//! seconds seek in an index of recent operations whatever the length of the history.
//!
//! # Guarantees
//!
//! - Only operations with an archivable status (`succeeded`, `failed`, `cancelled`) that
//!   finished more than the retention window ago are archived; nothing is deleted. Archived
//!   operations are still read by id, by `GET /api/operations?archived=true`, and count in a
//!   cluster's status; retrying a step of one brings it back.
//! - A sweep archives in batches of [`BATCH`] (one short write transaction each), so it never
//!   holds the store's write lock for long, and stops when a batch comes back short.
//! - A failed sweep is logged and tried again at the next tick; it never stops the server.

use chrono::{DateTime, Utc};
use instantstart_core::store::{Store, StoreError};
use std::sync::Arc;
use std::time::Duration;

/// Operations archived per write transaction.
pub const BATCH: u32 = 1_000;

/// Default `--operation-retention-days`.
pub const DEFAULT_RETENTION_DAYS: u32 = 30;

/// How often the sweep runs (and once at start).
pub const SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// Archives every archivable operation that finished before `now − retention`, in batches;
/// returns how many it archived.
pub fn archive_now(store: &dyn Store, now: DateTime<Utc>, retention: Duration) -> Result<u64, StoreError> {
    let window = chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX);
    let Some(cutoff) = now.checked_sub_signed(window) else { return Ok(0) };
    let mut total = 0;
    loop {
        let n = store.archive_operations(cutoff, BATCH)?;
        total += n;
        if n < u64::from(BATCH) {
            return Ok(total);
        }
    }
}

/// Runs [`archive_now`] at start and every [`SWEEP_EVERY`] on a blocking thread.
pub fn spawn_retention(store: Arc<dyn Store>, retention: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SWEEP_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let store = store.clone();
            match tokio::task::spawn_blocking(move || archive_now(store.as_ref(), Utc::now(), retention)).await {
                Ok(Ok(0)) => {}
                Ok(Ok(n)) => {
                    tracing::info!(archived = n, retention_days = retention.as_secs() / 86_400, "operations archived")
                }
                Ok(Err(e)) => tracing::error!(error = %e, "archiving operations failed"),
                Err(e) => tracing::error!(error = %e, "archiving operations: task failed"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use instantstart_core::operation::{
        Actor, Face, NewOperation, OperationId, OperationKind, OperationStatus, request_hash,
    };
    use instantstart_core::store::OperationFilter;

    #[test]
    fn a_sweep_archives_what_finished_before_the_window_in_batches() {
        let store = instantstart_store::SqliteStore::open_in_memory().unwrap();
        let insert = |target: &str| {
            let id = OperationId::generate();
            let request = serde_json::json!({});
            store
                .insert_operation(NewOperation {
                    id: id.clone(),
                    kind: OperationKind::UpdateInstanceGroup,
                    target: target.into(),
                    actor: Actor { face: Face::Api, principal: "test".into() },
                    request_hash: request_hash(OperationKind::UpdateInstanceGroup, "", &request),
                    request,
                    idempotency_key: None,
                    steps: vec![],
                })
                .unwrap();
            id
        };
        // More than a batch of finished operations, one needing attention, one running.
        let n = BATCH as usize + 5;
        for i in 0..n {
            let id = insert(&format!("cluster/c{i}"));
            store.set_operation_status(&id, OperationStatus::Succeeded, None).unwrap();
        }
        let attention = insert("cluster/attention");
        store.set_operation_status(&attention, OperationStatus::NeedsAttention, Some("look")).unwrap();
        let running = insert("cluster/running");
        let hot = |archived| {
            store.list_operations(&OperationFilter { archived: Some(archived), ..Default::default() }).unwrap().len()
        };
        let day = Duration::from_secs(86_400);
        // Within the window: nothing moves.
        assert_eq!(archive_now(&store, Utc::now(), day).unwrap(), 0);
        assert_eq!((hot(false), hot(true)), (n + 2, 0));
        // A day later, everything finished and archivable moves, in two batches.
        assert_eq!(archive_now(&store, Utc::now() + chrono::Duration::days(2), day).unwrap(), n as u64);
        assert_eq!((hot(false), hot(true)), (2, n));
        let left: Vec<OperationId> = store
            .list_operations(&OperationFilter { archived: Some(false), ..Default::default() })
            .unwrap()
            .into_iter()
            .map(|o| o.id)
            .collect();
        assert_eq!(left, vec![running, attention]);
        // A retention too long to subtract archives nothing.
        assert_eq!(archive_now(&store, Utc::now(), Duration::MAX).unwrap(), 0);
    }
}
