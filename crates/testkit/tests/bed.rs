//! The kit on itself: a built bed runs an operation and restarts as kill -9 does; a manual
//! clock holds a state until the test advances it; a served bed answers its typed client on
//! loopback (its health too: plain text, not JSON), restarts on the same data directory, and
//! stops serving when dropped.

use instantstart_core::operation::{Face, OperationKind, OperationStatus, StepPhase};
use instantstart_testkit::{Bed, REGION};
use serde_json::{Value, json};
use std::time::Duration;

fn request(name: &str) -> Value {
    json!({
        "name": name,
        "region": REGION,
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1a" }
        ]}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_clock_holds_a_step_until_advanced_and_a_restart_resumes_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Bed::sim(dir.path()).manual_clock().build();
    let id = b.submit(OperationKind::CreateCluster, &request("demo")).id;
    // The EKS control plane takes 600 simulated seconds: on a stopped clock it stays polled.
    b.wait_for(&id, "eks_cluster to be polled", |op| op.step("eks_cluster").unwrap().phase == StepPhase::Polling).await;
    let before = b.sim.sim_seconds();
    tokio::time::sleep(Duration::from_millis(100)).await; // elapsed wall time, on purpose
    assert_eq!(b.sim.sim_seconds(), before, "wall time does not move a manual clock");
    assert_eq!(b.engine.get(&id).unwrap().step("eks_cluster").unwrap().phase, StepPhase::Polling);

    // Kill -9 mid-pipeline: the new engine resumes the one running operation.
    b.restart().await;
    assert_eq!(b.engine.resume_all().unwrap(), 1);
    let op = b.advance_until(&id, "to finish", Duration::from_secs(30), |op| op.status.is_terminal()).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{}", instantstart_testkit::summary(&op));
    assert!(b.sim.sim_seconds() >= before + 600.0, "{}", b.sim.sim_seconds());
    assert_eq!(b.sim.calls("eks:CreateCluster"), 1, "{:?}", b.sim.stats());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[should_panic(expected = "hyperpod_cluster to be polled: not within")]
async fn a_wait_that_times_out_names_what_it_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).manual_clock().timeout(Duration::from_millis(300)).build();
    let id = b.submit(OperationKind::CreateCluster, &request("demo")).id;
    // The NAT gateway never becomes available on a stopped clock, so HyperPod never starts.
    b.wait_for(&id, "hyperpod_cluster to be polled", |op| {
        op.step("hyperpod_cluster").unwrap().phase == StepPhase::Polling
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_bed_answers_its_client_and_restarts_on_the_same_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Bed::sim(dir.path()).serve();
    b.client().session().await.unwrap();
    let submitted = b.client().create_cluster_json(&request("demo"), &Default::default()).await.unwrap();
    let instantstart_client::Submitted::Accepted(accepted) = submitted else { panic!("{submitted:?}") };
    let id = accepted.operation.id.clone();
    let op = b.wait_done(&id).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{}", instantstart_testkit::summary(&op));
    let clusters = b.client().list_clusters().await.unwrap();
    assert_eq!(clusters.iter().map(|c| c.record.name.as_str()).collect::<Vec<_>>(), ["demo"]);

    // The same store and world after a restart, on a new port; the old one no longer answers.
    let old = b.url().to_string();
    b.restart().await;
    assert_ne!(b.url(), old);
    assert_eq!(b.client().list_clusters().await.unwrap().len(), 1);
    assert_eq!(b.sim.calls("sagemaker:CreateCluster"), 1);
    let stale = instantstart_client::Client::new(&old, Some(instantstart_testkit::TOKEN.into()), Face::Api).unwrap();
    b.wait_until("the old server to stop answering", || async { stale.session().await.is_err() }).await;
    let url = b.url().to_string();
    drop(b);
    let gone = instantstart_client::Client::new(&url, Some(instantstart_testkit::TOKEN.into()), Face::Api).unwrap();
    instantstart_testkit::wait_until(Duration::from_secs(10), "the dropped bed's server to stop", || async {
        gone.session().await.is_err()
    })
    .await;
}

/// `Client::healthz` against the real server: `/healthz` answers plain text (`ok`), which the
/// client once tried to decode as JSON ("HTTP 200 OK: body is not JSON"); a server that is gone
/// is a connection error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_reads_the_servers_health() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).serve();
    let health = b.client().healthz().await.unwrap();
    assert_eq!(health, instantstart_client::Health { message: "ok".into() });
    let anonymous = instantstart_client::Client::new(b.url(), None, Face::Api).unwrap();
    assert_eq!(anonymous.healthz().await.unwrap().message, "ok", "no token needed");
    let url = b.url().to_string();
    drop(b);
    let gone = instantstart_client::Client::new(&url, None, Face::Api).unwrap();
    instantstart_testkit::wait_until(Duration::from_secs(10), "the dropped bed's server to stop", || async {
        gone.healthz().await.is_err()
    })
    .await;
    let err = gone.healthz().await.unwrap_err();
    assert!(matches!(err, instantstart_client::Error::Connection { .. }), "{err:?}");
}
