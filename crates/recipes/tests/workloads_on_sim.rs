//! The workload workflows (`instantstart_core::workflow::workloads`) with the real renderer of
//! this crate, on the simulated cloud and a real SQLite store: prepare lays out the steps and
//! records the rendered objects; a submitted job is applied once and the operation completes;
//! a delete leaves nothing; a restart resumes from the recorded objects without rendering again
//! or applying twice; an endpoint with autoscaling needs the KEDA chart's release in the cluster.

use instantstart_core::engine::EngineError;
use instantstart_core::operation::{Operation, OperationKind, OperationStatus, StepPhase};
use instantstart_core::preflight::CheckStatus;
use instantstart_core::provider::ProviderErrorKind;
use instantstart_core::provider::{HelmReleases, KEDA, KubeApi, KubeTarget, ListParams, ObjectRef};
use instantstart_core::validate::{ValidationError, ValidationKind};
use instantstart_core::workflow::workloads;
use instantstart_core::workload::{
    RenderedWorkload, TypeRef, WorkloadKind, WorkloadRenderer as RenderWorkload, WorkloadRequest,
};
use instantstart_recipes::WorkloadRenderer;
use instantstart_sim::{FaultMode, SimFaults};
use instantstart_testkit::{Bed, user};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// The real renderer, counting its calls.
#[derive(Default)]
struct Counting(AtomicUsize);

impl RenderWorkload for Counting {
    fn render(&self, request: &WorkloadRequest) -> Result<RenderedWorkload, ValidationError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        WorkloadRenderer.render(request)
    }

    fn owned_types(&self, kind: WorkloadKind) -> Vec<TypeRef> {
        WorkloadRenderer.owned_types(kind)
    }
}

/// The kit's bed on `dir` with the Helm runner, like the server (create-cluster installs the
/// pinned charts: KubeRay, KEDA), and `renders` as the workload renderer.
fn on_sim(dir: &Path, renders: Arc<Counting>) -> Bed {
    Bed::sim(dir).seed(11).helm().renderer(renders).timeout(WAIT).build()
}

async fn finish(b: &Bed, op: &Operation) -> Operation {
    let op = b.engine.wait(&op.id, WAIT).await.unwrap();
    assert!(op.status.is_terminal(), "operation did not finish: {op:#?}");
    op
}

/// Submits like every face does (assessment first), and waits for the end.
async fn run(b: &Bed, kind: OperationKind, req: &Value) -> Operation {
    let outcome = b.engine.submit_checked(kind, req, user(), None).await.unwrap();
    let instantstart_core::engine::Outcome::Submitted(s) = outcome else { panic!("no change for {req}") };
    finish(b, &s.operation).await
}

async fn cluster(b: &Bed) {
    let req = json!({
        "name": "demo",
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.12xlarge", "count": 2, "availability_zone": "us-east-1a" }
        ]}
    });
    let s = b.engine.submit(OperationKind::CreateCluster, &req, user(), None).unwrap();
    let op = finish(b, &s.operation).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
}

fn hyperpod_job(name: &str) -> Value {
    json!({
        "cluster": "demo",
        "kind": "training_job",
        "params": {
            "runtime": "hyperpod",
            "job": { "name": name, "namespace": "default", "image": "pytorch/pytorch:2.5.1", "instance_type": "ml.g5.12xlarge", "nodes": 2 },
            "recipe": { "kind": "torch", "script": "scripts/train.py" }
        }
    })
}

fn download() -> Value {
    json!({ "cluster": "demo", "kind": "model_download", "params": { "namespace": "default", "repo_id": "Qwen/Qwen3-0.6B" } })
}

fn target() -> KubeTarget {
    KubeTarget::new("us-east-1", "demo")
}

fn job_ref(name: &str) -> ObjectRef {
    ObjectRef {
        api_version: "sagemaker.amazonaws.com/v1".into(),
        kind: "HyperPodPyTorchJob".into(),
        namespace: Some("default".into()),
        name: name.into(),
    }
}

