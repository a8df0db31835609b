//! Day-2 HyperPod actions end to end on the simulated cloud, with the real engine and SQLite
//! store: deep health checks on demand (`StartClusterHealthCheck`) — nodes go
//! `DeepHealthCheckInProgress` and back, a check in flight is followed rather than started
//! twice, a failing node is replaced (automatic node recovery) or left in `Failure` (`None`),
//! and what SageMaker refuses (CPU-only groups, connectivity without EFA) is refused by the
//! workflow before anything is recorded and by the simulator alike.

use instantstart_core::api::capacity::{self, AcceleratorCount, NodeHealth};
use instantstart_core::engine::Outcome;
use instantstart_core::operation::{OperationKind, OperationStatus};
use instantstart_core::provider::{DeepHealthCheck, HealthCheckTarget, HyperPodApi, ProviderErrorKind};
use instantstart_sim::{FaultMode, SimCloud, SimFaults};
use instantstart_testkit::{Bed, user};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const REGION: &str = "us-east-1";

/// `workers` (2 × ml.g5.2xlarge: GPU, no EFA), `efa` (1 × ml.g5.12xlarge: GPU + EFA) and `cpu`
/// (1 × ml.m5.xlarge).
async fn created(dir: &Path) -> Bed {
    let b = Bed::sim(dir).speed(2000.0).seed(7).build();
    let req = json!({
        "name": "demo", "region": REGION, "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 2, "availability_zone": "us-east-1a" },
            { "name": "efa", "instance_type": "ml.g5.12xlarge", "count": 1, "availability_zone": "us-east-1a" },
            { "name": "cpu", "instance_type": "ml.m5.xlarge", "count": 1, "availability_zone": "us-east-1b" }
        ]}
    });
    run(&b, OperationKind::CreateCluster, &req).await;
    b
}

async fn run(b: &Bed, kind: OperationKind, req: &Value) -> instantstart_core::operation::Operation {
    let s = match b.engine.submit_checked(kind, req, user(), None).await.unwrap() {
        Outcome::Submitted(s) => s,
        other => panic!("expected a change, got {other:?}"),
    };
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    op
}

async fn nodes_of(sim: &SimCloud, group: &str) -> Vec<(String, String)> {
    sim.list_cluster_nodes(REGION, "demo-hp")
        .await
        .unwrap()
        .into_iter()
        .filter(|n| n.instance_group == group)
        .map(|n| (n.instance_id, n.status))
        .collect()
}

fn check(groups: Value) -> Value {
    json!({ "cluster": "demo", "instance_groups": groups })
}

fn output(op: &instantstart_core::operation::Operation) -> Value {
    op.steps.iter().find(|s| s.key == "health_check").map(|s| s.outputs.clone()).unwrap_or(Value::Null)
}

