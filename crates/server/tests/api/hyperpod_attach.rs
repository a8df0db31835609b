//! HyperPod on an EKS-only cluster through the REST API on the simulated cloud: add it (dry
//! run, 404/400/422/409 before anything is recorded), then remove it (409 when there is none).

use super::*;

fn eks_only_body(name: &str) -> Value {
    json!({ "name": name, "region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"] })
}

fn hyperpod_body() -> Value {
    json!({ "hyperpod": { "instance_groups": [
        { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1a" }
    ]}})
}

#[tokio::test]
async fn hyperpod_is_added_to_an_eks_only_cluster_and_removed() {
    let app = test_app(2000.0);
    run(&app, Method::POST, "/api/clusters", Some(eks_only_body("demo"))).await;
    assert_eq!(app.get("/api/clusters/demo").await.body["hyperpod_cluster"], Value::Null);
    let ops = || async { app.get("/api/operations").await.body.as_array().map(Vec::len) };
    let before = ops().await;
    assert!(before.is_some_and(|n| n > 0), "the create is listed");

    // 404 unknown cluster, 400 naming the field, 422 on a second bucket, 409 removing nothing.
    let r = app.send(Method::POST, "/api/clusters/nope/hyperpod", Some(hyperpod_body()), &[]).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:#}", r.body);
    let mut bad = hyperpod_body();
    bad["hyperpod"]["instance_groups"][0]["instance_type"] = json!("ml.nope.large");
    let r = app.send(Method::POST, "/api/clusters/demo/hyperpod", Some(bad), &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:#}", r.body);
    assert_eq!(r.body["findings"][0]["field"], "hyperpod.instance_groups[0].instance_type", "{:#}", r.body);
    let mut unknown = hyperpod_body();
    unknown["network"] = json!({});
    let r = app.send(Method::POST, "/api/clusters/demo/hyperpod", Some(unknown), &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:#}", r.body);
    let mut other = hyperpod_body();
    other["bucket"] = json!("is-another-bucket");
    let r = app.send(Method::POST, "/api/clusters/demo/hyperpod", Some(other), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);
    assert_eq!(r.body["findings"][0]["field"], "bucket", "{:#}", r.body);
    let r = app.send(Method::DELETE, "/api/clusters/demo/hyperpod", None, &[]).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{:#}", r.body);
    assert_eq!(ops().await, before, "nothing recorded");

    // The dry run is the plan: the EKS side is all there, so only HyperPod's part is planned.
    let dry = app.send(Method::POST, "/api/clusters/demo/hyperpod?dry_run=true", Some(hyperpod_body()), &[]).await;
    assert_eq!(dry.status, StatusCode::OK, "{:#}", dry.body);
    let keys: Vec<&str> = dry.body["steps"].as_array().unwrap().iter().filter_map(|s| s["key"].as_str()).collect();
    assert_eq!(
        keys,
        [
            "eks_cluster",
            "bucket",
            "chart:hyperpod-dependencies",
            "hyperpod_execution_role",
            "lifecycle_script",
            "compute_subnets",
            "hyperpod_cluster",
            "storage",
            "record"
        ],
        "{:#}",
        dry.body
    );
    assert_eq!(ops().await, before, "a dry run records nothing");

    let done = run(&app, Method::POST, "/api/clusters/demo/hyperpod", Some(hyperpod_body())).await;
    assert_eq!(done["kind"], "add_hyperpod");
    let detail = app.get("/api/clusters/demo").await.body;
    assert_eq!(detail["hyperpod_cluster"], "demo-hp", "{detail:#}");
    assert_eq!(detail["hyperpod"]["name"], "demo-hp", "{detail:#}");
    let r = app.send(Method::POST, "/api/clusters/demo/hyperpod", Some(hyperpod_body()), &[]).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{:#}", r.body);

    let dry = app.send(Method::DELETE, "/api/clusters/demo/hyperpod?dry_run=true", None, &[]).await;
    assert_eq!(dry.status, StatusCode::OK, "{:#}", dry.body);
    let done = run(&app, Method::DELETE, "/api/clusters/demo/hyperpod", None).await;
    assert_eq!(done["kind"], "remove_hyperpod");
    let detail = app.get("/api/clusters/demo").await.body;
    assert_eq!(detail["hyperpod_cluster"], Value::Null, "EKS-only again: {detail:#}");
    assert_eq!(detail["eks"]["name"], "demo", "{detail:#}");
}
