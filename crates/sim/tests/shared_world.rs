//! Several [`SimCloud`]s on one [`WorldStore`] — in memory, and in a PostgreSQL database the
//! tests start (the store suite's `common` module) — behave as one simulated account, as the
//! simulators of replicas in separate processes on one database must:
//! - what one creates the other sees, counters included, and both read one clock (an
//!   `advance` on one moves the other);
//! - concurrent mutations through both are serialized by the store's lock: none is lost;
//! - two replicas' engines, each with its own simulator on the shared world, drive a create
//!   pipeline; the driving one is killed mid-pipeline, the other takes over after the lease
//!   TTL and completes it with exactly one create per resource.

#[path = "../../store/tests/common/mod.rs"]
mod common;

use instantstart_core::engine::{Engine, EngineConfig};
use instantstart_core::operation::{Actor, Face, OperationKind, OperationStatus, StepPhase};
use instantstart_core::provider::{CreateBucket, PutObject, S3Api, Tags};
use instantstart_core::store::Store;
use instantstart_core::workflow;
use instantstart_sim::{MemoryWorldStore, PostgresWorldStore, SimCloud, SimConfig, WorldStore};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

const SPEED: f64 = 400.0;
const TTL: Duration = Duration::from_millis(600);
const WAIT: Duration = Duration::from_secs(90);

/// A shared world under test: its name, two handles on it, what keeps it alive.
type Worlds = (&'static str, Vec<Arc<dyn WorldStore>>, Option<Arc<common::PgServer>>);

/// The memory store (one handle used twice) and, unless skipped, two connections to one fresh
/// PostgreSQL database.
fn worlds() -> Vec<Worlds> {
    let memory: Arc<dyn WorldStore> = Arc::new(MemoryWorldStore::new());
    let mut all: Vec<Worlds> = vec![("memory", vec![memory.clone(), memory], None)];
    if let Some(server) = common::pg_server() {
        let url = server.create_database();
        let pg = (0..2)
            .map(|_| Arc::new(PostgresWorldStore::connect(&url).expect("connect")) as Arc<dyn WorldStore>)
            .collect();
        all.push(("postgres", pg, Some(server)));
    }
    all
}

fn cloud(store: &Arc<dyn WorldStore>) -> SimCloud {
    SimCloud::new(SimConfig::with_speed(SPEED).seed(7).world_store(store.clone())).unwrap()
}

fn bucket(name: &str) -> CreateBucket {
    CreateBucket { region: "us-east-1".into(), name: name.into(), tags: Tags::new() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clouds_on_one_store_see_one_account_and_one_clock() {
    for (name, stores, _guard) in tokio::task::block_in_place(worlds) {
        let (a, b) = (cloud(&stores[0]), cloud(&stores[1]));
        assert_eq!(a.account(), b.account(), "{name}");
        a.create_bucket(&bucket("shared-one")).await.unwrap();
        let seen = b.describe_bucket("shared-one").await.unwrap();
        assert!(seen.is_some(), "{name}: B sees A's bucket");
        assert_eq!(b.calls("s3:CreateBucket"), 1, "{name}: one create, counted once for both");
        assert_eq!(a.stats().get("s3:CreateBucket"), b.stats().get("s3:CreateBucket"), "{name}");
        // Creating it again through B is refused by the one account.
        let again = b.create_bucket(&bucket("shared-one")).await;
        assert!(again.is_err(), "{name}: {again:?}");
        // One clock: the two readings are within the time it takes to read them.
        let (ta, tb) = (a.sim_seconds(), b.sim_seconds());
        assert!((ta - tb).abs() < 0.5 * SPEED, "{name}: A at {ta}, B at {tb}");
        a.advance(Duration::from_secs(100_000));
        assert!(b.sim_seconds() >= tb + 100_000.0, "{name}: B's clock moved with A's advance");
        // A third cloud on the same store (a replica starting late) finds the same account.
        let c = cloud(&stores[1]);
        assert!(c.describe_bucket("shared-one").await.unwrap().is_some(), "{name}");
        assert!(c.sim_seconds() >= tb + 100_000.0, "{name}: the late replica reads the same clock");
    }
}

#[test]
fn a_lock_held_by_a_paused_process_is_released_by_the_database_and_its_commit_changes_nothing() {
    let Some(server) = common::pg_server() else { return };
    let url = server.create_database();
    let (a, b) = (PostgresWorldStore::connect(&url).unwrap(), PostgresWorldStore::connect(&url).unwrap());
    let (before, held) = a.lock(0).unwrap();
    // A holds the world and stops acting (its process paused): B gets it once the server ended
    // A's idle session, not never.
    let started = std::time::Instant::now();
    let (snapshot, lock) = b.lock(before.version).unwrap();
    let waited = started.elapsed();
    let bound = Duration::from_millis(instantstart_sim::world_store::IDLE_IN_TRANSACTION_TIMEOUT_MS);
    assert!(waited >= bound / 2 && waited < bound * 3, "B waited {waited:?} (bound {bound:?})");
    assert_eq!(snapshot.version, before.version);
    let after = lock.commit(Some(b"by b".to_vec())).unwrap();
    // A wakes up: its commit fails and the world stays B's.
    assert!(held.commit(Some(b"stale by a".to_vec())).is_err(), "the paused holder's commit is refused");
    let now = b.peek(0).unwrap();
    assert_eq!((now.version, now.body.as_deref()), (after, Some(&b"by b"[..])));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_mutations_through_two_clouds_are_all_kept() {
    const EACH: usize = 20;
    for (name, stores, _guard) in tokio::task::block_in_place(worlds) {
        let (a, b) = (cloud(&stores[0]), cloud(&stores[1]));
        a.create_bucket(&bucket("race")).await.unwrap();
        let before = a.calls("s3:PutObject");
        let writer = |cloud: SimCloud, who: &'static str| async move {
            for i in 0..EACH {
                let put = PutObject {
                    bucket: "race".into(),
                    key: format!("{who}/{i}"),
                    body: vec![1, 2, 3],
                    content_type: "application/octet-stream".into(),
                };
                cloud.put_object(&put).await.unwrap();
            }
        };
        let (ra, rb) = tokio::join!(tokio::spawn(writer(a.clone(), "a")), tokio::spawn(writer(b.clone(), "b")));
        ra.unwrap();
        rb.unwrap();
        let listing = b.list_objects("race", "", None).await.unwrap();
        assert_eq!(listing.entries.len(), 2, "{name}: two prefixes: {listing:?}");
        for who in ["a/", "b/"] {
            let objects = a.list_objects("race", who, None).await.unwrap();
            assert_eq!(objects.entries.len(), EACH, "{name}: every object {who} wrote is there");
        }
        assert_eq!(a.calls("s3:PutObject") - before, 2 * EACH as u64, "{name}: every call counted once");
    }
}

fn request() -> serde_json::Value {
    json!({
        "name": "demo",
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 2, "availability_zone": "us-east-1a" }
        ]}
    })
}

