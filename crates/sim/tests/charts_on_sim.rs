//! The pinned Helm charts in the create/delete pipelines on the simulated cloud: the
//! `chart:<release>` steps (KubeRay and KEDA) install exactly once (observe before submit), a
//! failed release fails the step with Helm's reason and a retry upgrades it, and delete-cluster
//! uninstalls them. The HyperPod dependencies chart (vendored) is installed before the HyperPod
//! cluster is created and uninstalled after it is deleted.

use instantstart_core::engine::Engine;
use instantstart_core::operation::{OperationKind, OperationStatus, StepPhase};
use instantstart_core::provider::{
    HYPERPOD_DEPENDENCIES, HelmReleases, KEDA, KUBERAY_OPERATOR, KubeTarget, ReleaseStatus,
};
use instantstart_sim::{FaultMode, SimCloud, SimFaults};
use instantstart_testkit::{Bed, user};
use serde_json::{Value, json};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

fn request() -> Value {
    json!({ "name": "demo", "region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"] })
}

async fn run(engine: &Engine, kind: OperationKind, req: &Value) -> instantstart_core::operation::Operation {
    let s = engine.submit(kind, req, user(), None).unwrap();
    let op = engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert!(op.status.is_terminal(), "operation did not finish: {op:#?}");
    op
}

