//! The AMP query source end to end without AWS: [`AmpMetrics`] over the real adapter's
//! SigV4-signed `query_range` (`AwsProvider::with_amp_query_endpoint`) against the simulator's
//! AMP query API on loopback, whose telemetry is the simulator's own; the per-cluster choice
//! ([`ClusterMetrics`]) reading the observability add-on's workspace; the error cases; and the
//! request as AMP documents it (method, path, form fields, signature scope `aps`).

use aws_config::{BehaviorVersion, Region};
use aws_credential_types::Credentials;
use instantstart_aws::AwsProvider;
use instantstart_core::amp_metrics::AmpMetrics;
use instantstart_core::metrics_choice::ClusterMetrics;
use instantstart_core::provider::*;
use instantstart_core::workflow::observability::{OBSERVABILITY_ADDON, observability_addon_values};
use instantstart_sim::{SimCloud, timings};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

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

/// The adapter with static credentials, sending AMP queries to `url`.
async fn provider(url: &str, region: &str) -> AwsProvider {
    let conf = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(region.to_string()))
        .credentials_provider(Credentials::new("AKIDTESTING", "testing", None, None, "test"))
        .load()
        .await;
    AwsProvider::from_sdk_config(conf).with_amp_query_endpoint(url)
}

/// An ACTIVE workspace and the observability add-on of `demo` writing to it.
async fn observability(s: &SimCloud) -> PrometheusWorkspace {
    let ws = s
        .create_prometheus_workspace(&CreatePrometheusWorkspace {
            region: REGION.into(),
            alias: prometheus_alias("demo"),
            client_token: "ws-token".into(),
            tags: ownership_tags("demo", "op-2"),
        })
        .await
        .unwrap();
    adv(s, timings::AMP_WORKSPACE_CREATE);
    let ws = s.describe_prometheus_workspace(REGION, &ws.id).await.unwrap().unwrap();
    assert_eq!(ws.status, "ACTIVE");
    s.create_addon(&CreateEksAddon {
        region: REGION.into(),
        cluster: "demo".into(),
        name: OBSERVABILITY_ADDON.into(),
        version: None,
        client_request_token: "addon-token".into(),
        tags: ownership_tags("demo", "op-2"),
        configuration_values: Some(observability_addon_values(&ws.arn, &ws.endpoint(REGION))),
    })
    .await
    .unwrap();
    adv(s, timings::ADDON_CREATE);
    ws
}

