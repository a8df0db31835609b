//! Kubernetes authorization of tokens, end to end on the simulated cloud (served to the kube-rs
//! adapter on loopback): a token bound to `alice`/`team-a` submits a job and reads its logs
//! where the cluster's RBAC lets it, is refused by the cluster's RBAC elsewhere (403 from the
//! simulated API server, nothing recorded), an unbound token is refused outside `default`, the
//! admin token is unaffected, and an operation keeps acting as its token's identity after a
//! restart, whoever retries it.

use super::*;
use instantstart_core::provider::{KubeObject, KubeTarget};

/// A one-node HyperPod job; outside `default` it mounts the namespace's own claim `data`.
fn job(name: &str, namespace: &str) -> Value {
    let mut body = json!({
        "runtime": "hyperpod",
        "job": { "name": name, "namespace": namespace, "image": "pytorch/pytorch:2.5.1",
                 "instance_type": "ml.g5.2xlarge", "nodes": 1 },
        "recipe": { "kind": "torch", "script": "scripts/train.py" }
    });
    if namespace != "default" {
        body["job"]["storage"] = json!({ "claim_name": "data" });
    }
    body
}

fn claim(namespace: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": { "name": "data", "namespace": namespace },
        "spec": { "accessModes": ["ReadWriteMany"], "resources": { "requests": { "storage": "1Gi" } } } })
}

fn target() -> KubeTarget {
    KubeTarget::new("us-east-1", "demo")
}

/// Applies `objects` as the control plane (the cluster's administrator).
async fn admin_apply(app: &Bed, objects: &[Value]) {
    for o in objects {
        app.state().kube.apply(&target(), &KubeObject(o.clone())).await.unwrap();
    }
}

fn namespace(name: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } })
}

fn role(namespace: &str, name: &str, verbs: &[&str]) -> Value {
    json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": { "name": name, "namespace": namespace },
        "rules": [{ "apiGroups": ["*"], "resources": ["*"], "verbs": verbs }] })
}

fn group_binding(namespace: &str, role: &str, group: &str) -> Value {
    json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": { "name": format!("{role}-{group}"), "namespace": namespace },
        "subjects": [{ "kind": "Group", "name": group, "apiGroup": "rbac.authorization.k8s.io" }],
        "roleRef": { "kind": "Role", "name": role, "apiGroup": "rbac.authorization.k8s.io" } })
}

/// Mints a token through the API and returns its secret.
async fn mint(app: &Bed, body: Value) -> String {
    let r = app.send(Method::POST, "/api/tokens", Some(body), &[]).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:#}", r.body);
    r.body["token"].as_str().unwrap().to_string()
}

async fn operations(app: &Bed) -> usize {
    app.get("/api/operations").await.body.as_array().map(Vec::len).unwrap_or(0)
}

