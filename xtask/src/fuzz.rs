//! `cargo xtask fuzz-api [EXAMPLES]`: schemathesis against the served OpenAPI document of a real
//! server on loopback (simulated cloud), in three runs on one server:
//!
//! 1. **seeded**: a cluster with HyperPod, a model download, a training job, an endpoint in a
//!    model pool and an MLflow tracking server are created through REST first ([`seed`]); a
//!    schemathesis configuration ([`config_toml`]) pins every path parameter to those real
//!    objects (the node, pool worker, MLflow run and operation too), so every operation reaches
//!    its handler's logic with generated queries and bodies instead of stopping at a `404`.
//!    `DELETE`s are left out of this run, so the parents outlive it;
//! 2. **seeded deletes**: the `DELETE` operations, on the same real objects;
//! 3. **unseeded**, on a fresh server: every operation with generated identifiers (unknown
//!    names, odd characters).
//!
//! No run calls `PUT /api/sim/faults` ([`SIM_FAULTS_OFF`]): it makes the simulated cloud fail on
//! purpose.
//!
//! # Guarantees checked
//! - No response is a 5xx, each conforms to the document (status, content type, schema):
//!   schemathesis's checks, in every run.
//! - Nothing is half-applied ([`settled_and_consistent`]): after the runs every operation
//!   settles (none stays `running`), and the simulated cloud's create calls agree with the
//!   store's operations (at most one EKS `CreateCluster` per create operation, at most one
//!   HyperPod `CreateCluster` per create or add-HyperPod operation), however many fuzzed
//!   requests reached them.

use crate::harness::{Api, Server, create_request, progress, runtime};
use anyhow::{Context, Result, anyhow, bail, ensure};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Simulated seconds per wall-clock second while fuzzing: pipelines finish in seconds.
const SPEED: f64 = 10_000.0;
/// The seeded objects' names.
const CLUSTER: &str = "fz";
const JOB: &str = "fz-job";
const ENDPOINT: &str = "fz-ep";
const POOL: &str = "fz-pool";
const TRACKING_SERVER: &str = "fz-ml";
const MODEL_REPO: &str = "Qwen/Qwen3-0.6B";
/// The seeded runs generate `examples / SEEDED_EXAMPLES_DIVISOR` cases per operation.
const SEEDED_EXAMPLES_DIVISOR: u32 = 8;

/// Left out of every run: `PUT /api/sim/faults` turns on the simulator's fault injection (its
/// purpose), after which every call to the simulated cloud may fail and the server rightly
/// answers `502`: the fuzzer would be judging the faults, not the API.
pub const SIM_FAULTS_OFF: &str =
    "\n[[operations]]\ninclude-path = \"/api/sim/faults\"\ninclude-method = \"PUT\"\nenabled = false\n";

/// The real objects the seeded runs point every path parameter at.
#[derive(Debug, Clone)]
pub struct Seeded {
    pub cluster: String,
    pub node: String,
    pub group: String,
    pub download: String,
    pub job: String,
    pub endpoint: String,
    pub pool: String,
    pub pod: Option<String>,
    pub tracking_server: String,
    pub run_id: Option<String>,
    pub operation: String,
    pub step: String,
}

