//! FSx for Lustre volumes mounted by name through the REST API on the simulated cloud: a
//! training job, a download and an endpoint name the cluster's volume `scratch`; the rendering
//! mounts its claim `fsx-scratch`, an unknown volume (or one named before it exists) is a 422
//! naming `volumes[i].name` before anything is recorded, and a download into the volume writes
//! nothing to the shared bucket.

use super::*;

const FSX: &str = "/api/clusters/demo/storage/fsx";

fn job(name: &str, volumes: Value) -> Value {
    json!({
        "runtime": "hyperpod",
        "job": { "name": name, "namespace": "default", "image": "pytorch/pytorch:2.5.1",
                 "instance_type": "ml.g5.2xlarge", "nodes": 1, "volumes": volumes },
        "recipe": { "kind": "torch", "script": "scripts/train.py" },
    })
}

/// The pod spec of the first object of a dry run's rendering that has one.
fn pod_spec(dry: &Value) -> Value {
    let objects = dry["request"]["rendered"]["objects"].as_array().unwrap();
    objects
        .iter()
        .find_map(|o| {
            o.pointer("/spec/replicaSpecs/0/template/spec").or_else(|| o.pointer("/spec/template/spec")).cloned()
        })
        .unwrap_or_else(|| panic!("no pod template in {dry:#}"))
}

fn finding(body: &Value, field: &str) -> String {
    body["findings"]
        .as_array()
        .and_then(|f| f.iter().find(|x| x["field"] == field))
        .and_then(|x| x["rule"].as_str())
        .unwrap_or_else(|| panic!("no finding on {field}: {body:#}"))
        .to_string()
}

