//! A store that fails while an operation runs: the driver stops, and the operation is recorded
//! as failed (retryable), never left `running`; retrying the failed steps completes it without
//! creating anything twice.

use instantstart_core::engine::{Engine, EngineConfig};
use instantstart_core::operation::{
    Actor, AuditEntry, Face, NewOperation, Operation, OperationId, OperationKind, OperationStatus, Step, StepPhase,
    StepUpdate,
};
use instantstart_core::store::{ClusterRecord, Inserted, Lease, OperationFilter, Store, StoreError};
use instantstart_core::workflow;
use instantstart_sim::{SimCloud, SimConfig};
use instantstart_store::SqliteStore;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A SQLite store whose next `failing` calls fail, as a locked or full database would.
struct FlakyStore {
    inner: SqliteStore,
    failing: AtomicU32,
}

impl FlakyStore {
    fn check(&self) -> Result<(), StoreError> {
        let took = self.failing.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        if took { Err(StoreError::Backend("database is locked (injected)".into())) } else { Ok(()) }
    }
}

impl Store for FlakyStore {
    fn insert_operation(&self, op: NewOperation) -> Result<Inserted, StoreError> {
        self.check()?;
        self.inner.insert_operation(op)
    }
    fn get_operation(&self, id: &OperationId) -> Result<Option<Operation>, StoreError> {
        self.check()?;
        self.inner.get_operation(id)
    }
    fn find_by_idempotency_key(&self, key: &str) -> Result<Option<Operation>, StoreError> {
        self.check()?;
        self.inner.find_by_idempotency_key(key)
    }
    fn list_operations(&self, filter: &OperationFilter) -> Result<Vec<Operation>, StoreError> {
        self.check()?;
        self.inner.list_operations(filter)
    }
    fn running_operations(&self) -> Result<Vec<Operation>, StoreError> {
        self.check()?;
        self.inner.running_operations()
    }
    fn update_step(&self, id: &OperationId, key: &str, update: &StepUpdate) -> Result<Step, StoreError> {
        self.check()?;
        self.inner.update_step(id, key, update)
    }
    fn set_operation_status(
        &self,
        id: &OperationId,
        status: OperationStatus,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        self.check()?;
        self.inner.set_operation_status(id, status, error)
    }
    fn reopen_operation(&self, id: &OperationId) -> Result<(), StoreError> {
        self.check()?;
        self.inner.reopen_operation(id)
    }
    fn archive_operations(&self, before: chrono::DateTime<chrono::Utc>, limit: u32) -> Result<u64, StoreError> {
        self.check()?;
        self.inner.archive_operations(before, limit)
    }
    fn append_audit(&self, entry: &AuditEntry) -> Result<(), StoreError> {
        self.check()?;
        self.inner.append_audit(entry)
    }
    fn list_audit(&self, target: Option<&str>, limit: u32) -> Result<Vec<AuditEntry>, StoreError> {
        self.check()?;
        self.inner.list_audit(target, limit)
    }
    fn put_cluster(&self, record: &ClusterRecord) -> Result<(), StoreError> {
        self.check()?;
        self.inner.put_cluster(record)
    }
    fn get_cluster(&self, name: &str) -> Result<Option<ClusterRecord>, StoreError> {
        self.check()?;
        self.inner.get_cluster(name)
    }
    fn list_clusters(&self) -> Result<Vec<ClusterRecord>, StoreError> {
        self.check()?;
        self.inner.list_clusters()
    }
    fn delete_cluster(&self, name: &str) -> Result<(), StoreError> {
        self.check()?;
        self.inner.delete_cluster(name)
    }
    fn get_setting(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.check()?;
        self.inner.get_setting(key)
    }
    fn set_setting(&self, key: &str, value: Option<&str>) -> Result<(), StoreError> {
        self.check()?;
        self.inner.set_setting(key, value)
    }
    // Leases are taken and renewed as usual: the failures under test are the driver's writes.
    fn acquire_lease(&self, id: &OperationId, replica: &str, ttl: Duration) -> Result<Option<Lease>, StoreError> {
        self.inner.acquire_lease(id, replica, ttl)
    }
    fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError> {
        self.inner.renew_lease(lease, ttl)
    }
    fn release_lease(&self, lease: &Lease) -> Result<(), StoreError> {
        self.inner.release_lease(lease)
    }
    fn get_lease(&self, id: &OperationId) -> Result<Option<Lease>, StoreError> {
        self.inner.get_lease(id)
    }
    fn unleased_running_operations(&self) -> Result<Vec<OperationId>, StoreError> {
        self.inner.unleased_running_operations()
    }
    fn update_step_fenced(&self, lease: &Lease, key: &str, update: &StepUpdate) -> Result<Step, StoreError> {
        self.check()?;
        self.inner.update_step_fenced(lease, key, update)
    }
    fn set_operation_status_fenced(
        &self,
        lease: &Lease,
        status: OperationStatus,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        self.check()?;
        self.inner.set_operation_status_fenced(lease, status, error)
    }
}

