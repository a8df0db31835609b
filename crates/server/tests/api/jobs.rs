//! Training jobs, shared storage and model downloads through the REST API on the simulated
//! cloud: dry runs show the rendered manifests, HyperPod and Ray jobs run (phase, pods,
//! recovery budget after an injected process fault), logs over HTTP and the WebSocket, delete
//! leaves nothing, and 404/409/400/422 answers name what is wrong.

use super::*;
use futures::StreamExt;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

fn cluster_body() -> Value {
    json!({
        "name": "demo",
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 4, "availability_zone": "us-east-1a" }
        ]}
    })
}

fn hyperpod_job(name: &str, nodes: u32) -> Value {
    json!({
        "runtime": "hyperpod",
        "job": { "name": name, "namespace": "default", "image": "pytorch/pytorch:2.5.1",
                 "instance_type": "ml.g5.2xlarge", "nodes": nodes },
        "recipe": { "kind": "torch", "script": "scripts/train.py" }
    })
}

fn ray_job(name: &str) -> Value {
    json!({
        "runtime": "ray",
        "ray_version": "2.49.0",
        "job": { "name": name, "namespace": "default", "image": "verlai/verl:v0.5.0",
                 "instance_type": "ml.g5.2xlarge", "nodes": 2 },
        "recipe": { "kind": "verl", "overrides": { "data.train_files": "data/gsm8k/train.parquet" } }
    })
}