fn target() -> KubeTarget {
    KubeTarget::new("us-east-1", "demo")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_installs_the_pinned_chart_once_and_delete_uninstalls_it() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).seed(11).helm().world_in_memory().build();
    let (sim, engine) = (b.sim.clone(), b.engine.clone());
    let op = run(&engine, OperationKind::CreateCluster, &request()).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let step = op.step("chart:kuberay-operator").expect("chart step");
    assert_eq!((step.phase, step.attempts), (StepPhase::Succeeded, 1));
    assert_eq!(step.depends_on, ["select_active"]);
    let r = sim.get_release(&target(), KUBERAY_OPERATOR.namespace, KUBERAY_OPERATOR.release).await.unwrap().unwrap();
    assert!(r.is_deployed(&KUBERAY_OPERATOR.chart_ref()), "{r:?}");
    assert_eq!(r.revision, 1);
    let step = op.step("chart:keda").expect("KEDA chart step");
    assert_eq!((step.phase, step.attempts), (StepPhase::Succeeded, 1));
    assert_eq!(step.depends_on, ["select_active"]);
    assert_eq!((step.outputs["chart"].as_str(), step.outputs["version"].as_str()), (Some("keda"), Some("2.21.1")));
    let r = sim.get_release(&target(), KEDA.namespace, KEDA.release).await.unwrap().unwrap();
    assert!(r.is_deployed(&KEDA.chart_ref()), "{r:?}");
    assert_eq!(sim.stats().get("helm:upgrade").copied(), Some(4), "each chart installed exactly once");

    let op = run(&engine, OperationKind::DeleteCluster, &json!({ "name": "demo" })).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    for key in ["chart:kuberay-operator", "chart:keda", "chart:prometheus", "chart:aws-load-balancer-controller"] {
        let step = op.step(key).expect("chart removal step");
        assert_eq!(step.phase, StepPhase::Succeeded);
        assert!(op.step("eks_cluster").unwrap().depends_on.contains(&key.to_string()), "{key}");
    }
    assert_eq!(sim.stats().get("helm:uninstall").copied(), Some(4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_release_fails_its_step_with_helms_reason_and_a_retry_upgrades_it() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).seed(11).helm().world_in_memory().build();
    let (sim, engine) = (b.sim.clone(), b.engine.clone());
    sim.set_faults(SimFaults::none().with("helm:upgrade", FaultMode::resource_fails("ImagePullBackOff")));
    let op = run(&engine, OperationKind::CreateCluster, &request()).await;
    assert_eq!(op.status, OperationStatus::Failed);
    let step = op.step("chart:kuberay-operator").unwrap();
    assert_eq!(step.phase, StepPhase::Failed);
    assert!(step.error.as_deref().unwrap().contains("ImagePullBackOff"), "{step:?}");
    let failed: Vec<&str> = op.steps.iter().filter(|s| s.phase == StepPhase::Failed).map(|s| s.key.as_str()).collect();
    assert_eq!(
        failed,
        ["chart:kuberay-operator", "chart:keda", "chart:prometheus", "chart:aws-load-balancer-controller"],
        "only the charts failed"
    );

    sim.set_faults(SimFaults::none());
    for key in failed {
        engine.retry_step(&op.id, key, user()).unwrap();
        engine.wait(&op.id, WAIT).await.unwrap();
    }
    let op = engine.wait(&op.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let r = sim.get_release(&target(), KUBERAY_OPERATOR.namespace, KUBERAY_OPERATOR.release).await.unwrap().unwrap();
    assert_eq!((r.status, r.revision), (ReleaseStatus::Deployed, 2), "the failed revision was upgraded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hyperpod_cluster_is_created_only_after_its_dependencies_chart() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).seed(11).helm().world_in_memory().build();
    let (sim, engine) = (b.sim.clone(), b.engine.clone());
    let no_hyperpod = run(&engine, OperationKind::CreateCluster, &request()).await;
    assert!(no_hyperpod.step("chart:hyperpod-dependencies").is_none(), "only planned with a HyperPod cluster");

    let mut req = request();
    req["name"] = json!("hp");
    req["hyperpod"] = json!({ "instance_groups": [
        { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1a" }
    ]});
    let op = run(&engine, OperationKind::CreateCluster, &req).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let chart = op.step("chart:hyperpod-dependencies").expect("chart step");
    assert_eq!((chart.phase, chart.attempts), (StepPhase::Succeeded, 1));
    assert_eq!(chart.depends_on, ["select_active"]);
    assert_eq!(chart.outputs["chart"], "hyperpod-helm-chart");
    assert_eq!(chart.outputs["namespace"], "kube-system");
    let hp = op.step("hyperpod_cluster").unwrap();
    assert!(hp.depends_on.contains(&chart.key), "{:?}", hp.depends_on);
    assert!(hp.started_at.unwrap() >= chart.finished_at.unwrap(), "HyperPod created before its dependencies");
    let target = KubeTarget::new("us-east-1", "hp");
    let (ns, rel) = (HYPERPOD_DEPENDENCIES.namespace, HYPERPOD_DEPENDENCIES.release);
    let r = sim.get_release(&target, ns, rel).await.unwrap().unwrap();
    assert!(r.is_deployed(&HYPERPOD_DEPENDENCIES.chart_ref()), "{r:?}");

    let op = run(&engine, OperationKind::DeleteCluster, &json!({ "name": "hp" })).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let removal = op.step("chart:hyperpod-dependencies").expect("chart removal step");
    assert_eq!(removal.depends_on, ["hyperpod_cluster"], "uninstalled after the HyperPod cluster is gone");
    assert!(op.step("eks_cluster").unwrap().depends_on.contains(&removal.key));
    assert_eq!(
        sim.stats().get("helm:uninstall").copied(),
        Some(5),
        "KubeRay, KEDA, Prometheus, the load balancer controller and the HyperPod dependencies"
    );
}

/// The steps create-cluster gained for serving (the OIDC provider, the controller's role, the
/// Prometheus and load balancer controller releases) create nothing twice: not when a create's
/// response is lost (the retry observes first), not when the server is killed at the step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serving_steps_create_once_through_lost_responses_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).seed(11).helm().world_in_memory().build();
    let (sim, engine) = (b.sim.clone(), b.engine.clone());
    sim.set_faults(
        SimFaults::none()
            .with("iam:CreateOpenIDConnectProvider", FaultMode::LostResponse)
            .with("iam:CreateRole", FaultMode::LostResponse)
            .with("helm:upgrade", FaultMode::LostResponse),
    );
    let op = run(&engine, OperationKind::CreateCluster, &request()).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let stats = sim.stats();
    assert_eq!(stats.get("iam:CreateOpenIDConnectProvider").copied(), Some(1), "{stats:?}");
    assert_eq!(
        stats.get("iam:CreateRole").copied(),
        Some(3),
        "the EKS role, the S3 CSI driver's and the controller's: {stats:?}"
    );
    assert_eq!(stats.get("helm:upgrade").copied(), Some(4), "{stats:?}");
    assert_eq!(
        op.step("chart:aws-load-balancer-controller").unwrap().depends_on,
        ["select_active", "lb_controller_role"]
    );

    for key in ["oidc_provider", "lb_controller_role", "chart:aws-load-balancer-controller", "chart:prometheus"] {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Bed::sim(dir.path()).seed(11).helm().build();
        let id = b.submit(OperationKind::CreateCluster, &request()).id;
        b.wait_for(&id, &format!("{key} to get past submitting"), |op| {
            matches!(op.step(key).unwrap().phase, StepPhase::Submitted | StepPhase::Polling | StepPhase::Succeeded)
        })
        .await;
        b.kill().await;
        b.sim.flush().unwrap();
        b.restart().await;
        let (sim, engine) = (b.sim.clone(), b.engine.clone());
        engine.resume_all().unwrap();
        let op = engine.wait(&id, WAIT).await.unwrap();
        assert_eq!(op.status, OperationStatus::Succeeded, "{key}: {op:#?}");
        let stats = sim.stats();
        assert_eq!(stats.get("iam:CreateOpenIDConnectProvider").copied(), Some(1), "{key}: {stats:?}");
        assert_eq!(stats.get("iam:CreateRole").copied(), Some(3), "{key}: {stats:?}");
        assert_eq!(stats.get("helm:upgrade").copied(), Some(4), "{key}: {stats:?}");
    }
}

/// The VPC of cluster `demo`.
async fn demo_vpc(sim: &SimCloud) -> String {
    use instantstart_core::provider::NetworkApi;
    let name = instantstart_core::names::DerivedNames::for_cluster("demo").vpc;
    sim.find_vpc("us-east-1", &name).await.unwrap().expect("the cluster's VPC").id
}

/// A `LoadBalancer` Service handed to the AWS Load Balancer Controller, as a `load_balancer`
/// endpoint's (`managed-by: instantstart`) or someone else's.
fn nlb_service(name: &str, ours: bool) -> instantstart_core::provider::KubeObject {
    let mut labels = json!({ "app": name });
    if ours {
        labels["app.kubernetes.io/managed-by"] = json!("instantstart");
        labels["instantstart.io/route"] = json!("self_managed");
    }
    instantstart_core::provider::KubeObject(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": name, "namespace": "default", "labels": labels, "annotations": {
            "service.beta.kubernetes.io/aws-load-balancer-type": "external",
            "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip",
            "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal" } },
        "spec": { "type": "LoadBalancer", "selector": { "app": name }, "ports": [{ "port": 80, "targetPort": 8000 }] }
    }))
}

