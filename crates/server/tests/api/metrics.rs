//! GPU and training metrics over time through the REST API on the simulated cloud: a running
//! HyperPod job's GPUs read busy on its nodes and idle elsewhere, the job's own series (mean GPU
//! use, throughput, loss) agree with its log, and bad queries are 400s naming their field.

use super::*;

fn cluster_body() -> Value {
    json!({
        "name": "demo",
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.12xlarge", "count": 2, "availability_zone": "us-east-1a" }
        ]}
    })
}

fn job(name: &str) -> Value {
    json!({
        "runtime": "hyperpod",
        "job": { "name": name, "namespace": "default", "image": "pytorch/pytorch:2.5.1",
                 "instance_type": "ml.g5.12xlarge", "nodes": 1, "gpus_per_node": 2 },
        "recipe": { "kind": "torch", "script": "scripts/train.py" }
    })
}

fn fields(body: &Value) -> Vec<String> {
    body["findings"]
        .as_array()
        .map(|f| f.iter().map(|x| x["field"].as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

fn series<'a>(view: &'a Value, metric: &str, gpu: Option<u64>) -> &'a Value {
    view["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["metric"] == metric && s["gpu"].as_u64() == gpu)
        .unwrap_or_else(|| panic!("no {metric} {gpu:?} in {view:#}"))
}

fn latest(s: &Value) -> f64 {
    s["points"].as_array().unwrap().last().unwrap()[1].as_f64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_of_nodes_and_jobs_follow_what_runs() {
    let app = test_app(2000.0);
    // Rules first: exactly one of node or job, a bounded window and number of points.
    let cases = [
        ("/api/clusters/demo/metrics", "node"),
        ("/api/clusters/demo/metrics?node=a&job=b", "node"),
        ("/api/clusters/demo/metrics?node=Not_A_Node", "node"),
        ("/api/clusters/demo/metrics?job=x&since=30", "since"),
        ("/api/clusters/demo/metrics?job=x&since=86400&step=10", "step"),
        ("/api/clusters/demo/metrics?node=n&namespace=default", "namespace"),
    ];
    for (uri, field) in cases {
        let r = app.get(uri).await;
        assert_eq!((r.status, fields(&r.body)), (StatusCode::BAD_REQUEST, vec![field.to_string()]), "{uri}");
    }
    assert_eq!(app.get("/api/clusters/nope/metrics?node=n").await.status, StatusCode::NOT_FOUND);

    let r = app.send(Method::POST, "/api/clusters", Some(cluster_body()), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    app.state().sim.as_ref().unwrap().set_speed(50.0).unwrap();
    assert_eq!(app.get("/api/clusters/demo/metrics?node=nope").await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.get("/api/clusters/demo/metrics?job=nope").await.status, StatusCode::NOT_FOUND);

    let r = app.send(Method::POST, "/api/clusters/demo/jobs", Some(job("llama")), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");

    // The job logs steps: its throughput and loss come from those lines.
    let view = app
        .get_until("/api/clusters/demo/metrics?job=llama&since=600&step=10", |v| {
            v["series"]
                .as_array()
                .is_some_and(|s| s.iter().any(|s| s["metric"] == "loss" && !s["points"].as_array().unwrap().is_empty()))
        })
        .await;
    assert_eq!(
        (view["job"].clone(), view["namespace"].clone(), view["origin"].clone()),
        (json!("llama"), json!("default"), json!("simulated"))
    );
    assert_eq!(view["step_seconds"], 10);
    assert_eq!(view["gpu_memory_total_mib"], 24_576.0, "an A10G has 24 GB");
    let util = series(&view, "gpu_utilization", None);
    assert_eq!((util["unit"].clone(), util["source"].clone()), (json!("percent"), json!("DCGM_FI_DEV_GPU_UTIL")));
    assert!((85.0..=98.0).contains(&latest(util)), "{util:#}");
    let memory = series(&view, "gpu_memory_used", None);
    assert!(latest(memory) > 0.5 * 24_576.0 && latest(memory) < 24_576.0, "{memory:#}");
    let throughput = series(&view, "throughput", None);
    assert_eq!((throughput["unit"].clone(), throughput["source"].clone()), (json!("tokens/s"), json!("training log")));
    assert!(latest(throughput) > 1000.0, "{throughput:#}");
    // Points are on the grid: a multiple of the step, one step apart, within the window.
    let pts = util["points"].as_array().unwrap();
    assert!(pts.len() <= 61);
    assert!(pts.iter().all(|p| p[0].as_f64().unwrap() % 10.0 == 0.0));
    assert!(pts.windows(2).all(|w| w[1][0].as_f64().unwrap() - w[0][0].as_f64().unwrap() == 10.0));

    // The node the job runs on: two GPUs busy, the other two idle; the other node all idle.
    let detail = app.get("/api/clusters/demo/jobs/llama").await.body;
    let node = detail["pod_list"][0]["node"].as_str().unwrap().to_string();
    let view = app.get(&format!("/api/clusters/demo/metrics?node={node}&since=120&step=10")).await;
    assert_eq!(view.status, StatusCode::OK, "{:#}", view.body);
    let gpus: Vec<f64> = (0..4).map(|g| latest(series(&view.body, "gpu_utilization", Some(g)))).collect();
    assert_eq!(gpus.iter().filter(|u| **u >= 85.0).count(), 2, "{gpus:?}");
    assert_eq!(gpus.iter().filter(|u| **u == 0.0).count(), 2, "{gpus:?}");
    assert_eq!(series(&view.body, "gpu_memory_used", Some(3))["unit"], "MiB");
    let cap = app.get("/api/clusters/demo/capacity").await.body;
    let other = cap["node_list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["name"].as_str())
        .find(|n| *n != node)
        .unwrap()
        .to_string();
    let idle = app.get(&format!("/api/clusters/demo/metrics?node={other}&since=120")).await.body;
    assert!(
        idle["series"].as_array().unwrap().iter().all(|s| s["points"].as_array().unwrap().iter().all(|p| p[1] == 0.0)),
        "{idle:#}"
    );
    // Every read is tagged like every JSON read.
    assert!(app.get(&format!("/api/clusters/demo/metrics?node={other}")).await.headers.contains_key(header::ETAG));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metrics_read_whose_source_fails_is_a_502_and_the_next_read_recovers() {
    let app = test_app(2000.0);
    let r = app.send(Method::POST, "/api/clusters", Some(cluster_body()), &[]).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{:#}", r.body);
    let done = app.wait_op(r.body["operation"]["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "succeeded", "{done:#}");
    let cap = app.get("/api/clusters/demo/capacity").await.body;
    let node = cap["node_list"][0]["name"].as_str().unwrap().to_string();
    let uri = format!("/api/clusters/demo/metrics?node={node}");
    let sim = app.state().sim.as_ref().unwrap();
    sim.set_faults(
        instantstart_sim::SimFaults::none()
            .with("k8s:Metrics", instantstart_sim::FaultMode::fail("exporter down (injected)")),
    );
    let r = app.get(&uri).await;
    assert_eq!(r.status, StatusCode::BAD_GATEWAY, "{:#}", r.body);
    sim.set_faults(instantstart_sim::SimFaults::none());
    assert_eq!(app.get(&uri).await.status, StatusCode::OK);
}
