//! Two replicas (two engines, each with its own store handle, as two server processes would
//! have) sharing one simulated cloud and one store — a SQLite file, and a PostgreSQL database
//! the tests start (the store suite's `common` module) — drive a create pipeline:
//! - replica A is killed mid-pipeline (its tasks dropped, its lease not released): B takes the
//!   operation over once the lease lapses (an `operation.takeover` audit entry names both) and
//!   completes it, creating every resource once;
//! - replica A stalls (its renewals stop): it stops driving by itself before its lease can
//!   lapse, makes no provider call afterwards, and its stale lease is fenced once B took over;
//! - live streams: a subscriber of replica B sees every phase change of an operation driven by
//!   A (the store's change feed), in the order A's own subscribers see them.

#[path = "../../store/tests/common/mod.rs"]
mod common;

use instantstart_core::engine::{Engine, EngineConfig};
use instantstart_core::operation::{Actor, Face, OperationId, OperationKind, OperationStatus, StepPhase, StepUpdate};
use instantstart_core::store::{Store, StoreError};
use instantstart_core::workflow;
use instantstart_sim::{SimCloud, SimConfig};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);
const TTL: Duration = Duration::from_millis(600);
const SPEED: f64 = 400.0;

fn user() -> Actor {
    Actor { face: Face::Api, principal: "test".into() }
}

fn request(name: &str) -> Value {
    json!({
        "name": name,
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 2, "availability_zone": "us-east-1a" },
            { "name": "spot", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1b", "capacity": { "type": "spot" } }
        ]}
    })
}

/// A replica: its engine on its own handle of the shared store.
fn replica(sim: &SimCloud, store: Arc<dyn Store>, id: &str) -> Engine {
    let workflows = workflow::all(Arc::new(sim.clone()), Arc::new(sim.clone()), store.clone(), None);
    let config = EngineConfig { lease_ttl: TTL, ..EngineConfig::scaled(SPEED) };
    Engine::with_replica(store, workflows, config, id.into())
}