/// The order delete-cluster had before: the controller uninstalled while a `LoadBalancer`
/// Service still had its NLB. The NLB stays in the VPC (the Service deleted afterwards takes
/// nothing with it), and EC2 refuses to delete its subnets and the VPC (`DependencyViolation`),
/// as EKS's "Delete a cluster" page warns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_balancer_service_that_outlives_its_controller_keeps_the_vpc_from_being_deleted() {
    use instantstart_core::provider::{KubeApi, NetworkApi, ObjectRef};
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).seed(11).helm().world_in_memory().build();
    let (sim, engine) = (b.sim.clone(), b.engine.clone());
    let op = run(&engine, OperationKind::CreateCluster, &request()).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let svc = nlb_service("llm", true);
    sim.apply(&target(), &svc).await.unwrap();
    sim.advance(Duration::from_secs(120));
    let live = sim.get(&target(), &svc.object_ref().unwrap()).await.unwrap().unwrap();
    let host = live.0["status"]["loadBalancer"]["ingress"][0]["hostname"].as_str().expect("the NLB").to_string();
    let vpc = demo_vpc(&sim).await;
    assert!(sim.orphaned_load_balancers(&vpc).is_empty(), "a Service whose controller runs leaves nothing");

    // The old order: the controller goes first, then the Service.
    let lbc = instantstart_core::provider::AWS_LOAD_BALANCER_CONTROLLER;
    sim.uninstall(&target(), lbc.namespace, lbc.release).await.unwrap();
    let r: ObjectRef = svc.object_ref().unwrap();
    sim.delete(&target(), &r).await.unwrap();
    assert_eq!(sim.orphaned_load_balancers(&vpc), std::slice::from_ref(&host));

    // The rest of the teardown runs; the VPC cannot go.
    let del = run(&engine, OperationKind::DeleteCluster, &json!({ "name": "demo" })).await;
    assert_eq!(del.status, OperationStatus::Failed, "{del:#?}");
    let network = del.step("network").unwrap();
    assert_eq!(network.phase, StepPhase::Failed);
    let error = network.error.as_deref().unwrap();
    assert!(error.contains("DependencyViolation") && error.contains(&host), "{error}");
    assert!(sim.describe_network("us-east-1", &vpc).await.is_ok(), "the VPC is still there");
    let private = sim
        .describe_network("us-east-1", &vpc)
        .await
        .unwrap()
        .subnets
        .into_iter()
        .find(|s| s.tags.contains_key("kubernetes.io/role/internal-elb"))
        .unwrap();
    let e = sim.delete_subnet("us-east-1", &private.id).await.unwrap_err();
    assert!(e.message.contains("DependencyViolation"), "{e}");
}