fn user() -> Actor {
    Actor { face: Face::Api, principal: "test".into() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_error_fails_the_operation_retryably_instead_of_leaving_it_running() {
    let dir = tempfile::tempdir().unwrap();
    let speed = 300.0;
    let sim = SimCloud::new(SimConfig::with_speed(speed).state_file(dir.path().join("world.json")).seed(7)).unwrap();
    let flaky = Arc::new(FlakyStore {
        inner: SqliteStore::open(&dir.path().join("db.sqlite")).unwrap(),
        failing: AtomicU32::new(0),
    });
    let store: Arc<dyn Store> = flaky.clone();
    let workflows = workflow::all(Arc::new(sim.clone()), Arc::new(sim.clone()), store.clone(), None);
    let engine = Engine::new(store, workflows, EngineConfig::scaled(speed));
    let request = json!({
        "name": "flaky",
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 2, "availability_zone": "us-east-1a" }
        ]}
    });
    let id = engine.submit(OperationKind::CreateCluster, &request, user(), None).unwrap().operation.id;
    // Once a step waits on the provider, the store fails for a while.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let op = engine.get(&id).unwrap();
        if op.steps.iter().any(|s| s.phase == StepPhase::Polling) {
            break;
        }
        assert!(Instant::now() < deadline, "no step started polling: {op:#?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    flaky.failing.store(8, Ordering::SeqCst);
    // The driver stops on the error and records the failure once the store answers again.
    let deadline = Instant::now() + Duration::from_secs(30);
    let failed = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if flaky.failing.load(Ordering::SeqCst) > 0 {
            continue;
        }
        let op = engine.get(&id).unwrap();
        if op.status != OperationStatus::Running {
            break op;
        }
        assert!(Instant::now() < deadline, "the operation was left running: {op:#?}");
    };
    assert_eq!(failed.status, OperationStatus::Failed, "{failed:#?}");
    let failed_steps: Vec<&Step> = failed.steps.iter().filter(|s| s.phase == StepPhase::Failed).collect();
    assert!(!failed_steps.is_empty(), "a failed step to retry: {failed:#?}");
    // Retrying the failed steps completes the operation, creating nothing twice.
    let mut op = failed;
    for _ in 0..10 {
        if op.status == OperationStatus::Succeeded {
            break;
        }
        let step = op.steps.iter().find(|s| s.phase == StepPhase::Failed).expect("a failed step").key.clone();
        engine.retry_step(&id, &step, user()).unwrap();
        op = engine.wait(&id, Duration::from_secs(60)).await.unwrap();
    }
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let stats = sim.stats();
    for api in ["ec2:CreateVpc", "eks:CreateCluster", "sagemaker:CreateCluster", "s3:CreateBucket"] {
        assert_eq!(stats.get(api).copied().unwrap_or(0), 1, "{api}: {stats:?}");
    }
}