fn keys(op_steps: &[instantstart_core::operation::StepSpec]) -> Vec<String> {
    op_steps.iter().map(|s| format!("{} <- [{}]", s.key, s.depends_on.join(", "))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_lays_out_apply_then_ready_and_records_the_rendered_objects() {
    let dir = tempfile::tempdir().unwrap();
    let b = on_sim(dir.path(), Arc::default());
    // Unknown cluster: 404, nothing rendered.
    let e = b.engine.dry_run(OperationKind::SubmitJob, &hyperpod_job("llama")).unwrap_err();
    assert_eq!(e, EngineError::UnknownCluster("demo".into()));
    cluster(&b).await;

    struct Case {
        kind: OperationKind,
        request: Value,
        target: &'static str,
        steps: &'static [&'static str],
    }
    let cases = [
        Case {
            kind: OperationKind::SubmitJob,
            request: hyperpod_job("llama"),
            target: "cluster/demo/job/llama",
            steps: &["apply:HyperPodPyTorchJob/llama <- []", "ready <- [apply:HyperPodPyTorchJob/llama]"],
        },
        Case {
            kind: OperationKind::DeleteJob,
            request: json!({"cluster": "demo", "kind": "training_job", "name": "llama", "namespace": "default"}),
            target: "cluster/demo/job/llama",
            steps: &[
                "delete:RayJob <- []",
                "delete:HyperPodPyTorchJob <- [delete:RayJob]",
                "delete:ServiceAccount <- [delete:HyperPodPyTorchJob]",
                "gone <- [delete:ServiceAccount]",
                // The association of an MLflow job's service account, once its pods are gone.
                "pod_identity <- [gone]",
            ],
        },
    ];
    for c in cases {
        let p = b.engine.dry_run(c.kind, &c.request).unwrap();
        assert_eq!(p.target, c.target);
        assert_eq!(keys(&p.steps), c.steps);
    }
    let p = b.engine.dry_run(OperationKind::DownloadModel, &download()).unwrap();
    assert!(p.target.starts_with("cluster/demo/download/download-qwen-qwen3-0-6b-"), "{}", p.target);
    let stored: workloads::StoredWorkload = serde_json::from_value(p.request.clone()).unwrap();
    assert_eq!(stored.rendered.objects.len(), 1);
    // The cluster's shared claim was filled in from the registry.
    let claim = stored.rendered.objects[0].0.pointer("/spec/template/spec/volumes").unwrap().to_string();
    assert!(claim.contains("s3-shared"), "{claim}");

    // Wrong kind for the operation, and bad parameters: typed errors with field names.
    let mut wrong = download();
    wrong["kind"] = json!("training_job");
    let e = b.engine.dry_run(OperationKind::DownloadModel, &wrong).unwrap_err();
    assert!(matches!(&e, EngineError::Validation(v) if v.findings[0].field == "kind"), "{e:?}");
    let mut bad = hyperpod_job("Bad_Name");
    bad["params"]["job"]["nodes"] = json!(0);
    let EngineError::Validation(v) = b.engine.dry_run(OperationKind::SubmitJob, &bad).unwrap_err() else { panic!() };
    let fields: Vec<&str> = v.findings.iter().map(|f| f.field.as_str()).collect();
    assert!(fields.contains(&"job.name") && fields.contains(&"job.nodes"), "{fields:?}");
    let e = b
        .engine
        .dry_run(
            OperationKind::DeleteJob,
            &json!({"cluster": "demo", "kind": "training_job", "name": "x_y", "namespace": "default"}),
        )
        .unwrap_err();
    assert!(matches!(&e, EngineError::Validation(v) if v.findings[0].field == "name"), "{e:?}");
    // Dry runs record nothing: the only operation is the cluster's creation.
    let ops = b.store.list_operations(&Default::default()).unwrap();
    assert_eq!(ops.iter().map(|o| o.kind).collect::<Vec<_>>(), [OperationKind::CreateCluster]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_is_applied_once_completes_and_its_delete_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let b = on_sim(dir.path(), Arc::default());
    cluster(&b).await;
    // Preflight: the cluster serves the job's type; the training operator add-on is a warning.
    let dry = b.engine.dry_run_checked(OperationKind::SubmitJob, &hyperpod_job("llama")).await.unwrap();
    let checks: Vec<(&str, CheckStatus)> = dry.checks.iter().map(|c| (c.check.as_str(), c.status)).collect();
    assert_eq!(checks, [("api_type", CheckStatus::Pass), ("training_operator", CheckStatus::Warn)]);
    // A cluster that does not serve the type (no CRD): 422 on `runtime` before anything is recorded.
    b.sim.set_faults(SimFaults::none().with(
        "k8s:List",
        FaultMode::Fail {
            kind: ProviderErrorKind::NotFound,
            message: "the server could not find the requested resource".into(),
        },
    ));
    let e = b.engine.submit_checked(OperationKind::SubmitJob, &hyperpod_job("llama"), user(), None).await.unwrap_err();
    assert!(
        matches!(&e, EngineError::Validation(v) if v.kind == ValidationKind::Unprocessable && v.findings[0].field == "runtime"
            && v.findings[0].rule.contains("training operator")),
        "{e:?}"
    );
    b.sim.set_faults(SimFaults::none());
    let applies = b.sim.calls("k8s:Apply");
    let op = run(&b, OperationKind::SubmitJob, &hyperpod_job("llama")).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert!(op.steps.iter().all(|s| s.phase == StepPhase::Succeeded && s.attempts == 1), "{op:#?}");
    assert_eq!(b.sim.calls("k8s:Apply") - applies, 1);
    let live = b.sim.get(&target(), &job_ref("llama")).await.unwrap().expect("the job exists");
    assert_eq!(live.label("app.kubernetes.io/managed-by"), Some("instantstart"));
    assert_eq!(live.0.pointer("/metadata/annotations/instantstart.io~1operation").unwrap(), &json!(op.id.0));

    // A second submit of the same name is refused before anything is recorded.
    let e = b.engine.submit_checked(OperationKind::SubmitJob, &hyperpod_job("llama"), user(), None).await.unwrap_err();
    assert!(matches!(&e, EngineError::InvalidState(m) if m.contains("already exists")), "{e:?}");

    let del = json!({"cluster": "demo", "kind": "training_job", "name": "llama", "namespace": "default"});
    let op = run(&b, OperationKind::DeleteJob, &del).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert!(b.sim.get(&target(), &job_ref("llama")).await.unwrap().is_none());
    let pods = b
        .sim
        .list(
            &target(),
            &ListParams {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: Some("default".into()),
                labels: workloads::workload_labels("llama"),
            },
        )
        .await
        .unwrap();
    assert!(pods.is_empty(), "{pods:?}");
    // Deleting it again: nothing to delete is a 404.
    let e = b.engine.submit_checked(OperationKind::DeleteJob, &del, user(), None).await.unwrap_err();
    assert!(matches!(e, EngineError::Missing(_)), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_completes_and_a_restart_resumes_from_the_recorded_objects() {
    let dir = tempfile::tempdir().unwrap();
    let (id, applies) = {
        let b = on_sim(dir.path(), Arc::default());
        cluster(&b).await;
        let applies = b.sim.calls("k8s:Apply");
        let wf_out = b.engine.submit_checked(OperationKind::DownloadModel, &download(), user(), None).await.unwrap();
        let instantstart_core::engine::Outcome::Submitted(s) = wf_out else { panic!() };
        // Crash as soon as the Job was applied.
        b.wait_for(&s.operation.id, "the apply to finish", |op| op.steps[0].phase == StepPhase::Succeeded).await;
        b.kill().await;
        (s.operation.id, applies)
    };
    // A new process: a renderer of its own, which must never be called.
    let renders = Arc::new(Counting::default());
    let b = on_sim(dir.path(), renders.clone());
    b.engine.resume_all().unwrap();
    let op = b.engine.wait(&id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(renders.0.load(Ordering::SeqCst), 0, "resume never renders");
    assert_eq!(b.sim.calls("k8s:Apply") - applies, 1, "the Job was applied once");
    assert_eq!(op.step("ready").unwrap().outputs["ready"], json!(true));
    // The same download again converges on the same, completed Job.
    let again = run(&b, OperationKind::DownloadModel, &download()).await;
    assert_eq!(again.status, OperationStatus::Succeeded, "{again:#?}");
}

fn autoscaled_endpoint() -> Value {
    json!({
        "cluster": "demo",
        "kind": "endpoint",
        "params": {
            "route": "self_managed", "name": "chat", "namespace": "default", "image": "lmsysorg/sglang:v0.5.2",
            "instance_type": "ml.g5.12xlarge", "gpus": 1, "replicas": 1,
            "engine": { "kind": "sglang", "model": "models/Qwen/Qwen3-0.6B", "served_model_name": "qwen" },
            "autoscaling": { "min_replicas": 1, "max_replicas": 2 }
        }
    })
}

/// The workload preflight on the simulator, which serves ScaledObject only while the `keda`
/// release is deployed: the create pipeline installed it, so autoscaling passes; on a cluster
/// without it (uninstalled here; an imported cluster is the same) the deploy is a 422 on
/// `autoscaling` naming the chart to install, before anything is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autoscaling_needs_the_keda_release_in_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let b = on_sim(dir.path(), Arc::default());
    cluster(&b).await;
    let created = b.store.list_operations(&Default::default()).unwrap();
    let create = b.store.get_operation(&created[0].id).unwrap().unwrap();
    assert!(create.step("chart:keda").is_some_and(|s| s.phase == StepPhase::Succeeded), "{create:#?}");
    let dry = b.engine.dry_run_checked(OperationKind::DeployEndpoint, &autoscaled_endpoint()).await.unwrap();
    let scaled = dry.checks.iter().find(|c| c.detail.contains("ScaledObject")).expect("a check of the ScaledObject");
    assert_eq!((scaled.status, scaled.field.as_str()), (CheckStatus::Pass, "autoscaling"), "{scaled:?}");

    b.sim.uninstall(&target(), KEDA.namespace, KEDA.release).await.unwrap();
    let dry = b.engine.dry_run_checked(OperationKind::DeployEndpoint, &autoscaled_endpoint()).await.unwrap();
    let scaled = dry.checks.iter().find(|c| c.detail.contains("ScaledObject")).unwrap();
    assert_eq!((scaled.status, scaled.field.as_str()), (CheckStatus::Fail, "autoscaling"), "{scaled:?}");
    let ops = b.store.list_operations(&Default::default()).unwrap().len();
    let e =
        b.engine.submit_checked(OperationKind::DeployEndpoint, &autoscaled_endpoint(), user(), None).await.unwrap_err();
    let EngineError::Validation(v) = &e else { panic!("{e:?}") };
    assert_eq!(v.kind, ValidationKind::Unprocessable, "{e:?}");
    assert_eq!(v.findings.len(), 1, "only the ScaledObject is missing: {e:?}");
    let f = &v.findings[0];
    assert_eq!(f.field, "autoscaling");
    for part in [
        "does not serve ScaledObject (keda.sh/v1alpha1)",
        "install KEDA",
        "keda 2.21.1",
        "https://kedacore.github.io/charts",
        "chart:keda",
    ] {
        assert!(f.rule.contains(part), "{part:?} missing in {:?}", f.rule);
    }
    assert_eq!(b.store.list_operations(&Default::default()).unwrap().len(), ops, "nothing recorded");
    // Without autoscaling the same endpoint needs no KEDA.
    let mut fixed = autoscaled_endpoint();
    fixed["params"].as_object_mut().unwrap().remove("autoscaling");
    let dry = b.engine.dry_run_checked(OperationKind::DeployEndpoint, &fixed).await.unwrap();
    assert!(dry.checks.iter().all(|c| c.status != CheckStatus::Fail), "{:?}", dry.checks);
}

/// A cluster fresh from create-cluster serves what endpoints need with no hand work: an
/// autoscaled endpoint's ScaledObject is Ready (its default trigger's Prometheus is
/// `chart:prometheus`) and scales with the metric; a `load_balancer` endpoint passes its
/// preflight (`chart:aws-load-balancer-controller`, whose service account has the IRSA role
/// `lb_controller_role` created) and gets an NLB address. Without the controller the deploy is a
/// 422 whose remedy names the chart and the step; delete-cluster removes the releases and the role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_cluster_serves_autoscaled_and_load_balancer_endpoints() {
    use instantstart_core::provider::{AWS_LOAD_BALANCER_CONTROLLER, IamApi, PROMETHEUS};
    use instantstart_core::workflow::lb_controller::{lb_controller_policy, lb_controller_role};
    let dir = tempfile::tempdir().unwrap();
    let b = on_sim(dir.path(), Arc::default());
    cluster(&b).await;
    let created = b.store.list_operations(&Default::default()).unwrap();
    let create = b.store.get_operation(&created[0].id).unwrap().unwrap();
    for key in ["chart:prometheus", "oidc_provider", "lb_controller_role", "chart:aws-load-balancer-controller"] {
        let s = create.step(key).unwrap_or_else(|| panic!("{key} planned"));
        assert_eq!((s.phase, s.attempts), (StepPhase::Succeeded, 1), "{key}");
    }
    let role = b.sim.get_role(&lb_controller_role("demo")).await.unwrap().expect("controller role");
    let policies = b.sim.role_policies(&role.name).unwrap();
    assert_eq!(policies.inline_policies, [("aws-load-balancer-controller".to_string(), lb_controller_policy())]);
    assert!(
        policies.trust_policy.to_string().contains("system:serviceaccount:kube-system:aws-load-balancer-controller")
    );
    let values = b
        .sim
        .helm_release_values(&target(), AWS_LOAD_BALANCER_CONTROLLER.namespace, AWS_LOAD_BALANCER_CONTROLLER.release)
        .unwrap();
    assert_eq!(values["clusterName"], "demo");
    assert_eq!(values["region"], "us-east-1");
    assert!(values["vpcId"].as_str().unwrap().starts_with("vpc-"), "{values}");
    assert_eq!(values["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"], role.arn);
    let prom = b.sim.helm_release_values(&target(), PROMETHEUS.namespace, PROMETHEUS.release).unwrap();
    assert_eq!(prom["alertmanager"]["enabled"], false);

    // Autoscaled: Ready, scraped, and scaling with the (simulated) query's answer.
    let op = run(&b, OperationKind::DeployEndpoint, &autoscaled_endpoint()).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let get = |api: &str, kind: &str, ns: Option<&str>, name: &str| ObjectRef {
        api_version: api.into(),
        kind: kind.into(),
        namespace: ns.map(Into::into),
        name: name.into(),
    };
    let so = b.sim.get(&target(), &get("keda.sh/v1alpha1", "ScaledObject", Some("default"), "chat")).await.unwrap();
    let so = so.expect("ScaledObject chat").0;
    assert_eq!(so["status"]["conditions"][0]["status"], "True", "{so:#}");
    assert_eq!(
        so["spec"]["triggers"][0]["metadata"]["serverAddress"],
        "http://prometheus-server.monitoring.svc.cluster.local:80"
    );
    let d = b.sim.get(&target(), &get("apps/v1", "Deployment", Some("default"), "chat")).await.unwrap().unwrap().0;
    assert_eq!(d["spec"]["template"]["metadata"]["annotations"]["prometheus.io/scrape"], "true");
    assert_eq!(d["spec"]["replicas"], 1);
    b.sim.set_scaling_metric(&target(), "default", "chat", 9.0).unwrap();
    let d = b.sim.get(&target(), &get("apps/v1", "Deployment", Some("default"), "chat")).await.unwrap().unwrap().0;
    assert_eq!(d["spec"]["replicas"], 2, "ceil(9 / 5) replicas, no hand work");

    // load_balancer: the controller is there, the endpoint deploys and gets the NLB's address.
    let mut lb = autoscaled_endpoint();
    lb["params"]["name"] = json!("public");
    lb["params"].as_object_mut().unwrap().remove("autoscaling");
    lb["params"]["exposure"] = json!({ "type": "load_balancer" });
    // The endpoint preflight every face runs before a deploy (the server's routes call it).
    use instantstart_core::workflow::endpoints::{deploy_preflight, preflight_refusal};
    let checks = deploy_preflight(&b.sim, &target(), &lb["params"]).await.unwrap();
    let check = checks.iter().find(|c| c.check == "load_balancer_controller").expect("the controller check");
    assert_eq!(check.status, CheckStatus::Pass, "{check:?}");
    let op = run(&b, OperationKind::DeployEndpoint, &lb).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let hostname = || async {
        let svc = b.sim.get(&target(), &get("v1", "Service", Some("default"), "public")).await.unwrap().unwrap().0;
        svc.pointer("/status/loadBalancer/ingress/0/hostname").and_then(Value::as_str).map(str::to_string)
    };
    b.wait_until("the NLB to get an address", || async { hostname().await.is_some() }).await;
    let address = hostname().await;
    assert!(address.is_some_and(|h| h.ends_with(".elb.us-east-1.amazonaws.com")), "the NLB got an address");

    // Its Service goes while the controller runs, so the controller deletes the NLB with it
    // (uninstalling the controller first would leave the NLB in the VPC).
    let del = json!({ "cluster": "demo", "kind": "endpoint", "name": "public", "namespace": "default" });
    let op = run(&b, OperationKind::DeleteEndpoint, &del).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");

    // Without the controller: refused before anything is recorded, the remedy naming the step.
    b.sim
        .uninstall(&target(), AWS_LOAD_BALANCER_CONTROLLER.namespace, AWS_LOAD_BALANCER_CONTROLLER.release)
        .await
        .unwrap();
    let checks = deploy_preflight(&b.sim, &target(), &lb["params"]).await.unwrap();
    let v = preflight_refusal(&checks).expect("refused without the controller");
    assert_eq!(v.kind, ValidationKind::Unprocessable);
    assert_eq!(v.findings[0].field, "exposure");
    for part in
        ["chart:aws-load-balancer-controller", "aws-load-balancer-controller 3.5.0", "https://aws.github.io/eks-charts"]
    {
        assert!(v.findings[0].rule.contains(part), "{part:?} missing in {:?}", v.findings[0].rule);
    }

    // delete-cluster removes the releases (the controller's is already gone: done) and its role.
    let op = run(&b, OperationKind::DeleteCluster, &json!({ "name": "demo" })).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    for key in ["chart:prometheus", "chart:aws-load-balancer-controller", "lb_controller_role"] {
        assert_eq!(op.step(key).map(|s| s.phase), Some(StepPhase::Succeeded), "{key}");
    }
    assert_eq!(b.sim.get_role(&lb_controller_role("demo")).await.unwrap(), None);
}

/// A `LoadBalancer` Service handed to the AWS Load Balancer Controller that is not
/// InstantStart's (someone applied it by hand).
fn foreign_nlb_service(name: &str) -> instantstart_core::provider::KubeObject {
    instantstart_core::provider::KubeObject(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": name, "namespace": "default", "annotations": {
            "service.beta.kubernetes.io/aws-load-balancer-type": "external",
            "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal" } },
        "spec": { "type": "LoadBalancer", "selector": { "app": name }, "ports": [{ "port": 80 }] }
    }))
}

