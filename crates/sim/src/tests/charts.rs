//! Helm releases and the kinds their charts serve (KubeRay, KEDA and its Prometheus).

use super::*;

/// One HTTP/1.1 request to the loopback API server: the status code and the JSON body.
async fn http(server: &crate::KubeApiServer, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let ct = if method == "PATCH" { "application/apply-patch+yaml" } else { "application/json" };
    let path = if method == "PATCH" { format!("{path}?fieldManager=test") } else { path.to_string() };
    let req = format!(
        "{method} {} HTTP/1.1\r\nHost: sim\r\nConnection: close\r\nContent-Type: {ct}\r\nContent-Length: {}\r\n\r\n{body}",
        cluster_path(&target(), &path),
        body.len()
    );
    conn.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let code: u16 = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let json = text.find("\r\n\r\n").and_then(|i| {
        let rest = &text[i + 4..];
        // Chunked bodies: the JSON starts at the first brace.
        rest.find('{').and_then(|j| serde_json::Deserializer::from_str(&rest[j..]).into_iter::<Value>().next())
    });
    (code, json.and_then(Result::ok).unwrap_or(Value::Null))
}

fn cluster_path(t: &KubeTarget, path: &str) -> String {
    format!("/clusters/{}/{}{path}", t.region, t.eks_cluster)
}

/// The chart-provided kinds (RayJob from KubeRay, ScaledObject from KEDA) are served only while
/// their release is deployed, through the `KubeApi` and the loopback API server alike; the
/// add-on-provided kinds are served regardless. Uninstalling removes the CRDs and their objects.
#[tokio::test]
async fn chart_kinds_are_served_only_while_their_release_is_deployed() {
    let s = sim();
    gpu_world(&s, 0).await;
    let server = s.serve_kube_api().await.unwrap();
    let ray_job = json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "r", "namespace": "default"},
                         "spec": {"entrypoint": "python3 x.py"}});
    let so = json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "so", "namespace": "default"},
                    "spec": {"scaleTargetRef": {"name": "web"}, "minReplicaCount": 1, "maxReplicaCount": 2,
                             "triggers": [{"type": "prometheus", "metadata": {"serverAddress": "http://p:9090", "query": "q", "threshold": "1"}}]}});
    let list = |api: &str, kind: &str| ListParams {
        api_version: api.into(),
        kind: kind.into(),
        namespace: Some("default".into()),
        labels: vec![],
    };
    let kinds = [
        ("ray.io/v1", "RayJob", "/apis/ray.io/v1/namespaces/default/rayjobs", &ray_job, &KUBERAY_OPERATOR),
        ("keda.sh/v1alpha1", "ScaledObject", "/apis/keda.sh/v1alpha1/namespaces/default/scaledobjects", &so, &KEDA),
    ];
    let group_of = |api: &str| api.split('/').next().unwrap().to_string();
    for (api, ty, path, object, _) in kinds {
        // The KubeApi: apply and list are NotFound, get is None, delete is a no-op.
        let e = s.apply(&target(), &KubeObject(object.clone())).await.unwrap_err();
        assert_eq!((e.api.as_str(), e.kind), ("k8s:Apply", ProviderErrorKind::NotFound), "{ty}: {e}");
        assert!(e.message.contains("could not find the requested resource"), "{e}");
        assert_eq!(kind(s.list(&target(), &list(api, ty)).await), ProviderErrorKind::NotFound, "{ty}");
        let name = object["metadata"]["name"].as_str().unwrap();
        assert_eq!(get(&s, api, ty, Some("default"), name).await, None);
        s.delete(&target(), &oref(api, ty, Some("default"), name)).await.unwrap();
        // The API server: 404 NotFound for list, get and apply; discovery does not list the group.
        let (code, status) = http(&server, "GET", path, None).await;
        assert_eq!((code, status["reason"].as_str()), (404, Some("NotFound")), "{ty}: {status}");
        assert_eq!(http(&server, "GET", &format!("{path}/{name}"), None).await.0, 404);
        assert_eq!(http(&server, "PATCH", &format!("{path}/{name}"), Some(object)).await.0, 404);
        assert_eq!(http(&server, "GET", &format!("/apis/{api}"), None).await.0, 404, "{api}");
        let (_, groups) = http(&server, "GET", "/apis", None).await;
        assert!(!groups.to_string().contains(&format!("\"{}\"", group_of(api))), "{groups}");
    }
    // Add-on kinds are served without any chart.
    let hp = ListParams { namespace: None, ..list("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob") };
    assert!(s.list(&target(), &hp).await.unwrap().is_empty());
    assert_eq!(http(&server, "GET", "/apis/sagemaker.amazonaws.com/v1/hyperpodpytorchjobs", None).await.0, 200);

    for (api, ty, path, object, chart) in kinds {
        // Installing: still pending (no CRDs yet), then deployed.
        s.install_or_upgrade(&target(), &chart.spec_for(REGION)).await.unwrap();
        assert_eq!(kind(s.list(&target(), &list(api, ty)).await), ProviderErrorKind::NotFound, "pending");
        adv(&s, timings::HELM_RELEASE);
        s.apply(&target(), &KubeObject(object.clone())).await.unwrap_or_else(|e| panic!("{ty}: {e}"));
        assert_eq!(s.list(&target(), &list(api, ty)).await.unwrap().len(), 1, "{ty}");
        let (code, listed) = http(&server, "GET", path, None).await;
        assert_eq!((code, listed["items"].as_array().map(Vec::len)), (200, Some(1)), "{ty}: {listed}");
        let (code, doc) = http(&server, "GET", &format!("/apis/{api}"), None).await;
        assert_eq!(code, 200, "{doc}");
        let (_, groups) = http(&server, "GET", "/apis", None).await;
        assert!(groups.to_string().contains(&format!("\"{}\"", group_of(api))), "{groups}");
        // An upgrade keeps the CRDs in place while it runs.
        s.install_or_upgrade(&target(), &chart.spec_for(REGION)).await.unwrap();
        assert_eq!(s.list(&target(), &list(api, ty)).await.unwrap().len(), 1, "{ty} during an upgrade");
        adv(&s, timings::HELM_RELEASE);
    }
    // Each chart serves only its own kinds: uninstalling KEDA leaves the RayJob.
    s.uninstall(&target(), KEDA.namespace, KEDA.release).await.unwrap();
    assert_eq!(kind(s.list(&target(), &list("keda.sh/v1alpha1", "ScaledObject")).await), ProviderErrorKind::NotFound);
    assert_eq!(s.list(&target(), &list("ray.io/v1", "RayJob")).await.unwrap().len(), 1);
    // Reinstalled, the CRD is back empty: its objects went with it.
    install_chart(&s, &KEDA).await;
    assert!(s.list(&target(), &list("keda.sh/v1alpha1", "ScaledObject")).await.unwrap().is_empty());
}

