//! Training end to end on the simulated cloud, through the REST API only: every recipe is
//! submitted (plain PyTorch script, LLaMA-Factory and MS-Swift on the HyperPod training
//! operator, VERL on KubeRay), its log is followed over the WebSocket until training steps
//! arrive (the numbers are the simulated training curve), a process fault injected through
//! `/api/sim/faults` shows in the job's recovery budget, a job with no budget fails, a model
//! download fills the shared bucket, and deleting every job leaves no object or pod behind.

use super::{TOKEN, create_ready_with_nodes, test_app};
use axum::http::{Method, StatusCode};
use futures::StreamExt;
use instantstart_core::provider::{KubeApi, ListParams};
use instantstart_testkit::{Bed, admin};
use serde_json::{Value, json};
use std::time::Duration;

const JOBS: &str = "/api/clusters/demo/jobs";

fn job(name: &str, runtime: &str, recipe: Value, extra: Value) -> Value {
    let image = if runtime == "ray" {
        "rayproject/ray:2.49.0-py311-gpu"
    } else {
        "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
    };
    let mut v = json!({
        "runtime": runtime,
        "job": { "name": name, "namespace": "default", "image": image, "instance_type": "ml.g5.2xlarge", "nodes": 2 },
        "recipe": recipe,
    });
    v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    v
}

fn recipes() -> Vec<(&'static str, Value)> {
    vec![
        (
            "torch-job",
            job(
                "torch-job",
                "hyperpod",
                json!({ "kind": "torch", "script": "scripts/train.py", "args": ["--epochs", "3"] }),
                json!({}),
            ),
        ),
        (
            "lf-job",
            job(
                "lf-job",
                "hyperpod",
                json!({ "kind": "llama_factory", "config": "configs/qwen3_lora_sft.yaml", "overrides": { "learning_rate": "1e-4" } }),
                json!({}),
            ),
        ),
        (
            "swift-job",
            job(
                "swift-job",
                "hyperpod",
                json!({ "kind": "ms_swift", "command": "sft", "config": "configs/swift_sft.yaml" }),
                // No recovery budget at all: the first fault fails the job.
                json!({ "resilience": { "restart_policy": { "restarts_before_full_job_restart": 0, "max_full_job_restarts": 0 } } }),
            ),
        ),
        (
            "verl-job",
            job(
                "verl-job",
                "ray",
                json!({ "kind": "verl", "overrides": { "data.train_files": "/s3/data/gsm8k/train.parquet" } }),
                json!({ "ray_version": "2.49.0" }),
            ),
        ),
    ]
}

/// Polls a job until `done` holds (simulated time runs while it waits).
async fn job_until(app: &Bed, name: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let uri = format!("{JOBS}/{name}");
    let wait = format!("{name} to become {what}");
    app.call_until(&wait, || admin(Method::GET, &uri, None), |r| r.status == StatusCode::OK && done(&r.body)).await.body
}

