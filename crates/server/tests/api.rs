//! REST API tests: checks of every endpoint, auth, idempotency, dry run and conflicts on the
//! kit's served bed (`instantstart_testkit::Bed`: requests go through the server's router,
//! WebSockets through its loopback port); the OpenAPI snapshot; and an end-to-end run of the
//! real binary that is killed with SIGKILL mid-pipeline and restarted on the same data
//! directory (a process of its own, not a bed: the kill is the point).

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use instantstart_server::ServerOptions;
use instantstart_testkit::{Bed, Reply, TOKEN, as_token};
use serde_json::{Value, json};
use std::time::Duration;

/// The served bed these tests call: the server on the simulated cloud at `speed`, on a data
/// directory of its own, called through its router (`Bed::send`, `Bed::call`).
fn test_app(speed: f64) -> Bed {
    Bed::temp().speed(speed).serve()
}

fn test_app_with(speed: f64, shared_bucket: Option<&str>) -> Bed {
    let bucket = shared_bucket.map(str::to_string);
    test_app_with_options(speed, move |o| o.shared_bucket = bucket.clone())
}

fn test_app_with_options(speed: f64, set: impl Fn(&mut ServerOptions) + Send + Sync + 'static) -> Bed {
    Bed::temp().speed(speed).server_options(set).serve()
}

fn create_body(name: &str) -> Value {
    json!({
        "name": name,
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 2, "availability_zone": "us-east-1a" }
        ]}
    })
}