/// Every point the AMP source answers is the simulator's own value at that moment, for each
/// node (per GPU) and for a job (the mean over its GPUs); the chooser picks AMP for a cluster
/// whose add-on writes to a workspace, and the exporters' source otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amp_source_reads_the_simulated_telemetry_signed_for_aps() {
    let sim = world(2).await;
    let t = target();
    // Before the add-on, the cluster is read from the fallback source.
    let server = sim.serve_amp_query().await.unwrap();
    let aws = Arc::new(provider(&server.url(), REGION).await);
    let chooser = ClusterMetrics::new(Arc::new(sim.clone()), aws.clone(), Arc::new(sim.clone()), Arc::new(sim.clone()));
    assert_eq!(chooser.workspace_for(&t).await, None);
    let ws = observability(&sim).await;
    let chooser = ClusterMetrics::new(Arc::new(sim.clone()), aws.clone(), Arc::new(sim.clone()), Arc::new(sim.clone()));
    assert_eq!(chooser.workspace_for(&t).await, Some((REGION.to_string(), ws.id.clone())));

    sim.apply(&t, &KubeObject(gpu_ray_job("llm"))).await.unwrap();
    adv(&sim, timings::POD_START + timings::RAY_JOB_SUBMIT + 200.0);
    sim.set_speed(0.001).unwrap();
    let window = MetricsWindow { since_seconds: 300, step_seconds: 5 };
    let nodes: Vec<String> = sim
        .list(&t, &ListParams { api_version: "v1".into(), kind: "Node".into(), namespace: None, labels: vec![] })
        .await
        .unwrap()
        .iter()
        .map(|n| n.0["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(nodes.len(), 2);
    let mut busy = 0;
    for node in &nodes {
        let want = MetricsSource::node_metrics(&sim, &t, node, &window).await.unwrap();
        let end = want.end.timestamp_millis() as f64 / 1000.0;
        let source = AmpMetrics::new(aws.clone(), Arc::new(sim.clone()), REGION, &ws.id).with_clock(move || end);
        let got = source.node_metrics(&t, node, &window).await.unwrap();
        assert_eq!((got.origin.as_deref(), source.origin()), (Some("amp"), "amp"));
        assert_eq!(got.gpu_memory_total_mib, want.gpu_memory_total_mib);
        assert_eq!(got.gpu_memory_total_mib, Some(24_576.0), "an A10G");
        assert_eq!(got.series.len(), want.series.len(), "{got:?}");
        for (mine, theirs) in got.series.iter().zip(&want.series) {
            assert_eq!((mine.metric, mine.gpu, &mine.source), (theirs.metric, theirs.gpu, &theirs.source));
            assert_eq!(by_time(mine), by_time(theirs), "{:?} of GPU {:?} on {node}", mine.metric, mine.gpu);
            assert!(mine.points.len() >= 60, "a point every 5 s over 300 s: {mine:?}");
        }
        busy += usize::from(got.series[0].latest().unwrap() >= 85.0);
    }
    assert_eq!(busy, 2, "the job's two pods hold a GPU each: one per node (a node has one)");

    let want = MetricsSource::job_metrics(&sim, &t, "default", "llm", &window).await.unwrap();
    let end = want.end.timestamp_millis() as f64 / 1000.0;
    let source = AmpMetrics::new(aws.clone(), Arc::new(sim.clone()), REGION, &ws.id).with_clock(move || end);
    let got = source.job_metrics(&t, "default", "llm", &window).await.unwrap();
    assert_eq!(got.gpu_memory_total_mib, Some(24_576.0));
    for (mine, theirs) in got.series.iter().zip(&want.series) {
        assert_eq!((mine.metric, &mine.source), (theirs.metric, &theirs.source));
        match mine.metric {
            Metric::GpuUtilization | Metric::GpuMemoryUsed => {
                assert!(mine.points.len() >= 40, "{mine:?}");
                assert_eq!(by_time(mine), by_time(theirs), "{:?}", mine.metric);
            }
            // Not in AMP: the newest line the logging pod printed, at the newest moment.
            Metric::Throughput | Metric::Loss => {
                assert_eq!(mine.points.len(), 1, "{mine:?}");
                let logged: Vec<f64> = (1..400)
                    .map(|k| instantstart_sim::training_curve("llm", k))
                    .map(|(loss, tp)| if mine.metric == Metric::Loss { loss } else { tp })
                    .collect();
                assert!(logged.contains(&mine.points[0][1]), "{mine:?}");
            }
        }
    }

    // Through the chooser: AMP answers and the view's origin says so.
    let set = chooser.node_metrics(&t, &nodes[0], &window).await.unwrap();
    assert_eq!(set.origin.as_deref(), Some("amp"));
}

/// What AMP refuses, as the adapter classifies it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amp_queries_that_are_refused() {
    let sim = world(0).await;
    let ws = observability(&sim).await;
    let server = sim.serve_amp_query().await.unwrap();
    let aws = provider(&server.url(), REGION).await;
    let q = RangeQuery { query: "max by (gpu) (DCGM_FI_DEV_GPU_UTIL)".into(), start: 0.0, end: 60.0, step_seconds: 10 };
    // The workspace answers (no GPU node: no series).
    assert_eq!(aws.query_range(REGION, &ws.id, &q).await.unwrap(), vec![]);
    let e = aws.query_range(REGION, "ws-00000000-0000-0000-0000-000000000000", &q).await.unwrap_err();
    assert_eq!((e.api.as_str(), e.kind), ("aps:QueryMetrics", ProviderErrorKind::NotFound), "{e}");
    assert!(e.message.contains("ResourceNotFoundException"), "{e}");
    // Signed for another region than the workspace's: not found there.
    let e = aws.query_range("us-west-2", &ws.id, &q).await.unwrap_err();
    assert!(e.kind == ProviderErrorKind::AccessDenied || e.kind == ProviderErrorKind::NotFound, "{e}");
    let bad = RangeQuery { query: "rate(DCGM_FI_DEV_GPU_UTIL[5m])".into(), ..q.clone() };
    let e = aws.query_range(REGION, &ws.id, &bad).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::InvalidRequest, "{e}");
    assert!(e.message.contains("bad_data"), "{e}");
    // A workspace still being created.
    let creating = sim
        .create_prometheus_workspace(&CreatePrometheusWorkspace {
            region: REGION.into(),
            alias: "other".into(),
            client_token: "other-token".into(),
            tags: Tags::new(),
        })
        .await
        .unwrap();
    let e = aws.query_range(REGION, &creating.id, &q).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::Conflict, "{e}");
    assert!(e.message.contains("CREATING"), "{e}");
    // Unsigned: refused before anything is read.
    let unsigned = raw_post(&server.url(), &format!("/workspaces/{}/api/v1/query_range", ws.id), "", "query=up");
    assert!(unsigned.starts_with("HTTP/1.1 403"), "{unsigned}");
    assert!(
        unsigned.to_ascii_lowercase().contains("x-amzn-errortype: missingauthenticationtokenexception"),
        "{unsigned}"
    );
    let wrong_service =
        "AWS4-HMAC-SHA256 Credential=AKID/20261206/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=x";
    let refused =
        raw_post(&server.url(), &format!("/workspaces/{}/api/v1/query_range", ws.id), wrong_service, "query=up");
    assert!(refused.starts_with("HTTP/1.1 403") && refused.contains("'aps'"), "{refused}");
}

