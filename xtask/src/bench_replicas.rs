//! `cargo xtask bench replicas`: throughput of one server on SQLite (the default) and of 1, 2
//! and 3 replicas on one PostgreSQL database ([`crate::pg`], a fresh database per
//! configuration), side by side in one run on the same machine:
//!
//! - **operations started per second**: [`OPS_CLIENTS`] clients send create-cluster requests
//!   (distinct names, each a full pipeline the server validates, assesses against the
//!   simulated cloud, records and starts driving) back to back for `--duration`, spread over
//!   the replicas round-robin; a `202` counts. The simulated cloud runs at speed
//!   [`SIM_SPEED`] (real time), so the pipelines started keep running in the background at the
//!   pace they would in AWS.
//! - **REST reads per second**: one cluster (`GET /api/clusters/{cluster}`), one operation
//!   (`GET /api/operations/{id}`) and a list page (`GET /api/operations?limit=50`), each from
//!   `--connections` keep-alive connections spread over the replicas for `--duration`.
//!
//! The numbers are compared as ratios to the SQLite process (no timed assertion). With the
//! simulated cloud every replica shares one world row (`sim_world`), so the calls a create
//! makes to it are serialized across replicas, which real AWS does not do.

use crate::bench::load;
use crate::harness::{Api, Server, Table, TempDir, create_request, percentile};
use crate::pg::PgServer;
use anyhow::{Context, Result, anyhow};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Clients sending create requests at once.
pub const OPS_CLIENTS: usize = 8;
/// Speed of the simulated cloud: real time.
pub const SIM_SPEED: f64 = 1.0;

/// One configuration: its label, its store, how many servers.
struct Config {
    label: &'static str,
    store: &'static str,
    replicas: usize,
}

const CONFIGS: [Config; 4] = [
    Config { label: "SQLite, 1 process", store: "sqlite", replicas: 1 },
    Config { label: "PostgreSQL, 1 replica", store: "postgres", replicas: 1 },
    Config { label: "PostgreSQL, 2 replicas", store: "postgres", replicas: 2 },
    Config { label: "PostgreSQL, 3 replicas", store: "postgres", replicas: 3 },
];

/// Create requests from `clients` clients for `duration`, client `i` on `ports[i % len]`:
/// (accepted, other answers, seconds, latencies in ms, an accepted operation id, its cluster).
async fn start_operations(
    ports: &[u16],
    clients: usize,
    duration: Duration,
) -> Result<(usize, usize, f64, Vec<f64>, Option<(String, String)>)> {
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..clients {
        let api = Api { port: ports[c % ports.len()] };
        tasks.spawn(async move {
            let (mut ok, mut other, mut lat, mut first) = (0usize, 0usize, Vec::new(), None);
            let mut i = 0;
            while Instant::now() < deadline {
                let name = format!("b{c}-{i}");
                i += 1;
                let t = Instant::now();
                let answer = api.call("POST", "/api/clusters", Some(&create_request(&name)), &[]).await;
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
                match answer {
                    Ok((202, body)) => {
                        ok += 1;
                        if first.is_none() {
                            first = body["operation"]["id"].as_str().map(|id| (id.to_string(), name));
                        }
                    }
                    _ => other += 1,
                }
            }
            (ok, other, lat, first)
        });
    }
    let (mut ok, mut other, mut lat, mut first) = (0, 0, Vec::new(), None);
    while let Some(r) = tasks.join_next().await {
        let (o, e, l, f) = r?;
        ok += o;
        other += e;
        lat.extend(l);
        first = first.or(f);
    }
    lat.sort_by(f64::total_cmp);
    Ok((ok, other, started.elapsed().as_secs_f64(), lat, first))
}