#[tokio::test]
async fn auth_is_required_and_scoped() {
    let app = test_app(2000.0);
    // No credentials: 401 problem+json.
    let r = app.call(Request::get("/api/clusters").body(Body::empty()).unwrap()).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers[header::CONTENT_TYPE], "application/problem+json");
    assert_eq!(r.body["status"], 401);
    // Wrong token.
    let r = app
        .call(Request::get("/api/clusters").header(header::AUTHORIZATION, "Bearer nope").body(Body::empty()).unwrap())
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    // A read token can GET but not mutate.
    let minted = app.send(Method::POST, "/api/tokens", Some(json!({ "name": "viewer", "scope": "read" })), &[]).await;
    assert_eq!(minted.status, StatusCode::CREATED, "{:?}", minted.body);
    let read = minted.body["token"].as_str().unwrap().to_string();
    let get = Request::get("/api/clusters")
        .header(header::AUTHORIZATION, format!("Bearer {read}"))
        .body(Body::empty())
        .unwrap();
    assert_eq!(app.call(get).await.status, StatusCode::OK);
    let post = Request::post("/api/clusters")
        .header(header::AUTHORIZATION, format!("Bearer {read}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(create_body("demo").to_string()))
        .unwrap();
    let r = app.call(post).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:?}", r.body);
    // Health and the OpenAPI document are public; `/metrics` needs a token of any scope (review
    // #24: it runs a store count per scrape), unless the server runs with --public-metrics.
    for path in ["/healthz", "/api/openapi.json"] {
        let r = app.call(Request::get(path).body(Body::empty()).unwrap()).await;
        assert_eq!(r.status, StatusCode::OK, "{path}");
    }
    let r = app.call(Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = app.call(as_token(Method::GET, "/metrics", &read, None)).await;
    assert_eq!(r.status, StatusCode::OK);
    let public = test_app_with_options(1000.0, |o| o.http.public_metrics = true);
    let r = public.call(Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(r.status, StatusCode::OK);

    // DNS rebinding: a request for a host name that is not ours is refused before anything else;
    // loopback names, addresses and the names --allowed-hosts lists are answered.
    let host = |h: &str| Request::get("/healthz").header(header::HOST, h).body(Body::empty()).unwrap();
    let r = app.call(host("rebind.attacker.example:3099")).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert!(r.body["detail"].as_str().unwrap().contains("--allowed-hosts"), "{:?}", r.body);
    for ok in ["localhost:3099", "127.0.0.1:3099", "[::1]:3099"] {
        assert_eq!(app.call(host(ok)).await.status, StatusCode::OK, "{ok}");
    }
    let named = test_app_with_options(1000.0, |o| o.http.allowed_hosts = vec!["ui.example.com".into()]);
    assert_eq!(named.call(host("ui.example.com")).await.status, StatusCode::OK);
    assert_eq!(named.call(host("other.example.com")).await.status, StatusCode::FORBIDDEN);
    // Unknown API routes are problem+json 404s, other paths serve the UI.
    assert_eq!(app.get("/api/nope").await.status, StatusCode::NOT_FOUND);
    let ui = app.call(Request::get("/").body(Body::empty()).unwrap()).await;
    assert_eq!(ui.status, StatusCode::OK);
    assert!(ui.headers[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/html"));
}

/// Review #15: behind a TLS proxy (`X-Forwarded-Proto: https`) the session cookie is `Secure`;
/// on plain HTTP it cannot be (the browser would drop it).
#[tokio::test]
async fn the_session_cookie_is_secure_behind_a_tls_proxy() {
    let app = test_app(2000.0);
    for (proto, secure) in [(None, false), (Some("https"), true), (Some("http"), false)] {
        let mut req = Request::post("/api/login").header(header::CONTENT_TYPE, "application/json");
        if let Some(p) = proto {
            req = req.header("x-forwarded-proto", p);
        }
        let r = app.call(req.body(Body::from(json!({ "token": TOKEN }).to_string())).unwrap()).await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        let cookie = r.headers[header::SET_COOKIE].to_str().unwrap();
        assert_eq!(cookie.contains("; Secure"), secure, "{proto:?}: {cookie}");
        assert!(cookie.contains("HttpOnly; SameSite=Strict"), "{cookie}");
    }
}

#[tokio::test]
async fn tokens_are_minted_listed_and_revoked_by_the_admin_only() {
    let app = test_app(2000.0);
    // Mint: the secret once, in `token`; an expiry is kept.
    let expires = (chrono::Utc::now() + chrono::Duration::days(1)).to_rfc3339();
    let r = app
        .send(
            Method::POST,
            "/api/tokens",
            Some(json!({ "name": "ci", "scope": "operate", "expires_at": expires })),
            &[],
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let ci = r.body["token"].as_str().unwrap().to_string();
    assert_eq!((r.body["name"].as_str(), r.body["scope"].as_str()), (Some("ci"), Some("operate")));
    assert!(r.body["expires_at"].is_string());
    // The list never shows secrets.
    let list = app.get("/api/tokens").await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(list.body[0]["name"], "ci");
    assert!(list.body[0].get("token").is_none() && !list.body.to_string().contains(&ci));
    // Bad input: every finding names its field; a duplicate is a conflict.
    let past = (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339();
    let r = app
        .send(
            Method::POST,
            "/api/tokens",
            Some(json!({ "name": "bad name", "scope": "read", "expires_at": past })),
            &[],
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    let fields: Vec<&str> =
        r.body["findings"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["name", "expires_at"]);
    let r = app.send(Method::POST, "/api/tokens", Some(json!({ "name": "ci", "scope": "read" })), &[]).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{:?}", r.body);
    // Only the admin token manages tokens, even an operate token gets 403.
    assert_eq!(app.call(as_token(Method::GET, "/api/tokens", &ci, None)).await.status, StatusCode::FORBIDDEN);
    let r = app.call(as_token(Method::POST, "/api/tokens", &ci, Some(json!({ "name": "x", "scope": "read" })))).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(app.call(as_token(Method::DELETE, "/api/tokens/ci", &ci, None)).await.status, StatusCode::FORBIDDEN);
    // A browser session minted from the token works until the token is revoked.
    let (session, _) = app.login(&ci).await;
    let who = || Request::get("/api/session").header(header::COOKIE, &session).body(Body::empty()).unwrap();
    assert_eq!(app.call(who()).await.body["name"], "ci");
    let r = app.send(Method::DELETE, "/api/tokens/ci", None, &[]).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{:?}", r.body);
    assert_eq!(app.call(as_token(Method::GET, "/api/clusters", &ci, None)).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(app.call(who()).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(app.send(Method::DELETE, "/api/tokens/ci", None, &[]).await.status, StatusCode::NOT_FOUND);
    // Who did it, through which face.
    let audit = app.get("/api/audit?target=token/ci").await.body;
    let actions: Vec<(&str, &str)> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["action"].as_str().unwrap(), a["actor"]["principal"].as_str().unwrap()))
        .collect();
    assert_eq!(actions, [("token.revoke", "admin"), ("token.create", "admin")]);
}

#[tokio::test]
async fn logout_ends_the_session_on_the_server() {
    let app = test_app(2000.0);
    let (session, csrf) = app.login(TOKEN).await;
    let who = || Request::get("/api/session").header(header::COOKIE, &session).body(Body::empty()).unwrap();
    assert_eq!(app.call(who()).await.status, StatusCode::OK);
    let logout = Request::post("/api/logout")
        .header(header::COOKIE, &session)
        .header("x-csrf-token", &csrf)
        .body(Body::empty())
        .unwrap();
    assert_eq!(app.call(logout).await.status, StatusCode::NO_CONTENT);
    // A copy of the cookie no longer works.
    assert_eq!(app.call(who()).await.status, StatusCode::UNAUTHORIZED);
    // The empty token the review found never logs in.
    let empty = Request::post("/api/login")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({ "token": "" }).to_string()))
        .unwrap();
    assert_eq!(app.call(empty).await.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn browser_sessions_need_csrf_for_changes() {
    let app = test_app(2000.0);
    let login = Request::post("/api/login")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({ "token": TOKEN }).to_string()))
        .unwrap();
    let r = app.call(login).await;
    assert_eq!(r.status, StatusCode::OK);
    let cookie = r.headers[header::SET_COOKIE].to_str().unwrap().to_string();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    let session = cookie.split(';').next().unwrap().to_string();
    let csrf = r.body["csrf_token"].as_str().unwrap().to_string();
    let bad = Request::post("/api/login")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({ "token": "x" }).to_string()))
        .unwrap();
    assert_eq!(app.call(bad).await.status, StatusCode::UNAUTHORIZED);

    let who =
        app.call(Request::get("/api/session").header(header::COOKIE, &session).body(Body::empty()).unwrap()).await;
    assert_eq!(who.body["name"], "admin");
    let put = |csrf: Option<&str>| {
        let mut b = Request::put("/api/active-cluster")
            .header(header::COOKIE, &session)
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(c) = csrf {
            b = b.header("x-csrf-token", c);
        }
        b.body(Body::from(json!({ "name": null }).to_string())).unwrap()
    };
    assert_eq!(app.call(put(None)).await.status, StatusCode::FORBIDDEN);
    assert_eq!(app.call(put(Some("wrong"))).await.status, StatusCode::FORBIDDEN);
    assert_eq!(app.call(put(Some(&csrf))).await.status, StatusCode::OK);
    let audit = app.get("/api/audit").await;
    assert_eq!(audit.body[0]["action"], "active_cluster.set");
    assert_eq!(audit.body[0]["actor"]["face"], "ui");
}

#[tokio::test]
async fn create_dry_run_idempotency_conflict_and_lifecycle() {
    let app = test_app(1000.0);
    // Dry run: the plan, nothing called.
    let r = app.send(Method::POST, "/api/clusters?dry_run=true", Some(create_body("demo")), &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.body["dry_run"], true);
    assert_eq!(r.body["target"], "cluster/demo");
    assert!(r.body["steps"].as_array().unwrap().iter().any(|s| s["key"] == "hyperpod_cluster"));
    let stats = app.get("/api/sim/stats").await.body;
    assert!(stats.as_object().unwrap().keys().all(|k| !k.contains("Create")), "dry run called nothing: {stats}");

    // Validation: every finding with its field path, nothing recorded.
    let mut bad = create_body("Bad Name");
    bad["hyperpod"]["instance_groups"][0]["count"] = json!(99999);
    let r = app.send(Method::POST, "/api/clusters", Some(bad), &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.headers[header::CONTENT_TYPE], "application/problem+json");
    let fields: Vec<&str> =
        r.body["findings"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["name", "hyperpod.instance_groups[0].count"]);
    let r = app.send(Method::POST, "/api/clusters", Some(json!({ "name": "x", "region": 5 })), &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.body["findings"][0]["field"], "region");
    assert!(app.get("/api/operations").await.body.as_array().unwrap().is_empty());

    // Create with an idempotency key; a replay returns the same operation.
    let key = [("idempotency-key", "create-demo-1"), ("x-instantstart-face", "cli")];
    let r = app.send(Method::POST, "/api/clusters", Some(create_body("demo")), &key).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    let id = r.body["operation"]["id"].as_str().unwrap().to_string();
    assert_eq!(r.body["replayed"], false);
    assert_eq!(r.body["links"]["self"], format!("/api/operations/{id}"));
    assert_eq!(r.body["operation"]["actor"]["face"], "cli");
    let again = app.send(Method::POST, "/api/clusters", Some(create_body("demo")), &key).await;
    assert_eq!(again.status, StatusCode::ACCEPTED);
    assert_eq!(again.body["operation"]["id"], id.as_str());
    assert_eq!(again.body["replayed"], true);
    let other = app.send(Method::POST, "/api/clusters", Some(create_body("other")), &key).await;
    assert_eq!(other.status, StatusCode::CONFLICT);
    assert_eq!(other.body["operation_id"], id.as_str());
    // A second mutation of the same cluster while the first runs: 409.
    let del = app.send(Method::DELETE, "/api/clusters/demo", None, &[]).await;
    assert_eq!(del.status, StatusCode::CONFLICT, "{:?}", del.body);
    // Creating a name that exists: 422.
    let dup = app.send(Method::POST, "/api/clusters", Some(create_body("demo")), &[]).await;
    assert_eq!(dup.status, StatusCode::UNPROCESSABLE_ENTITY);

    let done = app.wait_op(&id).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    let op = app.get(&format!("/api/operations/{id}")).await;
    assert_eq!(op.body["status"], "succeeded");
    assert!(op.body["steps"].as_array().unwrap().iter().all(|s| s["phase"] == "succeeded" && s["attempts"] == 1));
    let list = app.get("/api/clusters").await;
    assert_eq!(list.body[0]["name"], "demo");
    assert_eq!(list.body[0]["status"], "ready");
    assert_eq!(list.body[0]["active"], true);
    let detail = app.get("/api/clusters/demo").await;
    assert_eq!(detail.body["hyperpod"]["state"]["state"], "active", "{:#}", detail.body);
    assert_eq!(detail.body["nodes"].as_array().unwrap().len(), 2);
    assert_eq!(app.get("/api/clusters/nope").await.status, StatusCode::NOT_FOUND);
    let filtered = app.get("/api/operations?target=cluster/demo&status=succeeded&limit=5").await;
    assert_eq!(filtered.body.as_array().unwrap().len(), 1);
    assert_eq!(app.get("/api/operations?limit=0").await.status, StatusCode::BAD_REQUEST);

    // Delete: dry run, then for real.
    let plan = app.send(Method::DELETE, "/api/clusters/demo?dry_run=true", None, &[]).await;
    assert_eq!(plan.status, StatusCode::OK);
    let del = app.send(Method::DELETE, "/api/clusters/demo", None, &[]).await;
    assert_eq!(del.status, StatusCode::ACCEPTED, "{:?}", del.body);
    let done = app.wait_op(del.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    assert!(app.get("/api/clusters").await.body.as_array().unwrap().is_empty());
    assert_eq!(app.send(Method::DELETE, "/api/clusters/demo", None, &[]).await.status, StatusCode::NOT_FOUND);
}

/// `--shared-bucket`: the default bucket of clusters created in the server's region (the plan
/// names it, the pipeline mounts it, deleting the cluster keeps it); a bucket the deployment
/// policy does not cover and a Kubernetes version HyperPod does not support are refused with
/// 422s naming the field, before anything is recorded.
#[tokio::test]
async fn the_shared_bucket_option_is_the_default_bucket_and_the_rules_hold() {
    const SHARED: &str = "mgmt-sharedbucket-1a2b3c";
    let app = test_app_with(2000.0, Some(SHARED));
    let bucket_title = |plan: &Value| {
        plan["steps"].as_array().unwrap().iter().find(|s| s["key"] == "bucket").unwrap()["title"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let plan = app.send(Method::POST, "/api/clusters?dry_run=true", Some(create_body("demo")), &[]).await;
    assert_eq!(plan.status, StatusCode::OK, "{:?}", plan.body);
    assert!(bucket_title(&plan.body).contains(SHARED), "{:#}", plan.body);
    assert!(plan.body["steps"].as_array().unwrap().iter().any(|s| s["key"] == "addon:vpc-cni"));
    // Another region: the per-cluster default bucket.
    let mut west = create_body("west");
    west["region"] = json!("us-west-2");
    west["availability_zones"] = json!(["us-west-2a", "us-west-2b"]);
    west["hyperpod"]["instance_groups"][0]["availability_zone"] = json!("us-west-2a");
    let plan = app.send(Method::POST, "/api/clusters?dry_run=true", Some(west), &[]).await;
    assert_eq!(plan.status, StatusCode::OK, "{:?}", plan.body);
    assert!(bucket_title(&plan.body).contains("is-west-"), "{:#}", plan.body);

    // A bucket outside the policy, a version HyperPod does not support: 422 naming the field.
    let mut named = create_body("named");
    named["storage"] = json!({ "bucket": "my-datasets" });
    let r = app.send(Method::POST, "/api/clusters", Some(named), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:?}", r.body);
    assert_eq!(r.body["findings"][0]["field"], "storage.bucket");
    assert!(r.body["findings"][0]["rule"].as_str().unwrap().contains(SHARED), "{:?}", r.body);
    let mut newest = create_body("newest");
    newest["kubernetes_version"] = json!("1.35");
    let r = app.send(Method::POST, "/api/clusters", Some(newest), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:?}", r.body);
    assert_eq!(r.body["findings"][0]["field"], "kubernetes_version");
    assert!(r.body["findings"][0]["rule"].as_str().unwrap().contains("1.32, 1.33, 1.34"), "{:?}", r.body);
    assert!(app.get("/api/operations").await.body.as_array().unwrap().is_empty());

    // The pipeline mounts the shared bucket; the cluster's record names it.
    let r = app.send(Method::POST, "/api/clusters", Some(create_body("demo")), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    let id = r.body["operation"]["id"].as_str().unwrap().to_string();
    let done = app.wait_op(&id).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    let storage = done["steps"].as_array().unwrap().iter().find(|s| s["key"] == "storage").unwrap().clone();
    assert_eq!(storage["outputs"]["bucket"], SHARED, "{storage:#}");
    let cni = done["steps"].as_array().unwrap().iter().find(|s| s["key"] == "addon:vpc-cni").unwrap().clone();
    assert_eq!(cni["phase"], "succeeded", "{cni:#}");
    // Deleting the cluster keeps the shared bucket.
    let r = app.send(Method::DELETE, "/api/clusters/demo", None, &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    let id = r.body["operation"]["id"].as_str().unwrap().to_string();
    let done = app.wait_op(&id).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    let sim = app.state().sim.as_ref().unwrap();
    assert!(
        instantstart_core::provider::S3Api::describe_bucket(sim, SHARED).await.unwrap().is_some(),
        "the shared bucket is kept"
    );
}

#[tokio::test]
async fn failed_step_retry_cancel_import_and_context() {
    let app = test_app(1000.0);
    let faults = json!({ "fail_apis": { "sagemaker:CreateCluster": { "mode": "fail_once", "kind": "failed", "message": "InsufficientCapacity in us-east-1a" } } });
    assert_eq!(app.send(Method::PUT, "/api/sim/faults", Some(faults), &[]).await.status, StatusCode::OK);
    let r = app.send(Method::POST, "/api/clusters", Some(create_body("demo")), &[]).await;
    let id = r.body["operation"]["id"].as_str().unwrap().to_string();
    let failed = app.wait_op(&id).await;
    assert_eq!(failed["status"], "failed");
    let step = failed["steps"].as_array().unwrap().iter().find(|s| s["key"] == "hyperpod_cluster").unwrap().clone();
    assert!(step["error"].as_str().unwrap().contains("InsufficientCapacity"));
    // Retry a step that did not fail: 409. Retry the failed one: 202, then success.
    let r = app.send(Method::POST, &format!("/api/operations/{id}/steps/eks_cluster/retry"), None, &[]).await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    let r = app.send(Method::POST, &format!("/api/operations/{id}/steps/nope/retry"), None, &[]).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = app.send(Method::POST, &format!("/api/operations/{id}/steps/hyperpod_cluster/retry"), None, &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    assert_eq!(app.wait_op(&id).await["status"], "succeeded");
    let stats = app.get("/api/sim/stats").await.body;
    // The injected failure never reached the service: one CreateCluster call took effect.
    assert_eq!(stats["sagemaker:CreateCluster"], 1);
    assert_eq!(stats["eks:CreateCluster"], 1);
    // Cancelling a finished operation is a conflict.
    assert_eq!(
        app.send(Method::POST, &format!("/api/operations/{id}/cancel"), None, &[]).await.status,
        StatusCode::CONFLICT
    );

    // Import the EKS cluster under another name (it exists in the simulated account).
    let imp =
        json!({ "name": "imported", "region": "us-east-1", "eks_cluster": "demo", "hyperpod_cluster": "demo-hp" });
    let r = app.send(Method::POST, "/api/clusters/import", Some(imp), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:?}", r.body);
    assert_eq!(app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await["status"], "succeeded");
    // The region's EKS clusters: demo is managed twice now, with its HyperPod cluster and
    // the control plane's access entry (it created the cluster).
    let eks = app.get("/api/context/eks-clusters?region=us-east-1").await.body;
    let demo = eks.as_array().unwrap().iter().find(|c| c["name"] == "demo").expect("demo listed");
    assert_eq!(demo["hyperpod_clusters"], json!(["demo-hp"]));
    assert_eq!(demo["control_plane_access"], true);
    let mut managed: Vec<&str> =
        demo["managed_as"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    managed.sort();
    assert_eq!(managed, ["demo", "imported"]);
    assert_eq!(app.get("/api/context/eks-clusters?region=mars").await.status, StatusCode::BAD_REQUEST);
    // A cluster that is not there is refused before anything is recorded.
    let missing = json!({ "name": "ghost", "region": "us-east-1", "eks_cluster": "nope" });
    let r = app.send(Method::POST, "/api/clusters/import", Some(missing), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:?}", r.body);
    assert_eq!(r.body["findings"][0]["field"], "eks_cluster");
    // Switch the active cluster; unknown names are 404.
    assert_eq!(
        app.send(Method::PUT, "/api/active-cluster", Some(json!({ "name": "imported" })), &[]).await.status,
        StatusCode::OK
    );
    assert_eq!(app.get("/api/active-cluster").await.body["name"], "imported");
    assert_eq!(
        app.send(Method::PUT, "/api/active-cluster", Some(json!({ "name": "zzz" })), &[]).await.status,
        StatusCode::NOT_FOUND
    );

    // Context.
    let ctx = app.get("/api/context").await.body;
    assert_eq!(ctx["provider"], "sim");
    assert_eq!(ctx["identity"]["account"], "123456789012");
    let zones = app.get("/api/context/zones?region=us-east-1").await.body;
    assert!(zones.as_array().unwrap().iter().any(|z| z["name"] == "us-east-1a"));
    assert_eq!(app.get("/api/context/zones?region=mars").await.status, StatusCode::BAD_REQUEST);
    // Every ClusterInstanceType, with EC2's specs where EC2 describes it.
    let types = app.get("/api/context/instance-types?region=us-east-1").await.body;
    let types = types.as_array().unwrap();
    assert!(types.len() >= 150, "{} types", types.len());
    let of = |name: &str| types.iter().find(|t| t["instance_type"] == name).unwrap_or_else(|| panic!("{name}"));
    assert_eq!(of("ml.g5.2xlarge")["info"]["accelerators"], 1);
    assert_eq!(of("ml.g5.12xlarge")["info"]["efa_interfaces"], 1, "g5.12xlarge supports EFA");
    assert_eq!(of("ml.g5.8xlarge")["info"]["accelerator"], "nvidia-a10g");
    let gb200 = of("ml.p6e-gb200.36xlarge");
    assert_eq!(gb200["info"], Value::Null, "EC2 does not describe it");
    assert!(!gb200["availability_zones"].as_array().unwrap().is_empty(), "HyperPod offers it");

    // A running operation can be cancelled.
    let r = app.send(Method::POST, "/api/clusters", Some(create_body("slow")), &[]).await;
    let id = r.body["operation"]["id"].as_str().unwrap().to_string();
    let r = app.send(Method::POST, &format!("/api/operations/{id}/cancel"), None, &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    assert_eq!(app.wait_op(&id).await["status"], "cancelled");
    // Metrics show requests, operations and provider calls.
    let m = app.get("/metrics").await;
    let text = m.body.as_str().unwrap();
    assert!(text.contains("instantstart_http_requests_total{method=\"POST\",route=\"/api/clusters\",status=\"202\"}"));
    assert!(text.contains("instantstart_operations{status=\"cancelled\"} 1"));
    assert!(text.contains("instantstart_provider_calls_total{api=\"eks:CreateCluster\"}"));
}

#[tokio::test]
async fn openapi_document_is_generated_and_stable() {
    let app = test_app(1000.0);
    let doc = app.call(Request::get("/api/openapi.json").body(Body::empty()).unwrap()).await.body;
    assert_eq!(doc["openapi"], "3.1.0");
    // The route table and the document are one: every path we serve is documented.
    let paths: Vec<&str> = doc["paths"].as_object().unwrap().keys().map(String::as_str).collect();
    for p in [
        "/healthz",
        "/metrics",
        "/api/openapi.json",
        "/api/clusters",
        "/api/clusters/{cluster}",
        "/api/operations",
        "/api/operations/{id}",
        "/api/sim/stats",
        "/api/operations/stream",
    ] {
        assert!(paths.contains(&p), "{p} missing from {paths:?}");
    }
    insta::assert_json_snapshot!("openapi", doc);
}

/// Reads carry a strong ETag; revalidating with it answers 304 and no body until the data
/// changes; errors and mutations carry none. Concurrent reads of one cluster share one live read.
#[tokio::test]
async fn reads_are_conditional_and_live_cluster_reads_are_shared() {
    let app = test_app(1000.0);
    let first = app.get("/api/clusters").await;
    assert_eq!(first.status, StatusCode::OK);
    let tag = first.headers[header::ETAG].to_str().unwrap().to_string();
    assert!(tag.starts_with('"'), "strong tag: {tag}");
    assert_eq!(first.headers[header::CACHE_CONTROL], "no-cache");
    let again = app.send(Method::GET, "/api/clusters", None, &[("if-none-match", &tag)]).await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    assert_eq!(again.body, Value::String(String::new()), "a 304 has no body");
    assert_eq!(again.headers[header::ETAG].to_str().unwrap(), tag);
    // A weak comparison: W/ is ignored; another tag is not a match.
    let weak = app.send(Method::GET, "/api/clusters", None, &[("if-none-match", &format!("W/{tag}"))]).await;
    assert_eq!(weak.status, StatusCode::NOT_MODIFIED);
    let other = app.send(Method::GET, "/api/clusters", None, &[("if-none-match", "\"nope\"")]).await;
    assert_eq!(other.status, StatusCode::OK);

    // A change: the same revalidation now gets the new document and a new tag.
    let created = app.send(Method::POST, "/api/clusters", Some(create_body("etag")), &[]).await;
    assert_eq!(created.status, StatusCode::ACCEPTED, "{}", created.body);
    assert!(!created.headers.contains_key(header::ETAG), "mutations are not tagged");
    let changed = app.send(Method::GET, "/api/clusters", None, &[("if-none-match", &tag)]).await;
    assert_eq!(changed.status, StatusCode::OK);
    assert_ne!(changed.headers[header::ETAG].to_str().unwrap(), tag);
    // Errors are not tagged.
    let missing = app.get("/api/clusters/nope").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(!missing.headers.contains_key(header::ETAG));

    // Eight concurrent reads of one cluster: one EKS DescribeCluster among them.
    let id = created.body["operation"]["id"].as_str().unwrap().to_string();
    app.wait_op(&id).await;
    let sim = app.state().sim.as_ref().unwrap();
    // Let the last shared read go stale, then count.
    tokio::time::sleep(instantstart_core::api::live::LIVE_READ_TTL).await;
    let before = sim.calls("eks:DescribeCluster");
    let reads = futures::future::join_all((0..8).map(|_| app.get("/api/clusters/etag"))).await;
    assert!(reads.iter().all(|r| r.status == StatusCode::OK && r.body["eks"]["name"].is_string()), "live state read");
    assert_eq!(sim.calls("eks:DescribeCluster") - before, 1, "one shared live read");
}

/// A create or import request without `region` uses the server's default region (`--region`),
/// and the recorded request says which; a region that is not a string is still a 400.
#[tokio::test]
async fn a_request_without_region_uses_the_servers_default_region() {
    let app = test_app(2000.0);
    let mut body = create_body("noregion");
    body.as_object_mut().unwrap().remove("region");
    let dry = app.send(Method::POST, "/api/clusters?dry_run=true", Some(body.clone()), &[]).await;
    assert_eq!(dry.status, StatusCode::OK, "{:#}", dry.body);
    assert_eq!(dry.body["request"]["region"], "us-east-1", "{:#}", dry.body);
    let r = app.send(Method::POST, "/api/clusters", Some(body), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    let id = r.body["operation"]["id"].as_str().unwrap().to_string();
    let op = app.get(&format!("/api/operations/{id}")).await.body;
    assert_eq!(op["request"]["region"], "us-east-1", "{op:#}");
    assert_eq!(app.wait_op(&id).await["status"], "succeeded");
    assert_eq!(app.get("/api/clusters/noregion").await.body["region"], "us-east-1");

    let import = json!({ "name": "imported", "eks_cluster": "noregion" });
    let dry = app.send(Method::POST, "/api/clusters/import?dry_run=true", Some(import), &[]).await;
    assert_eq!(dry.body["request"]["region"], "us-east-1", "{:#}", dry.body);

    let mut bad = create_body("badregion");
    bad["region"] = json!(5);
    let r = app.send(Method::POST, "/api/clusters", Some(bad), &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:#}", r.body);
}

/// The EKS API's public endpoint admits the blocks a create request names plus the control
/// plane's own (`--eks-public-access-cidrs`), recorded in the operation's request; a private
/// block is a 400 naming it, before anything is recorded.
#[tokio::test]
async fn the_eks_public_endpoint_admits_the_requests_blocks_and_the_control_planes() {
    let app = test_app_with_options(2000.0, |o| o.eks_public_access_cidrs = vec!["198.51.100.7/32".parse().unwrap()]);
    let mut body = create_body("narrow");
    body["public_access_cidrs"] = json!(["203.0.113.0/24"]);
    let r = app.send(Method::POST, "/api/clusters", Some(body), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    let id = r.body["operation"]["id"].as_str().unwrap().to_string();
    let op = app.get(&format!("/api/operations/{id}")).await.body;
    assert_eq!(op["request"]["public_access_cidrs"], json!(["203.0.113.0/24", "198.51.100.7/32"]), "{op:#}");
    assert_eq!(app.wait_op(&id).await["status"], "succeeded");
    let eks = instantstart_core::names::DerivedNames::for_cluster("narrow").eks_cluster;
    let live = app.state().aws.describe_eks_cluster("us-east-1", &eks).await.unwrap().unwrap();
    assert_eq!(live.public_access_cidrs, ["203.0.113.0/24", "198.51.100.7/32"]);

    let mut bad = create_body("private");
    bad["public_access_cidrs"] = json!(["10.0.0.0/8"]);
    let r = app.send(Method::POST, "/api/clusters", Some(bad), &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:#}", r.body);
    assert!(r.body.to_string().contains("public_access_cidrs[0]"), "{:#}", r.body);
    assert_eq!(app.get("/api/operations").await.body.as_array().map(Vec::len), Some(1), "nothing recorded");
}

/// Rustdoc's intra-doc links (`` [`Type`] ``, `` [`crate::path`] ``) mean nothing to the
/// generated clients and documentation the served document feeds: every description is prose.
#[tokio::test]
async fn the_openapi_document_has_no_rustdoc_link_syntax() {
    fn walk(v: &Value, path: &str, out: &mut Vec<String>) {
        match v {
            Value::String(text) => {
                let mut rest = text.as_str();
                while let Some(at) = rest.find("[`") {
                    let after = &rest[at + 2..];
                    if let Some(end) = after.find("`]") {
                        let inner = &after[..end];
                        if !inner.contains('`') && !inner.contains('\n') {
                            out.push(format!("{path}: [`{inner}`]"));
                        }
                    }
                    rest = after;
                }
            }
            Value::Array(items) => items.iter().enumerate().for_each(|(i, x)| walk(x, &format!("{path}/{i}"), out)),
            Value::Object(map) => map.iter().for_each(|(k, x)| walk(x, &format!("{path}/{k}"), out)),
            _ => {}
        }
    }
    let app = test_app(1000.0);
    let doc = app.call(Request::get("/api/openapi.json").body(Body::empty()).unwrap()).await.body;
    let mut found = Vec::new();
    walk(&doc, "", &mut found);
    assert!(found.is_empty(), "rustdoc link syntax in the OpenAPI document:\n{}", found.join("\n"));
    // The check itself finds what it looks for.
    let mut probe = Vec::new();
    walk(&json!({ "description": "see [`crate::workflow::create_cluster`] and `code`" }), "", &mut probe);
    assert_eq!(probe, ["/description: [`crate::workflow::create_cluster`]"]);
}

/// Minimal HTTP/1.1 client for the binary test (one request per connection).
async fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text[9..12].parse().unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            out.push_str(&tail[..n]);
            rest = &tail[n + 2..];
        }
        out
    } else {
        body.to_string()
    };
    (status, serde_json::from_str(&body).unwrap_or(Value::String(body)))
}

struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn start_server(dir: &std::path::Path, port: u16) -> Server {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_instantstart-server"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--sim-speed", "300", "--data-dir"])
        .arg(dir)
        .env("INSTANTSTART_TOKEN", TOKEN)
        .env("RUST_LOG", "warn")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let server = Server(child);
    instantstart_testkit::wait_until(Duration::from_secs(10), "the server to start", || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok()
    })
    .await;
    server
}

/// Follows the live stream until `done` says so; returns the last operation seen.
async fn follow(port: u16, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req =
        format!("ws://127.0.0.1:{port}/api/operations/stream?operation_id={id}").into_client_request().unwrap();
    req.headers_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let msg = tokio::time::timeout_at(deadline, ws.next())
            .await
            .expect("stream ended in time")
            .expect("stream open")
            .unwrap();
        if let Ok(text) = msg.to_text() {
            let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            if v["type"] == "operation" && done(&v["operation"]) {
                return v["operation"].clone();
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_binary_survives_kill_9_mid_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server = start_server(dir.path(), port).await;
    let (status, created) = http(port, "POST", "/api/clusters", Some(&create_body("demo"))).await;
    assert_eq!(status, 202, "{created}");
    let id = created["operation"]["id"].as_str().unwrap().to_string();
    // Follow live progress until the EKS control plane is being polled, then SIGKILL.
    let phase_of = |op: &Value, key: &str| {
        op["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"] == key)
            .map(|s| s["phase"].as_str().unwrap().to_string())
    };
    follow(port, &id, |op| phase_of(op, "eks_cluster").as_deref() == Some("polling")).await;
    drop(server); // kill -9
    let _server = start_server(dir.path(), port).await;
    let last = follow(port, &id, |op| op["status"] != "running").await;
    assert_eq!(last["status"], "succeeded", "{last:#}");
    let (_, stats) = http(port, "GET", "/api/sim/stats", None).await;
    for (api, n) in [
        ("ec2:CreateVpc", 1),
        ("eks:CreateCluster", 1),
        ("sagemaker:CreateCluster", 1),
        // EKS cluster role, HyperPod execution role, the S3 CSI driver's Pod Identity role and
        // the load balancer controller's IRSA role (the real binary installs the charts).
        ("iam:CreateRole", 4),
        ("s3:CreateBucket", 1),
        ("eks:CreateAddon", 4),
        ("eks:CreatePodIdentityAssociation", 1),
    ] {
        assert_eq!(stats[api], n, "{api}: {stats:#}");
    }
}

/// `instantstart-server backup` against a running server's data directory: the backup file.
fn backup_cli(dir: &std::path::Path, to: &std::path::Path) -> std::path::PathBuf {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_instantstart-server"))
        .arg("--data-dir")
        .arg(dir)
        .args(["backup", "--to"])
        .arg(to)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

#[test]
fn backup_refuses_a_postgres_store_pointing_to_its_own_tools() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_instantstart-server"))
        .args(["--store-url", "postgres://instantstart:secret@127.0.0.1:1/instantstart", "backup", "--to"])
        .arg(dir.path().join("b"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("pg_dump") && !stderr.contains("secret"), "{stderr}");
    assert!(!dir.path().join("b").exists());
}

/// Restore as docs/server.md says: the server is stopped; the backup replaces the database
/// and the WAL beside the old one goes. Only the store is restored: the simulated world
/// (`sim-world.json`) stands for the cloud, which a restore does not roll back, so it keeps
/// everything created after the backup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_mid_pipeline_restores_and_the_operation_resumes_creating_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server = start_server(dir.path(), port).await;
    let (status, created) = http(port, "POST", "/api/clusters", Some(&create_body("demo"))).await;
    assert_eq!(status, 202, "{created}");
    let id = created["operation"]["id"].as_str().unwrap().to_string();
    let phase_of = |op: &Value, key: &str| {
        op["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"] == key)
            .map(|s| s["phase"].as_str().unwrap().to_string())
    };
    // The backup while the EKS control plane is being created (the server keeps running).
    follow(port, &id, |op| phase_of(op, "eks_cluster").as_deref() == Some("polling")).await;
    let backup = backup_cli(dir.path(), &dir.path().join("backups"));
    assert!(backup.starts_with(dir.path().join("backups")) && backup.is_file(), "{}", backup.display());
    // The pipeline goes on past the backup (the cloud gets the EKS cluster and more), then kill -9.
    follow(port, &id, |op| phase_of(op, "eks_cluster").as_deref() == Some("succeeded")).await;
    drop(server);
    // Restore the store only.
    let db = dir.path().join("instantstart.db");
    std::fs::copy(&backup, &db).unwrap();
    for side in ["instantstart.db-wal", "instantstart.db-shm"] {
        let _ = std::fs::remove_file(dir.path().join(side));
    }
    // The restored store has the operation as it was at the backup: EKS still being created
    // (read from a copy: opening the backup itself would change it).
    {
        use instantstart_core::store::Store;
        let inspect = dir.path().join("inspect.db");
        std::fs::copy(&backup, &inspect).unwrap();
        let store = instantstart_store::SqliteStore::open(&inspect).unwrap();
        let op = store.get_operation(&instantstart_core::operation::OperationId(id.clone())).unwrap().unwrap();
        let eks = op.steps.iter().find(|s| s.key == "eks_cluster").unwrap();
        assert_eq!(eks.phase.as_str(), "polling", "{op:#?}");
    }
    let _server = start_server(dir.path(), port).await;
    let last = follow(port, &id, |op| op["status"] != "running").await;
    assert_eq!(last["status"], "succeeded", "{last:#}");
    let (_, stats) = http(port, "GET", "/api/sim/stats", None).await;
    // Exactly one create per resource, as without the restore (the kill -9 test's counts).
    for (api, n) in [
        ("ec2:CreateVpc", 1),
        ("eks:CreateCluster", 1),
        ("sagemaker:CreateCluster", 1),
        ("iam:CreateRole", 4),
        ("s3:CreateBucket", 1),
        ("eks:CreateAddon", 4),
        ("eks:CreatePodIdentityAssociation", 1),
    ] {
        assert_eq!(stats[api], n, "{api}: {stats:#}");
    }
}

#[tokio::test]
async fn preflight_explains_quotas_and_offerings_before_anything_is_created() {
    let app = test_app(2000.0);
    let mut body = create_body("big");
    body["hyperpod"]["instance_groups"][0]["instance_type"] = json!("ml.p5.48xlarge");
    // The dry run shows the failing check with its remedy.
    let plan = app.send(Method::POST, "/api/clusters?dry_run=true", Some(body.clone()), &[]).await;
    assert_eq!(plan.status, StatusCode::OK, "{:#}", plan.body);
    let quota = plan.body["checks"].as_array().unwrap().iter().find(|c| c["check"] == "quota").unwrap().clone();
    assert_eq!(quota["status"], "fail", "{quota:#}");
    assert!(quota["remedy"].as_str().unwrap().contains("Service Quotas"), "{quota:#}");
    // Submitting is refused with 422 naming the field; nothing is recorded or created.
    let r = app.send(Method::POST, "/api/clusters", Some(body), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);
    let fields: Vec<&str> =
        r.body["findings"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
    assert!(fields.contains(&"hyperpod.instance_groups[0].count"), "{fields:?}");
    assert!(app.get("/api/operations").await.body.as_array().unwrap().is_empty());
    assert!(app.get("/api/clusters").await.body.as_array().unwrap().is_empty());
    let stats = app.get("/api/sim/stats").await.body;
    assert!(stats.as_object().unwrap().keys().all(|k| !k.contains("Create")), "{stats}");
}

async fn create_ready(app: &Bed, name: &str) {
    let r = app.send(Method::POST, "/api/clusters", Some(create_body(name)), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
}

/// [`create_ready`] with `nodes` one-GPU nodes in the group, for tests that run more GPU pods
/// at once than the two of [`create_body`] hold (the simulated scheduler counts GPUs).
async fn create_ready_with_nodes(app: &Bed, name: &str, nodes: u32) {
    let mut body = create_body(name);
    body["hyperpod"]["instance_groups"][0]["count"] = json!(nodes);
    let r = app.send(Method::POST, "/api/clusters", Some(body), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
}

async fn run(app: &Bed, method: Method, uri: &str, body: Option<Value>) -> Value {
    let r = app.send(method, uri, body, &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{uri}: {:#}", r.body);
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{uri}: {done:#}");
    done
}

/// FSx for Lustre volumes through REST: a dry run shows the steps, a broken rule is a 400 naming
/// the field, the volume is created and listed beside the bucket, an unknown one is a 404, and
/// the delete removes it.
#[tokio::test]
async fn fsx_volumes_are_created_listed_and_deleted() {
    let app = test_app(2000.0);
    create_ready(&app, "demo").await;
    let uri = "/api/clusters/demo/storage/fsx";
    let body = json!({ "name": "scratch", "deployment_type": "PERSISTENT_2", "storage_capacity_gib": 2400,
                       "per_unit_storage_throughput": 500,
                       "data_repository": { "bucket_prefix": "datasets/", "file_system_path": "/datasets", "export": ["NEW", "CHANGED"] } });
    let dry = app.send(Method::POST, &format!("{uri}?dry_run=true"), Some(body.clone()), &[]).await;
    assert_eq!(dry.status, StatusCode::OK, "{:#}", dry.body);
    let keys: Vec<&str> = dry.body["steps"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["addon:aws-fsx-csi-driver", "file_system", "data_repository", "claim"]);
    assert!(dry.body["request"]["placement"]["subnet_id"].is_string(), "{:#}", dry.body);
    assert!(
        dry.body["request"]["data_repository_path"]
            .as_str()
            .is_some_and(|p| p.starts_with("s3://") && p.ends_with("/datasets/")),
        "{:#}",
        dry.body
    );
    for (bad, field) in [
        (json!({ "name": "x", "storage_capacity_gib": 3000 }), "storage_capacity_gib"),
        (json!({ "name": "x", "per_unit_storage_throughput": 125 }), "per_unit_storage_throughput"),
        (json!({ "name": "x", "placement": {} }), "placement"),
        (
            json!({ "name": "x", "data_repository": { "file_system_path": "datasets" } }),
            "data_repository.file_system_path",
        ),
        (json!({ "name": "x", "data_repository": { "bucket_prefix": "datasets" } }), "data_repository.bucket_prefix"),
        (json!({ "name": "x", "file_system_id": "fs-0123456789abcdef0", "data_repository": {} }), "data_repository"),
    ] {
        let r = app.send(Method::POST, uri, Some(bad.clone()), &[]).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}: {:#}", r.body);
        assert_eq!(r.body["findings"][0]["field"], field, "{bad}: {:#}", r.body);
    }
    let unknown = app.send(Method::POST, "/api/clusters/nope/storage/fsx", Some(body.clone()), &[]).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{:#}", unknown.body);
    run(&app, Method::POST, uri, Some(body)).await;
    let storage = app.get("/api/clusters/demo/storage").await.body;
    let kinds: Vec<&str> = storage.as_array().unwrap().iter().map(|s| s["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["s3", "fsx_lustre"], "{storage:#}");
    assert_eq!(storage[1]["claim"], "default/fsx-scratch");
    assert_eq!(storage[1]["status"], "Bound");
    assert_eq!(storage[1]["file_system"]["lifecycle"], "AVAILABLE");
    assert_eq!(storage[1]["file_system"]["per_unit_storage_throughput"], 500);
    assert_eq!(storage[1]["file_system"]["file_system_type_version"], "2.15");
    let link = &storage[1]["data_repositories"][0];
    assert_eq!((link["file_system_path"].as_str(), link["lifecycle"].as_str()), (Some("/datasets"), Some("AVAILABLE")));
    assert_eq!(link["export_events"], json!(["NEW", "CHANGED"]), "{link:#}");
    let missing = app.send(Method::DELETE, &format!("{uri}/other"), None, &[]).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{:#}", missing.body);
    run(&app, Method::DELETE, &format!("{uri}/scratch"), None).await;
    let storage = app.get("/api/clusters/demo/storage").await.body;
    assert_eq!(storage.as_array().unwrap().len(), 1, "{storage:#}");
}

/// One cluster resolver, one error rule: every noun under `/api/clusters/{cluster}` (reads and
/// changes, valid bodies) and the active-cluster selection answer an unregistered name with the
/// same problem.
#[tokio::test]
async fn an_unknown_cluster_is_the_same_404_for_every_noun() {
    let app = test_app(600.0);
    let group = json!({ "name": "extra", "instance_type": "ml.g5.8xlarge", "count": 1,
                        "availability_zone": "us-east-1a" });
    let fsx = json!({ "name": "scratch" });
    let nodes = json!({ "node_ids": ["i-00000000000000000"] });
    let checks = json!({ "instance_groups": [{ "name": "workers", "checks": ["InstanceStress"] }] });
    let cases: Vec<(Method, &str, Option<Value>)> = vec![
        (Method::GET, "/api/clusters/nope", None),
        (Method::DELETE, "/api/clusters/nope", None),
        (Method::PUT, "/api/active-cluster", Some(json!({ "name": "nope" }))),
        (Method::GET, "/api/clusters/nope/instance-groups", None),
        (Method::POST, "/api/clusters/nope/instance-groups", Some(group)),
        (Method::PATCH, "/api/clusters/nope/instance-groups/workers", Some(json!({ "count": 2 }))),
        (Method::DELETE, "/api/clusters/nope/instance-groups/workers", None),
        (Method::GET, "/api/clusters/nope/nodes", None),
        (Method::GET, "/api/clusters/nope/nodes/i-00000000000000000", None),
        (Method::POST, "/api/clusters/nope/nodes/reboot", Some(nodes)),
        (Method::GET, "/api/clusters/nope/events", None),
        (Method::POST, "/api/clusters/nope/health-checks", Some(checks)),
        (Method::POST, "/api/clusters/nope/software-update", Some(json!({}))),
        (Method::GET, "/api/clusters/nope/features", None),
        (Method::PATCH, "/api/clusters/nope/features", Some(json!({ "training_operator": true }))),
        (Method::GET, "/api/clusters/nope/governance", None),
        (Method::DELETE, "/api/clusters/nope/hyperpod", None),
        (Method::GET, "/api/clusters/nope/storage", None),
        (Method::GET, "/api/clusters/nope/storage/objects", None),
        (Method::POST, "/api/clusters/nope/storage/fsx", Some(fsx)),
        (Method::DELETE, "/api/clusters/nope/storage/fsx/scratch", None),
        (Method::GET, "/api/clusters/nope/downloads", None),
        (Method::GET, "/api/clusters/nope/capacity", None),
        (Method::GET, "/api/clusters/nope/metrics?node=hyperpod-i-00000000000000000", None),
        (Method::GET, "/api/clusters/nope/jobs", None),
        (Method::GET, "/api/clusters/nope/endpoints", None),
    ];
    for (method, uri, body) in cases {
        let what = format!("{method} {uri}");
        let r = app.send(method, uri, body, &[]).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{what}: {:#}", r.body);
        assert_eq!(
            (&r.body["type"], &r.body["title"], &r.body["detail"]),
            (&json!("urn:instantstart:problem:not-found"), &json!("Not found"), &json!("no cluster named nope")),
            "{what}"
        );
    }
    // A name no cluster can have is not a different error: it is not registered either.
    for uri in
        ["/api/clusters/Not_A_Name/endpoints", "/api/clusters/Not_A_Name/jobs", "/api/clusters/Not_A_Name/storage"]
    {
        let r = app.get(uri).await;
        assert_eq!(
            (r.status, &r.body["detail"]),
            (StatusCode::NOT_FOUND, &json!("no cluster named Not_A_Name")),
            "{uri}"
        );
    }
    assert!(app.get("/api/operations").await.body.as_array().unwrap().is_empty(), "nothing was recorded");
}

#[tokio::test]
async fn instance_groups_scale_add_delete_with_explicit_diffs_and_immutable_fields() {
    let app = test_app(2000.0);
    create_ready(&app, "demo").await;
    let groups = app.get("/api/clusters/demo/instance-groups").await.body;
    assert_eq!(groups[0]["name"], "workers");
    assert_eq!(groups[0]["target_count"], 2);
    let ops_before = app.get("/api/operations").await.body.as_array().unwrap().len();

    // The same count: 200, nothing recorded, nothing called.
    let calls = app.get("/api/sim/stats").await.body["sagemaker:UpdateCluster"].clone();
    let r =
        app.send(Method::PATCH, "/api/clusters/demo/instance-groups/workers", Some(json!({ "count": 2 })), &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{:#}", r.body);
    assert_eq!(r.body["no_change"], true);
    assert_eq!(app.get("/api/operations").await.body.as_array().unwrap().len(), ops_before);
    assert_eq!(app.get("/api/sim/stats").await.body["sagemaker:UpdateCluster"], calls);
    // Immutable fields: 422 naming the field, before anything is called.
    let r = app
        .send(
            Method::PATCH,
            "/api/clusters/demo/instance-groups/workers",
            Some(json!({ "count": 3, "capacity": { "type": "spot" } })),
            &[],
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);
    assert_eq!(r.body["findings"][0]["field"], "patch.capacity");
    let r = app
        .send(
            Method::PATCH,
            "/api/clusters/demo/instance-groups/workers",
            Some(json!({ "interface_mode": "efa_only" })),
            &[],
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.body["findings"][0]["field"], "patch.interface_mode");
    assert_eq!(
        app.send(Method::PATCH, "/api/clusters/demo/instance-groups/nope", Some(json!({ "count": 1 })), &[])
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    // Scale up, then to zero.
    let plan = app
        .send(
            Method::PATCH,
            "/api/clusters/demo/instance-groups/workers?dry_run=true",
            Some(json!({ "count": 3 })),
            &[],
        )
        .await;
    assert_eq!(plan.body["plan"]["changes"][0]["field"], "count", "{:#}", plan.body);
    run(&app, Method::PATCH, "/api/clusters/demo/instance-groups/workers", Some(json!({ "count": 3 }))).await;
    let g = &app.get("/api/clusters/demo/instance-groups").await.body[0];
    assert_eq!((g["target_count"].as_u64(), g["current_count"].as_u64()), (Some(3), Some(3)));
    run(&app, Method::PATCH, "/api/clusters/demo/instance-groups/workers", Some(json!({ "count": 0 }))).await;
    assert_eq!(app.get("/api/clusters/demo/instance-groups").await.body[0]["current_count"], 0);

    // Add a spot group in another AZ: a new /20 compute subnet is planned and created.
    let subnets = app.get("/api/sim/stats").await.body["ec2:CreateSubnet"].as_u64().unwrap();
    let spot = json!({ "name": "spot", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1b", "capacity": { "type": "spot" } });
    let dup =
        json!({ "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1a" });
    assert_eq!(
        app.send(Method::POST, "/api/clusters/demo/instance-groups", Some(dup), &[]).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    run(&app, Method::POST, "/api/clusters/demo/instance-groups", Some(spot)).await;
    assert_eq!(app.get("/api/sim/stats").await.body["ec2:CreateSubnet"].as_u64().unwrap(), subnets + 1);
    let groups = app.get("/api/clusters/demo/instance-groups").await.body;
    let spot = groups.as_array().unwrap().iter().find(|g| g["name"] == "spot").unwrap();
    assert_eq!(spot["capacity"]["type"], "spot");
    // Capacity type of the new group is immutable too.
    let r = app
        .send(
            Method::PATCH,
            "/api/clusters/demo/instance-groups/spot",
            Some(json!({ "capacity": { "type": "on_demand" } })),
            &[],
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    run(&app, Method::DELETE, "/api/clusters/demo/instance-groups/spot", None).await;
    assert_eq!(app.get("/api/clusters/demo/instance-groups").await.body.as_array().unwrap().len(), 1);
    // The last group cannot be deleted.
    assert_eq!(
        app.send(Method::DELETE, "/api/clusters/demo/instance-groups/workers", None, &[]).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
}

#[tokio::test]
async fn node_reboot_replace_delete() {
    let app = test_app(2000.0);
    create_ready(&app, "demo").await;
    let nodes = app.get("/api/clusters/demo/nodes").await.body;
    let ids: Vec<String> =
        nodes.as_array().unwrap().iter().map(|n| n["instance_id"].as_str().unwrap().to_string()).collect();
    assert_eq!(ids.len(), 2);
    run(&app, Method::POST, "/api/clusters/demo/nodes/reboot", Some(json!({ "node_ids": [ids[0]] }))).await;
    assert_eq!(app.get("/api/sim/stats").await.body["sagemaker:BatchRebootClusterNodes"], 1);
    // Replace without acknowledging the data loss: 422 on that field.
    let r =
        app.send(Method::POST, "/api/clusters/demo/nodes/replace", Some(json!({ "node_ids": [ids[0]] })), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.body["findings"][0]["field"], "acknowledge_local_data_loss");
    let r =
        app.send(Method::POST, "/api/clusters/demo/nodes/reboot", Some(json!({ "node_ids": ["i-0000"] })), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.body["findings"][0]["field"], "node_ids[0]");
    run(
        &app,
        Method::POST,
        "/api/clusters/demo/nodes/replace",
        Some(json!({ "node_ids": [ids[0]], "acknowledge_local_data_loss": true })),
    )
    .await;
    let after: Vec<String> = app
        .get("/api/clusters/demo/nodes")
        .await
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["instance_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(after.len(), 2);
    assert!(!after.contains(&ids[0]) && after.contains(&ids[1]), "the replaced node has a new instance id");
    run(
        &app,
        Method::POST,
        "/api/clusters/demo/nodes/delete",
        Some(json!({ "node_ids": [ids[1]], "acknowledge_local_data_loss": true })),
    )
    .await;
    assert_eq!(app.get("/api/clusters/demo/nodes").await.body.as_array().unwrap().len(), 1);
    assert_eq!(app.get("/api/clusters/demo/instance-groups").await.body[0]["target_count"], 1);
}

#[tokio::test]
async fn hyperpod_events_and_one_node_in_detail() {
    let app = test_app(2000.0);
    create_ready(&app, "demo").await;
    // Page by page, newest first, until there is no next cursor.
    let mut events: Vec<Value> = Vec::new();
    let mut uri = "/api/clusters/demo/events?limit=3".to_string();
    loop {
        let r = app.get(&uri).await;
        assert_eq!(r.status, StatusCode::OK, "{:#}", r.body);
        let page = r.body["events"].as_array().unwrap();
        assert!(page.len() <= 3);
        events.extend(page.iter().cloned());
        match r.body["next_cursor"].as_str() {
            Some(c) => uri = format!("/api/clusters/demo/events?limit=3&cursor={}", urlencode(c)),
            None => break,
        }
    }
    let times: Vec<&str> = events.iter().map(|e| e["time"].as_str().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    let all = app.get("/api/clusters/demo/events?limit=100").await.body;
    assert_eq!(all["events"].as_array().unwrap(), &events);
    assert!(events.iter().any(|e| e["description"].as_str().unwrap().ends_with("is InService")), "{events:#?}");
    // One node: its detail and its events only.
    let nodes = app.get("/api/clusters/demo/nodes").await.body;
    let id = nodes[0]["instance_id"].as_str().unwrap();
    let d = app.get(&format!("/api/clusters/demo/nodes/{id}")).await;
    assert_eq!(d.status, StatusCode::OK, "{:#}", d.body);
    assert_eq!((d.body["instance_id"].as_str(), d.body["status"].as_str()), (Some(id), Some("Running")));
    assert_eq!(d.body["instance_group"], nodes[0]["instance_group"]);
    assert!(d.body["private_ip"].is_string() && d.body["launch_time"].is_string(), "{:#}", d.body);
    let mine = app.get(&format!("/api/clusters/demo/events?node_id={id}&resource_type=instance")).await.body;
    let mine = mine["events"].as_array().unwrap();
    assert!(!mine.is_empty() && mine.iter().all(|e| e["instance_id"] == id), "{mine:#?}");
    // Refusals name the field; unknown things are 404s.
    for (uri, status, field) in [
        ("/api/clusters/demo/events?limit=0", StatusCode::BAD_REQUEST, Some("limit")),
        ("/api/clusters/demo/events?limit=101", StatusCode::BAD_REQUEST, Some("limit")),
        ("/api/clusters/demo/events?node_id=node-1", StatusCode::BAD_REQUEST, Some("node_id")),
        ("/api/clusters/demo/events?instance_group=bad_name", StatusCode::BAD_REQUEST, Some("instance_group")),
        (
            "/api/clusters/demo/events?after=2026-01-02T00:00:00Z&before=2026-01-01T00:00:00Z",
            StatusCode::BAD_REQUEST,
            Some("after"),
        ),
        ("/api/clusters/demo/events?resource_type=pod", StatusCode::BAD_REQUEST, None),
        ("/api/clusters/nope/events", StatusCode::NOT_FOUND, None),
        ("/api/clusters/demo/nodes/node-1", StatusCode::BAD_REQUEST, Some("node")),
        ("/api/clusters/demo/nodes/i-00000000000000000", StatusCode::NOT_FOUND, None),
        ("/api/clusters/nope/nodes/i-00000000000000000", StatusCode::NOT_FOUND, None),
    ] {
        let r = app.get(uri).await;
        assert_eq!(r.status, status, "{uri}: {:#}", r.body);
        if let Some(field) = field {
            assert_eq!(r.body["findings"][0]["field"], field, "{uri}: {:#}", r.body);
        }
    }
    let r = app.get("/api/clusters/demo/nodes/i-00000000000000000").await;
    assert!(r.body["detail"].as_str().unwrap().starts_with("node i-00000000000000000 of cluster demo"), "{:#}", r.body);
    let stats = app.get("/api/sim/stats").await.body;
    assert!(stats["sagemaker:ListClusterEvents"].as_u64().unwrap() >= 3, "{stats}");
    assert!(stats["sagemaker:DescribeClusterNode"].as_u64().unwrap() >= 1, "{stats}");
}

#[tokio::test]
async fn quotas_training_plans_and_offerings_of_a_region() {
    let app = test_app(2000.0);
    create_ready(&app, "demo").await;
    let quotas = app.get("/api/context/quotas?region=us-east-1").await;
    assert_eq!(quotas.status, StatusCode::OK, "{:#}", quotas.body);
    let g5 = quotas.body.as_array().unwrap().iter().find(|q| q["instance_type"] == "ml.g5.2xlarge").cloned().unwrap();
    assert_eq!(g5["name"], "ml.g5.2xlarge for cluster usage");
    assert_eq!(g5["in_use"], 2, "the demo cluster's two workers: {g5:#}");
    assert_eq!(g5["available"].as_u64(), Some(g5["value"].as_u64().unwrap() - 2), "{g5:#}");
    let plans = app.get("/api/context/training-plans").await;
    assert_eq!((plans.status, plans.body.clone()), (StatusCode::OK, json!([])));
    let uri = "/api/context/training-plan-offerings?instance_type=ml.p5.48xlarge&instance_count=2&duration_hours=24\
               &start_after=2030-01-01T00:00:00Z";
    let offers = app.get(uri).await;
    assert_eq!(offers.status, StatusCode::OK, "{:#}", offers.body);
    let first = &offers.body[0];
    assert_eq!((first["instance_count"].as_u64(), first["duration_hours"].as_u64()), (Some(2), Some(24)));
    assert_eq!(first["target_resources"], json!(["hyperpod-cluster"]));
    assert!(first["start_time"].as_str().unwrap() >= "2030-01-01", "{first:#}");
    let base = "/api/context/training-plan-offerings?";
    for (query, field) in [
        ("instance_type=ml.g5.2xlarge&instance_count=2&duration_hours=24", Some("instance_type")),
        ("instance_type=ml.p5.48xlarge&instance_count=0&duration_hours=24", Some("instance_count")),
        ("instance_type=ml.p5.48xlarge&instance_count=257&duration_hours=24", Some("instance_count")),
        ("instance_type=ml.p5.48xlarge&instance_count=2&duration_hours=0", Some("duration_hours")),
        (
            "instance_type=ml.p5.48xlarge&instance_count=2&duration_hours=24\
             &start_after=2030-02-01T00:00:00Z&end_before=2030-01-01T00:00:00Z",
            Some("start_after"),
        ),
        ("instance_type=ml.p5.48xlarge&instance_count=2&duration_hours=24&region=Not_A_Region", Some("region")),
        ("instance_type=ml.p5.48xlarge&instance_count=2", None),
        ("instance_type=ml.p5.48xlarge&instance_count=two&duration_hours=24", None),
    ] {
        let r = app.get(&format!("{base}{query}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{query}: {:#}", r.body);
        if let Some(field) = field {
            assert_eq!(r.body["findings"][0]["field"], field, "{query}: {:#}", r.body);
        }
    }
    let r = app.get("/api/context/quotas?region=Not_A_Region").await;
    assert_eq!((r.status, r.body["findings"][0]["field"].clone()), (StatusCode::BAD_REQUEST, json!("region")));
    // A refused search never reached the (simulated) service; the good one did, once.
    let stats = app.get("/api/sim/stats").await.body;
    assert_eq!(stats["sagemaker:SearchTrainingPlanOfferings"], 1, "{stats:#}");
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn managed_features_are_reconciled_state() {
    let app = test_app(2000.0);
    create_ready(&app, "demo").await;
    let f = app.get("/api/clusters/demo/features").await.body;
    assert_eq!(f["training_operator"], false);
    assert!(f["autoscaling_scope"].as_str().unwrap().contains("HyperPod instance groups only"));

    // Training operator: prerequisites already installed by the pipeline are observed, not redone.
    let addons = app.get("/api/sim/stats").await.body["eks:CreateAddon"].as_u64().unwrap();
    let done =
        run(&app, Method::PATCH, "/api/clusters/demo/features", Some(json!({ "training_operator": true }))).await;
    let keys: Vec<&str> = done["steps"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert!(
        keys.contains(&"addon:cert-manager") && keys.contains(&"addon:amazon-sagemaker-hyperpod-training-operator")
    );
    assert_eq!(app.get("/api/sim/stats").await.body["eks:CreateAddon"].as_u64().unwrap(), addons + 1);
    assert!(keys.contains(&"training_operator_role") && keys.contains(&"training_operator_identity"), "{keys:?}");
    assert_eq!(app.get("/api/clusters/demo/features").await.body["training_operator"], true);
    // The same toggle again: "already in this state", no operation.
    let r =
        app.send(Method::PATCH, "/api/clusters/demo/features", Some(json!({ "training_operator": true })), &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["no_change"], true);
    assert_eq!(r.body["message"], "demo: already in this state");

    // Tiered checkpointing ON builds the identity chain; only the changed field is planned.
    let plan = app
        .send(
            Method::PATCH,
            "/api/clusters/demo/features?dry_run=true",
            Some(
                json!({ "training_operator": true, "tiered_checkpointing": { "enabled": true, "memory_percent": 30 } }),
            ),
            &[],
        )
        .await;
    let changes: Vec<&str> =
        plan.body["plan"]["changes"].as_array().unwrap().iter().map(|c| c["field"].as_str().unwrap()).collect();
    assert_eq!(changes, ["tiered_checkpointing"], "{:#}", plan.body);
    run(
        &app,
        Method::PATCH,
        "/api/clusters/demo/features",
        Some(json!({ "tiered_checkpointing": { "enabled": true, "memory_percent": 30 } })),
    )
    .await;
    let stats = app.get("/api/sim/stats").await.body;
    assert_eq!(stats["iam:CreateOpenIDConnectProvider"], 1, "the pipeline's provider is adopted");
    assert_eq!(
        stats["iam:CreateRole"], 6,
        "four pipeline roles (EKS, HyperPod, S3 CSI driver, load balancer controller), the training operator's and the checkpoint role"
    );
    let f = app.get("/api/clusters/demo/features").await.body;
    assert_eq!(f["tiered_checkpointing"]["memory_percent"], 30);
    // OFF removes the same chain.
    run(
        &app,
        Method::PATCH,
        "/api/clusters/demo/features",
        Some(json!({ "tiered_checkpointing": { "enabled": false } })),
    )
    .await;
    let stats = app.get("/api/sim/stats").await.body;
    assert_eq!(stats["iam:DeleteRole"], 1);
    assert_eq!(stats["k8s:Delete"], 1);
    assert_eq!(app.get("/api/clusters/demo/features").await.body["tiered_checkpointing"], Value::Null);

    // Managed autoscaling on and off.
    run(&app, Method::PATCH, "/api/clusters/demo/features", Some(json!({ "managed_autoscaling": true }))).await;
    assert_eq!(app.get("/api/clusters/demo/features").await.body["managed_autoscaling"], true);
    let bad = app
        .send(
            Method::PATCH,
            "/api/clusters/demo/features",
            Some(json!({ "tiered_checkpointing": { "enabled": true, "memory_percent": 0 } })),
            &[],
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.body["findings"][0]["field"], "patch.tiered_checkpointing.memory_percent");

    // Node recovery: read from DescribeCluster, changed by an explicit diff; autoscaling needs
    // Automatic (422 naming the field), so None goes with autoscaling off, after it.
    assert_eq!(app.get("/api/clusters/demo/features").await.body["node_recovery"], "Automatic");
    let kept = app
        .send(Method::PATCH, "/api/clusters/demo/features", Some(json!({ "node_recovery": "Automatic" })), &[])
        .await;
    assert_eq!((kept.status, kept.body["no_change"].clone()), (StatusCode::OK, json!(true)));
    let refused =
        app.send(Method::PATCH, "/api/clusters/demo/features", Some(json!({ "node_recovery": "None" })), &[]).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", refused.body);
    assert_eq!(refused.body["findings"][0]["field"], "patch.node_recovery");
    let bad = app
        .send(Method::PATCH, "/api/clusters/demo/features", Some(json!({ "node_recovery": "Sometimes" })), &[])
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let done = run(
        &app,
        Method::PATCH,
        "/api/clusters/demo/features",
        Some(json!({ "managed_autoscaling": false, "node_recovery": "None" })),
    )
    .await;
    let keys: Vec<&str> = done["steps"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(keys.last(), Some(&"node_recovery"), "{keys:?}");
    let f = app.get("/api/clusters/demo/features").await.body;
    assert_eq!((f["node_recovery"].clone(), f["managed_autoscaling"].clone()), (json!("None"), json!(false)));
}

#[tokio::test]
async fn deep_health_checks_start_on_demand_with_typed_refusals() {
    let app = test_app(2000.0);
    create_ready(&app, "demo").await;
    let nodes = app.get("/api/clusters/demo/nodes").await.body;
    let node = nodes[0]["instance_id"].as_str().unwrap().to_string();
    let uri = "/api/clusters/demo/health-checks";
    // Dry run: the step, nothing called.
    let plan = app
        .send(
            Method::POST,
            &format!("{uri}?dry_run=true"),
            Some(json!({ "instance_groups": [{ "name": "workers", "checks": ["InstanceStress"] }] })),
            &[],
        )
        .await;
    assert_eq!(plan.status, StatusCode::OK, "{:#}", plan.body);
    assert_eq!(plan.body["steps"][0]["key"], "health_check");
    assert_eq!(app.get("/api/sim/stats").await.body.get("sagemaker:StartClusterHealthCheck"), None);
    // The check runs and each node's result is the step's output.
    let done = run(
        &app,
        Method::POST,
        uri,
        Some(json!({ "instance_groups": [{ "name": "workers", "node_ids": [node], "checks": ["InstanceStress"] }] })),
    )
    .await;
    assert_eq!(done["kind"], "start_health_check");
    let out = &done["steps"][0]["outputs"];
    assert_eq!(out["nodes"], json!([{ "node_id": node, "result": "passed", "status": "Running" }]), "{done:#}");
    // Typed refusals: 400 for the shape, 422 for what the cluster cannot do, 404 for no cluster.
    let cases: Vec<(&str, Value, StatusCode, &str)> = vec![
        (uri, json!({ "instance_groups": [] }), StatusCode::BAD_REQUEST, "instance_groups"),
        (
            uri,
            json!({ "instance_groups": [{ "name": "workers", "checks": ["Everything"] }] }),
            StatusCode::BAD_REQUEST,
            "instance_groups[0].checks[0]",
        ),
        (
            uri,
            json!({ "instance_groups": [{ "name": "workers", "checks": ["InstanceConnectivity"] }] }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "instance_groups[0].checks[0]",
        ),
        (
            uri,
            json!({ "instance_groups": [{ "name": "ghost", "checks": ["InstanceStress"] }] }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "instance_groups[0].name",
        ),
        (
            "/api/clusters/nope/health-checks",
            json!({ "instance_groups": [{ "name": "workers", "checks": ["InstanceStress"] }] }),
            StatusCode::NOT_FOUND,
            "",
        ),
    ];
    for (path, body, status, field) in cases {
        let r = app.send(Method::POST, path, Some(body), &[]).await;
        assert_eq!(r.status, status, "{path} {field}: {:#}", r.body);
        if !field.is_empty() {
            assert_eq!(r.body["findings"][0]["field"], field, "{:#}", r.body);
        }
    }
    assert_eq!(app.get("/api/sim/stats").await.body["sagemaker:StartClusterHealthCheck"], 1);
}

#[tokio::test]
async fn software_updates_start_with_a_plan_and_typed_refusals() {
    let app = test_app(2000.0);
    create_ready(&app, "demo").await;
    let uri = "/api/clusters/demo/software-update";
    let groups = app.get("/api/clusters/demo/instance-groups").await.body;
    assert_eq!(groups[0]["software"]["current_release"], "2025.10.1", "{groups:#}");
    assert_eq!(groups[0]["software"]["image_version_status"], "UpdateAvailable");
    // Dry run: each group's software now and after, nothing called.
    let plan = app.send(Method::POST, &format!("{uri}?dry_run=true"), Some(json!({})), &[]).await;
    assert_eq!(plan.status, StatusCode::OK, "{:#}", plan.body);
    assert_eq!(plan.body["steps"][0]["key"], "software_update");
    assert_eq!(
        plan.body["plan"]["changes"][0],
        json!({ "field": "instance_groups.workers.software", "from": "release 2025.10.1 (UpdateAvailable)",
            "to": "the latest release" }),
        "{:#}",
        plan.body
    );
    assert_eq!(app.get("/api/sim/stats").await.body.get("sagemaker:UpdateClusterSoftware"), None);
    // Typed refusals: 400 for the shape, 422 for an unknown group, 404 for no cluster.
    let cases: Vec<(&str, Value, StatusCode, &str)> = vec![
        (uri, json!({ "image_id": "ami-12" }), StatusCode::BAD_REQUEST, "image_id"),
        (
            uri,
            json!({ "deployment": { "max_batch": { "type": "capacity_percentage", "value": 150 } } }),
            StatusCode::BAD_REQUEST,
            "deployment.max_batch.value",
        ),
        (
            uri,
            json!({ "instance_groups": [{ "name": "ghost" }] }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "instance_groups[0].name",
        ),
        ("/api/clusters/nope/software-update", json!({}), StatusCode::NOT_FOUND, ""),
    ];
    for (path, body, status, field) in cases {
        let r = app.send(Method::POST, path, Some(body), &[]).await;
        assert_eq!(r.status, status, "{path} {field}: {:#}", r.body);
        if !field.is_empty() {
            assert_eq!(r.body["findings"][0]["field"], field, "{:#}", r.body);
        }
    }
    // The update runs; a second one meanwhile is a 409.
    let body = json!({ "instance_groups": [{ "name": "workers" }],
        "deployment": { "max_batch": { "type": "capacity_percentage", "value": 50 } } });
    let r = app.send(Method::POST, uri, Some(body.clone()), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    let busy = app.send(Method::POST, uri, Some(body.clone()), &[]).await;
    assert_eq!(busy.status, StatusCode::CONFLICT, "{:#}", busy.body);
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    assert_eq!(done["kind"], "update_software");
    assert_eq!(done["steps"][0]["outputs"]["instance_groups"][0]["image_release_version"], "2025.11.2", "{done:#}");
    let groups = app.get("/api/clusters/demo/instance-groups").await.body;
    assert_eq!(groups[0]["software"]["image_version_status"], "UpToDate", "{groups:#}");
    // The same again: 200 "already in this state", nothing called.
    let again = app.send(Method::POST, uri, Some(body), &[]).await;
    assert_eq!(again.status, StatusCode::OK, "{:#}", again.body);
    assert_eq!(again.body["no_change"], true);
    assert_eq!(app.get("/api/sim/stats").await.body["sagemaker:UpdateClusterSoftware"], 1);
}

fn sglang_endpoint(name: &str, replicas: u32, extra: Value) -> Value {
    let mut v = json!({
        "route": "self_managed", "name": name, "namespace": "default", "image": "lmsysorg/sglang:v0.5.2",
        "instance_type": "ml.g5.2xlarge", "gpus": 1, "replicas": replicas,
        "engine": { "kind": "sglang", "model": "models/Qwen/Qwen3-0.6B", "served_model_name": "qwen" },
    });
    v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    v
}

/// Posts `body` to `uri` until the answer is 200 (e.g. a dry run waiting for a controller to be available).
async fn until_ok(app: &Bed, uri: &str, body: &Value) -> Value {
    let ok = |r: &instantstart_testkit::Reply| {
        r.status == StatusCode::OK
            && r.body["checks"].as_array().is_some_and(|c| c.iter().all(|c| c["status"] != "fail"))
    };
    let what = format!("{uri} to answer 200 without a failing check");
    app.call_until(&what, || instantstart_testkit::admin(Method::POST, uri, Some(body.clone())), ok).await.body
}

fn worker<'a>(pools: &'a Value, pool: &str, pod: &str) -> &'a Value {
    let p = pools.as_array().unwrap().iter().find(|p| p["pool"] == pool).unwrap();
    p["workers"].as_array().unwrap().iter().find(|w| w["pod"] == pod).unwrap()
}

#[tokio::test]
async fn inference_endpoints_deploy_chat_pools_scale_and_delete_on_the_sim() {
    use instantstart_core::provider::ListParams;
    let app = test_app(2000.0);
    // chat (2 replicas, then 3), alt and what moves between them: more than two GPUs.
    create_ready_with_nodes(&app, "demo", 5).await;
    let eps = "/api/clusters/demo/endpoints";

    // Validation: every finding names its field; what needs EC2's specs of the instance type
    // (its GPU count) once the rest is valid.
    let r = app.send(Method::POST, eps, Some(sglang_endpoint("bad", 1, json!({ "gpus": 9, "port": 0 }))), &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:#}", r.body);
    let fields: Vec<&str> =
        r.body["findings"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
    assert!(fields.contains(&"port"), "{fields:?}");
    let r = app.send(Method::POST, eps, Some(sglang_endpoint("bad", 1, json!({ "gpus": 9 }))), &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:#}", r.body);
    assert_eq!(r.body["findings"][0]["field"], "gpus", "{:#}", r.body);
    let vllm_router =
        sglang_endpoint("bad", 1, json!({ "router": true, "engine": { "kind": "vllm", "model": "models/m" } }));
    let r = app.send(Method::POST, eps, Some(vllm_router), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);
    assert_eq!(r.body["findings"][0]["field"], "router");
    // A load balancer needs the AWS Load Balancer Controller: create-cluster installed it
    // (`chart:aws-load-balancer-controller`), so the check passes; without it (its release
    // uninstalled here, like an imported cluster) the dry run shows the failing check and a
    // deploy is refused.
    let lb = sglang_endpoint("pub", 1, json!({ "exposure": { "type": "load_balancer" } }));
    let dry = until_ok(&app, &format!("{eps}?dry_run=true"), &lb).await;
    let check = dry["checks"].as_array().unwrap().iter().find(|c| c["check"] == "load_balancer_controller").unwrap();
    assert_eq!(check["status"], "pass", "{check:#}");
    {
        use instantstart_core::provider::HelmReleases;
        let rec = app.state().store.get_cluster("demo").unwrap().unwrap();
        let target = instantstart_core::provider::KubeTarget::new(rec.region, rec.eks_cluster);
        let sim = app.state().sim.clone().expect("the simulated cloud");
        sim.uninstall(&target, "kube-system", "aws-load-balancer-controller").await.unwrap();
    }
    let dry = app.send(Method::POST, &format!("{eps}?dry_run=true"), Some(lb.clone()), &[]).await;
    assert_eq!(dry.status, StatusCode::OK, "{:#}", dry.body);
    let check =
        dry.body["checks"].as_array().unwrap().iter().find(|c| c["check"] == "load_balancer_controller").unwrap();
    assert_eq!(check["status"], "fail");
    let r = app.send(Method::POST, eps, Some(lb), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);
    assert_eq!(r.body["findings"][0]["field"], "exposure");

    // Deploy two pool endpoints; the operations complete when they are ready.
    let r = app.send(Method::POST, eps, Some(sglang_endpoint("chat", 2, json!({ "pool": "warm" }))), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    assert_eq!(r.body["workload"], json!({ "name": "chat", "namespace": "default" }));
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    run(&app, Method::POST, eps, Some(sglang_endpoint("alt", 1, json!({ "pool": "spare" })))).await;
    let list = app.get(eps).await.body;
    let chat = list.as_array().unwrap().iter().find(|e| e["name"] == "chat").unwrap();
    assert_eq!(chat["ready"], true, "{chat:#}");
    assert_eq!(chat["replicas"], json!({ "desired": 2, "ready": 2 }));
    assert_eq!(chat["exposure"], "model_pool");
    assert_eq!(chat["pool"], "warm");
    assert_eq!(chat["engine"], "sglang");
    assert_eq!(chat["url"], "http://chat.default.svc.cluster.local");

    // Call the model through the service proxy.
    let ask = json!({ "model": "qwen", "messages": [{ "role": "user", "content": "hello model" }], "max_tokens": 64 });
    let r = app.send(Method::POST, &format!("{eps}/chat/chat"), Some(ask.clone()), &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{:#}", r.body);
    assert!(r.body["choices"][0]["message"]["content"].as_str().unwrap().contains("hello model"));
    assert_eq!(r.body["usage"]["prompt_tokens"], 5);
    assert!(r.body["usage"]["completion_tokens"].as_u64().unwrap() > 0);
    let wrong_model = json!({ "model": "nope", "messages": [{ "role": "user", "content": "x" }] });
    assert_eq!(
        app.send(Method::POST, &format!("{eps}/chat/chat"), Some(wrong_model), &[]).await.status,
        StatusCode::NOT_FOUND
    );
    let huge = json!({ "messages": [{ "role": "user", "content": "x".repeat(1 << 20) }] });
    let r = app.send(Method::POST, &format!("{eps}/chat/chat"), Some(huge), &[]).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{:#}", r.body);
    assert_eq!(
        app.send(Method::POST, &format!("{eps}/nope/chat"), Some(ask.clone()), &[]).await.status,
        StatusCode::NOT_FOUND
    );

    // Move a worker of the warm pool to the other endpoint by its label: same pod, not restarted.
    let pools = app.get("/api/clusters/demo/pools").await.body;
    let warm = pools.as_array().unwrap().iter().find(|p| p["pool"] == "warm").unwrap();
    assert_eq!(warm["workers"].as_array().unwrap().len(), 2);
    let pod = warm["workers"][0]["pod"].as_str().unwrap().to_string();
    let uid = warm["workers"][0]["uid"].clone();
    assert_eq!(warm["workers"][0]["serving"], "chat");
    let uri = format!("/api/clusters/demo/pools/warm/workers/{pod}");
    let r = app.send(Method::PUT, &uri, Some(json!({ "serving": "alt" })), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    assert_eq!(r.body["plan"]["changes"][0]["from"], "warm");
    assert_eq!(r.body["plan"]["changes"][0]["to"], "spare");
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    // Pod lists come from the watch cache: they catch up within a watch poll.
    let pools = app.get_until("/api/clusters/demo/pools", |b| worker(b, "warm", &pod)["serving"] == "alt").await;
    let moved = worker(&pools, "warm", &pod);
    assert_eq!(moved["serving"], "alt");
    assert_eq!(moved["uid"], uid, "the pod was not restarted");
    assert_eq!(moved["ready"], true);
    let r = app.send(Method::PUT, &uri, Some(json!({ "serving": "alt" })), &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{:#}", r.body);
    assert_eq!(r.body["no_change"], true);
    let r = app.send(Method::PUT, &uri, Some(json!({ "serving": "ghost" })), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);

    // Scale: the same replicas is a no-op; another count is an update_endpoint with the diff.
    let one = format!("{eps}/chat");
    let applies = app.get("/api/sim/stats").await.body["k8s:Apply"].clone();
    let ops = app.get("/api/operations").await.body.as_array().unwrap().len();
    let r = app.send(Method::PATCH, &one, Some(json!({ "replicas": 2 })), &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{:#}", r.body);
    assert_eq!(r.body["no_change"], true);
    assert_eq!(app.get("/api/sim/stats").await.body["k8s:Apply"], applies, "a no-op applies nothing");
    assert_eq!(app.get("/api/operations").await.body.as_array().unwrap().len(), ops, "and records nothing");
    let r = app.send(Method::PATCH, &one, Some(json!({ "replicas": 3 })), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    assert_eq!(r.body["plan"]["changes"][0], json!({ "field": "replicas", "from": 2, "to": 3 }));
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    assert_eq!(app.get(&one).await.body["replicas"], json!({ "desired": 3, "ready": 3 }));
    // Scaling kept the moved worker where it was.
    assert_eq!(worker(&app.get("/api/clusters/demo/pools").await.body, "warm", &pod)["uid"], uid);

    // Autoscaling with KEDA, driven by the simulated metric (5 waiting requests per replica).
    let auto = json!({ "autoscaling": { "min_replicas": 1, "max_replicas": 4, "cooldown_seconds": 600 } });
    let r = app.send(Method::PATCH, &one, Some(auto.clone()), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    assert_eq!(app.send(Method::PATCH, &one, Some(auto), &[]).await.body["no_change"], true);
    let r = app.send(Method::PATCH, &one, Some(json!({ "replicas": 2 })), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "replicas belong to the autoscaler: {:#}", r.body);
    let metric = |v: f64| json!({ "cluster": "demo", "namespace": "default", "scaled_object": "chat", "value": v });
    assert_eq!(app.send(Method::PUT, "/api/sim/scaling-metric", Some(metric(18.0)), &[]).await.status, StatusCode::OK);
    let scaled = app.get_until(&one, |b| b["replicas"]["desired"] == 4 && b["replicas"]["ready"] == 4).await;
    assert_eq!(scaled["autoscaling"]["max"], 4);
    // The cooldown is simulated time (0.3 s of wall time here): hold the clock while the
    // scale-down is checked, so a slow machine does not let the cooldown pass in between.
    let clock = app.state().sim.clone().expect("the simulated cloud");
    clock.set_manual_clock(true).unwrap();
    app.send(Method::PUT, "/api/sim/scaling-metric", Some(metric(1.0)), &[]).await;
    assert_eq!(app.get(&one).await.body["replicas"]["desired"], 4, "scale-down waits for the cooldown");
    clock.set_manual_clock(false).unwrap();
    app.get_until(&one, |b| b["replicas"]["desired"] == 1).await;

    // Remove autoscaling ("autoscaling": null, merge-patch): the diff says the replicas stay
    // where KEDA has them now (2, read from the cluster, not the request's 3); the update
    // deletes the ScaledObject first, then applies the Deployment with that fixed count.
    app.send(Method::PUT, "/api/sim/scaling-metric", Some(metric(9.0)), &[]).await;
    app.get_until(&one, |b| b["replicas"]["desired"] == 2 && b["replicas"]["ready"] == 2).await;
    let off = json!({ "autoscaling": null });
    let dry = app.send(Method::PATCH, &format!("{one}?dry_run=true"), Some(off.clone()), &[]).await;
    assert_eq!(dry.status, StatusCode::OK, "{:#}", dry.body);
    assert_eq!(
        dry.body["plan"]["changes"][1],
        json!({ "field": "replicas", "from": "set by autoscaling (2 now)", "to": 2 })
    );
    let keys: Vec<&str> = dry.body["steps"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(keys.first(), Some(&"remove:ScaledObject/chat"), "{keys:?}");
    assert!(!keys.iter().any(|k| k.starts_with("apply:ScaledObject")), "{keys:?}");
    let r = app.send(Method::PATCH, &one, Some(off.clone()), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    assert_eq!(
        r.body["plan"]["changes"],
        json!([
            { "field": "autoscaling", "from": { "min_replicas": 1, "max_replicas": 4, "cooldown_seconds": 600 }, "to": null },
            { "field": "replicas", "from": "set by autoscaling (2 now)", "to": 2 },
        ])
    );
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    let target = {
        let rec = app.state().store.get_cluster("demo").unwrap().unwrap();
        instantstart_core::provider::KubeTarget::new(rec.region, rec.eks_cluster)
    };
    let so = ListParams {
        api_version: "keda.sh/v1alpha1".into(),
        kind: "ScaledObject".into(),
        namespace: Some("default".into()),
        labels: vec![("app.kubernetes.io/instance".into(), "chat".into())],
    };
    assert!(app.state().kube.list(&target, &so).await.unwrap().is_empty(), "the ScaledObject is gone");
    let deployment = instantstart_core::provider::ObjectRef {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        namespace: Some("default".into()),
        name: "chat".into(),
    };
    let live = app.state().kube.get(&target, &deployment).await.unwrap().unwrap();
    assert_eq!(live.0["spec"]["replicas"], 2, "a fixed count the user saw in the plan");
    let ep = app.get(&one).await.body;
    assert_eq!((&ep["autoscaling"], &ep["replicas"]), (&Value::Null, &json!({ "desired": 2, "ready": 2 })), "{ep:#}");
    assert_eq!(ep["request"]["replicas"], 2);
    assert_eq!(ep["request"].get("autoscaling"), None);
    // Nothing scales it any more.
    let r = app.send(Method::PUT, "/api/sim/scaling-metric", Some(metric(30.0)), &[]).await;
    assert!(r.status.is_client_error(), "no ScaledObject to drive: {:#}", r.body);
    // Removing it again: no_change, no operation, no call.
    let applies = app.get("/api/sim/stats").await.body["k8s:Apply"].clone();
    let ops = app.get("/api/operations").await.body.as_array().unwrap().len();
    let r = app.send(Method::PATCH, &one, Some(off), &[]).await;
    assert_eq!((r.status, &r.body["no_change"]), (StatusCode::OK, &json!(true)), "{:#}", r.body);
    assert_eq!(app.get("/api/sim/stats").await.body["k8s:Apply"], applies, "a no-op applies nothing");
    assert_eq!(app.get("/api/operations").await.body.as_array().unwrap().len(), ops, "and records nothing");
    assert_eq!(app.get(&one).await.body["replicas"]["desired"], 2);

    // Delete leaves nothing behind.
    for name in ["chat", "alt"] {
        let r = app.send(Method::DELETE, &format!("{eps}/{name}"), None, &[]).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
        let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
        assert_eq!(done["status"], "succeeded", "{done:#}");
    }
    assert_eq!(app.get(eps).await.body, json!([]));
    let target = instantstart_core::provider::KubeTarget::new("us-east-1", "demo");
    let target = {
        let rec = app.state().store.get_cluster("demo").unwrap().unwrap();
        instantstart_core::provider::KubeTarget { eks_cluster: rec.eks_cluster, ..target }
    };
    for (api, kind) in [
        ("apps/v1", "Deployment"),
        ("v1", "Service"),
        ("v1", "Pod"),
        ("keda.sh/v1alpha1", "ScaledObject"),
        ("v1", "ServiceAccount"),
        ("rbac.authorization.k8s.io/v1", "Role"),
    ] {
        for name in ["chat", "alt"] {
            let params = ListParams {
                api_version: api.into(),
                kind: kind.into(),
                namespace: None,
                labels: vec![("app.kubernetes.io/instance".into(), name.into())],
            };
            let left = app.state().kube.list(&target, &params).await.unwrap();
            assert!(left.is_empty(), "{kind} of {name} left behind: {left:?}");
        }
    }
}

#[tokio::test]
async fn managed_endpoint_and_router_become_ready_and_answer() {
    let app = test_app(2000.0);
    // The managed endpoint and the routed one's two replicas hold a GPU each.
    create_ready_with_nodes(&app, "demo", 4).await;
    let eps = "/api/clusters/demo/endpoints";
    let managed = json!({
        "route": "managed", "name": "qwen", "namespace": "default", "instance_type": "ml.g5.2xlarge",
        "model_source": { "bucket": "demo-bucket", "region": "us-east-1", "model_location": "models/Qwen/Qwen3-0.6B" },
        "worker": { "image": "vllm/vllm-openai:v0.11.0", "gpus": 1 },
        "routing": "prefix_aware",
    });
    run(&app, Method::POST, eps, Some(managed)).await;
    let ep = app.get(&format!("{eps}/qwen")).await.body;
    assert_eq!(ep["route"], "managed");
    assert_eq!(ep["ready"], true, "{ep:#}");
    assert_eq!(ep["conditions"][0]["type"], "DeploymentComplete");
    let ask = json!({ "messages": [{ "role": "user", "content": "hi" }] });
    let r = app.send(Method::POST, &format!("{eps}/qwen/chat"), Some(ask.clone()), &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{:#}", r.body);
    assert_eq!(r.body["model"], "qwen");
    let r = app
        .send(
            Method::PATCH,
            &format!("{eps}/qwen"),
            Some(json!({ "autoscaling": { "min_replicas": 1, "max_replicas": 2 } })),
            &[],
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);

    // Multi-replica SGLang behind the router: the router forwards to a ready worker.
    run(&app, Method::POST, eps, Some(sglang_endpoint("routed", 2, json!({ "router": true })))).await;
    let ep = app.get(&format!("{eps}/routed")).await.body;
    assert_eq!(ep["router"], true);
    assert_eq!(ep["url"], "http://routed-router.default.svc.cluster.local");
    let r = app.send(Method::POST, &format!("{eps}/routed/chat"), Some(ask), &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{:#}", r.body);
    assert!(r.body["system_fingerprint"].as_str().unwrap().starts_with("routed-"), "{:#}", r.body);
    run(&app, Method::DELETE, &format!("{eps}/routed"), None).await;
    // A delete answers the workload it acts on; replayed with the same Idempotency-Key once the
    // endpoint is gone, it returns its operation (core::api::workloads::delete); without the key
    // a gone endpoint is a 404.
    let qwen = format!("{eps}/qwen");
    let key = [("idempotency-key", "delete-qwen-1")];
    let r = app.send(Method::DELETE, &qwen, None, &key).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    assert_eq!(r.body["workload"], json!({ "name": "qwen", "namespace": "default" }));
    let id = r.body["operation"]["id"].as_str().unwrap().to_string();
    assert_eq!(app.wait_op(&id).await["status"], "succeeded");
    let again = app.send(Method::DELETE, &qwen, None, &key).await;
    assert_eq!(
        (again.status, again.body["replayed"].as_bool()),
        (StatusCode::ACCEPTED, Some(true)),
        "{:#}",
        again.body
    );
    assert_eq!(
        (again.body["operation"]["id"].as_str(), &again.body["workload"]),
        (Some(id.as_str()), &r.body["workload"])
    );
    assert_eq!(app.send(Method::DELETE, &qwen, None, &[]).await.status, StatusCode::NOT_FOUND);
    let other_key = [("idempotency-key", "delete-qwen-2")];
    assert_eq!(app.send(Method::DELETE, &qwen, None, &other_key).await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.get(eps).await.body, json!([]));

    // With the AWS Load Balancer Controller running, a load_balancer exposure passes its check and
    // the endpoint's URL is the NLB's address once it is provisioned.
    let rec = app.state().store.get_cluster("demo").unwrap().unwrap();
    let target = instantstart_core::provider::KubeTarget::new(rec.region, rec.eks_cluster);
    let lbc = json!({ "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "aws-load-balancer-controller", "namespace": "kube-system" },
        "spec": { "replicas": 1, "selector": { "matchLabels": { "app": "lbc" } },
                  "template": { "metadata": { "labels": { "app": "lbc" } },
                                "spec": { "containers": [{ "name": "controller", "image": "public.ecr.aws/eks/aws-load-balancer-controller:v2.13.0" }] } } } });
    app.state().kube.apply(&target, &instantstart_core::provider::KubeObject(lbc)).await.unwrap();
    let lb = sglang_endpoint("public", 1, json!({ "exposure": { "type": "load_balancer" } }));
    let dry = until_ok(&app, &format!("{eps}?dry_run=true"), &lb).await;
    let check = dry["checks"].as_array().unwrap().iter().find(|c| c["check"] == "load_balancer_controller").unwrap();
    assert_eq!(check["status"], "pass", "{check:#}");
    run(&app, Method::POST, eps, Some(lb)).await;
    let ep = app.get_until(&format!("{eps}/public"), |b| b["url"].is_string()).await;
    assert_eq!(ep["exposure"], "load_balancer");
    assert!(ep["url"].as_str().unwrap().ends_with(".elb.us-east-1.amazonaws.com"), "{ep:#}");
    run(&app, Method::DELETE, &format!("{eps}/public"), None).await;

    // A server that never becomes ready fails the deploy once the rollout deadline passes.
    let fault = json!({ "fail_apis": { "k8s:Apply": { "mode": "resource_fails", "reason": "CUDA out of memory" } } });
    assert_eq!(app.send(Method::PUT, "/api/sim/faults", Some(fault), &[]).await.status, StatusCode::OK);
    let r = app.send(Method::POST, eps, Some(sglang_endpoint("crash", 1, json!({}))), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "failed", "{done:#}");
    let ready = done["steps"].as_array().unwrap().iter().find(|s| s["key"] == "ready").unwrap();
    assert!(ready["error"].as_str().unwrap().contains("CUDA out of memory"), "{ready:#}");
    let ep = app.get(&format!("{eps}/crash")).await.body;
    assert_eq!(ep["ready"], false);
    assert!(ep["pods"][0]["restarts"].as_u64().unwrap() > 0, "{ep:#}");
}

#[path = "api/training.rs"]
mod training;

#[path = "api/hyperpod_attach.rs"]
mod hyperpod_attach;

/// `step 12 | loss 1.2345 | lr 2.00e-05 | 9123.4 tokens/s` → (12, 1.2345, 9123.4).
fn step_line(line: &str) -> Option<(i64, f64, f64)> {
    let rest = &line[line.find("step ")? + 5..];
    let parts: Vec<&str> = rest.split(" | ").collect();
    let step = parts.first()?.trim().parse().ok()?;
    let loss = parts.get(1)?.strip_prefix("loss ")?.trim().parse().ok()?;
    let throughput = parts.get(3)?.strip_suffix(" tokens/s")?.trim().parse().ok()?;
    Some((step, loss, throughput))
}

/// A job that asks for managed tiered checkpointing runs as the feature's service account: it is
/// refused before anything is recorded while the feature is off (the account would not exist),
/// and runs to completion once it is on.
#[tokio::test]
async fn a_tiered_checkpointing_job_runs_as_the_features_service_account() {
    let app = test_app(2000.0);
    create_ready(&app, "demo").await;
    let job = |ns: &str| {
        json!({ "runtime": "hyperpod", "tiered_checkpointing": true,
            "job": { "name": "ckpt", "namespace": ns, "image": "pytorch/pytorch:2.5.1", "instance_type": "ml.g5.2xlarge", "nodes": 1 },
            "recipe": { "kind": "torch", "script": "scripts/train.py" } })
    };
    let jobs = "/api/clusters/demo/jobs";
    // Outside `default`: a validation error naming the field.
    let r = app.send(Method::POST, jobs, Some(job("ml")), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);
    assert!(
        r.body["findings"].as_array().unwrap().iter().any(|f| f["field"] == "job.namespace"
            && f["rule"].as_str().unwrap().contains("with tiered_checkpointing")),
        "{:#}",
        r.body
    );
    // The feature off: the preflight fails and names the remedy; nothing is recorded.
    let dry = app.send(Method::POST, &format!("{jobs}?dry_run=true"), Some(job("default")), &[]).await;
    assert_eq!(dry.status, StatusCode::OK, "{:#}", dry.body);
    let check = dry.body["checks"].as_array().unwrap().iter().find(|c| c["check"] == "tiered_checkpointing").unwrap();
    assert_eq!(check["status"], "fail", "{check:#}");
    assert!(check["remedy"].as_str().unwrap().contains("tiered_checkpointing"), "{check:#}");
    let r = app.send(Method::POST, jobs, Some(job("default")), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);
    assert_eq!(r.body["findings"][0]["field"], "tiered_checkpointing", "{:#}", r.body);
    // On: the job's pods run as default/hyperpod-checkpointing, and the job completes.
    run(
        &app,
        Method::PATCH,
        "/api/clusters/demo/features",
        Some(json!({ "tiered_checkpointing": { "enabled": true, "memory_percent": 20 } })),
    )
    .await;
    let done = run(&app, Method::POST, jobs, Some(job("default"))).await;
    let manifest = &done["request"]["rendered"]["objects"][0];
    assert_eq!(
        manifest.pointer("/spec/replicaSpecs/0/template/spec/serviceAccountName"),
        Some(&json!("hyperpod-checkpointing")),
        "{manifest:#}"
    );
    app.get_until("/api/clusters/demo/jobs/ckpt?namespace=default", |b| b["phase"] == "succeeded").await;
    // The simulator's API server refuses a pod whose service account does not exist (as the
    // ServiceAccount admission does): such a job's pod never starts, and says why.
    let orphan = json!({ "runtime": "hyperpod",
        "job": { "name": "orphan", "namespace": "default", "image": "pytorch/pytorch:2.5.1", "instance_type": "ml.g5.2xlarge",
                 "nodes": 1, "service_account": "nobody" },
        "recipe": { "kind": "torch", "script": "scripts/train.py" } });
    run(&app, Method::POST, jobs, Some(orphan)).await;
    let job = app
        .get_until("/api/clusters/demo/jobs/orphan?namespace=default", |b| {
            b["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["reason"] == "FailedCreate"))
        })
        .await;
    let refused = job["conditions"].as_array().unwrap().iter().find(|c| c["reason"] == "FailedCreate").unwrap();
    assert!(refused["message"].as_str().unwrap().contains(r#"serviceaccount "nobody" not found"#), "{job:#}");
    assert_eq!(job["pod_list"][0]["phase"], "Pending", "{job:#}");
}
#[tokio::test]
async fn training_history_from_a_tracking_server_and_a_job_that_reports_to_it() {
    let app = test_app(2000.0);
    create_ready(&app, "demo").await;
    let servers = "/api/mlflow/servers";
    assert_eq!(app.get(servers).await.body, json!([]));

    // Validation names the fields; an unknown cluster is a 404.
    let r = app.send(Method::POST, servers, Some(json!({ "name": "-bad", "region": "mars-1" })), &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:#}", r.body);
    let fields: Vec<&str> =
        r.body["findings"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["name", "region", "artifact_store_uri"]);
    let r = app.send(Method::POST, servers, Some(json!({ "name": "team", "size": "Huge" })), &[]).await;
    assert_eq!((r.status, r.body["findings"][0]["field"].as_str()), (StatusCode::BAD_REQUEST, Some("size")));
    let r = app.send(Method::POST, servers, Some(json!({ "name": "team", "cluster": "nope" })), &[]).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:#}", r.body);

    // The dry run shows the role and the server, artifacts in the cluster's bucket.
    let body = json!({ "name": "team", "cluster": "demo" });
    let dry = app.send(Method::POST, &format!("{servers}?dry_run=true"), Some(body.clone()), &[]).await;
    assert_eq!(dry.status, StatusCode::OK, "{:#}", dry.body);
    let keys: Vec<&str> = dry.body["steps"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["role", "tracking_server", "writer_role"]);
    assert_eq!(dry.body["target"], "mlflow/team");
    assert_eq!(dry.body["request"]["region"], "us-east-1");
    assert_eq!(dry.body["request"]["size"], "Small");
    let uri = dry.body["request"]["artifact_store_uri"].as_str().unwrap();
    assert!(uri.starts_with("s3://") && uri.ends_with("/mlflow/team"), "{uri}");

    let done = run(&app, Method::POST, servers, Some(body)).await;
    let arn =
        done["steps"].as_array().unwrap().iter().find(|s| s["key"] == "tracking_server").unwrap()["outputs"]["arn"]
            .as_str()
            .unwrap()
            .to_string();
    let listed = app.get(servers).await.body;
    assert_eq!(listed[0]["name"], "team");
    assert_eq!(listed[0]["status"], "Created");
    assert_eq!(listed[0]["arn"], arn.as_str());
    assert!(listed[0]["url"].is_string() && listed[0]["created_at"].is_string(), "{listed:#}");

    // A HyperPod job with the MLflow wiring of the recipes reports to it.
    let job = json!({ "runtime": "hyperpod",
        "job": { "name": "sft", "namespace": "default", "image": "pytorch/pytorch:2.5.1", "instance_type": "ml.g5.2xlarge",
                 "nodes": 2, "mlflow": { "tracking_server_arn": arn, "experiment": "llama" } },
        "recipe": { "kind": "torch", "script": "scripts/train.py" } });
    let submitted = run(&app, Method::POST, "/api/clusters/demo/jobs", Some(job)).await;
    // It runs as its own service account, bound through EKS Pod Identity to the server's
    // writer role before the job is applied: without credentials it could not report.
    let keys: Vec<&str> = submitted["steps"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["pod_identity", "apply:ServiceAccount/sft-mlflow", "apply:HyperPodPyTorchJob/sft", "ready"]);
    let manifest = &submitted["request"]["rendered"]["objects"][1];
    assert_eq!(manifest.pointer("/spec/replicaSpecs/0/template/spec/serviceAccountName"), Some(&json!("sft-mlflow")));
    let associations = || {
        let stats = app.state().sim.as_ref().unwrap().stats();
        (
            stats.get("eks:CreatePodIdentityAssociation").copied().unwrap_or(0),
            stats.get("eks:DeletePodIdentityAssociation").copied().unwrap_or(0),
        )
    };
    let (created, _) = associations();
    let runs = app
        .get_until("/api/mlflow/servers/team/runs?experiment=llama", |b| {
            b.as_array().is_some_and(|a| a.len() == 1 && a[0]["status"] == "FINISHED")
        })
        .await;
    let run_id = runs[0]["run_id"].as_str().unwrap();
    assert_eq!(runs[0]["name"], "sft");
    assert_eq!(runs[0]["experiment"], "llama");
    let metrics = app.get(&format!("/api/mlflow/servers/team/runs/{run_id}/metrics")).await;
    assert_eq!(metrics.status, StatusCode::OK, "{:#}", metrics.body);
    let loss = metrics.body["series"]["loss"].as_array().unwrap();
    let throughput = metrics.body["series"]["throughput"].as_array().unwrap();
    assert!(loss.len() >= 10 && loss.len() == throughput.len(), "{:#}", metrics.body);
    assert_eq!(runs[0]["metrics"]["loss"], loss.last().unwrap()["value"]);
    // The plot is the job's log.
    let logs = app.get("/api/clusters/demo/jobs/sft/logs?tail=1000").await.body;
    let logged: Vec<(i64, f64, f64)> =
        logs["lines"].as_array().unwrap().iter().filter_map(|l| step_line(l.as_str().unwrap())).collect();
    let plotted: Vec<(i64, f64, f64)> = loss
        .iter()
        .zip(throughput)
        .map(|(l, t)| (l["step"].as_i64().unwrap(), l["value"].as_f64().unwrap(), t["value"].as_f64().unwrap()))
        .collect();
    assert_eq!(plotted, logged);

    // A job reporting to a server InstantStart did not create has no writer role to assume:
    // refused before anything is recorded, naming the field and what to do.
    let foreign = json!({ "runtime": "hyperpod",
        "job": { "name": "other", "namespace": "default", "image": "pytorch/pytorch:2.5.1", "instance_type": "ml.g5.2xlarge",
                 "nodes": 1, "mlflow": { "tracking_server_arn": "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/byo" } },
        "recipe": { "kind": "torch", "script": "scripts/train.py" } });
    let r = app.send(Method::POST, "/api/clusters/demo/jobs", Some(foreign), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);
    assert_eq!(r.body["findings"][0]["field"], "job.mlflow", "{:#}", r.body);
    assert!(r.body["findings"][0]["rule"].as_str().unwrap().contains("byo-mlflow-writer"), "{:#}", r.body);
    // Deleting the job removes its association (and its service account with its objects).
    run(&app, Method::DELETE, "/api/clusters/demo/jobs/sft?namespace=default", None).await;
    assert_eq!(associations(), (created, 1));

    // Read errors name their field or say what is missing.
    let r = app.get("/api/mlflow/servers/team/runs?max=0").await;
    assert_eq!((r.status, r.body["findings"][0]["field"].as_str()), (StatusCode::BAD_REQUEST, Some("max")));
    let r = app.get(&format!("/api/mlflow/servers/team/runs/{run_id}/metrics?keys=loss,bad%07")).await;
    assert_eq!((r.status, r.body["findings"][0]["field"].as_str()), (StatusCode::BAD_REQUEST, Some("keys[1]")));
    let r = app.get("/api/mlflow/servers/team/runs/not-hex!/metrics").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:#}", r.body);
    assert_eq!(app.get("/api/mlflow/servers/other/runs").await.status, StatusCode::NOT_FOUND);
    let r = app.get("/api/mlflow/servers/team/runs/0123456789abcdef0123456789abcdef/metrics").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:#}", r.body);
    let r = app.get("/api/mlflow/servers/team/runs?experiment=nope").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:#}", r.body);

    // The server goes with its cluster: the delete's dry run lists it (and the role made for
    // it) unless it is kept; nothing is called.
    let step_keys = |body: &Value| -> Vec<String> {
        body["steps"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap().to_string()).collect()
    };
    let mlflow_keys =
        |body: &Value| -> Vec<String> { step_keys(body).into_iter().filter(|k| k.starts_with("mlflow")).collect() };
    let dry = app.send(Method::DELETE, "/api/clusters/demo?dry_run=true", None, &[]).await;
    assert_eq!(dry.status, StatusCode::OK, "{:#}", dry.body);
    assert_eq!(mlflow_keys(&dry.body), ["mlflow:team", "mlflow_role:team", "mlflow_writer:team"]);
    assert_eq!(dry.body["request"]["tracking_servers"][0]["arn"], arn.as_str());
    let unregister = dry.body["steps"].as_array().unwrap().iter().find(|s| s["key"] == "unregister").unwrap();
    assert!(unregister["depends_on"].as_array().unwrap().iter().any(|d| d == "mlflow_role:team"), "{unregister:#}");
    let kept = app.send(Method::DELETE, "/api/clusters/demo?dry_run=true&keep_tracking_servers=true", None, &[]).await;
    assert_eq!(kept.status, StatusCode::OK, "{:#}", kept.body);
    assert_eq!(mlflow_keys(&kept.body), Vec::<String>::new());
    assert_eq!(kept.body["request"]["keep_tracking_servers"], true);
    let stats = app.state().sim.as_ref().unwrap().stats();
    assert_eq!(stats.get("sagemaker:DeleteMlflowTrackingServer"), None, "{stats:?}");
    let done = run(&app, Method::DELETE, "/api/clusters/demo", None).await;
    let keys = step_keys(&done);
    assert!(keys.contains(&"mlflow:team".to_string()), "{keys:?}");
    assert_eq!(app.get(servers).await.body, json!([]), "deleted with its cluster");
}

#[tokio::test]
async fn a_tracking_server_is_deleted_with_the_role_instantstart_created_and_only_if_ours() {
    use instantstart_core::provider::{
        CreateIamRole, CreateTrackingServer, IamApi, MlflowTracking, TrackingServerSize,
    };
    let app = test_app(2000.0);
    let servers = "/api/mlflow/servers";
    let deletes = |app: &Bed| {
        let stats = app.state().sim.as_ref().unwrap().stats();
        stats.get("sagemaker:DeleteMlflowTrackingServer").copied().unwrap_or(0)
    };

    // Unknown is a 404 (the dry run too); a bad name or region names its field.
    let r = app.send(Method::DELETE, "/api/mlflow/servers/team?dry_run=true", None, &[]).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:#}", r.body);
    assert!(r.body["detail"].as_str().unwrap().contains("tracking server team in us-east-1"), "{:#}", r.body);
    let r = app.send(Method::DELETE, "/api/mlflow/servers/-bad?region=mars", None, &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:#}", r.body);
    let fields: Vec<&str> =
        r.body["findings"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["name", "region"]);

    // The role InstantStart creates carries the permissions boundary, which reaches only
    // InstantStart's buckets: another bucket needs a role of the user's own.
    let elsewhere = json!({ "name": "team", "region": "us-east-1", "artifact_store_uri": "s3://team-bucket/mlflow" });
    let r = app.send(Method::POST, servers, Some(elsewhere), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);
    assert_eq!(r.body["findings"][0]["field"], "artifact_store_uri", "{:#}", r.body);
    assert!(r.body["findings"][0]["rule"].as_str().unwrap().contains("role_arn"), "{:#}", r.body);
    let body = json!({ "name": "team", "region": "us-east-1", "artifact_store_uri": "s3://is-team-bucket/mlflow" });
    run(&app, Method::POST, servers, Some(body)).await;

    // The dry run: the server, then the role InstantStart created for it; nothing is called.
    let dry = app.send(Method::DELETE, "/api/mlflow/servers/team?dry_run=true", None, &[]).await;
    assert_eq!(dry.status, StatusCode::OK, "{:#}", dry.body);
    let keys: Vec<&str> = dry.body["steps"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["tracking_server", "role", "writer_role"]);
    assert_eq!(dry.body["target"], "mlflow/team");
    assert_eq!(dry.body["request"]["found"]["role"], "team-mlflow-role");
    assert_eq!(dry.body["request"]["found"]["writer_role"], "team-mlflow-writer");
    assert_eq!(deletes(&app), 0);

    // 202 with the operation; the same Idempotency-Key returns it again.
    let key = [("idempotency-key", "delete-team-1")];
    let r = app.send(Method::DELETE, "/api/mlflow/servers/team", None, &key).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    assert_eq!(r.body["operation"]["kind"], "delete_tracking_server");
    let id = r.body["operation"]["id"].as_str().unwrap().to_string();
    let again = app.send(Method::DELETE, "/api/mlflow/servers/team", None, &key).await;
    assert_eq!((again.status, again.body["replayed"].as_bool()), (StatusCode::ACCEPTED, Some(true)));
    assert_eq!(again.body["operation"]["id"], id.as_str());
    let done = app.wait_op(&id).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    assert_eq!(app.get(servers).await.body, json!([]));
    assert_eq!(app.get("/api/mlflow/servers/team/runs").await.status, StatusCode::NOT_FOUND);
    let sim = app.state().sim.as_ref().unwrap();
    assert_eq!(sim.get_role("team-mlflow-role").await.unwrap(), None);
    assert_eq!(sim.get_role("team-mlflow-writer").await.unwrap(), None);
    assert_eq!(deletes(&app), 1);
    // Gone: deleting it again is a 404, and calls nothing.
    let r = app.send(Method::DELETE, "/api/mlflow/servers/team", None, &[]).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:#}", r.body);
    assert_eq!(deletes(&app), 1);

    // A server InstantStart did not create is refused before anything is recorded.
    let trust = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]});
    let role = CreateIamRole {
        name: "their-role".into(),
        trust_policy: trust,
        managed_policies: vec![],
        inline_policies: vec![],
        tags: Default::default(),
    };
    let role_arn = sim.create_role(&role).await.unwrap().arn;
    let theirs = CreateTrackingServer {
        region: "us-east-1".into(),
        name: "theirs".into(),
        artifact_store_uri: "s3://their-bucket/mlflow".into(),
        size: TrackingServerSize::Small,
        role_arn,
        mlflow_version: None,
        tags: Default::default(),
    };
    sim.create_tracking_server(&theirs).await.unwrap();
    let before = app.get("/api/operations").await.body.as_array().unwrap().len();
    let r = app.send(Method::DELETE, "/api/mlflow/servers/theirs", None, &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);
    assert_eq!(r.body["findings"][0]["field"], "name");
    assert!(r.body["findings"][0]["rule"].as_str().unwrap().contains("not created by InstantStart"), "{:#}", r.body);
    assert_eq!(app.get("/api/operations").await.body.as_array().unwrap().len(), before, "nothing recorded");
    assert!(sim.describe_tracking_server("us-east-1", "theirs").await.unwrap().is_some());
}

#[path = "api/jobs.rs"]
mod jobs;

#[path = "api/foreign.rs"]
mod foreign;

#[path = "api/metrics.rs"]
mod metrics;

#[tokio::test]
async fn endpoint_requests_are_validated_field_by_field() {
    let app = test_app(2000.0);
    create_ready(&app, "demo").await;
    let eps = "/api/clusters/demo/endpoints";
    let cases: Vec<(Value, StatusCode, &str)> = vec![
        (json!({ "name": "x" }), StatusCode::BAD_REQUEST, "route"),
        (sglang_endpoint("Bad_Name", 1, json!({})), StatusCode::BAD_REQUEST, "name"),
        (sglang_endpoint("gpu", 1, json!({ "gpus": 2 })), StatusCode::BAD_REQUEST, "gpus"),
        (sglang_endpoint("port", 1, json!({ "port": 0 })), StatusCode::BAD_REQUEST, "port"),
        (sglang_endpoint("rep", 0, json!({})), StatusCode::BAD_REQUEST, "replicas"),
        (
            sglang_endpoint(
                "tp",
                1,
                json!({ "engine": { "kind": "sglang", "model": "models/m", "tensor_parallel_size": 3 } }),
            ),
            StatusCode::BAD_REQUEST,
            "engine.tensor_parallel_size",
        ),
        (
            sglang_endpoint(
                "thr",
                2,
                json!({ "router": true, "router_options": { "policy": { "kind": "cache_aware", "balance_rel_threshold": 0.5 } } }),
            ),
            StatusCode::BAD_REQUEST,
            "router_options.policy.balance_rel_threshold",
        ),
        (
            sglang_endpoint("auto", 1, json!({ "autoscaling": { "min_replicas": 3, "max_replicas": 1 } })),
            StatusCode::BAD_REQUEST,
            "autoscaling.min_replicas",
        ),
        (sglang_endpoint("extra", 1, json!({ "bogus": true })), StatusCode::BAD_REQUEST, "bogus"),
        (
            sglang_endpoint("pub", 1, json!({ "exposure": { "type": "load_balancer", "internet_facing": true } })),
            StatusCode::BAD_REQUEST,
            "exposure.source_ranges",
        ),
        (
            json!({ "route": "managed", "name": "m", "namespace": "default", "instance_type": "ml.g5.2xlarge",
                    "model_source": { "bucket": "demo-bucket", "region": "us-east-1", "model_location": "m" },
                    "worker": { "image": "img:1", "gpus": 4 } }),
            StatusCode::BAD_REQUEST,
            "worker.gpus",
        ),
    ];
    for (body, status, field) in cases {
        let r = app.send(Method::POST, eps, Some(body), &[]).await;
        assert_eq!(r.status, status, "{field}: {:#}", r.body);
        let fields: Vec<String> =
            r.body["findings"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap().to_string()).collect();
        assert!(fields.iter().any(|f| f.contains(field)), "{field} not in {fields:?}");
    }
    // Nothing was recorded for any of them; an unknown cluster is a 404.
    assert_eq!(app.get("/api/operations").await.body.as_array().unwrap().len(), 1);
    let r = app.send(Method::POST, "/api/clusters/nope/endpoints", Some(sglang_endpoint("a", 1, json!({}))), &[]).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:#}", r.body);
    let r = app.send(Method::PATCH, &format!("{eps}/ghost"), Some(json!({ "replicas": 2 })), &[]).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:#}", r.body);
    let r = app.send(Method::PATCH, &format!("{eps}/ghost"), Some(json!({ "replicas": 2, "bogus": 1 })), &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:#}", r.body);
}

/// A bucket the user names is adopted only when it is this account's: another account's
/// bucket (S3's bucket owner condition answers 403, as the simulator does) is a 422 naming the
/// field, in the dry run and the real call, before anything is recorded or created.
#[tokio::test]
async fn a_user_named_bucket_of_another_account_is_refused_before_anything_is_recorded() {
    use instantstart_core::provider::{CreateBucket, Tags};
    let app = test_app(2000.0);
    let sim = app.state().sim.as_ref().unwrap();
    let theirs = CreateBucket { region: "us-east-1".into(), name: "is-theirs-data".into(), tags: Tags::new() };
    sim.seed_foreign_bucket(&theirs, "999999999999").unwrap();
    let mut body = create_body("demo");
    body["storage"] = json!({ "bucket": "is-theirs-data" });
    for uri in ["/api/clusters?dry_run=true", "/api/clusters"] {
        let r = app.send(Method::POST, uri, Some(body.clone()), &[]).await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{uri}: {:#}", r.body);
        assert_eq!(r.body["findings"][0]["field"], "storage.bucket", "{:#}", r.body);
        let rule = r.body["findings"][0]["rule"].as_str().unwrap();
        assert!(rule.contains("is-theirs-data is not this account's") && rule.contains("AccessDenied"), "{rule}");
    }
    assert!(app.get("/api/operations").await.body.as_array().unwrap().is_empty());
    let stats = app.get("/api/sim/stats").await.body;
    assert!(stats.as_object().unwrap().keys().all(|k| !k.contains("Create")), "{stats}");
    // The same bucket name of this account is adopted (the dry run plans the cluster).
    let mut ours = create_body("demo");
    ours["storage"] = json!({ "bucket": "is-ours-data" });
    sim.seed_bucket(&CreateBucket { name: "is-ours-data".into(), ..theirs }).unwrap();
    let r = app.send(Method::POST, "/api/clusters?dry_run=true", Some(ours), &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{:#}", r.body);
}

/// A user-named lifecycle script is checked before anything is recorded: it must be readable by
/// the HyperPod execution role (a `sagemaker-*` bucket or the cluster's own bucket) and exist.
/// Table: (what, source_s3_uri, on_create, expected status, rule substring of the finding).
#[tokio::test]
async fn user_named_lifecycle_scripts_are_checked_in_the_preflight() {
    use instantstart_core::provider::{CreateBucket, PutObject, S3Api, Tags};
    let app = test_app(2000.0);
    let sim = app.state().sim.as_ref().unwrap();
    for bucket in ["sagemaker-team-scripts", "team-scripts"] {
        sim.seed_bucket(&CreateBucket { region: "us-east-1".into(), name: bucket.into(), tags: Tags::new() }).unwrap();
        sim.put_object(&PutObject {
            bucket: bucket.into(),
            key: "eks/on_create.sh".into(),
            body: b"#!/bin/bash\nexit 0\n".to_vec(),
            content_type: "text/x-shellscript".into(),
        })
        .await
        .unwrap();
    }
    let field = "hyperpod.instance_groups[0].lifecycle_script";
    let cases: &[(&str, &str, &str, StatusCode, &str)] = &[
        ("readable and present", "s3://sagemaker-team-scripts/eks", "on_create.sh", StatusCode::ACCEPTED, ""),
        ("trailing slash", "s3://sagemaker-team-scripts/eks/", "on_create.sh", StatusCode::ACCEPTED, ""),
        (
            "missing object",
            "s3://sagemaker-team-scripts/eks",
            "setup.sh",
            StatusCode::UNPROCESSABLE_ENTITY,
            "s3://sagemaker-team-scripts/eks/setup.sh does not exist",
        ),
        (
            "missing bucket",
            "s3://sagemaker-nobody/eks",
            "on_create.sh",
            StatusCode::UNPROCESSABLE_ENTITY,
            "does not exist",
        ),
        (
            "bucket the role cannot read",
            "s3://team-scripts/eks",
            "on_create.sh",
            StatusCode::UNPROCESSABLE_ENTITY,
            "it reads only buckets named sagemaker-*",
        ),
    ];
    for (i, (what, uri, on_create, status, rule)) in cases.iter().enumerate() {
        let mut body = create_body(&format!("lc{i}"));
        body["hyperpod"]["instance_groups"][0]["lifecycle_script"] =
            json!({ "source_s3_uri": uri, "on_create": on_create });
        let r = app.send(Method::POST, "/api/clusters", Some(body), &[]).await;
        assert_eq!(r.status, *status, "{what}: {:#}", r.body);
        if *status == StatusCode::UNPROCESSABLE_ENTITY {
            let findings = r.body["findings"].as_array().unwrap();
            let f = findings.iter().find(|f| f["field"] == field).unwrap_or_else(|| panic!("{what}: {findings:?}"));
            let text = f["rule"].as_str().unwrap();
            assert!(text.contains(rule), "{what}: {text}");
            assert!(text.contains(" — "), "{what}: the rule carries a remedy: {text}");
        } else {
            let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
            assert_eq!(done["status"], "succeeded", "{what}: {done:#}");
        }
    }
    // Only the accepted requests created anything.
    assert_eq!(app.state().sim.as_ref().unwrap().calls("sagemaker:CreateCluster"), 2);
}

#[path = "api/pages.rs"]
mod pages;
#[path = "api/rbac.rs"]
mod rbac;

#[path = "api/governance_jobs.rs"]
mod governance_jobs;
#[path = "api/volumes.rs"]
mod volumes;