/// Delete-cluster with a live `load_balancer` endpoint: its Service is deleted, and waited for,
/// before the controller is uninstalled, so the NLB goes with it and the VPC is deleted
/// (EKS "Delete a cluster": delete the Services associated with a load balancer first). A
/// `LoadBalancer` Service that is not InstantStart's stops that step, untouched, until it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_cluster_with_a_load_balancer_endpoint_removes_its_service_before_the_controller() {
    use instantstart_core::provider::{NetworkApi, ResourceState};
    use instantstart_core::workflow::lb_controller::LB_SERVICES_STEP;
    let dir = tempfile::tempdir().unwrap();
    let b = on_sim(dir.path(), Arc::default());
    cluster(&b).await;
    let mut lb = autoscaled_endpoint();
    lb["params"]["name"] = json!("public");
    lb["params"].as_object_mut().unwrap().remove("autoscaling");
    lb["params"]["exposure"] = json!({ "type": "load_balancer" });
    let op = run(&b, OperationKind::DeployEndpoint, &lb).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    b.sim.advance(Duration::from_secs(120));
    let eps = instantstart_core::workflow::endpoints::list_endpoints(&b.sim, &target()).await.unwrap();
    let ep = eps.iter().find(|e| e.name == "public").expect("the endpoint");
    assert_eq!(ep.exposure, "load_balancer");
    assert!(ep.url.as_deref().is_some_and(|u| u.ends_with(".elb.us-east-1.amazonaws.com")), "{ep:?}");
    let vpc = b.store.get_cluster("demo").unwrap().unwrap().vpc_id.unwrap();

    // Someone else's LoadBalancer Service: the step needs attention and deletes nothing.
    let foreign = foreign_nlb_service("theirs");
    b.sim.apply(&target(), &foreign).await.unwrap();
    let s = b.engine.submit(OperationKind::DeleteCluster, &json!({ "name": "demo" }), user(), None).unwrap();
    let del = finish(&b, &s.operation).await;
    let step = del.step(LB_SERVICES_STEP).unwrap();
    assert_eq!(step.phase, StepPhase::NeedsAttention, "{step:?}");
    assert!(step.error.as_deref().unwrap().contains("default/theirs"), "{step:?}");
    for key in ["chart:aws-load-balancer-controller", "eks_cluster"] {
        assert_eq!(del.step(key).unwrap().phase, StepPhase::Pending, "{key}");
    }
    assert!(b.sim.get(&target(), &foreign.object_ref().unwrap()).await.unwrap().is_some(), "left alone");

    // Once the user deleted theirs, a retry deletes ours, then the controller goes, then the VPC.
    b.sim.delete(&target(), &foreign.object_ref().unwrap()).await.unwrap();
    b.engine.retry_step(&del.id, LB_SERVICES_STEP, user()).unwrap();
    let del = b.engine.wait(&del.id, WAIT).await.unwrap();
    assert_eq!(del.status, OperationStatus::Succeeded, "{del:#?}");
    let step = del.step(LB_SERVICES_STEP).unwrap();
    assert_eq!(step.outputs["deleted"], json!(["default/public"]));
    let uninstall = del.step("chart:aws-load-balancer-controller").unwrap();
    assert!(uninstall.depends_on.contains(&LB_SERVICES_STEP.to_string()));
    assert!(uninstall.started_at.unwrap() >= step.finished_at.unwrap(), "the controller went after the Services");
    assert!(b.sim.orphaned_load_balancers(&vpc).is_empty(), "no load balancer left in the VPC");
    match b.sim.describe_network("us-east-1", &vpc).await {
        Err(e) => assert_eq!(e.kind, ProviderErrorKind::NotFound, "{e}"),
        Ok(n) => assert_eq!(n.vpc.state, ResourceState::Deleting),
    }
    assert!(b.store.get_cluster("demo").unwrap().is_none());
}