/// Runs the three schemathesis runs (`examples` generated cases per operation in the unseeded
/// run, an eighth of that in the seeded ones), then checks the server settled consistently.
pub fn fuzz_api(examples: u32) -> Result<()> {
    let venv = crate::venv()?;
    crate::build_bins()?;
    let bin = crate::root().join("target/debug/instantstart-server");
    let data = crate::root().join("target").join("fuzz-api-data");
    let _ = std::fs::remove_dir_all(&data);
    let rt = runtime()?;
    let server = rt.block_on(Server::start(&bin, &data, SPEED))?;
    let api = server.api();
    let started = Instant::now();
    let seeded = rt.block_on(seed(&api)).context("seeding the fuzzed server")?;
    eprintln!("fuzz-api: seeded in {:.1} s: {seeded:?}", started.elapsed().as_secs_f64());
    let config = data.join("schemathesis.toml");
    std::fs::write(&config, config_toml(&seeded))?;
    let unseeded_config = data.join("schemathesis-unseeded.toml");
    std::fs::write(&unseeded_config, SIM_FAULTS_OFF)?;
    let url = format!("http://127.0.0.1:{}/api/openapi.json", server.port);
    let report = crate::root().join("target").join("schemathesis-report");
    let st_at = |url: &str, label: &str, config: &Path, filter: &[&str], examples: u32| -> Result<()> {
        eprintln!("fuzz-api: {label} ({examples} examples per operation)");
        let mut cmd = Command::new(venv.join("bin").join("st"));
        cmd.arg("--config-file").arg(config);
        cmd.args(["run", url])
            .args(["--header", &format!("Authorization: Bearer {}", crate::harness::TOKEN)])
            .args([
                "--checks",
                "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
            ])
            .args(filter)
            .args(["--max-examples", &examples.to_string()])
            .args(["--workers", "1", "--seed", "1", "--suppress-health-check", "all", "--report-dir"])
            .arg(report.join(label))
            .env("SCHEMATHESIS_HOOKS", "");
        crate::run(&mut cmd).with_context(|| format!("schemathesis, {label}"))
    };
    let st = |label: &str, config: &Path, filter: &[&str], examples: u32| st_at(&url, label, config, filter, examples);
    // Requests on real objects do real work (live reads of the simulated cluster, plans,
    // operations), so the seeded runs generate fewer cases per operation than the unseeded one,
    // besides schemathesis's coverage phase (the boundary values of every parameter and field).
    let seeded_examples = examples.div_ceil(SEEDED_EXAMPLES_DIVISOR);
    let phases = ["--phases", "examples,coverage,fuzzing"];
    st("seeded", &config, &[&phases[..], &["--exclude-method", "DELETE"]].concat(), seeded_examples)?;
    st("seeded-deletes", &config, &[&phases[..], &["--include-method", "DELETE"]].concat(), seeded_examples)?;
    rt.block_on(settled_and_consistent(&api))?;
    drop(server);
    // The unseeded run on a fresh server: identifiers schemathesis learns from the seeded
    // objects' responses would otherwise make it a third seeded run.
    let fresh = crate::root().join("target").join("fuzz-api-data-unseeded");
    let _ = std::fs::remove_dir_all(&fresh);
    let server = rt.block_on(Server::start(&bin, &fresh, SPEED))?;
    let url = format!("http://127.0.0.1:{}/api/openapi.json", server.port);
    st_at(&url, "unseeded", &unseeded_config, &[], examples)?;
    rt.block_on(settled_and_consistent(&server.api()))
}

