//! HyperPod managed (Karpenter) autoscaling end to end on the simulated cloud, with the real
//! engine and SQLite store: the feature applies a `HyperpodNodeClass` + `NodePool` naming every
//! group or the named ones, HyperPod's simulated Karpenter scales a managed group from zero for
//! a pending pod and back when it is idle (and never touches unmanaged groups), instance-group
//! add/delete keeps the NodeClass in step, OFF removes exactly what ON created, and lost
//! responses / a restart mid-operation apply nothing twice (per-API call counters). Also the
//! UpdateCluster requests SageMaker refuses, refused by the simulator.

use instantstart_core::engine::Outcome;
use instantstart_core::operation::{OperationKind, OperationStatus, StepPhase};
use instantstart_core::provider::{
    AutoscalingUpdate, HyperPodApi, KubeApi, KubeObject, KubeTarget, ListParams, ObjectRef, ProviderErrorKind,
    UpdateHyperPodCluster,
};
use instantstart_core::spec::{NodeRecovery, TieredCheckpointing};
use instantstart_core::workflow::karpenter::{KARPENTER_NAME, node_class_ref, node_pool_ref};
use instantstart_sim::{FaultMode, SimCloud, SimFaults};
use instantstart_testkit::{Bed, user, wait_until};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const REGION: &str = "us-east-1";

/// `workers` (1 node), `burst` (ml.g5.12xlarge, 0 nodes) and `spare` (0 nodes).
fn cluster_request() -> Value {
    json!({
        "name": "demo",
        "region": REGION,
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1a" },
            { "name": "burst", "instance_type": "ml.g5.12xlarge", "count": 0, "availability_zone": "us-east-1a" },
            { "name": "spare", "instance_type": "ml.g5.xlarge", "count": 0, "availability_zone": "us-east-1b" }
        ]}
    })
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

async fn created(dir: &Path, speed: f64) -> Bed {
    let b = Bed::sim(dir).speed(speed).seed(11).build();
    run(&b, OperationKind::CreateCluster, &cluster_request()).await;
    b
}

fn target() -> KubeTarget {
    KubeTarget::new(REGION, "demo")
}

async fn get(sim: &SimCloud, r: &ObjectRef) -> Option<Value> {
    sim.get(&target(), r).await.unwrap().map(|o| o.0)
}

async fn node_class_groups(sim: &SimCloud) -> Option<Vec<String>> {
    get(sim, &node_class_ref()).await.map(|o| {
        o["spec"]["instanceGroups"].as_array().unwrap().iter().map(|g| g.as_str().unwrap().to_string()).collect()
    })
}

async fn target_count(sim: &SimCloud, group: &str) -> u32 {
    let c = sim.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().unwrap();
    c.instance_groups.iter().find(|g| g.name == group).map_or(0, |g| g.target_count)
}

async fn features(b: &Bed, patch: Value) -> instantstart_core::operation::Operation {
    run(b, OperationKind::SetFeatures, &json!({ "cluster": "demo", "patch": patch })).await
}

fn deployment(name: &str, selector: Value, gpus: u32) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name, "namespace": "default", "labels": { "app": name } },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "nodeSelector": selector,
                          "containers": [{ "name": "server", "image": "vllm/vllm-openai:v0.9",
                                           "resources": { "limits": { "nvidia.com/gpu": gpus } } }] }
            }
        }
    })
}

async fn pod_phase(sim: &SimCloud, app: &str) -> String {
    let params = ListParams {
        api_version: "v1".into(),
        kind: "Pod".into(),
        namespace: Some("default".into()),
        labels: vec![("app".into(), app.into())],
    };
    let pods = sim.list(&target(), &params).await.unwrap();
    pods.first().and_then(|p| p.0["status"]["phase"].as_str()).unwrap_or("none").to_string()
}