/// A replica: its own simulator on the shared world, its own store handle.
fn replica(world: &Arc<dyn WorldStore>, store: Arc<dyn Store>, id: &str) -> (Engine, SimCloud) {
    let sim = cloud(world);
    let workflows = workflow::all(Arc::new(sim.clone()), Arc::new(sim.clone()), store.clone(), None);
    let config = EngineConfig { lease_ttl: TTL, ..EngineConfig::scaled(SPEED) };
    (Engine::with_replica(store, workflows, config, id.into()), sim)
}

async fn until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !ready() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Two replicas' handles: on the shared world, and on the store.
type Handles = (Vec<Arc<dyn WorldStore>>, Vec<Arc<dyn Store>>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replica_with_its_own_simulator_is_taken_over_and_everything_is_created_once() {
    let Some(server) = tokio::task::block_in_place(common::pg_server) else { return };
    let url = tokio::task::block_in_place(|| server.create_database());
    let (worlds, stores): Handles = tokio::task::block_in_place(|| {
        let worlds =
            (0..2).map(|_| Arc::new(PostgresWorldStore::connect(&url).unwrap()) as Arc<dyn WorldStore>).collect();
        let stores = (0..2)
            .map(|_| Arc::new(instantstart_store::PostgresStore::connect(&url).unwrap()) as Arc<dyn Store>)
            .collect();
        (worlds, stores)
    });
    let (a, sim_a) = replica(&worlds[0], stores[0].clone(), "replica-a");
    let (b, sim_b) = replica(&worlds[1], stores[1].clone(), "replica-b");
    b.start_lease_sweep();
    let user = Actor { face: Face::Api, principal: "test".into() };
    let id = a.submit(OperationKind::CreateCluster, &request(), user, None).unwrap().operation.id;
    let phase = |step: &str| stores[1].get_operation(&id).unwrap().unwrap().step(step).unwrap().phase;
    until("eks_cluster is polled", || phase("eks_cluster") == StepPhase::Polling).await;
    assert_eq!(sim_b.calls("eks:CreateCluster"), 1, "B's simulator sees the cluster A created");
    a.abort_all(); // kill A: its lease stays until it lapses
    until("the operation finished", || stores[1].get_operation(&id).unwrap().unwrap().status.is_terminal()).await;
    let op = stores[1].get_operation(&id).unwrap().unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(stores[1].get_lease(&id).unwrap().unwrap().replica, "replica-b", "B finished it");
    // Both simulators count one account's creates (reads' counters are written back lazily).
    for sim in [&sim_a, &sim_b] {
        let stats = sim.stats();
        for api in ["ec2:CreateVpc", "eks:CreateCluster", "sagemaker:CreateCluster", "s3:CreateBucket"] {
            assert_eq!(stats.get(api).copied(), Some(1), "{api}: {stats:?}");
        }
    }
    b.abort_all();
}
