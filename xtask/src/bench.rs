//! `cargo xtask bench [all|pipeline|rest|fanout|logs|…|ui-traffic] [--debug] [--duration SECS]`: performance
//! numbers of the real server binary on loopback and the simulated cloud, each compared within
//! one run. Prints tables and writes `target/bench/bench-<name>.json`. Benchmarks only print
//! numbers; the one property they check is that no stream follower misses the final state.
//!
//! - `pipeline`: three create-cluster pipelines at a fixed sim speed (200): wall time vs the
//!   critical path of the step DAG (longest chain of step durations) and vs the sum of the step
//!   durations (the same steps one after another); and the provider calls the engine makes per
//!   minute of waiting for EKS and HyperPod (sim call counters sampled when the step starts
//!   polling and when it succeeds; minutes of simulated time = real AWS minutes).
//! - `rest`: 1,000 clusters and 10,000 operations written into the store before the server
//!   starts (cached under `target/bench/seed/`); unloaded latency of `GET /api/clusters`,
//!   `GET /api/operations` and `GET /metrics`; then the two API reads from 64 concurrent
//!   keep-alive connections for `--duration` seconds each (a Rust load generator on the same
//!   machine); server RSS idle and after the load; cold start (spawn to the first `200` on
//!   `/healthz`) with an empty and with the seeded data dir.
//! - `reads`, `scale`, `memory`: one cluster and one operation beside `/healthz`; pages of
//!   10,000 clusters and 1,000,000 operations; RSS idle and under followers
//!   ([`crate::bench_scale`]).
//! - `fanout`: 1, 10 and 100 WebSocket followers of one operation's stream (`?target=`) while
//!   a create pipeline runs at sim speed 1000: every follower must receive the final state;
//!   delivery latency is arrival time minus the latest change recorded in the snapshot.
//! - `logs`: job-log fan-out, 1 and 100 WebSocket followers of one simulated job writing
//!   10,000 numbered lines/s for `--duration` seconds: lines lost (must be 0) and delivery
//!   latency ([`crate::bench_logs`]).
//! - `ui-traffic`: requests and bytes per minute of one UI tab on a running pipeline's and a
//!   running job's page, with conditional reads off and on ([`crate::bench_ui`]; needs
//!   Chromium; not part of `all`).
//! - `replicas`: operations started and REST reads per second, one server on SQLite beside 1,
//!   2 and 3 replicas on one PostgreSQL (skipped, saying why, when PostgreSQL cannot be
//!   started here) ([`crate::bench_replicas`]).
//!
//! The server is built with `--release` unless `--debug` is given.

use crate::harness::{
    Api, Follower, Server, Table, TempDir, build_server, create_request, latest_change, median, percentile, phase_of,
    secs_between, write_report,
};
use anyhow::{Context, Result, anyhow, bail, ensure};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

const PIPELINE_SPEED: f64 = 200.0;
const PIPELINE_RUNS: usize = 3;
const SEED_CLUSTERS: usize = 1_000;
const SEED_OPS_PER_CLUSTER: usize = 10;
const FANOUT_SPEED: f64 = 1000.0;
const FANOUT_REPEATS: usize = 3;
const JOB_LOG_NOTE: &str = "job-log fan-out is `cargo xtask bench logs` (bench-logs.json)";

struct Opts {
    what: String,
    release: bool,
    duration: Duration,
    connections: usize,
    followers: usize,
    log_rate: f64,
}

/// `cargo xtask bench`: what to measure and how hard.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Which benchmark: the create pipeline, REST reads under load, reads of one cluster and
    /// one operation beside `/healthz`, lists over 10,000 clusters and 1,000,000 operations,
    /// memory, operation fan-out to WebSocket followers, job-log fan-out, throughput by store
    /// and replica count, or all of those; `ui-traffic` (one UI tab's requests and bytes,
    /// headless Chromium) runs only when named.
    #[arg(value_parser = ["all", "pipeline", "rest", "reads", "scale", "memory", "fanout", "logs", "replicas", "ui-traffic"], default_value = "all")]
    pub what: String,
    /// Benchmark a debug build of the server (faster to build, slower to run) instead of release.
    #[arg(long)]
    pub debug: bool,
    /// Seconds of load per measurement (REST load, job-log fan-out).
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub duration: u64,
    /// Concurrent HTTP connections of the REST load.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub connections: usize,
    /// WebSocket followers of the fan-out benchmarks.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub followers: usize,
    /// Log lines per second the simulated job writes (job-log fan-out).
    #[arg(long, value_name = "LINES_PER_SEC", default_value_t = crate::bench_logs::LINES_PER_SEC)]
    pub log_rate: f64,
}