// `wait_until` polls its condition, and every poll is an API call: that is when the simulated
// Karpenter acts.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_groups_scale_from_zero_for_a_pending_pod_and_back_when_idle_then_off_removes_the_objects() {
    let dir = tempfile::tempdir().unwrap();
    let b = created(dir.path(), 2000.0).await;
    // Before managed autoscaling, HyperPod serves no Karpenter kinds.
    assert_eq!(get(&b.sim, &node_class_ref()).await, None);
    b.sim.reset_stats();
    let op = features(&b, json!({ "managed_autoscaling": true })).await;
    let keys: Vec<&str> = op.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, ["autoscaling_role", "autoscaling", "karpenter"]);
    assert_eq!(b.sim.calls("sagemaker:UpdateCluster"), 1);
    assert_eq!(b.sim.calls("k8s:Apply"), 2, "one NodeClass, one NodePool: {:?}", b.sim.stats());
    assert_eq!(node_class_groups(&b.sim).await.unwrap(), ["workers", "burst", "spare"]);
    let pool = get(&b.sim, &node_pool_ref()).await.unwrap();
    assert_eq!(pool["spec"]["template"]["spec"]["nodeClassRef"]["name"], KARPENTER_NAME);
    assert_eq!(pool["metadata"]["labels"]["app.kubernetes.io/managed-by"], "instantstart");
    assert!(b.sim.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().unwrap().autoscaling);

    // A pod needing 4 GPUs of an ml.g5.12xlarge: no current node fits; `burst` scales from zero.
    assert_eq!(target_count(&b.sim, "burst").await, 0);
    b.sim.apply(&target(), &KubeObject(deployment("big", json!({}), 4))).await.unwrap();
    wait_until(WAIT, "burst to scale up", || async { target_count(&b.sim, "burst").await == 1 }).await;
    wait_until(WAIT, "the pod to run", || async { pod_phase(&b.sim, "big").await == "Running" }).await;
    assert_eq!(target_count(&b.sim, "spare").await, 0, "a group the pod does not fit is not scaled");
    // Idle again: consolidated back to zero after consolidateAfter.
    b.sim
        .delete(
            &target(),
            &ObjectRef {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                namespace: Some("default".into()),
                name: "big".into(),
            },
        )
        .await
        .unwrap();
    wait_until(WAIT, "burst to scale back down", || async { target_count(&b.sim, "burst").await == 0 }).await;
    // `workers` is managed too and ran nothing: Karpenter took it to zero as well (AWS: "If you
    // start with more than 0 nodes, Karpenter will scale them down to 0").
    wait_until(WAIT, "workers to be consolidated", || async { target_count(&b.sim, "workers").await == 0 }).await;

    // OFF: exactly the two objects go, before the UpdateCluster that disables autoscaling.
    b.sim.reset_stats();
    let op = features(&b, json!({ "managed_autoscaling": false })).await;
    let keys: Vec<&str> = op.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, ["remove_karpenter", "autoscaling_off", "remove_autoscaling_role"]);
    assert_eq!(b.sim.calls("k8s:Delete"), 2, "{:?}", b.sim.stats());
    assert!(!b.sim.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().unwrap().autoscaling);
    assert_eq!(get(&b.sim, &node_class_ref()).await, None);
    assert_eq!(get(&b.sim, &node_pool_ref()).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_groups_only_are_managed_and_instance_group_changes_keep_the_node_class_in_step() {
    let dir = tempfile::tempdir().unwrap();
    let b = created(dir.path(), 2000.0).await;
    // Unknown or ill-formed names are refused with their field paths; nothing is recorded.
    let bad = json!({ "cluster": "demo", "patch": { "managed_autoscaling": true, "autoscaling_instance_groups": ["burst", "nope", "burst"] } });
    let err = b.engine.submit_checked(OperationKind::SetFeatures, &bad, user(), None).await.unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("autoscaling_instance_groups[2]"), "{msg}");
    let bad = json!({ "cluster": "demo", "patch": { "managed_autoscaling": true, "autoscaling_instance_groups": ["burst", "nope"] } });
    let err = b.engine.submit_checked(OperationKind::SetFeatures, &bad, user(), None).await.unwrap_err();
    assert!(err.to_string().contains("patch.autoscaling_instance_groups[1]"), "{err}");

    features(&b, json!({ "managed_autoscaling": true, "autoscaling_instance_groups": ["burst"] })).await;
    assert_eq!(node_class_groups(&b.sim).await.unwrap(), ["burst"]);
    // `spare` is not in the NodeClass: a pod only it could take stays Pending, and it stays at 0.
    let only_spare = deployment("pinned", json!({ "sagemaker.amazonaws.com/instance-group-name": "spare" }), 1);
    b.sim.apply(&target(), &KubeObject(only_spare)).await.unwrap();
    b.sim.advance(Duration::from_secs(1200));
    assert_eq!(pod_phase(&b.sim, "pinned").await, "Pending");
    assert_eq!(target_count(&b.sim, "spare").await, 0, "an unmanaged group is never scaled");

    // Named mode: a new group is not added; the same list again is a no-op.
    let add = json!({ "cluster": "demo", "group": { "name": "extra", "instance_type": "ml.g5.2xlarge", "count": 0, "availability_zone": "us-east-1a" } });
    let op = run(&b, OperationKind::AddInstanceGroup, &add).await;
    assert!(op.step("karpenter").is_some_and(|s| s.phase == StepPhase::Succeeded));
    assert_eq!(node_class_groups(&b.sim).await.unwrap(), ["burst"]);
    let again = json!({ "cluster": "demo", "patch": { "managed_autoscaling": true, "autoscaling_instance_groups": ["burst"] } });
    assert!(matches!(
        b.engine.submit_checked(OperationKind::SetFeatures, &again, user(), None).await.unwrap(),
        Outcome::NoChange(_)
    ));
    // Changing the list while autoscaling stays on re-applies the NodeClass only.
    b.sim.reset_stats();
    let op =
        features(&b, json!({ "managed_autoscaling": true, "autoscaling_instance_groups": ["burst", "extra"] })).await;
    assert_eq!(op.steps.iter().map(|s| s.key.as_str()).collect::<Vec<_>>(), ["karpenter"]);
    assert_eq!(b.sim.calls("sagemaker:UpdateCluster"), 0);
    assert_eq!(b.sim.calls("k8s:Apply"), 1, "only the NodeClass changed");
    assert_eq!(node_class_groups(&b.sim).await.unwrap(), ["burst", "extra"]);

    // Deleting a managed group removes it from the NodeClass first.
    let op = run(&b, OperationKind::DeleteInstanceGroup, &json!({ "cluster": "demo", "group": "extra" })).await;
    assert_eq!(op.steps.iter().map(|s| s.key.as_str()).collect::<Vec<_>>(), ["karpenter", "instance_group"]);
    assert_eq!(node_class_groups(&b.sim).await.unwrap(), ["burst"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_all_mode_added_groups_join_and_lost_responses_or_a_restart_apply_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let b = created(dir.path(), 400.0).await;
        b.sim.reset_stats();
        let req = json!({ "cluster": "demo", "patch": { "managed_autoscaling": true } });
        let Outcome::Submitted(s) =
            b.engine.submit_checked(OperationKind::SetFeatures, &req, user(), None).await.unwrap()
        else {
            panic!("a change")
        };
        // Kill while the autoscaling UpdateCluster is being polled.
        wait_until(WAIT, "the autoscaling step to poll", || async {
            b.engine.get(&s.operation.id).unwrap().step("autoscaling").unwrap().phase == StepPhase::Polling
        })
        .await;
        b.kill().await;
        s.operation.id
    };
    let b = Bed::sim(dir.path()).seed(11).build();
    // The NodeClass apply's response is lost: the retry observes and applies only the NodePool.
    b.sim.set_faults(SimFaults::none().with("k8s:Apply", FaultMode::LostResponse));
    assert_eq!(b.engine.resume_all().unwrap(), 1);
    let op = b.engine.wait(&id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    // The call counters live in the persisted world: one UpdateCluster across the crash (the
    // restarted step observed and polled; it did not update again).
    assert_eq!(b.sim.calls("sagemaker:UpdateCluster"), 1, "{:?}", b.sim.stats());
    assert_eq!(b.sim.calls("k8s:Apply"), 2, "{:?}", b.sim.stats());
    assert_eq!(node_class_groups(&b.sim).await.unwrap(), ["workers", "burst", "spare"]);

    // All mode: an added group joins; a lost response on that apply is not repeated either.
    b.sim.reset_stats();
    b.sim.set_faults(SimFaults::none().with("k8s:Apply", FaultMode::LostResponse));
    let add = json!({ "cluster": "demo", "group": { "name": "extra", "instance_type": "ml.g5.2xlarge", "count": 0, "availability_zone": "us-east-1b" } });
    let op = run(&b, OperationKind::AddInstanceGroup, &add).await;
    assert_eq!(
        op.steps.iter().map(|s| s.key.as_str()).collect::<Vec<_>>(),
        ["placement", "instance_group", "karpenter"]
    );
    assert_eq!(b.sim.calls("k8s:Apply"), 1);
    assert_eq!(node_class_groups(&b.sim).await.unwrap(), ["workers", "burst", "spare", "extra"]);
    let op = run(&b, OperationKind::DeleteInstanceGroup, &json!({ "cluster": "demo", "group": "spare" })).await;
    assert!(op.step("karpenter").is_some());
    assert_eq!(node_class_groups(&b.sim).await.unwrap(), ["workers", "burst", "extra"]);

    // OFF with a lost delete response: each object is deleted once.
    b.sim.reset_stats();
    b.sim.set_faults(SimFaults::none().with("k8s:Delete", FaultMode::LostResponse));
    features(&b, json!({ "managed_autoscaling": false })).await;
    assert_eq!(b.sim.calls("k8s:Delete"), 2, "{:?}", b.sim.stats());
    assert_eq!(b.store.get_cluster("demo").unwrap().unwrap().hyperpod_cluster.as_deref(), Some("demo-hp"));
}

/// UpdateCluster calls SageMaker refuses are refused by the simulator, with AWS's messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_cluster_refusals_follow_sagemaker() {
    let dir = tempfile::tempdir().unwrap();
    let b = created(dir.path(), 2000.0).await;
    let of = UpdateHyperPodCluster::of(REGION, "demo-hp");
    let role = Some("arn:aws:iam::123456789012:role/demo-hp-autoscaling-role".to_string());
    let cases: Vec<(&str, UpdateHyperPodCluster, &str)> = vec![
        (
            "tiered storage alone",
            UpdateHyperPodCluster {
                tiered_storage: Some(Some(TieredCheckpointing { memory_percent: 20 })),
                ..of.clone()
            },
            "at least one of NodeRecovery or InstanceGroups",
        ),
        (
            "autoscaling without ClusterRole",
            UpdateHyperPodCluster {
                node_recovery: Some(NodeRecovery::Automatic),
                autoscaling: Some(AutoscalingUpdate { enabled: true, role_arn: None }),
                ..of.clone()
            },
            "ClusterRole is required",
        ),
        (
            "autoscaling with node recovery None",
            UpdateHyperPodCluster {
                node_recovery: Some(NodeRecovery::None),
                autoscaling: Some(AutoscalingUpdate { enabled: true, role_arn: role.clone() }),
                ..of.clone()
            },
            "NodeRecovery to be Automatic",
        ),
    ];
    for (what, req, message) in cases {
        let e = b.sim.update_hyperpod_cluster(&req).await.unwrap_err();
        assert_eq!(e.kind, ProviderErrorKind::InvalidRequest, "{what}");
        assert!(e.message.starts_with("ValidationException: ") && e.message.contains(message), "{what}: {e}");
    }
    // Nothing changed, and the accepted form passes.
    let c = b.sim.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().unwrap();
    assert_eq!((c.tiered_storage, c.autoscaling), (None, false));
    let ok = UpdateHyperPodCluster {
        node_recovery: Some(NodeRecovery::Automatic),
        tiered_storage: Some(Some(TieredCheckpointing { memory_percent: 20 })),
        ..of.clone()
    };
    b.sim.update_hyperpod_cluster(&ok).await.unwrap();
}

/// Node recovery after creation: an explicit diff (one UpdateCluster with `NodeRecovery`, none
/// when it already matches), and managed autoscaling keeps it `Automatic` — refused by the
/// workflow (422) and by the simulated SageMaker alike.
#[tokio::test]
async fn node_recovery_changes_after_creation_and_autoscaling_keeps_it_automatic() {
    let dir = tempfile::tempdir().unwrap();
    let b = created(dir.path(), 2000.0).await;
    let recovery = |sim: SimCloud| async move {
        sim.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().unwrap().node_recovery
    };
    assert_eq!(recovery(b.sim.clone()).await, NodeRecovery::Automatic);
    let updates = b.sim.calls("sagemaker:UpdateCluster");
    let op = features(&b, json!({ "node_recovery": "None" })).await;
    let keys: Vec<&str> = op.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, ["node_recovery"]);
    assert_eq!(recovery(b.sim.clone()).await, NodeRecovery::None);
    assert_eq!(b.sim.calls("sagemaker:UpdateCluster"), updates + 1);
    // Already so: nothing recorded, nothing called.
    let again = b
        .engine
        .submit_checked(
            OperationKind::SetFeatures,
            &json!({ "cluster": "demo", "patch": { "node_recovery": "None" } }),
            user(),
            None,
        )
        .await
        .unwrap();
    assert!(matches!(again, Outcome::NoChange(_)), "{again:?}");
    assert_eq!(b.sim.calls("sagemaker:UpdateCluster"), updates + 1);
    // Autoscaling needs Automatic: refused before anything is recorded.
    let refused = b
        .engine
        .submit_checked(
            OperationKind::SetFeatures,
            &json!({ "cluster": "demo", "patch": { "managed_autoscaling": true } }),
            user(),
            None,
        )
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("Automatic"), "{refused}");
    // Both in one request: node recovery first, then autoscaling.
    let op = features(&b, json!({ "managed_autoscaling": true, "node_recovery": "Automatic" })).await;
    let pos = |k: &str| op.steps.iter().position(|s| s.key == k).unwrap();
    assert!(op.steps[pos("autoscaling")].depends_on.contains(&"node_recovery".to_string()));
    let c = b.sim.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().unwrap();
    assert_eq!((c.node_recovery, c.autoscaling), (NodeRecovery::Automatic, true));
    // None while autoscaling stays on: the workflow refuses, and so does SageMaker.
    let refused = b
        .engine
        .submit_checked(
            OperationKind::SetFeatures,
            &json!({ "cluster": "demo", "patch": { "node_recovery": "None" } }),
            user(),
            None,
        )
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("patch.node_recovery"), "{refused}");
    let e = b
        .sim
        .update_hyperpod_cluster(&UpdateHyperPodCluster {
            node_recovery: Some(NodeRecovery::None),
            ..UpdateHyperPodCluster::of(REGION, "demo-hp")
        })
        .await
        .unwrap_err();
    assert!(e.message.contains("NodeRecovery must be Automatic while Karpenter autoscaling is enabled"), "{e}");
    // Autoscaling off and None together: None goes after autoscaling is off.
    let op = features(&b, json!({ "managed_autoscaling": false, "node_recovery": "None" })).await;
    let pos = |k: &str| op.steps.iter().position(|s| s.key == k).unwrap();
    assert!(op.steps[pos("node_recovery")].depends_on.contains(&"autoscaling_off".to_string()));
    let c = b.sim.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().unwrap();
    assert_eq!((c.node_recovery, c.autoscaling), (NodeRecovery::None, false));
}
