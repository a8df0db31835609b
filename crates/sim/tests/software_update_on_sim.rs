//! HyperPod platform software updates (`UpdateClusterSoftware`) end to end on the simulated
//! cloud, with the real engine and SQLite store: groups roll batch by batch (nodes
//! `SystemUpdating`) to the latest or a named release, a request already satisfied is "already
//! in this state", a server killed mid-update resumes without a second UpdateClusterSoftware,
//! and what SageMaker refuses (a cluster busy with another update, an unknown group or
//! release, a custom-AMI group without `ImageId`) is refused by the workflow before anything is
//! recorded and by the simulator alike; a failed update names its group.

use instantstart_core::engine::{EngineError, Outcome};
use instantstart_core::operation::{Operation, OperationKind, OperationStatus, StepPhase, StepUpdate};
use instantstart_core::provider::{
    HyperPodApi, HyperPodCluster, ProviderErrorKind, SoftwareUpdateGroup, UpdateClusterSoftware,
};
use instantstart_core::validate::ValidationKind;
use instantstart_sim::{FaultMode, SimCloud, SimFaults};
use instantstart_testkit::{Bed, user};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const REGION: &str = "us-east-1";
const SPEED: f64 = 2000.0;
const LAUNCH: &str = "2025.10.1";
const LATEST: &str = "2025.11.2";

/// A bed over the world and store kept in `dir` (a second bed over the same dir is the
/// restarted server).
/// `workers` (3 × ml.g5.2xlarge) and `cpu` (1 × ml.m5.xlarge).
async fn created(dir: &Path) -> Bed {
    let b = Bed::sim(dir).speed(SPEED).build();
    let req = json!({
        "name": "demo", "region": REGION, "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 3, "availability_zone": "us-east-1a" },
            { "name": "cpu", "instance_type": "ml.m5.xlarge", "count": 1, "availability_zone": "us-east-1b" }
        ]}
    });
    let op = run(&b, OperationKind::CreateCluster, &req).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    b
}

async fn submit(b: &Bed, req: &Value) -> Result<Outcome, EngineError> {
    b.engine.submit_checked(OperationKind::UpdateSoftware, req, user(), None).await
}

async fn run(b: &Bed, kind: OperationKind, req: &Value) -> Operation {
    let s = match b.engine.submit_checked(kind, req, user(), None).await.unwrap() {
        Outcome::Submitted(s) => s,
        other => panic!("expected a change, got {other:?}"),
    };
    b.engine.wait(&s.operation.id, WAIT).await.unwrap()
}

async fn live(sim: &SimCloud) -> HyperPodCluster {
    sim.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().unwrap()
}

/// (release, image version status, update status) of a group.
async fn software(sim: &SimCloud, group: &str) -> (String, String, Option<String>) {
    let c = live(sim).await;
    let g = c.instance_groups.iter().find(|g| g.name == group).unwrap();
    let s = &g.software;
    (
        s.current_release.clone().unwrap_or_default(),
        s.image_version_status.clone().unwrap_or_default(),
        s.update_status.clone(),
    )
}

fn update(groups: Value) -> Value {
    json!({ "cluster": "demo", "instance_groups": groups })
}