#[tokio::test]
async fn jobs_downloads_and_endpoints_mount_a_volume_by_name() {
    let app = test_app(2000.0);
    create_ready(&app, "demo").await;
    let jobs = "/api/clusters/demo/jobs";

    // Before the volume exists: 422 on the field, nothing recorded.
    let before = app.get("/api/operations").await.body.as_array().unwrap().len();
    let r = app.send(Method::POST, jobs, Some(job("early", json!([{ "name": "scratch" }]))), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);
    assert!(finding(&r.body, "job.volumes[0].name").contains("has no FSx volume"), "{:#}", r.body);
    assert_eq!(app.get("/api/operations").await.body.as_array().unwrap().len(), before);
    // A malformed entry is a 400 before the cluster is read.
    let r = app.send(Method::POST, jobs, Some(job("bad", json!([{ "name": "Scratch" }]))), &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:#}", r.body);
    finding(&r.body, "job.volumes[0].name");

    run(&app, Method::POST, FSX, Some(json!({ "name": "scratch" }))).await;

    // Another name: 422 listing the volumes the cluster has.
    let r = app.send(Method::POST, jobs, Some(job("other", json!([{ "name": "data" }]))), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);
    assert!(finding(&r.body, "job.volumes[0].name").contains("it has: scratch"), "{:#}", r.body);

    // The job mounts the claim at /fsx/scratch beside the bucket, and runs.
    let body = job("train", json!([{ "name": "scratch" }]));
    let dry = app.send(Method::POST, &format!("{jobs}?dry_run=true"), Some(body.clone()), &[]).await;
    assert_eq!(dry.status, StatusCode::OK, "{:#}", dry.body);
    let spec = pod_spec(&dry.body);
    assert!(
        spec["volumes"].as_array().unwrap().iter().any(|v| v["persistentVolumeClaim"]["claimName"] == "fsx-scratch"),
        "{spec:#}"
    );
    let mounts = spec["containers"][0]["volumeMounts"].as_array().unwrap();
    assert!(mounts.iter().any(|m| m["name"] == "fsx-scratch" && m["mountPath"] == "/fsx/scratch"), "{mounts:#?}");
    assert!(mounts.iter().any(|m| m["mountPath"] == "/s3"), "the bucket stays mounted: {mounts:#?}");
    assert_eq!(dry.body["request"]["request"]["context"]["file_systems"][0]["claim"], "fsx-scratch", "{:#}", dry.body);
    run(&app, Method::POST, jobs, Some(body)).await;
    // The job's view lists what its pods mount, read from the job object.
    let volumes = app.get(&format!("{jobs}/train")).await.body["volumes"].clone();
    let fsx = volumes.as_array().unwrap().iter().find(|v| v["volume"] == "scratch").expect("the FSx volume is listed");
    assert_eq!(
        (&fsx["mount_path"], &fsx["kind"], &fsx["claim"], &fsx["read_only"]),
        (&json!("/fsx/scratch"), &json!("fsx_lustre"), &json!("fsx-scratch"), &json!(false)),
        "{volumes:#}"
    );
    assert!(volumes.as_array().unwrap().iter().any(|v| v["kind"] == "s3" && v["mount_path"] == "/s3"), "{volumes:#}");

    // A download into the volume: the files land there, not in the bucket.
    let dl = json!({ "namespace": "default", "repo_id": "Qwen/Qwen3-0.6B", "volume": "scratch" });
    let dry = app.send(Method::POST, "/api/clusters/demo/downloads?dry_run=true", Some(dl.clone()), &[]).await;
    assert_eq!(dry.status, StatusCode::OK, "{:#}", dry.body);
    let env = pod_spec(&dry.body)["containers"][0]["env"].clone();
    assert!(
        env.as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "DESTINATION" && e["value"] == "/fsx/scratch/models/Qwen/Qwen3-0.6B"),
        "{env:#}"
    );
    run(&app, Method::POST, "/api/clusters/demo/downloads", Some(dl)).await;
    let files = app.get("/api/clusters/demo/storage/objects?prefix=models/").await.body;
    assert_eq!(files["entries"], json!([]), "nothing in the bucket: {files:#}");
    let r = app
        .send(
            Method::POST,
            "/api/clusters/demo/downloads",
            Some(json!({ "namespace": "default", "repo_id": "Qwen/Qwen3-0.6B", "volume": "data" })),
            &[],
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);
    finding(&r.body, "volume");

    // An endpoint loads its model from the volume, mounted read-only.
    let ep = json!({
        "route": "self_managed", "name": "qwen", "namespace": "default", "image": "lmsysorg/sglang:v0.5.2",
        "instance_type": "ml.g5.2xlarge", "gpus": 1,
        "engine": { "kind": "sglang", "model": "models/Qwen/Qwen3-0.6B" },
        "volumes": [{ "name": "scratch" }], "model_volume": "scratch",
    });
    let dry = app.send(Method::POST, "/api/clusters/demo/endpoints?dry_run=true", Some(ep.clone()), &[]).await;
    assert_eq!(dry.status, StatusCode::OK, "{:#}", dry.body);
    let spec = pod_spec(&dry.body);
    let argv = spec["containers"][0]["command"]
        .as_array()
        .unwrap()
        .iter()
        .chain(spec["containers"][0]["args"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(argv.contains("--model-path /fsx/scratch/models/Qwen/Qwen3-0.6B"), "{argv}");
    assert_eq!(
        spec["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "fsx-scratch").unwrap()["persistentVolumeClaim"]
            ["readOnly"],
        true
    );
    let mut bad = ep.clone();
    bad["model_volume"] = json!("data");
    let r = app.send(Method::POST, "/api/clusters/demo/endpoints", Some(bad), &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:#}", r.body);
    finding(&r.body, "model_volume");
    run(&app, Method::POST, "/api/clusters/demo/endpoints", Some(ep)).await;
    let volumes = app.get("/api/clusters/demo/endpoints/qwen").await.body["volumes"].clone();
    let fsx = volumes.as_array().unwrap().iter().find(|v| v["volume"] == "scratch").expect("the FSx volume is listed");
    assert_eq!((&fsx["kind"], &fsx["read_only"]), (&json!("fsx_lustre"), &json!(true)), "{volumes:#}");
}