pub fn main(args: BenchArgs) -> Result<()> {
    let opts = Opts {
        what: args.what,
        release: !args.debug,
        duration: Duration::from_secs(args.duration),
        connections: args.connections,
        followers: args.followers,
        log_rate: args.log_rate,
    };
    let bin = build_server(opts.release)?;
    let profile = if opts.release { "release" } else { "debug" };
    println!("InstantStart benchmarks: {profile} server binary, loopback, simulated cloud");
    let rt = crate::harness::runtime()?;
    let all = opts.what == "all";
    let mut failed = Vec::new();
    if all || opts.what == "pipeline" {
        let report = rt.block_on(pipeline(&bin))?;
        println!("  → {}", write_report("bench-pipeline", with_profile(report, profile))?.display());
    }
    if all || opts.what == "rest" {
        let report = rt.block_on(rest(&bin, &opts))?;
        println!("  → {}", write_report("bench-rest", with_profile(report, profile))?.display());
    }
    if all || opts.what == "reads" {
        let report = rt.block_on(crate::bench_scale::reads(&bin, opts.duration))?;
        println!("  → {}", write_report("bench-reads", with_profile(report, profile))?.display());
    }
    if all || opts.what == "scale" {
        let report = rt.block_on(crate::bench_scale::scale(&bin, opts.duration))?;
        println!("  → {}", write_report("bench-scale", with_profile(report, profile))?.display());
    }
    if all || opts.what == "memory" {
        let report = rt.block_on(crate::bench_scale::memory(&bin))?;
        println!("  → {}", write_report("bench-memory", with_profile(report, profile))?.display());
    }
    if all || opts.what == "fanout" {
        let report = rt.block_on(fanout(&bin, opts.followers))?;
        if report["final_state_lost"].as_u64() != Some(0) {
            failed.push(format!("{} followers missed the final state", report["final_state_lost"]));
        }
        println!("  → {}", write_report("bench-fanout", with_profile(report, profile))?.display());
    }
    if all || opts.what == "logs" {
        let report = rt.block_on(crate::bench_logs::bench(&bin, opts.followers, opts.log_rate, opts.duration))?;
        if report["lines_lost"].as_u64() != Some(0) {
            failed.push(format!("{} job-log lines lost", report["lines_lost"]));
        }
        println!("  → {}", write_report("bench-logs", with_profile(report, profile))?.display());
    }
    if all || opts.what == "replicas" {
        let report = rt.block_on(crate::bench_replicas::bench(&bin, opts.connections, opts.duration))?;
        println!("  → {}", write_report("bench-replicas", with_profile(report, profile))?.display());
    }
    if opts.what == "ui-traffic" {
        let report = crate::bench_ui::ui_traffic(&bin)?;
        println!("  → {}", write_report("bench-ui-traffic", with_profile(report, profile))?.display());
    }
    if !failed.is_empty() {
        bail!("reliability property failed: {}", failed.join("; "));
    }
    Ok(())
}

fn with_profile(mut v: Value, profile: &str) -> Value {
    v["server_profile"] = json!(profile);
    v
}

fn r2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

// ---------------------------------------------------------------------------------------------
// Pipeline: wall vs critical path vs serial; provider calls per minute of waiting.

/// Longest chain of step durations through the DAG ending at `key`.
fn longest(
    key: &str,
    deps: &HashMap<String, Vec<String>>,
    dur: &HashMap<String, f64>,
    memo: &mut HashMap<String, (f64, Vec<String>)>,
) -> (f64, Vec<String>) {
    if let Some(v) = memo.get(key) {
        return v.clone();
    }
    let mut best = (0.0, Vec::new());
    for d in deps.get(key).into_iter().flatten() {
        let c = longest(d, deps, dur, memo);
        if c.0 > best.0 {
            best = c;
        }
    }
    let mut path = best.1;
    path.push(key.to_string());
    let out = (best.0 + dur.get(key).copied().unwrap_or(0.0), path);
    memo.insert(key.to_string(), out.clone());
    out
}

struct Timing {
    wall: f64,
    critical: f64,
    critical_path: Vec<String>,
    serial: f64,
    steps: BTreeMap<String, f64>,
}