#[tokio::test]
async fn groups_roll_in_batches_to_the_new_release_and_a_second_request_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let b = created(dir.path()).await;
    assert_eq!(software(&b.sim, "workers").await, (LAUNCH.into(), "UpdateAvailable".into(), None));

    // The latest release on `workers`, one instance at a time.
    let req = json!({ "cluster": "demo", "instance_groups": [{ "name": "workers" }],
        "deployment": { "max_batch": { "type": "instance_count", "value": 1 }, "wait_interval_secs": 60 } });
    let s = match submit(&b, &req).await.unwrap() {
        Outcome::Submitted(s) => s,
        other => panic!("{other:?}"),
    };
    // While it runs: the cluster and the group SystemUpdating, one node at a time updating.
    let mut seen_updating = 0;
    // A sampling loop, not a wait: it watches the nodes while the update runs (its sleep is the
    // sampling period).
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let op = b.engine.get(&s.operation.id).unwrap();
        if op.status.is_terminal() {
            break;
        }
        let nodes = b.sim.list_cluster_nodes(REGION, "demo-hp").await.unwrap();
        let updating = nodes.iter().filter(|n| n.status == "SystemUpdating").count();
        assert!(updating <= 1, "one instance per batch: {nodes:?}");
        assert!(nodes.iter().all(|n| n.instance_group == "workers" || n.status == "Running"), "{nodes:?}");
        if updating == 1 {
            seen_updating += 1;
            let c = live(&b.sim).await;
            // The simulated clock runs on between the calls: judge the group only when a node is
            // still updating after its read (the last batch may have ended in between).
            let after = b.sim.list_cluster_nodes(REGION, "demo-hp").await.unwrap();
            if !after.iter().any(|n| n.status == "SystemUpdating") {
                continue;
            }
            let g = c.instance_groups.iter().find(|g| g.name == "workers").unwrap();
            assert_eq!(g.status, "SystemUpdating");
            assert_eq!(g.software.desired_release.as_deref(), Some(LATEST));
            assert!(g.software.update_running(), "{:?}", g.software);
        }
        assert!(tokio::time::Instant::now() < deadline, "the update never ended");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(seen_updating > 0, "no node was seen SystemUpdating");
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(b.sim.calls("sagemaker:UpdateClusterSoftware"), 1);
    let out = &op.step("software_update").unwrap().outputs;
    assert_eq!(out["instance_groups"][0]["image_release_version"], LATEST, "{out:#}");
    assert_eq!(software(&b.sim, "workers").await, (LATEST.into(), "UpToDate".into(), Some("Succeeded".into())));
    assert_eq!(software(&b.sim, "cpu").await, (LAUNCH.into(), "UpdateAvailable".into(), None), "not named: unchanged");

    // The same request again: already in this state, nothing recorded or called.
    match submit(&b, &req).await.unwrap() {
        Outcome::NoChange(plan) => assert!(plan.changes.is_empty()),
        other => panic!("expected no change, got {other:?}"),
    }
    // Every group: only `cpu` would change.
    let all = match b.engine.dry_run_checked(OperationKind::UpdateSoftware, &json!({ "cluster": "demo" })).await {
        Ok(d) => d,
        Err(e) => panic!("{e}"),
    };
    let fields: Vec<&str> = all.plan.as_ref().unwrap().changes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(fields, ["instance_groups.cpu.software"]);

    // A named (older) release on `cpu`.
    let op = run(
        &b,
        OperationKind::UpdateSoftware,
        &update(json!([{ "name": "cpu", "image_release_version": "2025.8.1" }])),
    )
    .await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(software(&b.sim, "cpu").await, ("2025.8.1".into(), "UpdateAvailable".into(), Some("Succeeded".into())));
    assert_eq!(b.sim.calls("sagemaker:UpdateClusterSoftware"), 2);
}

/// A server killed between the persisted `submitting` phase and the call, or while the update
/// is polled, resumes without a second UpdateClusterSoftware.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_update_follows_it_without_a_second_call() {
    for kill_at in [StepPhase::Submitting, StepPhase::Polling] {
        let dir = tempfile::tempdir().unwrap();
        let id = {
            let b = created(dir.path()).await;
            let s = match submit(&b, &json!({ "cluster": "demo" })).await.unwrap() {
                Outcome::Submitted(s) => s,
                other => panic!("{other:?}"),
            };
            b.wait_for(&s.operation.id, &format!("{kill_at:?} to be reached"), |op| {
                let phase = op.step("software_update").unwrap().phase;
                phase != StepPhase::Pending && (kill_at == StepPhase::Submitting || phase == StepPhase::Polling)
            })
            .await;
            b.kill().await;
            if kill_at == StepPhase::Submitting {
                // Killed between the persisted phase and the call's answer: the call may or
                // may not have reached SageMaker.
                let back = StepUpdate { phase: Some(StepPhase::Submitting), ..Default::default() };
                b.store.update_step(&s.operation.id, "software_update", &back).unwrap();
            }
            b.sim.flush().unwrap();
            s.operation.id
        };
        let b = Bed::sim(dir.path()).speed(SPEED).build();
        b.engine.resume_all().unwrap();
        let op = b.engine.wait(&id, WAIT).await.unwrap();
        assert_eq!(op.status, OperationStatus::Succeeded, "{kill_at:?}: {op:#?}");
        assert_eq!(b.sim.calls("sagemaker:UpdateClusterSoftware"), 1, "{kill_at:?}");
        for g in ["workers", "cpu"] {
            assert_eq!(software(&b.sim, g).await.0, LATEST, "{kill_at:?} {g}");
        }
    }
}