/// Follows a job's log over the WebSocket until `n` training steps arrived; returns them as
/// (step, loss, throughput), checking each against the simulated curve.
async fn follow_steps(port: u16, job: &str, n: usize) -> Vec<(u64, f64, f64)> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = format!("ws://127.0.0.1:{port}{JOBS}/{job}/logs/stream?tail=100").into_client_request().unwrap();
    req.headers_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut steps = Vec::new();
    let mut pod = None;
    while steps.len() < n {
        let msg = tokio::time::timeout_at(deadline, ws.next())
            .await
            .unwrap_or_else(|_| panic!("{job}: no {n} steps within 60 s, got {steps:?}"))
            .expect("the stream stays open while the job runs")
            .unwrap();
        let Ok(text) = msg.to_text() else { continue };
        // Frames are newline-delimited JSON.
        for doc in text.lines() {
            let v: Value = serde_json::from_str(doc).unwrap_or(Value::Null);
            assert!(v["end"] != true, "{job}: the stream ended before {n} steps: {v}");
            if let Some(line) = v["line"].as_str()
                && let Some(step) = instantstart_sim::parse_training_log_line(line)
            {
                pod.get_or_insert_with(|| v["pod"].as_str().unwrap().to_string());
                assert_eq!((step.1, step.2), instantstart_sim::training_curve(job, step.0), "{job}: {line}");
                steps.push(step);
            }
        }
    }
    let _ = ws.close(None).await;
    assert!(steps.windows(2).all(|w| w[1].0 == w[0].0 + 1), "{job}: consecutive steps {steps:?}");
    steps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn training_recipes_logs_recovery_budget_downloads_and_delete_on_the_sim() {
    let app = test_app(2000.0);
    // Four jobs of two nodes run at once: a GPU each.
    create_ready_with_nodes(&app, "demo", 8).await;
    let sim = app.state().sim.clone().expect("the sim provider");
    // Watch the jobs at a pace a poller follows: a step every 0.25 s, a pod start in 0.75 s.
    sim.set_speed(40.0).unwrap();
    let port = app.port();

    // Submit every recipe; the operation returns the real object name.
    for (name, body) in recipes() {
        let r = app.send(Method::POST, JOBS, Some(body), &[]).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{name}: {:#}", r.body);
        assert_eq!(r.body["workload"]["name"], name, "{:#}", r.body);
        let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
        assert_eq!(done["status"], "succeeded", "{name}: {done:#}");
    }
    let list = app.get(JOBS).await.body;
    let mut seen: Vec<(String, String, String)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["name"].as_str().unwrap().into(),
                j["runtime"].as_str().unwrap().into(),
                j["recipe"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    seen.sort();
    let expect = |n: &str, r: &str, k: &str| (n.to_string(), r.to_string(), k.to_string());
    assert_eq!(
        seen,
        [
            expect("lf-job", "hyperpod", "llama-factory"),
            expect("swift-job", "hyperpod", "ms-swift"),
            expect("torch-job", "hyperpod", "torch"),
            expect("verl-job", "ray", "verl"),
        ]
    );

    // Every job runs and logs training steps on the curve, followed over the WebSocket.
    for (name, _) in recipes() {
        let running = job_until(&app, name, "running", |j| j["phase"] == "running").await;
        assert_eq!(running["replicas"], 2, "{running:#}");
        let steps = follow_steps(port, name, 3).await;
        assert!(steps[0].1 > 0.0 && steps[0].2 > 0.0, "{steps:?}");
    }
    let torch = app.get(&format!("{JOBS}/torch-job")).await.body;
    assert_eq!(torch["recovery"], json!({ "budget": 7, "used": 0, "remaining": 7 }), "{torch:#}");
    let pods_before: Vec<Value> = torch["pod_list"].as_array().unwrap().clone();
    assert_eq!(pods_before.len(), 2);
    assert!(app.get(&format!("{JOBS}/verl-job")).await.body["recovery"].is_null(), "Ray jobs have no HyperPod budget");

    // A process fault: the job restarts in place (same pods) and one unit of the budget is used.
    let r = app
        .send(Method::PUT, "/api/sim/faults", Some(json!({ "process_faults": [{ "job": "torch-job" }] })), &[])
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:#}", r.body);
    let after = job_until(&app, "torch-job", "charged for the fault", |j| j["recovery"]["used"] == 1).await;
    assert_eq!(after["recovery"], json!({ "budget": 7, "used": 1, "remaining": 6 }), "{after:#}");
    let names = |j: &Value| j["pod_list"].as_array().unwrap().iter().map(|p| p["name"].clone()).collect::<Vec<_>>();
    assert_eq!(names(&after), names(&torch), "restarted in place");
    let back = job_until(&app, "torch-job", "running again", |j| j["phase"] == "running").await;
    assert_eq!(back["recovery"]["used"], 1);
    let log = app.get(&format!("{JOBS}/torch-job/logs?tail=500")).await.body;
    assert!(
        log["lines"].as_array().unwrap().iter().any(|l| l.as_str().unwrap().contains("worker process failed")),
        "{log:#}"
    );

    // No budget: the first fault fails the job, with the operator's reason.
    let r = app.send(Method::PUT, "/api/sim/faults", Some(json!({ "process_faults": [{ "job": "swift-job", "reason": "CUDA error: an illegal memory access was encountered" }] })), &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    let failed = job_until(&app, "swift-job", "failed", |j| j["phase"] == "failed").await;
    assert_eq!(failed["recovery"], json!({ "budget": 0, "used": 0, "remaining": 0 }), "{failed:#}");
    assert!(failed["message"].as_str().unwrap_or("").contains("illegal memory access"), "{failed:#}");

    // A model download lands in the shared bucket.
    let r = app
        .send(
            Method::POST,
            "/api/clusters/demo/downloads",
            Some(json!({ "namespace": "default", "repo_id": "Qwen/Qwen3-0.6B" })),
            &[],
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    let listing = app
        .get_until("/api/clusters/demo/storage/objects?prefix=models/Qwen/Qwen3-0.6B/", |l| {
            l["entries"].as_array().is_some_and(|e| !e.is_empty())
        })
        .await;
    let entries = listing["entries"].as_array().unwrap_or_else(|| panic!("{listing:#}"));
    let weights = entries.iter().find(|e| e["key"] == "models/Qwen/Qwen3-0.6B/model.safetensors").expect("weights");
    assert!(weights["size_bytes"].as_u64().unwrap() > 1_000_000_000, "{weights}");

    // Deleting every job leaves nothing: no job, no pod.
    for (name, _) in recipes() {
        let r = app.send(Method::DELETE, &format!("{JOBS}/{name}"), None, &[]).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{name}: {:#}", r.body);
        let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
        assert_eq!(done["status"], "succeeded", "{name}: {done:#}");
        assert_eq!(app.get(&format!("{JOBS}/{name}")).await.status, StatusCode::NOT_FOUND);
    }
    assert_eq!(app.get(JOBS).await.body, json!([]));
    let target = instantstart_core::provider::KubeTarget::new("us-east-1", "demo");
    let pods = sim
        .list(&target, &ListParams { api_version: "v1".into(), kind: "Pod".into(), namespace: None, labels: vec![] })
        .await
        .unwrap();
    let left: Vec<&str> = pods.iter().filter_map(|p| p.0.pointer("/metadata/name").and_then(Value::as_str)).collect();
    assert!(left.iter().all(|n| n.starts_with("download-")), "only the finished download's pod may remain: {left:?}");
}