/// KEDA's prometheus trigger needs a Prometheus at its address: without one the ScaledObject is
/// not Ready (TriggerError, the scaler's lookup error) and the metric scales nothing; once the
/// `prometheus` chart's release is deployed (its `prometheus-server` Service), it scales.
#[tokio::test]
async fn a_scaled_object_scales_only_while_its_prometheus_answers() {
    let s = sim();
    gpu_world(&s, 1).await;
    install_chart(&s, &KEDA).await;
    apply(&s, deployment("llm", 1, 0)).await;
    let address = "http://prometheus-server.monitoring.svc.cluster.local:80";
    let so = |address: &str| {
        json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "llm", "namespace": "default"},
               "spec": {"scaleTargetRef": {"name": "llm"}, "minReplicaCount": 1, "maxReplicaCount": 4,
                        "triggers": [{"type": "prometheus", "metadata": {"serverAddress": address, "query": "q", "threshold": "10"}}]}})
    };
    apply(&s, so(address)).await;
    let replicas = |d: &Value| d["spec"]["replicas"].as_u64();
    let conditions = |v: &Value| v["status"]["conditions"].clone();
    let so_now = get(&s, "keda.sh/v1alpha1", "ScaledObject", Some("default"), "llm").await.unwrap();
    let c = conditions(&so_now);
    assert_eq!(
        (c[0]["type"].as_str(), c[0]["status"].as_str(), c[0]["reason"].as_str()),
        (Some("Ready"), Some("False"), Some("TriggerError"))
    );
    let message = c[0]["message"].as_str().unwrap();
    assert!(message.contains("lookup prometheus-server.monitoring.svc.cluster.local: no such host"), "{message}");
    assert_eq!(c[1]["type"], "Active");
    s.set_scaling_metric(&target(), "default", "llm", 35.0).unwrap();
    let d = get(&s, "apps/v1", "Deployment", Some("default"), "llm").await.unwrap();
    assert_eq!(replicas(&d), Some(1), "no Prometheus, no metric, no scaling");

    // A bare service name resolves in the ScaledObject's namespace: still nothing there.
    apply(&s, so("http://prom:9090")).await;
    let c = conditions(&get(&s, "keda.sh/v1alpha1", "ScaledObject", Some("default"), "llm").await.unwrap());
    assert_eq!(c[0]["status"], "False");
    // An address outside the cluster (Amazon Managed Prometheus) is not simulated: reachable.
    apply(&s, so("https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1")).await;
    let c = conditions(&get(&s, "keda.sh/v1alpha1", "ScaledObject", Some("default"), "llm").await.unwrap());
    assert_eq!(c[0]["status"], "True");

    apply(&s, so(address)).await;
    install_chart(&s, &PROMETHEUS).await;
    let c = conditions(&get(&s, "keda.sh/v1alpha1", "ScaledObject", Some("default"), "llm").await.unwrap());
    assert_eq!((c[0]["status"].as_str(), c[0]["reason"].as_str()), (Some("True"), Some("ScaledObjectReady")));
    s.set_scaling_metric(&target(), "default", "llm", 35.0).unwrap();
    let d = get(&s, "apps/v1", "Deployment", Some("default"), "llm").await.unwrap();
    assert_eq!(replicas(&d), Some(4), "ceil(35/10) once Prometheus answers");
    // Uninstalled, the address no longer resolves.
    s.uninstall(&target(), PROMETHEUS.namespace, PROMETHEUS.release).await.unwrap();
    adv(&s, timings::HELM_RELEASE);
    let c = conditions(&get(&s, "keda.sh/v1alpha1", "ScaledObject", Some("default"), "llm").await.unwrap());
    assert_eq!(c[0]["status"], "False", "uninstalled: the trigger errors again");
}