#[tokio::test]
async fn refusals_follow_sagemaker_before_anything_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let b = created(dir.path()).await;

    // Shape: 400 naming the field.
    let bad = update(json!([{ "name": "workers", "image_release_version": "latest" }]));
    match submit(&b, &bad).await.unwrap_err() {
        EngineError::Validation(v) => {
            assert_eq!(v.kind, ValidationKind::Invalid);
            assert_eq!(v.findings[0].field, "instance_groups[0].image_release_version");
        }
        other => panic!("{other:?}"),
    }
    // Unknown group: 422.
    match submit(&b, &update(json!([{ "name": "ghost" }]))).await.unwrap_err() {
        EngineError::Validation(v) => {
            assert_eq!(v.kind, ValidationKind::Unprocessable);
            assert_eq!(v.findings[0].field, "instance_groups[0].name");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(b.sim.calls("sagemaker:UpdateClusterSoftware"), 0);

    // An update running (started outside the operation): 409, and SageMaker's Conflict.
    let direct = UpdateClusterSoftware {
        region: REGION.into(),
        cluster: "demo-hp".into(),
        instance_groups: vec![SoftwareUpdateGroup { name: "cpu".into(), image_release_version: None }],
        deployment: None,
        image_id: None,
    };
    b.sim.update_cluster_software(&direct).await.unwrap();
    match submit(&b, &update(json!([{ "name": "workers" }]))).await.unwrap_err() {
        EngineError::InvalidState(why) => assert!(why.contains("instance group cpu"), "{why}"),
        other => panic!("{other:?}"),
    }
    let e = b.sim.update_cluster_software(&direct).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::Conflict, "{e}");
    // Node actions wait for the update too.
    let e = b.sim.batch_node_action(REGION, "demo-hp", instantstart_core::provider::NodeAction::Reboot, &[]).await;
    assert_eq!(e.unwrap_err().kind, ProviderErrorKind::Conflict);
    b.sim.advance(Duration::from_secs(3600));

    // The simulator refuses an unknown release and an unknown group (the workflow's step
    // reports SageMaker's words).
    let mut unknown = direct.clone();
    unknown.instance_groups[0].image_release_version = Some("2099.1.1".into());
    let e = b.sim.update_cluster_software(&unknown).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::InvalidRequest, "{e}");
    assert!(e.to_string().contains("not a HyperPod AMI release"), "{e}");
    let op = run(
        &b,
        OperationKind::UpdateSoftware,
        &update(json!([{ "name": "workers", "image_release_version": "2099.1.1" }])),
    )
    .await;
    assert_eq!(op.status, OperationStatus::Failed, "{op:#?}");

    // A custom AMI: afterwards the group is updated only with an image id.
    let op = run(
        &b,
        OperationKind::UpdateSoftware,
        &json!({ "cluster": "demo", "image_id": "ami-0123456789abcdef0",
        "instance_groups": [{ "name": "cpu" }] }),
    )
    .await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let c = live(&b.sim).await;
    let cpu = c.instance_groups.iter().find(|g| g.name == "cpu").unwrap();
    assert_eq!(cpu.software.current_image_id.as_deref(), Some("ami-0123456789abcdef0"));
    match submit(&b, &update(json!([{ "name": "cpu" }]))).await.unwrap_err() {
        EngineError::Validation(v) => assert_eq!(v.findings[0].field, "image_id", "{v}"),
        other => panic!("{other:?}"),
    }
    let mut again = direct.clone();
    again.instance_groups[0].image_release_version = None;
    let e = b.sim.update_cluster_software(&again).await.unwrap_err();
    assert!(e.to_string().contains("custom AMI"), "{e}");
    let op = run(
        &b,
        OperationKind::UpdateSoftware,
        &json!({ "cluster": "demo", "image_id": "default",
        "instance_groups": [{ "name": "cpu" }] }),
    )
    .await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(software(&b.sim, "cpu").await.0, LATEST);
}

#[tokio::test]
async fn a_failed_update_rolls_back_and_names_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let b = created(dir.path()).await;
    b.sim.set_faults(
        SimFaults::none()
            .with("sagemaker:UpdateClusterSoftware", FaultMode::ResourceFails { reason: "AMI boot failure".into() }),
    );
    let op = run(&b, OperationKind::UpdateSoftware, &update(json!([{ "name": "workers" }]))).await;
    assert_eq!(op.status, OperationStatus::Failed, "{op:#?}");
    let detail = op.step("software_update").unwrap().error.clone().unwrap_or_default();
    assert!(detail.contains("instance group workers") && detail.contains("RollbackComplete"), "{detail}");
    assert_eq!(
        software(&b.sim, "workers").await,
        (LAUNCH.into(), "UpdateAvailable".into(), Some("RollbackComplete".into()))
    );
}