fn timing(op: &Value) -> Result<Timing> {
    let wall = secs_between(&op["created_at"], &op["finished_at"]).ok_or_else(|| anyhow!("no op timings"))?;
    let mut deps = HashMap::new();
    let mut dur = HashMap::new();
    let mut steps = BTreeMap::new();
    for s in op["steps"].as_array().into_iter().flatten() {
        let key = s["key"].as_str().unwrap_or_default().to_string();
        let d = secs_between(&s["started_at"], &s["finished_at"]).ok_or_else(|| anyhow!("step {key}: no timings"))?;
        let ds: Vec<String> =
            s["depends_on"].as_array().into_iter().flatten().filter_map(|d| d.as_str().map(String::from)).collect();
        deps.insert(key.clone(), ds);
        dur.insert(key.clone(), d);
        steps.insert(key, d);
    }
    let mut memo = HashMap::new();
    let (critical, critical_path) = steps
        .keys()
        .map(|k| longest(k, &deps, &dur, &mut memo))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .ok_or_else(|| anyhow!("no steps"))?;
    Ok(Timing { wall, critical, critical_path, serial: steps.values().sum(), steps })
}

/// Sim counters when a step started polling and when it succeeded.
struct WaitWindow {
    step: &'static str,
    describe: &'static str,
    start: Option<(Instant, BTreeMap<String, u64>)>,
    end: Option<(Instant, BTreeMap<String, u64>)>,
}

impl WaitWindow {
    fn report(&self, speed: f64) -> Option<Value> {
        let ((t0, s0), (t1, s1)) = (self.start.as_ref()?, self.end.as_ref()?);
        let wall = (*t1 - *t0).as_secs_f64();
        let sim_minutes = wall * speed / 60.0;
        let diff: BTreeMap<&String, u64> =
            s1.iter().map(|(k, v)| (k, v - s0.get(k).copied().unwrap_or(0))).filter(|(_, d)| *d > 0).collect();
        let describe = diff.iter().find(|(k, _)| k.as_str() == self.describe).map_or(0, |(_, v)| *v);
        let all: u64 = diff.values().sum();
        Some(json!({
            "step": self.step,
            "wall_secs": r2(wall),
            "simulated_minutes": r2(sim_minutes),
            "describe_api": self.describe,
            "describe_calls": describe,
            "all_calls": all,
            "describe_calls_per_minute": r2(describe as f64 / sim_minutes),
            "all_calls_per_minute": r2(all as f64 / sim_minutes),
            "calls_by_api": diff,
        }))
    }
}