/// A shared store under test: its name, two handles on the same data, what keeps it alive.
type Shared = (&'static str, Vec<Arc<dyn Store>>, common::Guard);

/// Each shared store under test.
fn stores() -> Vec<Shared> {
    common::shared_backends()
        .into_iter()
        .map(|(name, handles, guard)| (name, handles.into_iter().map(|h| h as Arc<dyn Store>).collect(), guard))
        .collect()
}

fn sim(dir: &Path) -> SimCloud {
    SimCloud::new(SimConfig::with_speed(SPEED).state_file(dir.join("world.json")).seed(7)).unwrap()
}

/// Every create of the pipeline happened exactly once.
fn assert_created_once(name: &str, sim: &SimCloud) {
    let expected = [
        ("ec2:CreateVpc", 1),
        ("ec2:CreateSubnet", 6),
        ("iam:CreateRole", 3),
        ("s3:CreateBucket", 1),
        ("s3:PutObject", 1),
        ("eks:CreateCluster", 1),
        ("eks:CreateAddon", 4),
        ("eks:CreatePodIdentityAssociation", 1),
        ("sagemaker:CreateCluster", 1),
        ("ec2:CreateVpcEndpoint", 1),
    ];
    let stats = sim.stats();
    for (api, n) in expected {
        assert_eq!(stats.get(api).copied().unwrap_or(0), n, "{name}: {api} calls; all stats: {stats:?}");
    }
}

async fn until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !ready() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn phase(store: &dyn Store, id: &OperationId, step: &str) -> StepPhase {
    store.get_operation(id).unwrap().unwrap().step(step).unwrap().phase
}

async fn finished(store: &dyn Store, id: &OperationId) -> instantstart_core::operation::Operation {
    until("the operation finished", || store.get_operation(id).unwrap().unwrap().status.is_terminal()).await;
    store.get_operation(id).unwrap().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replicas_operation_is_taken_over_after_the_ttl_and_creates_everything_once() {
    for (name, handles, _guard) in tokio::task::block_in_place(stores) {
        let dir = tempfile::tempdir().unwrap();
        let sim = sim(dir.path());
        let a = replica(&sim, handles[0].clone(), "replica-a");
        let b = replica(&sim, handles[1].clone(), "replica-b");
        b.start_lease_sweep();
        let s = a.submit(OperationKind::CreateCluster, &request("demo"), user(), None).unwrap();
        let id = s.operation.id;
        until("eks_cluster is polled", || phase(handles[1].as_ref(), &id, "eks_cluster") == StepPhase::Polling).await;
        assert!(a.is_driving(&id) && !b.is_driving(&id), "{name}: A drives, B waits");
        // Kill A: its tasks stop, its lease stays in the store until it lapses.
        a.abort_all();
        let killed = handles[1].get_lease(&id).unwrap().unwrap();
        assert_eq!(killed.replica, "replica-a", "{name}");
        tokio::time::sleep(TTL / 3).await;
        assert!(!b.is_driving(&id), "{name}: B does not take a live lease");
        let op = finished(handles[1].as_ref(), &id).await;
        assert_eq!(op.status, OperationStatus::Succeeded, "{name}: {op:#?}");
        let last = handles[1].get_lease(&id).unwrap().unwrap();
        assert_eq!(last.replica, "replica-b", "{name}: B took over");
        assert!(last.token > killed.token, "{name}: with a newer token");
        assert_created_once(name, &sim);
        // The audit log records the takeover: who took it from whom, with which tokens.
        let takeovers: Vec<_> = handles[1]
            .list_audit(Some(&op.target), 100)
            .unwrap()
            .into_iter()
            .filter(|e| e.action == "operation.takeover")
            .collect();
        assert_eq!(takeovers.len(), 1, "{name}: {takeovers:?}");
        let t = &takeovers[0];
        assert_eq!((t.actor.face, t.actor.principal.as_str()), (Face::System, "replica:replica-b"), "{name}");
        assert_eq!(t.operation_id.as_ref(), Some(&id), "{name}");
        assert_eq!(
            (&t.detail["previous_replica"], &t.detail["previous_token"], &t.detail["replica"]),
            (&json!("replica-a"), &json!(killed.token), &json!("replica-b")),
            "{name}: {t:?}"
        );
        assert!(t.detail["token"].as_u64().unwrap() > killed.token, "{name}: {t:?}");
        // A's lease is fenced for good.
        let stale = handles[0].update_step_fenced(&killed, "eks_cluster", &StepUpdate::default());
        assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{name}: {stale:?}");
        b.abort_all();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_replica_stops_by_itself_calls_nothing_more_and_is_fenced_after_takeover() {
    for (name, handles, _guard) in tokio::task::block_in_place(stores) {
        let dir = tempfile::tempdir().unwrap();
        let sim = sim(dir.path());
        let a = replica(&sim, handles[0].clone(), "replica-a");
        let b = replica(&sim, handles[1].clone(), "replica-b");
        let s = a.submit(OperationKind::CreateCluster, &request("demo"), user(), None).unwrap();
        let id = s.operation.id;
        until("eks_cluster is polled", || phase(handles[0].as_ref(), &id, "eks_cluster") == StepPhase::Polling).await;
        let held = handles[0].get_lease(&id).unwrap().unwrap();
        // A stalls: no more renewals. By its own clock it stops before the lease can lapse.
        a.pause_lease_renewals(true);
        until("A stops driving", || !a.is_driving(&id)).await;
        let calls_when_stopped = sim.stats();
        // Nothing more happens while nobody drives: A makes no provider call after it stopped.
        tokio::time::sleep(TTL * 3).await;
        assert_eq!(sim.stats(), calls_when_stopped, "{name}: A called the provider after it stopped");
        let op = handles[0].get_operation(&id).unwrap().unwrap();
        assert_eq!(op.status, OperationStatus::Running, "{name}: A did not record anything on the way out");
        assert_eq!(handles[1].unleased_running_operations().unwrap(), vec![id.clone()], "{name}: lapsed");
        // B takes over; A, waking up, is refused on every write and renewal.
        b.start_lease_sweep();
        until("B drives", || b.is_driving(&id)).await;
        let stale = handles[0].update_step_fenced(&held, "eks_cluster", &StepUpdate::default());
        assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{name}: {stale:?}");
        assert!(matches!(handles[0].renew_lease(&held, TTL), Err(StoreError::Fenced { .. })), "{name}");
        let op = finished(handles[1].as_ref(), &id).await;
        assert_eq!(op.status, OperationStatus::Succeeded, "{name}: {op:#?}");
        assert_created_once(name, &sim);
        // A, resumed, does not take the operation back.
        a.pause_lease_renewals(false);
        assert_eq!(a.resume_all().unwrap(), 0, "{name}");
        b.abort_all();
        a.abort_all();
    }
}

/// The phases each step went through, in order (repeats folded), from a stream of snapshots,
/// as a follower folds them: a snapshot older than one already seen is skipped (concurrent step
/// drivers may publish their reads out of order on the driving replica's local broadcast; the
/// WebSocket follower drops such stale snapshots the same way, `routes::stream::Sent`).
fn phase_history(events: &[instantstart_core::engine::OperationEvent]) -> Vec<(String, Vec<StepPhase>)> {
    let mut history: Vec<(String, Vec<StepPhase>)> = Vec::new();
    let mut newest = None;
    for ev in events {
        let Some(snap) = &ev.snapshot else { continue };
        if newest.is_some_and(|t| snap.operation.updated_at < t) {
            continue;
        }
        newest = Some(snap.operation.updated_at);
        for step in &snap.operation.steps {
            let i = match history.iter().position(|(k, _)| *k == step.key) {
                Some(i) => i,
                None => {
                    history.push((step.key.clone(), Vec::new()));
                    history.len() - 1
                }
            };
            if history[i].1.last() != Some(&step.phase) {
                history[i].1.push(step.phase);
            }
        }
    }
    history
}

async fn collect_until_done(
    mut rx: tokio::sync::broadcast::Receiver<instantstart_core::engine::OperationEvent>,
    id: &OperationId,
) -> Vec<instantstart_core::engine::OperationEvent> {
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let ev = tokio::time::timeout_at(deadline, rx.recv()).await.expect("timed out").expect("stream open");
        if ev.operation_id != *id {
            continue;
        }
        let done = ev.snapshot.as_ref().is_some_and(|s| s.operation.status.is_terminal());
        events.push(ev);
        if done {
            return events;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_of_another_replica_sees_every_phase_change_in_order() {
    for (name, handles, _guard) in tokio::task::block_in_place(stores) {
        let dir = tempfile::tempdir().unwrap();
        let sim = sim(dir.path());
        let a = replica(&sim, handles[0].clone(), "replica-a");
        let b = replica(&sim, handles[1].clone(), "replica-b");
        a.start_change_relay().unwrap();
        b.start_change_relay().unwrap();
        let (on_a, on_b) = (a.subscribe(), b.subscribe());
        let s = a.submit(OperationKind::CreateCluster, &request("demo"), user(), None).unwrap();
        let id = s.operation.id;
        let (seen_a, seen_b) = tokio::join!(collect_until_done(on_a, &id), collect_until_done(on_b, &id));
        assert!(!b.is_driving(&id), "{name}: B only relays");
        let final_b = &seen_b.last().unwrap().snapshot.as_ref().unwrap().operation;
        assert_eq!(final_b.status, OperationStatus::Succeeded, "{name}");
        assert_eq!(*final_b, handles[1].get_operation(&id).unwrap().unwrap(), "{name}: B ends on the stored state");
        let (history_a, history_b) = (phase_history(&seen_a), phase_history(&seen_b));
        assert_eq!(history_b, history_a, "{name}: B saw every phase change A made, in order");
        assert!(
            history_b.iter().all(|(_, phases)| phases.len() >= 2 && phases.last() == Some(&StepPhase::Succeeded)),
            "{name}: {history_b:?}"
        );
        a.abort_all();
        b.abort_all();
    }
}

/// One step whose first observation stalls the whole runtime past the lease TTL (a process
/// stopped with SIGSTOP, or a stalled call, while its read was in flight) and then answers
/// `Absent`, an answer the replica that took over has meanwhile made stale.
struct StallOnce {
    stall: std::sync::atomic::AtomicBool,
    exists: std::sync::atomic::AtomicBool,
    submits: std::sync::atomic::AtomicU32,
}

#[async_trait::async_trait]
impl instantstart_core::engine::StepExecutor for StallOnce {
    async fn observe(
        &self,
        _cx: &instantstart_core::engine::StepContext<'_>,
    ) -> Result<instantstart_core::engine::Observation, instantstart_core::engine::StepError> {
        use instantstart_core::engine::Observation;
        if self.stall.swap(false, std::sync::atomic::Ordering::SeqCst) {
            // Blocks the runtime's only thread: no renewal, no other task runs, as under SIGSTOP.
            std::thread::sleep(TTL * 2);
            return Ok(Observation::Absent);
        }
        Ok(if self.exists.load(std::sync::atomic::Ordering::SeqCst) {
            Observation::Exists(resource())
        } else {
            Observation::Absent
        })
    }
    async fn submit(
        &self,
        _cx: &instantstart_core::engine::StepContext<'_>,
    ) -> Result<instantstart_core::operation::ResourceRef, instantstart_core::engine::StepError> {
        self.submits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.exists.store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(resource())
    }
    async fn poll(
        &self,
        _cx: &instantstart_core::engine::StepContext<'_>,
        _r: &instantstart_core::operation::ResourceRef,
    ) -> Result<instantstart_core::engine::Progress, instantstart_core::engine::StepError> {
        Ok(instantstart_core::engine::Progress::Done(json!({})))
    }
}

fn resource() -> instantstart_core::operation::ResourceRef {
    instantstart_core::operation::ResourceRef { kind: "thing".into(), id: "thing-1".into(), arn: None }
}

/// A workflow of one `thing` step driven by [`StallOnce`].
struct OneThing(Arc<StallOnce>);

#[async_trait::async_trait]
impl instantstart_core::engine::Workflow for OneThing {
    fn kind(&self) -> OperationKind {
        OperationKind::CreateCluster
    }
    fn prepare(
        &self,
        request: &Value,
    ) -> Result<instantstart_core::engine::Prepared, instantstart_core::engine::EngineError> {
        Ok(instantstart_core::engine::Prepared {
            target: "cluster/thing".into(),
            request: request.clone(),
            steps: vec![instantstart_core::operation::StepSpec {
                key: "thing".into(),
                title: "Create the thing".into(),
                depends_on: vec![],
                expected_secs: None,
            }],
        })
    }
    fn executor(&self, _request: &Value, _key: &str) -> Option<Arc<dyn instantstart_core::engine::StepExecutor>> {
        Some(self.0.clone())
    }
}

/// The lease is checked again by the local clock between a step's observation and its create:
/// a driver whose `observe` outlasted the TTL (the whole process stalled, renewals included)
/// does not submit on that stale `Absent`; the replica that takes over creates the thing once.
#[tokio::test(flavor = "current_thread")]
async fn a_driver_stalled_during_its_observation_past_the_ttl_does_not_submit() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(instantstart_store::SqliteStore::open(&dir.path().join("s.db")).unwrap());
    let thing = Arc::new(StallOnce { stall: true.into(), exists: false.into(), submits: 0.into() });
    let config = EngineConfig { lease_ttl: TTL, ..EngineConfig::scaled(SPEED) };
    let workflows = || vec![Arc::new(OneThing(thing.clone())) as Arc<dyn instantstart_core::engine::Workflow>];
    let a = Engine::with_replica(store.clone(), workflows(), config, "replica-a".into());
    let id = a.submit(OperationKind::CreateCluster, &json!({}), user(), None).unwrap().operation.id;
    until("A stops driving", || !a.is_driving(&id)).await;
    assert_eq!(thing.submits.load(std::sync::atomic::Ordering::SeqCst), 0, "A submitted on a stale observation");
    assert_eq!(phase(store.as_ref(), &id, "thing"), StepPhase::Submitting, "A recorded nothing on the way out");
    let b = Engine::with_replica(store.clone(), workflows(), config, "replica-b".into());
    b.start_lease_sweep();
    let op = finished(store.as_ref(), &id).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(thing.submits.load(std::sync::atomic::Ordering::SeqCst), 1, "B creates the thing once");
    b.abort_all();
}