fn fields(body: &Value) -> Vec<String> {
    body["findings"]
        .as_array()
        .map(|f| f.iter().map(|x| x["field"].as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

async fn cluster_ready(app: &Bed) {
    let r = app.send(Method::POST, "/api/clusters", Some(cluster_body()), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn training_jobs_submit_list_get_logs_follow_recover_and_delete() {
    let app = test_app(2000.0);
    // Unknown cluster: 404 for reads and submissions.
    assert_eq!(app.get("/api/clusters/nope/jobs").await.status, StatusCode::NOT_FOUND);
    let r = app.send(Method::POST, "/api/clusters/nope/jobs", Some(hyperpod_job("llama", 2)), &[]).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:#}", r.body);
    cluster_ready(&app).await;
    // Watch the workloads at a pace a poller can follow.
    app.state().sim.as_ref().unwrap().set_speed(20.0).unwrap();

    // Dry run: the rendered manifest and the steps, nothing applied.
    let r = app.send(Method::POST, "/api/clusters/demo/jobs?dry_run=true", Some(hyperpod_job("llama", 2)), &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{:#}", r.body);
    assert_eq!(r.body["dry_run"], true);
    assert_eq!(r.body["target"], "cluster/demo/job/llama");
    let manifest = &r.body["request"]["rendered"]["objects"][0];
    assert_eq!(manifest["kind"], "HyperPodPyTorchJob");
    assert_eq!(manifest["spec"]["replicaSpecs"][0]["replicas"], 2);
    let steps: Vec<&str> = r.body["steps"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(steps, ["apply:HyperPodPyTorchJob/llama", "ready"]);
    assert_eq!(app.get("/api/clusters/demo/jobs").await.body, json!([]));

    // Bad requests name their fields: 400 for shape and rules, 422 for what the cluster refuses.
    let mut bad = hyperpod_job("Bad_Name", 0);
    bad["recipe"]["script"] = json!("/etc/passwd");
    let r = app.send(Method::POST, "/api/clusters/demo/jobs", Some(bad), &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:#}", r.body);
    let f = fields(&r.body);
    for want in ["job.name", "job.nodes", "recipe.script"] {
        assert!(f.iter().any(|x| x == want), "{want} not in {f:?}");
    }
    let r = app.send(Method::POST, "/api/clusters/demo/jobs", Some(json!({"job": {}})), &[]).await;
    assert_eq!((r.status, fields(&r.body)), (StatusCode::BAD_REQUEST, vec!["runtime".to_string()]));
    let mut elsewhere = hyperpod_job("llama", 2);
    elsewhere["job"]["namespace"] = json!("team-a");
    let r = app.send(Method::POST, "/api/clusters/demo/jobs", Some(elsewhere), &[]).await;
    assert_eq!((r.status, fields(&r.body)), (StatusCode::UNPROCESSABLE_ENTITY, vec!["job.namespace".to_string()]));

    // System namespaces (Kubernetes' own, the operators') are refused for workloads, naming the
    // field; a `?namespace=` that is not a namespace name is a 400 before the cluster is asked.
    for ns in ["kube-system", "kube-node-lease", "aws-hyperpod", "keda"] {
        let mut system = hyperpod_job("llama", 2);
        system["job"]["namespace"] = json!(ns);
        let r = app.send(Method::POST, "/api/clusters/demo/jobs", Some(system), &[]).await;
        assert!(matches!(r.status, StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY), "{ns}: {:#}", r.body);
        let findings = r.body["findings"].as_array().unwrap();
        assert!(
            findings
                .iter()
                .any(|f| f["field"] == "job.namespace" && f["rule"].as_str().unwrap().contains("system namespace")),
            "{ns}: {:#}",
            r.body
        );
    }
    for uri in ["/api/clusters/demo/jobs?namespace=Not_A_Namespace", "/api/clusters/demo/jobs/llama?namespace=-x"] {
        let r = app.get(uri).await;
        assert_eq!((r.status, fields(&r.body)), (StatusCode::BAD_REQUEST, vec!["namespace".to_string()]), "{uri}");
    }

    // Submit a HyperPod job and a Ray job.
    let r = app.send(Method::POST, "/api/clusters/demo/jobs", Some(hyperpod_job("llama", 2)), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    assert_eq!(r.body["workload"], json!({"name": "llama", "namespace": "default"}));
    assert_eq!(r.body["operation"]["kind"], "submit_job");
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    let r = app.send(Method::POST, "/api/clusters/demo/jobs", Some(ray_job("grpo")), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    // The same name again is a conflict, recorded nowhere.
    let r = app.send(Method::POST, "/api/clusters/demo/jobs", Some(hyperpod_job("llama", 2)), &[]).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{:#}", r.body);

    let jobs = app.get("/api/clusters/demo/jobs").await;
    assert_eq!(jobs.status, StatusCode::OK);
    let runtimes: Vec<(&str, &str)> = jobs
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|j| (j["name"].as_str().unwrap(), j["runtime"].as_str().unwrap()))
        .collect();
    assert!(runtimes.contains(&("llama", "hyperpod")) && runtimes.contains(&("grpo", "ray")), "{runtimes:?}");

    // The HyperPod job runs: both pods, its recovery budget (3 in place per window, 1 full restart).
    // (Pod lists may come from the adapter's watch cache, a moment behind the job's status.)
    let detail =
        app.get_until("/api/clusters/demo/jobs/llama", |j| j["phase"] == "running" && j["pods"]["running"] == 2).await;
    assert_eq!(detail["recovery"], json!({"budget": 7, "used": 0, "remaining": 7}));
    assert_eq!(detail["recipe"], "torch");
    assert_eq!(detail["pod_list"].as_array().unwrap().len(), 2);
    assert_eq!(detail["manifest"][0]["kind"], "HyperPodPyTorchJob");
    assert!(detail["conditions"].as_array().unwrap().iter().any(|c| c["type"] == "Running" && c["status"] == "True"));

    // GPU capacity: the job's two pods hold a GPU on two nodes, named on each; the read is
    // tagged like every JSON read; an unknown cluster is a 404.
    let cap = app
        .get_until("/api/clusters/demo/capacity", |c| {
            c["node_list"].as_array().is_some_and(|nodes| {
                nodes.iter().filter(|n| n["workloads"].as_array().unwrap().iter().any(|w| w["name"] == "llama")).count()
                    == 2
            })
        })
        .await;
    assert_eq!((cap["cluster"].clone(), cap["nodes"].clone()), (json!("demo"), json!(4)));
    assert_eq!(cap["health"], json!({"healthy": 4}));
    assert_eq!(cap["accelerators"]["gpus"]["total"], 4);
    // The numbers add up on every node: total = allocated + free + unavailable (the simulated
    // scheduler places a GPU pod only where the GPUs it asks for are free).
    let mut allocated = 0;
    for node in cap["node_list"].as_array().unwrap() {
        let g = &node["accelerators"]["gpus"];
        let n = |k: &str| g[k].as_u64().unwrap();
        assert_eq!(n("allocated") + n("free") + n("unavailable"), n("total"), "{node:#}");
        allocated += n("allocated");
    }
    assert_eq!(cap["accelerators"]["gpus"]["allocated"].as_u64(), Some(allocated), "the cluster sums its nodes");
    let on_llama: Vec<&Value> = cap["node_list"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["workloads"].as_array().unwrap())
        .filter(|w| w["name"] == "llama")
        .collect();
    assert!(on_llama.iter().all(|w| w["kind"] == "training" && w["ours"] == true && w["gpus"] == 1), "{on_llama:?}");
    assert_eq!(cap["instance_groups"][0]["name"], "workers");
    let tagged = app.get("/api/clusters/demo/capacity").await;
    assert!(tagged.headers.contains_key(header::ETAG));
    assert_eq!(app.get("/api/clusters/nope/capacity").await.status, StatusCode::NOT_FOUND);

    // Logs: rank 0 by default, another pod on request.
    let logs = app
        .get_until("/api/clusters/demo/jobs/llama/logs?tail=5", |l| {
            l["lines"].as_array().is_some_and(|x| !x.is_empty())
        })
        .await;
    assert_eq!(logs["pod"], "llama-workers-0");
    assert!(logs["lines"].as_array().unwrap().len() <= 5);
    let other = app.get("/api/clusters/demo/jobs/llama/logs?pod=llama-workers-1&tail=2").await;
    assert_eq!((other.status, &other.body["pod"]), (StatusCode::OK, &json!("llama-workers-1")), "{:#}", other.body);
    let r = app.get("/api/clusters/demo/jobs/llama/logs?pod=someone-else").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:#}", r.body);

    // Follow the log over the WebSocket: JSON frames {pod, line}.
    let port = app.port();
    let mut req =
        format!("ws://127.0.0.1:{port}/api/clusters/demo/jobs/llama/logs/stream?tail=3").into_client_request().unwrap();
    req.headers_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let mut got = Vec::new();
    while got.len() < 4 {
        let msg = tokio::time::timeout(Duration::from_secs(20), ws.next()).await.expect("a log line").unwrap().unwrap();
        let Message::Text(text) = msg else { continue };
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["pod"], "llama-workers-0", "{v}");
            got.push(v["line"].as_str().unwrap().to_string());
        }
    }
    drop(ws);
    // The stream refuses other sites and missing jobs before upgrading.
    let mut req =
        format!("ws://127.0.0.1:{port}/api/clusters/demo/jobs/llama/logs/stream").into_client_request().unwrap();
    req.headers_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    req.headers_mut().insert("origin", "https://evil.example".parse().unwrap());
    assert!(tokio_tungstenite::connect_async(req).await.is_err());
    let missing = app.get("/api/clusters/demo/jobs/nothing/logs/stream").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    // A process fault: the operator restarts in place and the budget shows it.
    let r =
        app.send(Method::PUT, "/api/sim/faults", Some(json!({ "process_faults": [{ "job": "llama" }] })), &[]).await;
    assert!(r.status.is_success(), "{:#}", r.body);
    let recovered = app.get_until("/api/clusters/demo/jobs/llama", |j| j["recovery"]["used"] == 1).await;
    assert_eq!(recovered["recovery"], json!({"budget": 7, "used": 1, "remaining": 6}), "{recovered:#}");
    assert!(["restarting", "running"].contains(&recovered["phase"].as_str().unwrap()), "{recovered:#}");

    // Delete: 202 delete_job, then nothing of the job is left.
    let r = app.send(Method::DELETE, "/api/clusters/demo/jobs/llama?dry_run=true", None, &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{:#}", r.body);
    let key = [("idempotency-key", "rm-llama")];
    let r = app.send(Method::DELETE, "/api/clusters/demo/jobs/llama", None, &key).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    assert_eq!(r.body["operation"]["kind"], "delete_job");
    assert_eq!(r.body["workload"], json!({"name": "llama", "namespace": "default"}));
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    // Replaying the delete with the same key returns the same operation, though the job is gone.
    let again = app.send(Method::DELETE, "/api/clusters/demo/jobs/llama", None, &key).await;
    assert_eq!((again.status, &again.body["replayed"]), (StatusCode::ACCEPTED, &json!(true)), "{:#}", again.body);
    assert_eq!(again.body["operation"]["id"], r.body["operation"]["id"]);
    assert_eq!(app.get("/api/clusters/demo/jobs/llama").await.status, StatusCode::NOT_FOUND);
    use instantstart_core::provider::{KubeTarget, ListParams};
    let target = KubeTarget::new("us-east-1", "demo");
    for (api_version, kind) in [("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob"), ("v1", "Pod")] {
        let left = instantstart_core::provider::KubeApi::list(
            app.state().kube.as_ref(),
            &target,
            &ListParams {
                api_version: api_version.into(),
                kind: kind.into(),
                namespace: None,
                labels: vec![("app.kubernetes.io/instance".into(), "llama".into())],
            },
        )
        .await
        .unwrap();
        assert!(left.is_empty(), "{kind}: {left:?}");
    }
    for (method, uri) in [
        (Method::DELETE, "/api/clusters/demo/jobs/llama"),
        (Method::GET, "/api/clusters/demo/jobs/llama/logs"),
        (Method::GET, "/api/clusters/nope/jobs/llama"),
    ] {
        let r = app.send(method, uri, None, &[]).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{uri}: {:#}", r.body);
        assert_eq!(r.headers[header::CONTENT_TYPE], "application/problem+json");
    }
    // The Ray job is still there.
    let ray = app.get("/api/clusters/demo/jobs/grpo").await;
    assert_eq!((ray.status, &ray.body["runtime"]), (StatusCode::OK, &json!("ray")), "{:#}", ray.body);
    assert_eq!(ray.body["recovery"], Value::Null);

    // A followed job that finishes ends the stream with an end frame, and its phase is succeeded.
    let r = app.send(Method::POST, "/api/clusters/demo/jobs", Some(hyperpod_job("short", 1)), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    app.get_until("/api/clusters/demo/jobs/short/logs", |l| l["lines"].as_array().is_some_and(|x| !x.is_empty())).await;
    let mut req =
        format!("ws://127.0.0.1:{port}/api/clusters/demo/jobs/short/logs/stream?tail=1").into_client_request().unwrap();
    req.headers_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    app.state().sim.as_ref().unwrap().set_speed(2000.0).unwrap();
    let end = loop {
        let msg = tokio::time::timeout(Duration::from_secs(20), ws.next()).await.expect("a frame").unwrap().unwrap();
        let Message::Text(text) = msg else { continue };
        let v: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        if v["end"] == true {
            break v;
        }
    };
    assert!(end["reason"].as_str().unwrap().contains("ended"), "{end}");
    let done = app.get_until("/api/clusters/demo/jobs/short", |j| j["phase"] == "succeeded").await;
    assert_eq!(done["recovery"]["used"], 0, "{done:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_listing_and_model_downloads() {
    let app = test_app(2000.0);
    assert_eq!(app.get("/api/clusters/nope/storage").await.status, StatusCode::NOT_FOUND);
    cluster_ready(&app).await;

    let storage = app.get("/api/clusters/demo/storage").await;
    assert_eq!(storage.status, StatusCode::OK, "{:#}", storage.body);
    let s = &storage.body[0];
    assert_eq!(s["claim"], "default/s3-shared");
    assert_eq!(s["mount_path"], "/s3");
    assert_eq!(s["status"], "Bound");
    assert!(s["bucket"].as_str().is_some_and(|b| !b.is_empty()), "{s:#}");
    assert!(s["entries"].is_array());

    // A download: the dry run shows the Job, the operation completes when the Job does.
    let body = json!({ "namespace": "default", "repo_id": "Qwen/Qwen3-0.6B" });
    let r = app.send(Method::POST, "/api/clusters/demo/downloads?dry_run=true", Some(body.clone()), &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{:#}", r.body);
    let job = &r.body["request"]["rendered"]["objects"][0];
    assert_eq!(job["kind"], "Job");
    let r = app
        .send(Method::POST, "/api/clusters/demo/downloads", Some(body.clone()), &[("idempotency-key", "dl-1")])
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    let name = r.body["workload"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("download-qwen-qwen3-0-6b-"), "{name}");
    assert_eq!(r.body["operation"]["kind"], "download_model");
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    // The same key and body replays the operation.
    let again =
        app.send(Method::POST, "/api/clusters/demo/downloads", Some(body), &[("idempotency-key", "dl-1")]).await;
    assert_eq!((again.status, &again.body["replayed"]), (StatusCode::ACCEPTED, &json!(true)));
    assert_eq!(again.body["workload"]["name"], name.as_str());

    let downloads = app.get("/api/clusters/demo/downloads").await;
    let d = &downloads.body[0];
    assert_eq!((d["name"].as_str(), &d["phase"]), (Some(name.as_str()), &json!("succeeded")), "{d:#}");
    assert_eq!(d["repo_id"], "Qwen/Qwen3-0.6B");
    assert_eq!(d["destination"], "models/Qwen/Qwen3-0.6B");

    // The files landed in the shared bucket.
    let top = app.get("/api/clusters/demo/storage/objects").await;
    assert_eq!(top.status, StatusCode::OK, "{:#}", top.body);
    assert!(top.body["entries"].as_array().unwrap().iter().any(|e| e["key"] == "models/" && e["kind"] == "prefix"));
    let files = app.get("/api/clusters/demo/storage/objects?prefix=models/Qwen/Qwen3-0.6B/").await;
    let entries = files.body["entries"].as_array().unwrap();
    assert!(
        entries.iter().any(|e| e["key"] == "models/Qwen/Qwen3-0.6B/config.json" && e["size_bytes"].as_u64() > Some(0)),
        "{entries:#?}"
    );

    // Delete the download: a delete_download operation removes its Job and pods; the files stay.
    let one = format!("/api/clusters/demo/downloads/{name}");
    let r = app.send(Method::DELETE, "/api/clusters/demo/downloads/download-nope", None, &[]).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:#}", r.body);
    assert_eq!(r.headers[header::CONTENT_TYPE], "application/problem+json");
    let r = app.send(Method::DELETE, "/api/clusters/demo/downloads/Not_A_Name", None, &[]).await;
    assert_eq!((r.status, fields(&r.body)), (StatusCode::BAD_REQUEST, vec!["name".to_string()]));
    let dry = app.send(Method::DELETE, &format!("{one}?dry_run=true"), None, &[]).await;
    assert_eq!(dry.status, StatusCode::OK, "{:#}", dry.body);
    let keys: Vec<&str> = dry.body["steps"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["delete:Job", "gone"]);
    let key = [("idempotency-key", "rm-dl-1")];
    let r = app.send(Method::DELETE, &one, None, &key).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    assert_eq!(r.body["operation"]["kind"], "delete_download");
    assert_eq!(r.body["workload"], json!({ "name": name.as_str(), "namespace": "default" }));
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    assert_eq!(app.get("/api/clusters/demo/downloads").await.body, json!([]));
    use instantstart_core::provider::{KubeTarget, ListParams};
    let target = {
        let rec = app.state().store.get_cluster("demo").unwrap().unwrap();
        KubeTarget::new(rec.region, rec.eks_cluster)
    };
    for (api_version, kind) in [("batch/v1", "Job"), ("v1", "Pod")] {
        let params = ListParams {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: None,
            labels: vec![("app.kubernetes.io/instance".into(), name.clone())],
        };
        let left = app.state().kube.list(&target, &params).await.unwrap();
        assert!(left.is_empty(), "{kind} left behind: {left:?}");
    }
    let kept = app.get("/api/clusters/demo/storage/objects?prefix=models/Qwen/Qwen3-0.6B/").await;
    assert!(
        kept.body["entries"].as_array().unwrap().iter().any(|e| e["key"] == "models/Qwen/Qwen3-0.6B/config.json"),
        "the downloaded files stay in the bucket: {:#}",
        kept.body
    );
    // Replaying the delete with the same key returns the same operation, though the Job is gone.
    let again = app.send(Method::DELETE, &one, None, &key).await;
    assert_eq!((again.status, &again.body["replayed"]), (StatusCode::ACCEPTED, &json!(true)), "{:#}", again.body);
    assert_eq!(again.body["operation"]["id"], r.body["operation"]["id"]);
    assert_eq!(app.send(Method::DELETE, &one, None, &[]).await.status, StatusCode::NOT_FOUND);

    // A folder larger than a page is listed page by page (review #25: nothing silently left
    // out): the cursor of one page continues it, the last page has none, every entry comes once.
    let bucket = app.state().store.get_cluster("demo").unwrap().unwrap().bucket.unwrap();
    let total = instantstart_core::provider::LIST_OBJECTS_LIMIT + 7;
    for i in 0..total {
        let put = instantstart_core::provider::PutObject {
            bucket: bucket.clone(),
            key: format!("many/f{i:05}"),
            body: b"x".to_vec(),
            content_type: "text/plain".into(),
        };
        app.state().aws.put_object(&put).await.unwrap();
    }
    let mut keys: Vec<String> = Vec::new();
    let mut uri = "/api/clusters/demo/storage/objects?prefix=many/".to_string();
    let mut pages = 0;
    let last_cursor = loop {
        let page = app.get(&uri).await;
        assert_eq!(page.status, StatusCode::OK, "{:#}", page.body);
        keys.extend(page.body["entries"].as_array().unwrap().iter().map(|e| e["key"].as_str().unwrap().to_string()));
        pages += 1;
        match page.body["next_cursor"].as_str() {
            Some(c) => uri = format!("/api/clusters/demo/storage/objects?prefix=many/&cursor={c}"),
            None => break uri,
        }
    };
    assert_eq!((pages, keys.len()), (2, total));
    assert_eq!(keys, (0..total).map(|i| format!("many/f{i:05}")).collect::<Vec<_>>());
    // A cursor of another prefix, or not a cursor at all, is a 400 naming `cursor`.
    let cursor = last_cursor.split("cursor=").nth(1).unwrap();
    for bad in [format!("prefix=models/&cursor={cursor}"), "prefix=many/&cursor=nonsense".to_string()] {
        let r = app.get(&format!("/api/clusters/demo/storage/objects?{bad}")).await;
        assert_eq!((r.status, fields(&r.body)), (StatusCode::BAD_REQUEST, vec!["cursor".to_string()]), "{bad}");
    }

    // Bad input names its field.
    let r = app.get("/api/clusters/demo/storage/objects?prefix=/etc/").await;
    assert_eq!((r.status, fields(&r.body)), (StatusCode::BAD_REQUEST, vec!["prefix".to_string()]));
    let r = app
        .send(
            Method::POST,
            "/api/clusters/demo/downloads",
            Some(json!({ "namespace": "default", "repo_id": "no good" })),
            &[],
        )
        .await;
    assert_eq!((r.status, fields(&r.body)), (StatusCode::BAD_REQUEST, vec!["repo_id".to_string()]));
    let r = app.send(Method::POST, "/api/clusters/demo/downloads", Some(json!({ "repo_id": "a/b" })), &[]).await;
    assert_eq!((r.status, fields(&r.body)), (StatusCode::BAD_REQUEST, vec!["namespace".to_string()]));
}