/// Creates the objects the seeded runs use, each through its REST route, and reads the
/// identifiers the server gave them (node, pool worker, MLflow run).
pub async fn seed(api: &Api) -> Result<Seeded> {
    let create = api.create_cluster(&create_request(CLUSTER), "fuzz-seed-cluster").await?;
    settle(api, &create, "create the cluster").await?;
    let base = format!("/api/clusters/{CLUSTER}");
    let download = submit(
        api,
        &format!("{base}/downloads"),
        json!({ "namespace": "default", "repo_id": MODEL_REPO }),
        "download the model",
    )
    .await?;
    let job = json!({
        "runtime": "hyperpod",
        "job": { "name": JOB, "namespace": "default", "image": "pytorch/pytorch:2.5.1",
                 "instance_type": "ml.g5.2xlarge", "nodes": 1 },
        "recipe": { "kind": "torch", "script": "scripts/train.py" }
    });
    submit(api, &format!("{base}/jobs"), job, "submit the job").await?;
    let endpoint = json!({
        "route": "self_managed", "name": ENDPOINT, "namespace": "default", "instance_type": "ml.g5.2xlarge",
        "replicas": 1, "image": "vllm/vllm-openai:v0.10.1", "port": 8000, "pool": POOL,
        "engine": { "kind": "vllm", "model": format!("models/{MODEL_REPO}") }
    });
    submit(api, &format!("{base}/endpoints"), endpoint, "deploy the endpoint").await?;
    submit(
        api,
        "/api/mlflow/servers",
        json!({ "name": TRACKING_SERVER, "cluster": CLUSTER }),
        "create the tracking server",
    )
    .await?;

    let downloads = api.get(&format!("{base}/downloads")).await?;
    let download_name = first_str(&downloads, &["0", "name"])
        .ok_or_else(|| anyhow!("no download listed after {download}: {downloads}"))?;
    let nodes = api.get(&format!("{base}/nodes")).await?;
    let node = find_str(&nodes, "instance_id").ok_or_else(|| anyhow!("no node listed: {nodes}"))?;
    let group = find_str(&nodes, "instance_group").unwrap_or_else(|| "workers".into());
    let pools = api.get(&format!("{base}/pools")).await?;
    let pod = find_str(&pools, "pod");
    let mut run_id = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    while run_id.is_none() && Instant::now() < deadline {
        let runs = api.get(&format!("/api/mlflow/servers/{TRACKING_SERVER}/runs")).await?;
        run_id = find_str(&runs, "run_id");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(Seeded {
        cluster: CLUSTER.into(),
        node,
        group,
        download: download_name,
        job: JOB.into(),
        endpoint: ENDPOINT.into(),
        pool: POOL.into(),
        pod,
        tracking_server: TRACKING_SERVER.into(),
        run_id,
        operation: create,
        step: "eks_cluster".into(),
    })
}

/// The schemathesis configuration of the seeded runs: every path parameter pinned to a seeded
/// object. `{cluster}` is the cluster everywhere; `{name}` is a tracking server under
/// `/api/mlflow/servers` (set per operation) and otherwise a token or an FSx volume (given the
/// cluster's name: a well-formed name that does not exist); `{action}` is a node id on `GET`
/// but the action on `POST` (`.../nodes/{action}`), so it is set per operation too.
pub fn config_toml(s: &Seeded) -> String {
    let q = |v: &str| format!("{v:?}");
    let mut global = BTreeMap::from([
        ("path.cluster", q(&s.cluster)),
        ("path.name", q(&s.cluster)),
        ("path.download", q(&s.download)),
        ("path.job", q(&s.job)),
        ("path.endpoint", q(&s.endpoint)),
        ("path.group", q(&s.group)),
        ("path.pool", q(&s.pool)),
        ("path.id", q(&s.operation)),
        ("path.step", q(&s.step)),
        ("path.action", q(&s.node)),
    ]);
    if let Some(pod) = &s.pod {
        global.insert("path.pod", q(pod));
    }
    let mut out =
        String::from("# Written by `cargo xtask fuzz-api`: path parameters pinned to seeded objects.\n[parameters]\n");
    for (k, v) in &global {
        out.push_str(&format!("{k:?} = {v}\n"));
    }
    let mut mlflow = format!(
        "\n[[operations]]\ninclude-path-regex = \"^/api/mlflow/servers/\"\nparameters = {{ \"path.name\" = {}",
        q(&s.tracking_server)
    );
    if let Some(run) = &s.run_id {
        mlflow.push_str(&format!(", \"path.run_id\" = {}", q(run)));
    }
    mlflow.push_str(" }\n");
    out.push_str(&mlflow);
    out.push_str(
        "\n[[operations]]\ninclude-path-regex = \"/nodes/\\\\{action\\\\}$\"\ninclude-method = \"POST\"\nparameters = { \"path.action\" = \"reboot\" }\n",
    );
    out.push_str(SIM_FAULTS_OFF);
    out
}

/// After the runs: every operation settles, and the simulated cloud's create calls are at most
/// one per operation that may make them.
pub async fn settled_and_consistent(api: &Api) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(180);
    let ops = loop {
        let ops = api.get("/api/operations?limit=500").await?;
        let ops = ops.as_array().cloned().unwrap_or_default();
        let running: Vec<_> = ops.iter().filter(|o| o["status"] == "running").collect();
        if running.is_empty() {
            break ops;
        }
        if Instant::now() > deadline {
            bail!(
                "operations still running 180 s after the fuzz runs: {:?}",
                running.iter().map(|o| progress(o)).collect::<Vec<_>>()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let kinds = ops.iter().filter_map(|o| o["kind"].as_str()).fold(BTreeMap::<&str, u64>::new(), |mut m, k| {
        *m.entry(k).or_default() += 1;
        m
    });
    let stats = api.stats().await?;
    let problems = create_excess(&kinds, &stats);
    ensure!(problems.is_empty(), "the simulated cloud and the store disagree after fuzzing: {problems:?}");
    eprintln!(
        "fuzz-api: {} operations settled ({kinds:?}); creates agree with them (eks:CreateCluster {}, sagemaker:CreateCluster {})",
        ops.len(),
        stats.get("eks:CreateCluster").copied().unwrap_or(0),
        stats.get("sagemaker:CreateCluster").copied().unwrap_or(0)
    );
    Ok(())
}

/// Create calls beyond what the operations allow: one EKS cluster per create operation, one
/// HyperPod cluster per create or add-HyperPod operation.
pub fn create_excess(kinds: &BTreeMap<&str, u64>, stats: &BTreeMap<String, u64>) -> Vec<String> {
    let n = |k: &str| kinds.get(k).copied().unwrap_or(0);
    let rules = [
        ("eks:CreateCluster", n("create_cluster")),
        ("sagemaker:CreateCluster", n("create_cluster") + n("add_hyperpod")),
    ];
    rules
        .iter()
        .filter_map(|(api, allowed)| {
            let got = stats.get(*api).copied().unwrap_or(0);
            (got > *allowed).then(|| format!("{api}={got} but only {allowed} operations may create"))
        })
        .collect()
}

async fn submit(api: &Api, path: &str, body: Value, what: &str) -> Result<String> {
    let key = format!("fuzz-seed-{}", path.replace('/', "-"));
    let (status, resp) = api.call("POST", path, Some(&body), &[("idempotency-key", &key)]).await?;
    ensure!(status == 202, "{what}: POST {path}: {status} {resp}");
    let id = resp["operation"]["id"].as_str().ok_or_else(|| anyhow!("{what}: no operation id: {resp}"))?.to_string();
    settle(api, &id, what).await?;
    Ok(id)
}

async fn settle(api: &Api, id: &str, what: &str) -> Result<()> {
    let op = api.wait_terminal(id, Duration::from_secs(120)).await?;
    ensure!(op["status"] == "succeeded", "{what} did not succeed: {}", progress(&op));
    Ok(())
}

/// `v` followed along `path` (object keys or array indexes), as a string.
fn first_str(v: &Value, path: &[&str]) -> Option<String> {
    let mut cur = v;
    for p in path {
        cur = match p.parse::<usize>() {
            Ok(i) => cur.get(i)?,
            Err(_) => cur.get(*p)?,
        };
    }
    cur.as_str().map(str::to_string)
}

/// The first string value of a field named `key` anywhere in `v` (depth first).
fn find_str(v: &Value, key: &str) -> Option<String> {
    match v {
        Value::Object(m) => {
            m.get(key).and_then(Value::as_str).map(str::to_string).or_else(|| m.values().find_map(|x| find_str(x, key)))
        }
        Value::Array(a) => a.iter().find_map(|x| find_str(x, key)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeded() -> Seeded {
        Seeded {
            cluster: "c".into(),
            node: "i-1".into(),
            group: "g".into(),
            download: "d".into(),
            job: "j".into(),
            endpoint: "e".into(),
            pool: "p".into(),
            pod: Some("p-0".into()),
            tracking_server: "m".into(),
            run_id: Some("r1".into()),
            operation: "op-1".into(),
            step: "eks_cluster".into(),
        }
    }

    /// The configuration pins each parameter, with the two per-operation cases (schemathesis
    /// itself rejects a malformed file when the runs start).
    #[test]
    fn config_pins_every_path_parameter() {
        let text = config_toml(&seeded());
        for line in [
            "[parameters]",
            r#""path.cluster" = "c""#,
            r#""path.name" = "c""#,
            r#""path.action" = "i-1""#,
            r#""path.pod" = "p-0""#,
            r#""path.id" = "op-1""#,
            r#"parameters = { "path.name" = "m", "path.run_id" = "r1" }"#,
            r#"include-path-regex = "/nodes/\\{action\\}$""#,
            r#"parameters = { "path.action" = "reboot" }"#,
            r#"include-path = "/api/sim/faults""#,
            "enabled = false",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
        }
        let without = config_toml(&Seeded { pod: None, run_id: None, ..seeded() });
        assert!(!without.contains("path.pod") && !without.contains("path.run_id"), "{without}");
    }

    /// Table: operation kinds and create counters → how many rules are broken.
    #[test]
    fn create_excess_allows_one_create_per_operation() {
        type Counts<'a> = &'a [(&'a str, u64)];
        let cases: &[(Counts, Counts, usize)] = &[
            (&[("create_cluster", 2)], &[("eks:CreateCluster", 2), ("sagemaker:CreateCluster", 2)], 0),
            (
                &[("create_cluster", 1), ("add_hyperpod", 1)],
                &[("eks:CreateCluster", 1), ("sagemaker:CreateCluster", 2)],
                0,
            ),
            (&[("create_cluster", 1)], &[("eks:CreateCluster", 2)], 1),
            (&[], &[("eks:CreateCluster", 1), ("sagemaker:CreateCluster", 1)], 2),
            (&[("delete_cluster", 3)], &[], 0),
        ];
        for (kinds, stats, want) in cases {
            let kinds = kinds.iter().copied().collect();
            let stats = stats.iter().map(|(k, v)| (k.to_string(), *v)).collect();
            assert_eq!(create_excess(&kinds, &stats).len(), *want, "{kinds:?} {stats:?}");
        }
    }

    #[test]
    fn field_lookups() {
        let v = json!({ "groups": [{ "instance_group": "g", "nodes": [{ "node_id": "i-9" }] }] });
        assert_eq!(find_str(&v, "node_id").as_deref(), Some("i-9"));
        assert_eq!(first_str(&v, &["groups", "0", "instance_group"]).as_deref(), Some("g"));
        assert_eq!(first_str(&v, &["groups", "1"]), None);
    }
}
