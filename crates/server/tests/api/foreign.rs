//! Foreign workloads (issue #18): jobs and endpoints someone else applied to a cluster through
//! its Kubernetes API are listed with `foreign: true`, can be read (details, pods, logs), and
//! every change of one is refused with 422 naming the field, before anything is recorded.

use super::*;
use instantstart_core::provider::{KubeObject, KubeTarget};

/// Objects another tool applied: no `app.kubernetes.io/managed-by=instantstart` label.
fn foreign_objects() -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
            "metadata": { "name": "legacy", "namespace": "default", "labels": { "team": "research" },
                          // The simulated training runs long: it is still running when read.
                          "annotations": { "sim.instantstart.io/duration-seconds": "1000000" } },
            "spec": { "replicaSpecs": [{ "name": "pods", "replicas": 2, "template": { "spec": { "containers": [{
                "name": "pytorch", "image": "pytorch/pytorch:2.5.1",
                "resources": { "limits": { "nvidia.com/gpu": 1 } }
            }] } } }] },
        }),
        json!({
            "apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
            "metadata": { "name": "their-llm", "namespace": "default" },
            "spec": { "modelName": "their-llm", "instanceType": "ml.g5.2xlarge", "replicas": 1,
                      "modelSourceConfig": { "modelSourceType": "s3", "modelLocation": "models/theirs" },
                      "worker": { "image": "vllm/vllm-openai:v0.11.0",
                                  "modelInvocationPort": { "containerPort": 8080 },
                                  "resources": { "limits": { "nvidia.com/gpu": 1 } } } },
        }),
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "tgi", "namespace": "default" },
            "spec": { "replicas": 1, "selector": { "matchLabels": { "app": "tgi" } },
                      "template": { "metadata": { "labels": { "app": "tgi" } },
                                    "spec": { "containers": [{ "name": "tgi",
                                        "image": "ghcr.io/huggingface/text-generation-inference:2.4.0" }] } } },
        }),
        // Not a model server: not an endpoint.
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "web", "namespace": "default" },
            "spec": { "replicas": 1, "selector": { "matchLabels": { "app": "web" } },
                      "template": { "metadata": { "labels": { "app": "web" } },
                                    "spec": { "containers": [{ "name": "web", "image": "nginx:1.27" }] } } },
        }),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_jobs_and_endpoints_are_listed_readable_and_never_changed() {
    let app = test_app(2000.0);
    create_ready(&app, "demo").await;
    let target = KubeTarget::new("us-east-1", "demo");
    for o in foreign_objects() {
        app.state().kube.apply(&target, &KubeObject(o)).await.unwrap();
    }

    // Listed, marked foreign, read from the real object and its pods.
    let jobs = app
        .get_until("/api/clusters/demo/jobs", |b| {
            b.as_array().unwrap().iter().any(|j| j["name"] == "legacy" && j["pods"]["running"] == 2)
        })
        .await;
    let legacy = jobs.as_array().unwrap().iter().find(|j| j["name"] == "legacy").unwrap();
    assert_eq!(
        (&legacy["foreign"], &legacy["runtime"], &legacy["replicas"], &legacy["phase"]),
        (&json!(true), &json!("hyperpod"), &json!(2), &json!("running")),
        "{legacy:#}"
    );
    let detail = app.get("/api/clusters/demo/jobs/legacy").await;
    assert_eq!(detail.status, StatusCode::OK, "{:#}", detail.body);
    assert_eq!(detail.body["foreign"], true);
    assert_eq!(detail.body["pod_list"].as_array().unwrap().len(), 2, "{:#}", detail.body);
    let logs = app.get("/api/clusters/demo/jobs/legacy/logs?tail=5").await;
    assert_eq!(logs.status, StatusCode::OK, "{:#}", logs.body);
    assert_eq!(logs.body["pod"], "legacy-pods-0");

    let eps = app.get_until("/api/clusters/demo/endpoints", |b| b.as_array().unwrap().len() == 2).await;
    let names: Vec<&str> = eps.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["tgi", "their-llm"], "the nginx Deployment is not an endpoint: {eps:#}");
    let by = |n: &str| eps.as_array().unwrap().iter().find(|e| e["name"] == n).unwrap().clone();
    let (tgi, theirs) = (by("tgi"), by("their-llm"));
    assert_eq!(
        (&tgi["foreign"], &tgi["route"], &tgi["engine"]),
        (&json!(true), &json!("self_managed"), &json!("custom"))
    );
    assert_eq!(
        (&theirs["foreign"], &theirs["route"], &theirs["engine"], &theirs["model"]),
        (&json!(true), &json!("managed"), &json!("managed"), &json!("models/theirs"))
    );
    let tgi_detail = app
        .get_until("/api/clusters/demo/endpoints/tgi", |b| b["pods"].as_array().is_some_and(|p| !p.is_empty()))
        .await;
    assert_eq!(tgi_detail["foreign"], true);

    // Every change is refused with 422 naming the field, and nothing is recorded.
    let before = app.get("/api/operations").await.body.as_array().unwrap().len();
    let refusals = [
        (Method::DELETE, "/api/clusters/demo/jobs/legacy", None, "job"),
        (Method::DELETE, "/api/clusters/demo/jobs/legacy?dry_run=true", None, "job"),
        (Method::DELETE, "/api/clusters/demo/endpoints/their-llm", None, "endpoint"),
        (Method::DELETE, "/api/clusters/demo/endpoints/tgi", None, "endpoint"),
        (Method::PATCH, "/api/clusters/demo/endpoints/tgi", Some(json!({ "replicas": 3 })), "endpoint"),
        (
            Method::PATCH,
            "/api/clusters/demo/endpoints/their-llm?dry_run=true",
            Some(json!({ "replicas": 2 })),
            "endpoint",
        ),
    ];
    for (method, uri, body, field) in refusals {
        let r = app.send(method.clone(), uri, body, &[]).await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{method} {uri}: {:#}", r.body);
        assert_eq!(r.body["findings"][0]["field"], field, "{uri}: {:#}", r.body);
        let rule = r.body["findings"][0]["rule"].as_str().unwrap_or_default();
        assert!(rule.contains("not created by InstantStart") && rule.contains("tool that created it"), "{rule}");
    }
    assert_eq!(app.get("/api/operations").await.body.as_array().unwrap().len(), before, "nothing recorded");
    // Still there, untouched.
    assert_eq!(app.get("/api/clusters/demo/jobs/legacy").await.status, StatusCode::OK);
    assert_eq!(app.get("/api/clusters/demo/endpoints/tgi").await.body["replicas"]["desired"], 1);
    // An unknown name is still a 404.
    let r = app.send(Method::DELETE, "/api/clusters/demo/jobs/nope", None, &[]).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:#}", r.body);
}