async fn pipeline(bin: &Path) -> Result<Value> {
    let dir = TempDir::new("bench-pipeline")?;
    let server = Server::start(bin, dir.path(), PIPELINE_SPEED).await?;
    let api = server.api();
    let mut runs = Vec::new();
    let mut table = Table::new(
        format!(
            "Create-cluster pipeline at sim speed {PIPELINE_SPEED} (wall = operation created → finished; critical path = \
             longest chain of step durations; serial = sum of step durations)"
        ),
        &["run", "wall s", "critical path s", "serial s", "wall/critical", "serial/wall"],
    );
    let mut waits = Table::new(
        "Provider calls per minute of waiting (minutes of simulated time = real AWS minutes; counters sampled when the \
         step starts polling and when it succeeds)",
        &["run", "step", "sim minutes", "Describe API", "Describe calls", "/min", "all calls", "all /min"],
    );
    for i in 0..PIPELINE_RUNS {
        let name = format!("bench{i}");
        let mut follower = Follower::connect(api.port, &format!("target=cluster/{name}")).await?;
        let id = api.create_cluster(&create_request(&name), &format!("bench-pipeline-{i}")).await?;
        let mut windows = [
            WaitWindow { step: "eks_cluster", describe: "eks:DescribeCluster", start: None, end: None },
            WaitWindow { step: "hyperpod_cluster", describe: "sagemaker:DescribeCluster", start: None, end: None },
        ];
        loop {
            let Some((op, _)) = follower.next_within(Duration::from_secs(300)).await? else {
                bail!("the stream ended before operation {id} finished");
            };
            for w in &mut windows {
                let phase = phase_of(&op, w.step);
                if phase == "polling" && w.start.is_none() {
                    w.start = Some((Instant::now(), api.stats().await?));
                }
                if phase == "succeeded" && w.start.is_some() && w.end.is_none() {
                    w.end = Some((Instant::now(), api.stats().await?));
                }
            }
            if op["status"] != "running" {
                break;
            }
        }
        let op = api.operation(&id).await?;
        ensure!(op["status"] == "succeeded", "pipeline {name} did not succeed: {}", crate::harness::progress(&op));
        let t = timing(&op)?;
        table.row(vec![
            name.clone(),
            format!("{:.2}", t.wall),
            format!("{:.2}", t.critical),
            format!("{:.2}", t.serial),
            format!("{:.3}", t.wall / t.critical),
            format!("{:.2}", t.serial / t.wall),
        ]);
        let mut wait_reports = Vec::new();
        for w in &windows {
            if let Some(r) = w.report(PIPELINE_SPEED) {
                waits.row(vec![
                    name.clone(),
                    w.step.into(),
                    format!("{}", r["simulated_minutes"]),
                    w.describe.into(),
                    format!("{}", r["describe_calls"]),
                    format!("{}", r["describe_calls_per_minute"]),
                    format!("{}", r["all_calls"]),
                    format!("{}", r["all_calls_per_minute"]),
                ]);
                wait_reports.push(r);
            }
        }
        runs.push(json!({
            "cluster": name,
            "wall_secs": r2(t.wall),
            "critical_path_secs": r2(t.critical),
            "critical_path": t.critical_path,
            "serial_secs": r2(t.serial),
            "wall_over_critical": (t.wall / t.critical * 1000.0).round() / 1000.0,
            "serial_over_wall": r2(t.serial / t.wall),
            "step_secs": t.steps.iter().map(|(k, v)| (k.clone(), json!(r2(*v)))).collect::<serde_json::Map<_, _>>(),
            "waiting": wait_reports,
        }));
    }
    let col = |k: &str| runs.iter().filter_map(|r| r[k].as_f64()).collect::<Vec<_>>();
    let (woc, sow) = (median(&col("wall_over_critical")), median(&col("serial_over_wall")));
    table.row(vec![
        "median".into(),
        format!("{:.2}", median(&col("wall_secs"))),
        format!("{:.2}", median(&col("critical_path_secs"))),
        format!("{:.2}", median(&col("serial_secs"))),
        format!("{woc:.3}"),
        format!("{sow:.2}"),
    ]);
    table.print();
    waits.print();
    let per_min = |step: &str, k: &str| {
        median(
            &runs
                .iter()
                .flat_map(|r| r["waiting"].as_array().cloned().unwrap_or_default())
                .filter(|w| w["step"] == step)
                .filter_map(|w| w[k].as_f64())
                .collect::<Vec<_>>(),
        )
    };
    Ok(json!({
        "benchmark": "pipeline",
        "sim_speed": PIPELINE_SPEED,
        "runs": runs,
        "median_wall_over_critical": woc,
        "median_serial_over_wall": sow,
        "median_calls_per_minute": {
            "eks_cluster": { "describe": per_min("eks_cluster", "describe_calls_per_minute"), "all": per_min("eks_cluster", "all_calls_per_minute") },
            "hyperpod_cluster": { "describe": per_min("hyperpod_cluster", "describe_calls_per_minute"), "all": per_min("hyperpod_cluster", "all_calls_per_minute") },
        },
        "critical_path_step": "the critical chain is the longest sum of step durations along depends_on",
    }))
}

// ---------------------------------------------------------------------------------------------
// REST: throughput and latency of reads with a large store; memory; cold start.