/// One raw HTTP/1.1 POST (form body) with `authorization` when given: the answer as text.
fn raw_post(url: &str, path: &str, authorization: &str, body: &str) -> String {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let auth = if authorization.is_empty() {
        String::new()
    } else {
        format!("Authorization: {authorization}\r\nX-Amz-Date: 20261206T040000Z\r\n")
    };
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The request on the wire is what AMP's QueryMetrics documents: `POST
/// /workspaces/{id}/api/v1/query_range`, a form body with `query`, `start`, `end`, `step`, and a
/// SigV4 signature scoped to `<region>/aps/aws4_request` over host, date and payload hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_query_request_is_what_amp_expects() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let recorder = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = s.read(&mut chunk).unwrap();
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf).to_string();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                if body.len() >= len {
                    break;
                }
            }
            if n == 0 {
                break;
            }
        }
        let answer = r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"gpu":"0"},"values":[[1700000000,"42"]]}]}}"#;
        write!(s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}", answer.len()).unwrap();
        String::from_utf8(buf).unwrap()
    });
    let aws = provider(&url, "eu-west-1").await;
    let q = RangeQuery {
        query: "avg(DCGM_FI_DEV_GPU_UTIL{namespace=\"team-a\",pod=~\"llm-0|llm-1\"})".into(),
        start: 1_700_000_000.0,
        end: 1_700_000_900.0,
        step_seconds: 30,
    };
    let got = aws.query_range("eu-west-1", "ws-abc", &q).await.unwrap();
    assert_eq!(got[0].points, vec![[1_700_000_000.0, 42.0]]);
    let request = recorder.join().unwrap();
    let (head, body) = request.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("POST /workspaces/ws-abc/api/v1/query_range HTTP/1.1\r\n"), "{head}");
    let header = |name: &str| {
        head.lines()
            .find_map(|l| {
                l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_default()
    };
    assert_eq!(header("content-type"), "application/x-www-form-urlencoded");
    let auth = header("authorization");
    assert!(auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDTESTING/"), "{auth}");
    assert!(auth.contains("/eu-west-1/aps/aws4_request"), "{auth}");
    let signed = auth.split("SignedHeaders=").nth(1).unwrap().split(',').next().unwrap();
    for h in ["content-type", "host", "x-amz-content-sha256", "x-amz-date"] {
        assert!(signed.split(';').any(|s| s == h), "{h} is signed: {signed}");
    }
    assert_eq!(header("x-amz-date").len(), 16);
    let fields: BTreeMap<&str, &str> = body.split('&').filter_map(|kv| kv.split_once('=')).collect();
    assert_eq!(fields.keys().copied().collect::<Vec<_>>(), ["end", "query", "start", "step"]);
    assert_eq!((fields["start"], fields["end"], fields["step"]), ("1700000000", "1700000900", "30"));
    assert!(fields["query"].starts_with("avg%28DCGM_FI_DEV_GPU_UTIL%7Bnamespace%3D%22team-a%22"), "{body}");
}