#[tokio::test]
async fn helm_releases_install_settle_upgrade_fail_and_uninstall() {
    use instantstart_core::provider::{HelmReleases, KUBERAY_OPERATOR, ReleaseStatus};
    let s = sim();
    let target = KubeTarget::new(REGION, "demo");
    let (ns, rel) = (KUBERAY_OPERATOR.namespace, KUBERAY_OPERATOR.release);
    assert_eq!(kind(s.get_release(&target, ns, rel).await), ProviderErrorKind::NotFound, "no cluster, no API");
    base(&s).await;
    assert_eq!(s.get_release(&target, ns, rel).await.unwrap(), None);
    let r = s.install_or_upgrade(&target, &KUBERAY_OPERATOR.spec()).await.unwrap();
    assert_eq!((r.status, r.revision, r.version.as_str()), (ReleaseStatus::PendingInstall, 1, "1.4.2"));
    assert_eq!(
        kind(s.install_or_upgrade(&target, &KUBERAY_OPERATOR.spec()).await),
        ProviderErrorKind::Conflict,
        "Helm refuses a second operation while one is pending"
    );
    adv(&s, timings::HELM_RELEASE);
    let r = s.get_release(&target, ns, rel).await.unwrap().unwrap();
    assert!(r.is_deployed(&KUBERAY_OPERATOR.chart_ref()), "{r:?}");
    let r = s.install_or_upgrade(&target, &KUBERAY_OPERATOR.spec()).await.unwrap();
    assert_eq!((r.status, r.revision), (ReleaseStatus::PendingUpgrade, 2));
    adv(&s, timings::HELM_RELEASE);

    let mut bad = KUBERAY_OPERATOR.spec();
    bad.chart.version = "latest".into();
    let e = s.install_or_upgrade(&target, &bad).await.unwrap_err();
    assert!(e.message.starts_with("chart.version:"), "{e}");

    s.set_faults(SimFaults::none().with("helm:upgrade", FaultMode::resource_fails("image pull failed")));
    s.install_or_upgrade(&target, &KUBERAY_OPERATOR.spec()).await.unwrap();
    adv(&s, timings::HELM_RELEASE);
    let r = s.get_release(&target, ns, rel).await.unwrap().unwrap();
    assert_eq!((r.status, r.revision), (ReleaseStatus::Failed, 3));
    assert!(r.description.contains("image pull failed"));

    s.uninstall(&target, ns, rel).await.unwrap();
    assert_eq!(s.get_release(&target, ns, rel).await.unwrap(), None);
    s.uninstall(&target, ns, rel).await.unwrap();

    // A vendored chart (the HyperPod dependencies) is recorded with its pinned source and values.
    s.set_faults(SimFaults::none());
    let hp = instantstart_core::provider::HYPERPOD_DEPENDENCIES;
    s.install_or_upgrade(&target, &hp.spec_for(REGION)).await.unwrap();
    adv(&s, timings::HELM_RELEASE);
    let r = s.get_release(&target, hp.namespace, hp.release).await.unwrap().unwrap();
    assert!(r.is_deployed(&hp.chart_ref()), "{r:?}");
    let recorded = s.read("test", |w, _| {
        Ok(w.kube.values().find_map(|kw| kw.helm_releases.get("kube-system/hyperpod-dependencies").cloned()))
    });
    let recorded = recorded.unwrap().expect("recorded");
    assert!(recorded.repository.contains(instantstart_core::provider::HYPERPOD_CLI_COMMIT), "{recorded:?}");
    assert_eq!(recorded.values["global"]["region"], REGION);
}