/// A store with 1,000 clusters and 10,000 terminal operations, written once with the real
/// `SqliteStore` (every call one durable transaction) and cached under `target/bench/seed/`.
fn seeded_db() -> Result<PathBuf> {
    use instantstart_core::operation::{
        Actor, Face, NewOperation, OperationId, OperationKind, OperationStatus, StepSpec, request_hash,
    };
    use instantstart_core::spec::ClusterCreateRequest;
    use instantstart_core::store::{ClusterRecord, ClusterSource, Store};
    use instantstart_core::workflow::{cluster_target, create_cluster::plan_steps, decode};

    let dir = crate::harness::target_dir().join("bench").join("seed").join(format!(
        "schema{}-c{SEED_CLUSTERS}-o{}",
        instantstart_store::SCHEMA_VERSION,
        SEED_CLUSTERS * SEED_OPS_PER_CLUSTER
    ));
    let db = dir.join("instantstart.db");
    if dir.join("ready").exists() {
        return Ok(db);
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    eprintln!(
        "seeding {SEED_CLUSTERS} clusters and {} operations into {} (once; cached)",
        SEED_CLUSTERS * SEED_OPS_PER_CLUSTER,
        db.display()
    );
    let started = Instant::now();
    let store = instantstart_store::SqliteStore::open(&db)?;
    let actor = Actor { face: Face::Api, principal: "bench-seed".into() };
    for c in 0..SEED_CLUSTERS {
        let name = format!("bench-{c:04}");
        let req: ClusterCreateRequest = decode(&create_request(&name))?;
        let request = serde_json::to_value(&req)?;
        let now = chrono::Utc::now();
        let names = instantstart_core::names::DerivedNames::for_cluster(&name);
        store.put_cluster(&ClusterRecord {
            name: name.clone(),
            region: req.region.clone(),
            source: ClusterSource::Created,
            eks_cluster: names.eks_cluster.clone(),
            hyperpod_cluster: Some(names.hyperpod_cluster.clone()),
            vpc_id: Some(format!("vpc-{c:017x}")),
            bucket: Some(format!("is-{name}-123456789012-use1")),
            kubernetes_version: Some(req.kubernetes_version.clone()),
            request: Some(req.clone()),
            created_at: now,
            updated_at: now,
        })?;
        for o in 0..SEED_OPS_PER_CLUSTER {
            // The first operation created the cluster (its 12 steps); the others are day-2
            // changes of an instance group, one failed.
            let (kind, request, steps) = if o == 0 {
                (OperationKind::CreateCluster, request.clone(), plan_steps(&req))
            } else {
                let r = json!({ "cluster": name, "group": "workers", "patch": { "count": 1 + o % 4 } });
                let s = vec![StepSpec {
                    key: "update_instance_group".into(),
                    title: format!("Scale instance group workers of {} to {}", names.hyperpod_cluster, 1 + o % 4),
                    depends_on: vec![],
                    expected_secs: Some(60),
                }];
                (OperationKind::UpdateInstanceGroup, r, s)
            };
            let id = OperationId::generate();
            store.insert_operation(NewOperation {
                id: id.clone(),
                kind,
                target: cluster_target(&name),
                actor: actor.clone(),
                request_hash: request_hash(kind, "", &request),
                request,
                idempotency_key: None,
                steps,
            })?;
            let (status, error) = if o == 5 {
                (OperationStatus::Failed, Some("update_instance_group: InsufficientCapacity (seeded)"))
            } else {
                (OperationStatus::Succeeded, None)
            };
            store.set_operation_status(&id, status, error)?;
        }
    }
    drop(store);
    std::fs::write(dir.join("ready"), format!("seeded in {:.1?}\n", started.elapsed()))?;
    eprintln!("seeded in {:.1?}", started.elapsed());
    Ok(db)
}

/// A fresh data directory holding a copy of the seeded database.
fn seeded_copy(db: &Path) -> Result<TempDir> {
    let dir = TempDir::new("bench-rest")?;
    for suffix in ["", "-wal", "-shm"] {
        let from = PathBuf::from(format!("{}{suffix}", db.display()));
        if from.exists() {
            std::fs::copy(&from, dir.path().join(format!("instantstart.db{suffix}")))?;
        }
    }
    Ok(dir)
}

pub(crate) struct Load {
    pub requests: usize,
    pub errors: usize,
    pub secs: f64,
    /// Sorted.
    pub latencies_ms: Vec<f64>,
    pub body_bytes: usize,
}

/// `connections` keep-alive connections, each sending `GET path` back to back until `duration`
/// has passed (requests in flight then complete and count); connection `i` goes to
/// `ports[i % ports.len()]` (several replicas).
pub(crate) async fn load(ports: &[u16], path: &str, connections: usize, duration: Duration) -> Result<Load> {
    ensure!(!ports.is_empty(), "no server to load");
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..connections {
        let api = Api { port: ports[i % ports.len()] };
        let path = path.to_string();
        tasks.spawn(async move {
            let mut lat = Vec::new();
            let (mut errors, mut bytes) = (0usize, 0usize);
            'conn: while Instant::now() < deadline {
                let Ok(stream) = TcpStream::connect(("127.0.0.1", api.port)).await else {
                    errors += 1;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let Ok((mut sender, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await else {
                    errors += 1;
                    continue;
                };
                tokio::spawn(conn);
                while Instant::now() < deadline {
                    if sender.ready().await.is_err() {
                        errors += 1;
                        continue 'conn;
                    }
                    let req = hyper::Request::get(path.as_str())
                        .header("host", format!("127.0.0.1:{}", api.port))
                        .header("authorization", format!("Bearer {}", crate::harness::TOKEN))
                        .body(Empty::<Bytes>::new())
                        .expect("static request");
                    let t = Instant::now();
                    let ok = match sender.send_request(req).await {
                        Ok(resp) => {
                            let status = resp.status();
                            match resp.into_body().collect().await {
                                Ok(b) => {
                                    bytes = b.to_bytes().len();
                                    status == 200
                                }
                                Err(_) => false,
                            }
                        }
                        Err(_) => false,
                    };
                    lat.push(t.elapsed().as_secs_f64() * 1000.0);
                    if !ok {
                        errors += 1;
                        continue 'conn;
                    }
                }
            }
            (lat, errors, bytes, Instant::now())
        });
    }
    let mut out = Load { requests: 0, errors: 0, secs: 0.0, latencies_ms: vec![], body_bytes: 0 };
    let mut last = started;
    while let Some(r) = tasks.join_next().await {
        let (lat, errors, bytes, done) = r?;
        out.requests += lat.len();
        out.errors += errors;
        out.body_bytes = out.body_bytes.max(bytes);
        out.latencies_ms.extend(lat);
        last = last.max(done);
    }
    out.secs = (last - started).as_secs_f64();
    out.latencies_ms.sort_by(f64::total_cmp);
    Ok(out)
}

async fn cold_starts(bin: &Path, dir: impl Fn() -> Result<TempDir>, n: usize) -> Result<Vec<f64>> {
    let mut out = Vec::new();
    for _ in 0..n {
        let d = dir()?;
        let mut s = Server::start(bin, d.path(), 60.0).await?;
        out.push(s.cold_start.as_secs_f64() * 1000.0);
        s.kill9();
    }
    Ok(out)
}

async fn rest(bin: &Path, opts: &Opts) -> Result<Value> {
    let db = tokio::task::spawn_blocking(seeded_db).await??;
    let cold_empty = cold_starts(bin, || TempDir::new("bench-cold"), 5).await?;
    let cold_seeded = cold_starts(bin, || seeded_copy(&db), 5).await?;

    let data = seeded_copy(&db)?;
    let server = Server::start(bin, data.path(), 60.0).await?;
    let api = server.api();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss_idle, _) = server.rss_kib()?;
    let clusters = api.get("/api/clusters").await?;
    ensure!(
        clusters.as_array().map(Vec::len) == Some(instantstart_core::page::DEFAULT_LIMIT as usize),
        "GET /api/clusters did not answer a first page of the seed"
    );

    // Unloaded latency: one request at a time on one keep-alive connection.
    let mut single = Table::new(
        "Unloaded latency (one request at a time, 5 requests, seeded store)",
        &["endpoint", "median ms", "max ms", "response KiB"],
    );
    let mut unloaded = Vec::new();
    let mut conn = crate::harness::Conn::open(api.port).await?;
    for path in ["/api/clusters", "/api/operations", "/metrics"] {
        let mut ms = Vec::new();
        let mut size = 0;
        for _ in 0..5 {
            let t = Instant::now();
            size = conn.get_bytes(path).await?.len();
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        let max = ms.iter().copied().fold(0.0, f64::max);
        single.row(vec![
            format!("GET {path}"),
            format!("{:.1}", median(&ms)),
            format!("{max:.1}"),
            format!("{:.0}", size as f64 / 1024.0),
        ]);
        unloaded.push(json!({ "path": path, "median_ms": r2(median(&ms)), "max_ms": r2(max), "response_bytes": size }));
    }
    drop(conn);

    let mut table = Table::new(
        format!(
            "REST reads, {} concurrent keep-alive connections for {:?} each ({SEED_CLUSTERS} clusters and {} \
             operations stored; load generator on the same machine)",
            opts.connections,
            opts.duration,
            SEED_CLUSTERS * SEED_OPS_PER_CLUSTER
        ),
        &["endpoint", "requests", "req/s", "p50 ms", "p99 ms", "max ms", "errors", "response KiB"],
    );
    let mut endpoints = Vec::new();
    for path in ["/api/clusters", "/api/operations"] {
        let l =
            load(&[api.port], path, opts.connections, opts.duration).await.with_context(|| format!("load {path}"))?;
        let rps = l.requests as f64 / l.secs;
        let (p50, p99, max) = (
            percentile(&l.latencies_ms, 50.0),
            percentile(&l.latencies_ms, 99.0),
            l.latencies_ms.last().copied().unwrap_or(f64::NAN),
        );
        table.row(vec![
            format!("GET {path}"),
            l.requests.to_string(),
            format!("{rps:.1}"),
            format!("{p50:.1}"),
            format!("{p99:.1}"),
            format!("{max:.1}"),
            l.errors.to_string(),
            format!("{:.0}", l.body_bytes as f64 / 1024.0),
        ]);
        endpoints.push(json!({
            "path": path,
            "requests": l.requests,
            "errors": l.errors,
            "secs": r2(l.secs),
            "requests_per_sec": r2(rps),
            "p50_ms": r2(p50),
            "p99_ms": r2(p99),
            "max_ms": r2(max),
            "response_bytes": l.body_bytes,
        }));
    }
    let (rss_after, rss_peak) = server.rss_kib()?;
    single.print();
    table.print();
    let mib = |k: u64| k as f64 / 1024.0;
    let mut mem = Table::new("Server memory and cold start", &["metric", "value"]);
    mem.row(vec!["RSS idle (seeded store, 2 s after start)".into(), format!("{:.1} MiB", mib(rss_idle))]);
    mem.row(vec!["RSS after the REST run".into(), format!("{:.1} MiB", mib(rss_after))]);
    mem.row(vec!["peak RSS (VmHWM)".into(), format!("{:.1} MiB", mib(rss_peak))]);
    let fmt = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        format!("median {:.0} ms, max {:.0} ms (n={})", percentile(&s, 50.0), s.last().unwrap_or(&f64::NAN), s.len())
    };
    mem.row(vec!["cold start to first 200 /healthz, empty data dir".into(), fmt(&cold_empty)]);
    mem.row(vec!["cold start to first 200 /healthz, seeded data dir".into(), fmt(&cold_seeded)]);
    mem.print();
    Ok(json!({
        "benchmark": "rest",
        "seed": { "clusters": SEED_CLUSTERS, "operations": SEED_CLUSTERS * SEED_OPS_PER_CLUSTER },
        "connections": opts.connections,
        "duration_secs": opts.duration.as_secs_f64(),
        "unloaded": unloaded,
        "endpoints": endpoints,
        "rss_idle_kib": rss_idle,
        "rss_after_kib": rss_after,
        "rss_peak_kib": rss_peak,
        "cold_start_ms": { "empty_data_dir": cold_empty.iter().map(|v| r2(*v)).collect::<Vec<_>>(),
                           "seeded_data_dir": cold_seeded.iter().map(|v| r2(*v)).collect::<Vec<_>>() },
        "load_generator": "xtask (tokio + hyper http1), same machine as the server",
    }))
}

// ---------------------------------------------------------------------------------------------
// Fan-out of the live operation stream.

struct Followed {
    messages: usize,
    latencies_ms: Vec<f64>,
    last: Value,
    transitions: usize,
    first: Option<chrono::DateTime<chrono::Utc>>,
    end: Option<chrono::DateTime<chrono::Utc>>,
}

async fn follow_to_end(mut f: Follower) -> Result<Followed> {
    let mut out =
        Followed { messages: 0, latencies_ms: vec![], last: Value::Null, transitions: 0, first: None, end: None };
    let mut seen = BTreeSet::new();
    loop {
        let Some((op, at)) = f.next_within(Duration::from_secs(300)).await? else { return Ok(out) };
        out.messages += 1;
        out.first.get_or_insert(at);
        out.end = Some(at);
        if let Some(changed) = latest_change(&op) {
            out.latencies_ms.push((at - changed).num_microseconds().unwrap_or(0) as f64 / 1000.0);
        }
        // `pending` is where every step starts, not a change: the changes are the four phases
        // after it (`transitions_total` counts the same).
        for s in op["steps"].as_array().into_iter().flatten().filter(|s| s["phase"] != "pending") {
            seen.insert(format!("{}={}", s["key"], s["phase"]));
        }
        let done = op["status"] != "running";
        out.last = op;
        if done {
            out.transitions = seen.len();
            return Ok(out);
        }
    }
}

/// One fan-out run: `followers` followers of one create pipeline on a fresh server.
async fn fanout_once(bin: &Path, followers: usize) -> Result<Value> {
    let dir = TempDir::new("bench-fanout")?;
    let server = Server::start(bin, dir.path(), FANOUT_SPEED).await?;
    let api = server.api();
    let mut tasks = tokio::task::JoinSet::new();
    for f in Follower::connect_many(&api, "target=cluster/fanout", followers).await? {
        tasks.spawn(follow_to_end(f));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let id = api.create_cluster(&create_request("fanout"), "bench-fanout").await?;
    let mut results = Vec::new();
    while let Some(r) = tasks.join_next().await {
        results.push(r?);
    }
    let op = api.wait_terminal(&id, Duration::from_secs(60)).await?;
    ensure!(op["status"] == "succeeded", "the fan-out pipeline did not succeed: {}", crate::harness::progress(&op));
    let transitions_total = op["steps"].as_array().map_or(0, |s| s.len()) * 4;
    let final_ok = results
        .iter()
        .filter(|r| {
            r.as_ref().is_ok_and(|r| r.last["status"] == "succeeded" && r.last["updated_at"] == op["updated_at"])
        })
        .count();
    let ok: Vec<&Followed> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    let errors: Vec<String> = results.iter().filter_map(|r| r.as_ref().err().map(|e| format!("{e:#}"))).collect();
    let mut lat: Vec<f64> = ok.iter().flat_map(|r| r.latencies_ms.iter().copied()).collect();
    lat.sort_by(f64::total_cmp);
    let msgs: Vec<f64> = ok.iter().map(|r| r.messages as f64).collect();
    let trans: Vec<f64> = ok.iter().map(|r| r.transitions as f64).collect();
    let delivered: usize = ok.iter().map(|r| r.messages).sum();
    let first = ok.iter().filter_map(|r| r.first).min();
    let end = ok.iter().filter_map(|r| r.end).max();
    let span = match (first, end) {
        (Some(a), Some(b)) => (b - a).num_milliseconds() as f64 / 1000.0,
        _ => f64::NAN,
    };
    let lo = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Ok(json!({
        "followers": followers,
        "final_state_received": final_ok,
        "final_state_lost": followers - final_ok,
        "follower_errors": errors,
        "messages_per_follower": { "min": lo(&msgs), "median": median(&msgs), "max": hi(&msgs) },
        "step_phase_changes_seen": { "min": lo(&trans), "median": median(&trans), "max": hi(&trans), "of": transitions_total },
        "messages_delivered": delivered,
        "span_secs": r2(span),
        "messages_per_sec": r2(delivered as f64 / span),
        "latency_ms": { "p50": r2(percentile(&lat, 50.0)), "p99": r2(percentile(&lat, 99.0)),
                        "max": r2(lat.last().copied().unwrap_or(f64::NAN)) },
    }))
}

/// Fan-out with 1, 10 and `followers` followers (how delivery scales with followers).
async fn fanout(bin: &Path, followers: usize) -> Result<Value> {
    let mut counts = vec![1, 10, followers];
    counts.sort();
    counts.dedup();
    let mut table = Table::new(
        format!(
            "Operation stream fan-out: WebSocket followers of one create pipeline (sim speed {FANOUT_SPEED}, \
             ~60 phase changes in ~2 s); latency = arrival − latest change in the snapshot"
        ),
        &[
            "followers",
            "final state received (3 runs)",
            "msgs/follower",
            "phase changes seen",
            "delivered/s",
            "p50 ms",
            "p99 ms",
            "max ms",
        ],
    );
    let mut runs = Vec::new();
    let mut lost = 0;
    for n in counts {
        // Each count several times on a fresh server; the run with the median p99 is shown (the
        // machine is shared with the load generator and whatever else runs).
        let mut tries = Vec::new();
        let mut received = 0;
        for _ in 0..FANOUT_REPEATS {
            let r = fanout_once(bin, n).await?;
            lost += r["final_state_lost"].as_u64().unwrap_or(0);
            received += r["final_state_received"].as_u64().unwrap_or(0);
            tries.push(r);
        }
        let p99 = |r: &Value| r["latency_ms"]["p99"].as_f64().unwrap_or(f64::NAN);
        tries.sort_by(|a, b| p99(a).total_cmp(&p99(b)));
        let all_p99: Vec<f64> = tries.iter().map(p99).collect();
        let mut r = tries.swap_remove(FANOUT_REPEATS / 2);
        r["p99_ms_of_all_repeats"] = json!(all_p99);
        let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
        let m = &r["messages_per_follower"];
        let t = &r["step_phase_changes_seen"];
        table.row(vec![
            n.to_string(),
            format!("{received}/{}", n * FANOUT_REPEATS),
            format!("{:.0}–{:.0}", f(&m["min"]), f(&m["max"])),
            format!("{:.0}–{:.0} of {}", f(&t["min"]), f(&t["max"]), t["of"]),
            format!("{:.0}", r["messages_per_sec"].as_f64().unwrap_or(f64::NAN)),
            format!("{:.1}", r["latency_ms"]["p50"].as_f64().unwrap_or(f64::NAN)),
            format!("{:.1}", r["latency_ms"]["p99"].as_f64().unwrap_or(f64::NAN)),
            format!("{:.1}", r["latency_ms"]["max"].as_f64().unwrap_or(f64::NAN)),
        ]);
        if let Some(e) = r["follower_errors"].as_array().filter(|e| !e.is_empty()) {
            println!("  follower errors with {n} followers: {e:?}");
        }
        runs.push(r);
    }
    table.print();
    println!("  note: {JOB_LOG_NOTE}");
    Ok(json!({
        "benchmark": "fanout",
        "stream": "/api/operations/stream?target=cluster/fanout",
        "sim_speed": FANOUT_SPEED,
        "runs": runs,
        "final_state_lost": lost,
        "latency_definition": "arrival time at the follower minus the latest updated_at in the operation snapshot (same host clock)",
        "job_log_fanout": JOB_LOG_NOTE,
    }))
}