fn audit(app: &Bed) -> Vec<instantstart_sim::KubeAuditEvent> {
    app.state().sim.as_ref().unwrap().kube_audit("us-east-1", "demo")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_tokens_act_as_their_kubernetes_identity() {
    let app = test_app(2000.0);
    create_ready(&app, "demo").await;
    admin_apply(
        &app,
        &[
            namespace("team-a"),
            namespace("team-b"),
            claim("team-a"),
            claim("team-b"),
            role("team-a", "jobs", &["*"]),
            group_binding("team-a", "jobs", "team-a"),
        ],
    )
    .await;
    // The binding is shown by the token list.
    let alice = mint(
        &app,
        json!({ "name": "alice-ci", "scope": "operate", "kube_bindings": [
            { "cluster": "demo", "user": "alice", "groups": ["team-a"], "namespaces": ["team-a", "team-b"] }] }),
    )
    .await;
    let list = app.get("/api/tokens").await.body;
    assert_eq!(list[0]["kube_bindings"][0]["user"], "alice", "{list:#}");
    // Bad bindings: every finding names its field, nothing is minted.
    let r = app
        .send(
            Method::POST,
            "/api/tokens",
            Some(json!({ "name": "bad", "scope": "operate", "kube_bindings": [
                { "cluster": "demo", "user": "system:admin", "groups": ["system:masters"], "namespaces": [] }] })),
            &[],
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:#}", r.body);
    let fields: Vec<&str> =
        r.body["findings"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["kube_bindings[0].user", "kube_bindings[0].groups[0]", "kube_bindings[0].namespaces"]);

    // alice submits in team-a: the job runs, its logs are readable, all as alice.
    let r = app.call(as_token(Method::POST, "/api/clusters/demo/jobs", &alice, Some(job("train-a", "team-a")))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    let id = r.body["operation"]["id"].as_str().unwrap().to_string();
    let done = app.wait_op(&id).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    assert_eq!(done["request"]["request"]["acting_as"]["identity"]["user"], "alice", "recorded with the operation");
    let logs = app
        .call_until(
            "alice's job logs",
            || as_token(Method::GET, "/api/clusters/demo/jobs/train-a/logs?namespace=team-a", &alice, None),
            |r| r.status == StatusCode::OK,
        )
        .await
        .body;
    assert!(logs["lines"].as_array().is_some_and(|l| !l.is_empty()), "{logs:#}");
    let events = audit(&app);
    for (verb, resource) in [("create", "hyperpodpytorchjobs"), ("get", "pods/log")] {
        assert!(
            events.iter().any(|e| e.user == "alice"
                && e.allowed
                && e.verb == verb
                && e.resource == resource
                && e.namespace.as_deref() == Some("team-a")),
            "{verb} {resource} as alice: {events:#?}"
        );
    }
    // Our audit log names the token and the impersonated user.
    let ours = app.get("/api/audit?target=cluster/demo/job/train-a").await.body;
    let created = ours.as_array().unwrap().iter().find(|a| a["action"] == "operation.create").unwrap();
    assert_eq!(created["actor"]["principal"], "alice-ci");
    assert_eq!(created["detail"]["request"]["acting_as"]["identity"]["user"], "alice");

    // team-b is in alice's binding but the cluster's RBAC refuses her there: 403 naming the
    // verb, resource and namespace, nothing recorded, nothing created.
    let before = operations(&app).await;
    let r = app.call(as_token(Method::POST, "/api/clusters/demo/jobs", &alice, Some(job("train-b", "team-b")))).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:#}", r.body);
    let detail = r.body["detail"].as_str().unwrap();
    assert!(detail.contains("User \"alice\" cannot") && detail.contains("in the namespace \"team-b\""), "{detail}");
    assert_eq!(operations(&app).await, before, "nothing recorded");
    assert!(audit(&app).iter().any(|e| e.user == "alice" && !e.allowed && e.namespace.as_deref() == Some("team-b")));
    let r = app.get("/api/clusters/demo/jobs?namespace=team-b").await;
    assert_eq!(r.body.as_array().map(Vec::len), Some(0), "{:#}", r.body);
    // Reads there are refused by the cluster too; a namespace outside the binding by us.
    let r = app.call(as_token(Method::GET, "/api/clusters/demo/jobs?namespace=team-b", &alice, None)).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:#}", r.body);
    let r = app.call(as_token(Method::POST, "/api/clusters/demo/jobs", &alice, Some(job("train-c", "default")))).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:#}", r.body);
    assert!(r.body["detail"].as_str().unwrap().starts_with("namespace: "), "{:#}", r.body);
    assert_eq!(operations(&app).await, before);

    // An unbound operate token: `default` only, as the control plane.
    let ci = mint(&app, json!({ "name": "ci", "scope": "operate" })).await;
    let r = app.call(as_token(Method::POST, "/api/clusters/demo/jobs", &ci, Some(job("ci-a", "team-a")))).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:#}", r.body);
    let detail = r.body["detail"].as_str().unwrap();
    assert!(detail.starts_with("namespace: ") && detail.contains("no Kubernetes binding"), "{detail}");
    let r = app.call(as_token(Method::GET, "/api/clusters/demo/jobs/train-a?namespace=team-a", &ci, None)).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:#}", r.body);
    assert_eq!(operations(&app).await, before);
    let r = app.call(as_token(Method::POST, "/api/clusters/demo/jobs", &ci, Some(job("ci-d", "default")))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    assert_eq!(app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await["status"], "succeeded");

    // The admin token keeps the control plane's identity: anywhere, not impersonating.
    let impersonated = audit(&app).len();
    let r = app.send(Method::POST, "/api/clusters/demo/jobs", Some(job("admin-b", "team-b")), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    assert_eq!(app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await["status"], "succeeded");
    assert_eq!(audit(&app).len(), impersonated, "the admin token impersonates nobody");
}

/// System namespaces are refused to every token, the admin's included, unless it is allowed
/// them explicitly (a binding's `system_namespaces`, the server's `--admin-system-namespaces`);
/// a binding that lists service accounts confines the ones its workloads may name. Every
/// refusal is before anything is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_namespaces_and_service_accounts_need_an_explicit_allowance() {
    let app = test_app_with_options(2000.0, |o| o.admin_system_namespaces = vec!["monitoring".into()]);
    create_ready(&app, "demo").await;
    let sa = |ns: &str, name: &str| json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": name, "namespace": ns } });
    admin_apply(
        &app,
        &[
            namespace("team-a"),
            namespace("monitoring"),
            claim("team-a"),
            claim("monitoring"),
            sa("team-a", "trainer"),
            sa("team-a", "deployer"),
            role("team-a", "jobs", &["*"]),
            group_binding("team-a", "jobs", "team-a"),
            role("monitoring", "jobs", &["*"]),
            group_binding("monitoring", "jobs", "team-a"),
        ],
    )
    .await;
    let before = operations(&app).await;
    let refused_as_system = |r: &Reply| {
        r.status == StatusCode::BAD_REQUEST
            && r.body["findings"].as_array().is_some_and(|f| {
                f.iter()
                    .any(|f| f["field"] == "job.namespace" && f["rule"].as_str().unwrap().contains("system namespace"))
            })
    };
    // The admin token: allowed `monitoring` by the server's option, nothing else.
    let r = app.send(Method::POST, "/api/clusters/demo/jobs", Some(job("admin-keda", "keda")), &[]).await;
    assert!(refused_as_system(&r), "{:#}", r.body);
    // A bound token without the allowance is refused there; with it, the cluster's RBAC decides.
    let plain = mint(
        &app,
        json!({ "name": "plain", "scope": "operate", "kube_bindings": [
            { "cluster": "demo", "user": "alice", "groups": ["team-a"], "namespaces": ["team-a"] }] }),
    )
    .await;
    let r = app.call(as_token(Method::POST, "/api/clusters/demo/jobs", &plain, Some(job("p-mon", "monitoring")))).await;
    assert!(refused_as_system(&r), "{:#}", r.body);
    let allowed = mint(
        &app,
        json!({ "name": "allowed", "scope": "operate", "kube_bindings": [
            { "cluster": "demo", "user": "alice", "groups": ["team-a"], "namespaces": ["team-a"],
              "system_namespaces": ["monitoring"], "service_accounts": ["trainer"] }] }),
    )
    .await;
    let r = app.call(as_token(Method::POST, "/api/clusters/demo/jobs", &allowed, Some(job("a-keda", "keda")))).await;
    assert!(refused_as_system(&r), "only the listed system namespace: {:#}", r.body);
    // A service account outside the binding's list is refused, naming the field.
    let mut named = job("a-deploy", "team-a");
    named["job"]["service_account"] = json!("deployer");
    let r = app.call(as_token(Method::POST, "/api/clusters/demo/jobs", &allowed, Some(named))).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:#}", r.body);
    assert!(r.body["detail"].as_str().unwrap().starts_with("service_account: "), "{:#}", r.body);
    assert_eq!(operations(&app).await, before, "nothing recorded for any refusal");

    let r =
        app.call(as_token(Method::POST, "/api/clusters/demo/jobs", &allowed, Some(job("a-mon", "monitoring")))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    assert_eq!(app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await["status"], "succeeded");
    let mut named = job("a-train", "team-a");
    named["job"]["service_account"] = json!("trainer");
    let r = app.call(as_token(Method::POST, "/api/clusters/demo/jobs", &allowed, Some(named))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    assert_eq!(app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await["status"], "succeeded");
    let r = app.send(Method::POST, "/api/clusters/demo/jobs", Some(job("admin-mon", "monitoring")), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    assert_eq!(app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await["status"], "succeeded");
}

/// A `workloads` token (review #8: an agent that only submits jobs) changes workloads and
/// nothing else: cluster, node and token changes are a 403 naming the scope they need, before
/// anything is recorded. Every route the scope allows is a route the API serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workloads_token_changes_workloads_and_nothing_else() {
    let app = test_app(2000.0);
    create_ready(&app, "demo").await;
    let agent = mint(&app, json!({ "name": "agent", "scope": "workloads" })).await;
    let r = app.call(as_token(Method::POST, "/api/clusters/demo/jobs", &agent, Some(job("by-agent", "default")))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    assert_eq!(app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await["status"], "succeeded");
    let before = operations(&app).await;
    let refused: &[(Method, &str, Option<Value>)] = &[
        (Method::DELETE, "/api/clusters/demo", None),
        (Method::POST, "/api/clusters", Some(json!({ "name": "other", "region": "us-east-1" }))),
        (Method::DELETE, "/api/clusters/demo/instance-groups/workers", None),
        (Method::PATCH, "/api/clusters/demo/features", Some(json!({}))),
        (Method::POST, "/api/tokens", Some(json!({ "name": "more", "scope": "operate" }))),
    ];
    for (method, uri, body) in refused {
        let r = app.call(as_token(method.clone(), uri, &agent, body.clone())).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{method} {uri}: {:#}", r.body);
        assert!(r.body["detail"].as_str().unwrap().contains("needs scope operate"), "{:#}", r.body);
    }
    assert_eq!(operations(&app).await, before, "nothing recorded");
    let r = app.call(as_token(Method::DELETE, "/api/clusters/demo/jobs/by-agent", &agent, None)).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    // A read token is told which scope a workload change needs.
    let viewer = mint(&app, json!({ "name": "viewer", "scope": "read" })).await;
    let r = app.call(as_token(Method::POST, "/api/clusters/demo/jobs", &viewer, Some(job("x", "default")))).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:#}", r.body);

    let doc = app.get("/api/openapi.json").await.body;
    for (method, route) in instantstart_core::credentials::WORKLOAD_ROUTES {
        assert!(
            doc["paths"][route][method.to_ascii_lowercase()].is_object(),
            "{method} {route} is not a route of the API: rename it in WORKLOAD_ROUTES too"
        );
    }
}

/// A model-download Job as InstantStart labels it, in `namespace`.
fn download_job(name: &str, namespace: &str) -> Value {
    json!({ "apiVersion": "batch/v1", "kind": "Job",
        "metadata": { "name": name, "namespace": namespace,
            "labels": { "app.kubernetes.io/managed-by": "instantstart", "app.kubernetes.io/component": "model-download" },
            "annotations": { "instantstart.io/model-id": "Qwen/Qwen3-0.6B" } },
        "spec": { "template": { "spec": { "restartPolicy": "Never",
            "containers": [{ "name": "download", "image": "python:3.12-slim" }] } } } })
}

/// Reads that go through the control plane's identity (downloads, endpoints, pools) show an
/// unbound token only `default`, as its writes are; the admin token sees every namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unbound_tokens_lists_show_only_its_namespace() {
    let app = test_app(2000.0);
    create_ready(&app, "demo").await;
    admin_apply(
        &app,
        &[namespace("team-b"), download_job("dl-default", "default"), download_job("dl-team-b", "team-b")],
    )
    .await;
    let names = |body: &Value| -> Vec<String> {
        let mut n: Vec<String> = body
            .as_array()
            .unwrap_or_else(|| panic!("{body:#}"))
            .iter()
            .map(|d| format!("{}/{}", d["namespace"].as_str().unwrap(), d["name"].as_str().unwrap()))
            .collect();
        n.sort();
        n
    };
    let all = app.get("/api/clusters/demo/downloads").await;
    assert_eq!(names(&all.body), ["default/dl-default", "team-b/dl-team-b"]);
    let reader = mint(&app, json!({ "name": "reader", "scope": "read" })).await;
    let r = app.call(as_token(Method::GET, "/api/clusters/demo/downloads", &reader, None)).await;
    assert_eq!(r.status, StatusCode::OK, "{:#}", r.body);
    assert_eq!(names(&r.body), ["default/dl-default"], "team-b is not the unbound token's to see");
    // Endpoints and pools are confined the same way (none here: the lists answer, empty).
    for path in ["/api/clusters/demo/endpoints", "/api/clusters/demo/pools"] {
        let r = app.call(as_token(Method::GET, path, &reader, None)).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {:#}", r.body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_keeps_its_identity_after_a_restart() {
    let mut app = test_app(2000.0);
    create_ready(&app, "demo").await;
    // alice may read in team-a but not create: the apply step is refused by the cluster.
    admin_apply(
        &app,
        &[
            namespace("team-a"),
            role("team-a", "read", &["get", "list", "watch"]),
            group_binding("team-a", "read", "team-a"),
        ],
    )
    .await;
    let alice = mint(
        &app,
        json!({ "name": "alice-ci", "scope": "operate", "kube_bindings": [
            { "cluster": "*", "user": "alice", "groups": ["team-a"], "namespaces": ["team-a"] }] }),
    )
    .await;
    let r = app.call(as_token(Method::POST, "/api/clusters/demo/jobs", &alice, Some(job("train", "team-a")))).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    let id = r.body["operation"]["id"].as_str().unwrap().to_string();
    let failed = app.wait_op(&id).await;
    assert_eq!(failed["status"], "failed", "{failed:#}");
    let step = failed["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["phase"] == "failed")
        .unwrap_or_else(|| panic!("{failed:#}"));
    assert!(step["error"].as_str().unwrap().contains("User \"alice\" cannot"), "{step:#}");
    let key = step["key"].as_str().unwrap().to_string();

    // The cluster's administrator grants create; the server restarts; the admin retries.
    admin_apply(&app, &[role("team-a", "write", &["create", "patch"]), group_binding("team-a", "write", "team-a")])
        .await;
    app.restart().await;
    let before = audit(&app).len();
    let r = app
        .call(as_token(Method::POST, &format!("/api/operations/{id}/steps/{}/retry", urlencode(&key)), TOKEN, None))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "retry");
    let done = app.wait_done(&instantstart_core::operation::OperationId(id.clone())).await;
    assert_eq!(done.status, instantstart_core::operation::OperationStatus::Succeeded, "{done:#?}");
    // Retried by the admin after a restart, the step still acted as alice.
    let after: Vec<_> = audit(&app).into_iter().skip(before).collect();
    assert!(
        after
            .iter()
            .any(|e| e.user == "alice" && e.allowed && e.verb == "create" && e.resource == "hyperpodpytorchjobs"),
        "{after:#?}"
    );
}