#[tokio::test]
async fn deep_health_checks_run_on_demand_and_report_each_node() {
    let dir = tempfile::tempdir().unwrap();
    let b = created(dir.path()).await;
    let workers = nodes_of(&b.sim, "workers").await;
    assert_eq!(workers.len(), 2);

    // Whole group: both nodes go through the check and pass.
    let op =
        run(&b, OperationKind::StartHealthCheck, &check(json!([{ "name": "workers", "checks": ["InstanceStress"] }])))
            .await;
    assert_eq!(b.sim.calls("sagemaker:StartClusterHealthCheck"), 1);
    let out = output(&op);
    assert_eq!(out["healthy"], true, "{out:#}");
    let results: Vec<(&str, &str)> = out["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["node_id"].as_str().unwrap(), n["result"].as_str().unwrap()))
        .collect();
    let mut want: Vec<(&str, &str)> = workers.iter().map(|(id, _)| (id.as_str(), "passed")).collect();
    want.sort();
    assert_eq!(results, want);

    // A check in flight (started outside the operation) is followed, not started twice.
    let one = workers[0].0.clone();
    let target = HealthCheckTarget {
        instance_group: "workers".into(),
        node_ids: vec![one.clone()],
        checks: vec![DeepHealthCheck::InstanceStress],
    };
    // Simulated time stands still until the operation has seen the check in flight (at 2000x
    // the check's 300 simulated seconds could pass before the operation looks, on a loaded
    // machine), then moves at the engine's pace.
    b.sim.set_manual_clock(true).unwrap();
    b.sim.start_cluster_health_check(REGION, "demo-hp", std::slice::from_ref(&target)).await.unwrap();
    assert!(nodes_of(&b.sim, "workers").await.iter().any(|(id, s)| id == &one && s == "DeepHealthCheckInProgress"));
    let request = check(json!([{ "name": "workers", "node_ids": [one], "checks": ["InstanceStress"] }]));
    let id = b.submit_checked(OperationKind::StartHealthCheck, &request).await.operation.id;
    let op = b.advance_until(&id, "to finish", Duration::from_secs(10), |op| op.status.is_terminal()).await;
    b.sim.set_manual_clock(false).unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(b.sim.calls("sagemaker:StartClusterHealthCheck"), 2, "observed, not submitted again");
    assert_eq!(output(&op)["nodes"][0]["result"], "passed");

    // Connectivity on the EFA group passes.
    run(
        &b,
        OperationKind::StartHealthCheck,
        &check(json!([{ "name": "efa", "checks": ["InstanceStress", "InstanceConnectivity"] }])),
    )
    .await;

    // A node that fails its check is replaced by automatic node recovery.
    b.sim.set_faults(
        SimFaults::none()
            .with("sagemaker:StartClusterHealthCheck", FaultMode::ResourceFails { reason: "GPU Xid 79".into() }),
    );
    let op = run(
        &b,
        OperationKind::StartHealthCheck,
        &check(json!([{ "name": "workers", "node_ids": [workers[1].0], "checks": ["InstanceStress"] }])),
    )
    .await;
    b.sim.set_faults(SimFaults::none());
    let out = output(&op);
    assert_eq!(
        (out["healthy"].clone(), out["nodes"][0]["result"].clone()),
        (json!(false), json!("replaced")),
        "{out:#}"
    );
    let now = nodes_of(&b.sim, "workers").await;
    assert_eq!(now.len(), 2, "the group keeps its size");
    assert!(!now.iter().any(|(id, _)| id == &workers[1].0), "a new instance id: {now:?}");
}

#[tokio::test]
async fn a_failed_node_stays_in_failure_without_automatic_recovery_until_rebooted() {
    let dir = tempfile::tempdir().unwrap();
    let b = created(dir.path()).await;
    run(&b, OperationKind::SetFeatures, &json!({ "cluster": "demo", "patch": { "node_recovery": "None" } })).await;
    let workers = nodes_of(&b.sim, "workers").await;
    b.sim.set_faults(
        SimFaults::none()
            .with("sagemaker:StartClusterHealthCheck", FaultMode::ResourceFails { reason: "GPU Xid 79".into() }),
    );
    let op = run(
        &b,
        OperationKind::StartHealthCheck,
        &check(json!([{ "name": "workers", "node_ids": [workers[0].0], "checks": ["InstanceStress"] }])),
    )
    .await;
    b.sim.set_faults(SimFaults::none());
    assert_eq!(output(&op)["nodes"][0], json!({ "node_id": workers[0].0, "result": "failed", "status": "Failure" }));
    // The capacity read shows it failed, with HyperPod's labels and taint, its GPU unavailable.
    let access = instantstart_core::kube_access::KubeAccess::control_plane("admin");
    let cap = capacity::get(b.store.as_ref(), &b.sim, &b.sim, "demo", &access).await.unwrap();
    let sick = cap.node_list.iter().find(|n| n.instance_id.as_deref() == Some(workers[0].0.as_str())).unwrap();
    assert_eq!(sick.health, NodeHealth::Failed, "{sick:?}");
    assert_eq!(sick.health_label.as_deref(), Some("UnschedulablePendingReplacement"));
    assert_eq!(sick.deep_health_check.as_deref(), Some("Failed"));
    assert_eq!(sick.taints[0].effect, "NoSchedule");
    assert_eq!(sick.accelerators.gpus, AcceleratorCount { total: 1, allocated: 0, free: 0, unavailable: 1 });
    let workers_group = cap.instance_groups.iter().find(|g| g.name == "workers").unwrap();
    assert_eq!(workers_group.health.get(&NodeHealth::Failed), Some(&1));
    assert_eq!(workers_group.health.get(&NodeHealth::Healthy), Some(&1));
    // CPU nodes count as nodes with no accelerators; the cluster's GPUs add up.
    let g = cap.accelerators.gpus;
    assert_eq!((g.total, g.free + g.unavailable + g.allocated), (2 + 4, 2 + 4), "{g:?}");
    // The ladder's reboot takes a Failure node back to Running.
    run(&b, OperationKind::RebootNodes, &json!({ "cluster": "demo", "node_ids": [workers[0].0] })).await;
    assert!(nodes_of(&b.sim, "workers").await.iter().all(|(_, s)| s == "Running"));
}

#[tokio::test]
async fn refusals_follow_sagemaker_before_anything_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let b = created(dir.path()).await;
    let cases: Vec<(Value, &str, &str)> = vec![
        (json!([{ "name": "cpu", "checks": ["InstanceStress"] }]), "instance_groups[0].checks[0]", "no accelerators"),
        (
            json!([{ "name": "workers", "checks": ["InstanceConnectivity"] }]),
            "instance_groups[0].checks[0]",
            "no EFA interface",
        ),
        (json!([{ "name": "ghost", "checks": ["InstanceStress"] }]), "instance_groups[0].name", "does not exist"),
        (
            json!([{ "name": "workers", "node_ids": ["i-0123456789abcdef0"], "checks": ["InstanceStress"] }]),
            "instance_groups[0].node_ids[0]",
            "is not a node of instance group workers",
        ),
        (json!([{ "name": "workers", "checks": [] }]), "instance_groups[0].checks", "at least one"),
    ];
    for (groups, field, rule) in cases {
        let e =
            b.engine.submit_checked(OperationKind::StartHealthCheck, &check(groups), user(), None).await.unwrap_err();
        let text = e.to_string();
        assert!(text.contains(field) && text.contains(rule), "{field}: {text}");
    }
    assert_eq!(b.sim.calls("sagemaker:StartClusterHealthCheck"), 0, "nothing reached SageMaker");
    // The simulated SageMaker refuses the same.
    let cpu = HealthCheckTarget {
        instance_group: "cpu".into(),
        node_ids: vec![],
        checks: vec![DeepHealthCheck::InstanceStress],
    };
    let e = b.sim.start_cluster_health_check(REGION, "demo-hp", &[cpu]).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::InvalidRequest);
    assert!(e.message.contains("accelerated instance types only"), "{e}");
    let no_efa = HealthCheckTarget {
        instance_group: "workers".into(),
        node_ids: vec![],
        checks: vec![DeepHealthCheck::InstanceConnectivity],
    };
    let e = b.sim.start_cluster_health_check(REGION, "demo-hp", &[no_efa]).await.unwrap_err();
    assert!(e.message.contains("InstanceConnectivity needs EFA"), "{e}");
}