/// One configuration measured: its JSON row.
async fn measure(
    bin: &Path,
    pg: Option<&PgServer>,
    config: &Config,
    connections: usize,
    duration: Duration,
) -> Result<Value> {
    let url = match config.store {
        "postgres" => Some(pg.ok_or_else(|| anyhow!("no PostgreSQL"))?.create_database()?),
        _ => None,
    };
    let mut servers = Vec::new();
    let mut dirs = Vec::new();
    for i in 0..config.replicas {
        let dir = TempDir::new("bench-replica")?;
        let mut args = Vec::new();
        if let Some(url) = &url {
            args.extend(["--store-url".to_string(), url.clone(), "--replica-id".into(), format!("r{i}")]);
        }
        servers.push(Server::start_with(bin, dir.path(), SIM_SPEED, &args).await.with_context(|| config.label)?);
        dirs.push(dir);
    }
    let ports: Vec<u16> = servers.iter().map(|s| s.port).collect();
    let (ok, other, secs, post_ms, first) = start_operations(&ports, OPS_CLIENTS, duration).await?;
    let (op_id, cluster) = first.ok_or_else(|| anyhow!("{}: no create request was accepted", config.label))?;
    let mut reads = serde_json::Map::new();
    for (what, path) in [
        ("cluster", format!("/api/clusters/{cluster}")),
        ("operation", format!("/api/operations/{op_id}")),
        ("list_page", "/api/operations?limit=50".to_string()),
    ] {
        let l = load(&ports, &path, connections, duration).await.with_context(|| format!("load {path}"))?;
        reads.insert(
            what.into(),
            json!({
                "path": path,
                "requests": l.requests,
                "errors": l.errors,
                "requests_per_sec": (l.requests as f64 / l.secs * 10.0).round() / 10.0,
                "p50_ms": (percentile(&l.latencies_ms, 50.0) * 10.0).round() / 10.0,
                "p99_ms": (percentile(&l.latencies_ms, 99.0) * 10.0).round() / 10.0,
            }),
        );
    }
    drop(servers);
    Ok(json!({
        "config": config.label,
        "store": config.store,
        "replicas": config.replicas,
        "operations_started": ok,
        "create_requests_not_accepted": other,
        "operations_started_per_sec": (ok as f64 / secs * 10.0).round() / 10.0,
        "create_p50_ms": (percentile(&post_ms, 50.0) * 10.0).round() / 10.0,
        "create_p99_ms": (percentile(&post_ms, 99.0) * 10.0).round() / 10.0,
        "reads": reads,
    }))
}

/// Every configuration, one after the other; prints the table.
pub async fn bench(bin: &Path, connections: usize, duration: Duration) -> Result<Value> {
    let pg = match crate::pg::unavailable() {
        None => Some(Arc::new(PgServer::start()?.context("PostgreSQL is not available")?)),
        Some(why) => {
            println!("\nReplicas on PostgreSQL: skipped ({why}); SQLite only");
            None
        }
    };
    let mut rows = Vec::new();
    for config in &CONFIGS {
        if config.store == "postgres" && pg.is_none() {
            continue;
        }
        rows.push(measure(bin, pg.as_deref(), config, connections, duration).await?);
    }
    let base = rows.first().cloned().unwrap_or(Value::Null);
    let rate = |row: &Value, path: &[&str]| path.iter().fold(row, |v, k| &v[*k]).as_f64().unwrap_or(f64::NAN);
    let mut table = Table::new(
        format!(
            "Throughput by store and replica count ({OPS_CLIENTS} clients starting create pipelines, then {connections} \
             connections reading, {duration:?} each, spread over the replicas; ×: ratio to SQLite){}",
            pg.as_ref().map(|p| format!("; {}", p.version)).unwrap_or_default()
        ),
        &[
            "configuration",
            "operations started/s",
            "×",
            "create p50/p99 ms",
            "GET cluster/s",
            "×",
            "GET operation/s",
            "×",
            "GET list page/s",
            "×",
        ],
    );
    for row in &rows {
        let ratio = |path: &[&str]| format!("{:.2}", rate(row, path) / rate(&base, path));
        let ops = ["operations_started_per_sec"];
        let (c, o, l) = (
            ["reads", "cluster", "requests_per_sec"],
            ["reads", "operation", "requests_per_sec"],
            ["reads", "list_page", "requests_per_sec"],
        );
        table.row(vec![
            row["config"].as_str().unwrap_or("?").to_string(),
            format!("{:.1}", rate(row, &ops)),
            ratio(&ops),
            format!("{} / {}", row["create_p50_ms"], row["create_p99_ms"]),
            format!("{:.0}", rate(row, &c)),
            ratio(&c),
            format!("{:.0}", rate(row, &o)),
            ratio(&o),
            format!("{:.0}", rate(row, &l)),
            ratio(&l),
        ]);
    }
    table.print();
    Ok(json!({
        "benchmark": "replicas",
        "postgres": pg.as_ref().map(|p| p.version.clone()),
        "sim_speed": SIM_SPEED,
        "create_clients": OPS_CLIENTS,
        "read_connections": connections,
        "duration_secs": duration.as_secs_f64(),
        "configurations": rows,
        "note": "every replica shares one simulated world row, so simulated calls are serialized across replicas",
    }))
}
