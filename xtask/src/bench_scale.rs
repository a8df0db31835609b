//! `cargo xtask bench reads|scale|memory`: cheap reads beside `/healthz`, lists over a large
//! store, and the server's memory (issue #23).
//!
//! - `reads`: one cluster created through the pipeline (sim speed 1000), then `/healthz`,
//!   `GET /api/clusters/{cluster}` and `GET /api/operations/{id}` from 32 keep-alive
//!   connections for `--duration` each, back to back in one run: requests per second, the
//!   ratio to `/healthz`, p50 and p99 (targets: ratio ≥ 1/3, p99 < 5 ms in release).
//! - `scale`: 10,000 clusters and 1,000,000 operations (100 per cluster over the past year, so
//!   with the default 30-day retention about 8 % are hot and the rest archived) written
//!   straight into SQLite ([`fast_seed`]); unloaded latency of the first pages and `/metrics`;
//!   a page of 50 clusters, of 50 operations and of 50 archived operations from 64 connections
//!   (target: clusters p99 < 20 ms); RSS.
//! - `memory`: idle RSS on an empty data directory (target < 30 MiB), and with 1,000 clusters,
//!   100,000 operations and 100 WebSocket followers.
//!
//! The seeds are cached under `target/bench/seed/` (keyed by schema version and size).

use crate::bench::load;
use crate::harness::{Follower, Server, Table, TempDir, create_request, percentile};
use anyhow::{Context, Result, ensure};
use instantstart_core::operation::{OperationId, OperationKind, request_hash};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const READS_CONNECTIONS: usize = 32;
const READS_SPEED: f64 = 1000.0;
const SCALE_CLUSTERS: usize = 10_000;
const SCALE_OPERATIONS: usize = 1_000_000;
const SCALE_CONNECTIONS: usize = 64;
const MEMORY_CLUSTERS: usize = 1_000;
const MEMORY_OPERATIONS: usize = 100_000;
const MEMORY_FOLLOWERS: usize = 100;
/// The seeded history spans this many days; operations that finished before the server's
/// default retention (`--operation-retention-days`, 30) are written archived.
const HISTORY_DAYS: i64 = 360;
const RETENTION_DAYS: i64 = 30;

fn r2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn mib(kib: u64) -> f64 {
    r2(kib as f64 / 1024.0)
}

/// One measured load: its row in a table and its JSON.
fn measure_row(table: &mut Table, label: &str, l: &crate::bench::Load, healthz_rps: Option<f64>) -> Value {
    let rps = l.requests as f64 / l.secs;
    let (p50, p99) = (percentile(&l.latencies_ms, 50.0), percentile(&l.latencies_ms, 99.0));
    let ratio = healthz_rps.map(|h| rps / h);
    table.row(vec![
        label.to_string(),
        l.requests.to_string(),
        format!("{rps:.0}"),
        ratio.map_or("-".into(), |r| format!("{r:.2}")),
        format!("{p50:.2}"),
        format!("{p99:.2}"),
        l.errors.to_string(),
        format!("{:.1}", l.body_bytes as f64 / 1024.0),
    ]);
    json!({
        "endpoint": label,
        "requests": l.requests,
        "errors": l.errors,
        "requests_per_sec": r2(rps),
        "ratio_to_healthz": ratio.map(|r| (r * 1000.0).round() / 1000.0),
        "p50_ms": r2(p50),
        "p99_ms": r2(p99),
        "max_ms": r2(l.latencies_ms.last().copied().unwrap_or(f64::NAN)),
        "response_bytes": l.body_bytes,
    })
}

const LOAD_HEADERS: &[&str] = &["endpoint", "requests", "req/s", "× /healthz", "p50 ms", "p99 ms", "errors", "KiB"];

// ---------------------------------------------------------------------------------------------
// Reads of one cluster and one operation, beside /healthz.

pub async fn reads(bin: &Path, duration: Duration) -> Result<Value> {
    let dir = TempDir::new("bench-reads")?;
    let server = Server::start(bin, dir.path(), READS_SPEED).await?;
    let api = server.api();
    let id = api.create_cluster(&create_request("reads"), "bench-reads").await?;
    let op = api.wait_terminal(&id, Duration::from_secs(120)).await?;
    ensure!(op["status"] == "succeeded", "the reads cluster did not become ready: {}", crate::harness::progress(&op));
    let cluster = api.get("/api/clusters/reads").await?;
    ensure!(cluster["live_error"].is_null(), "live read failed: {}", cluster["live_error"]);
    let mut table = Table::new(
        format!(
            "Cheap reads: {READS_CONNECTIONS} keep-alive connections, {duration:?} each, back to back in one run (one \
             ready cluster; load generator on the same machine)"
        ),
        LOAD_HEADERS,
    );
    let paths = [
        ("GET /healthz", "/healthz".to_string()),
        ("GET /api/clusters/{cluster}", "/api/clusters/reads".to_string()),
        ("GET /api/operations/{id}", format!("/api/operations/{id}")),
    ];
    let mut rows = Vec::new();
    let mut healthz = None;
    for (label, path) in &paths {
        let l = load(&[api.port], path, READS_CONNECTIONS, duration).await.with_context(|| format!("load {path}"))?;
        let row = measure_row(&mut table, label, &l, healthz);
        healthz = healthz.or(row["requests_per_sec"].as_f64());
        rows.push(row);
    }
    table.print();
    let (rss, peak) = server.rss_kib()?;
    let pass = rows[1..].iter().all(|r| {
        r["ratio_to_healthz"].as_f64().is_some_and(|x| x >= 1.0 / 3.0) && r["p99_ms"].as_f64().is_some_and(|p| p < 5.0)
    });
    println!("  targets (ratio ≥ 0.33, p99 < 5 ms): {}", if pass { "met" } else { "NOT met" });
    Ok(json!({
        "benchmark": "reads",
        "connections": READS_CONNECTIONS,
        "duration_secs": duration.as_secs_f64(),
        "endpoints": rows,
        "targets_met": pass,
        "rss_after_mib": mib(rss),
        "rss_peak_mib": mib(peak),
        "load_generator": "xtask (tokio + hyper http1), same machine as the server",
    }))
}

// ---------------------------------------------------------------------------------------------
// A large store, written fast.

/// A SQLite store with `clusters` clusters and `operations` operations (`operations /
/// clusters` each: the first created the cluster with its steps, the others changed an
/// instance group, one in ten failed), spread over the past [`HISTORY_DAYS`]; those that
/// finished before the retention window are written archived, as the server's sweep would
/// have left them. Written with the schema of `SqliteStore::open`, then one transaction of
/// prepared statements. Cached; returns the database path.
pub fn fast_seed(clusters: usize, operations: usize) -> Result<PathBuf> {
    use instantstart_core::spec::ClusterCreateRequest;
    use instantstart_core::store::{ClusterRecord, ClusterSource};
    use instantstart_core::workflow::{cluster_target, create_cluster::plan_steps, decode};
    use rusqlite::params;

    ensure!(clusters > 0 && operations >= clusters, "at least one operation per cluster");
    let per = operations / clusters;
    let dir = crate::harness::target_dir().join("bench").join("seed").join(format!(
        "fast-schema{}-c{clusters}-o{}",
        instantstart_store::SCHEMA_VERSION,
        per * clusters
    ));
    let db = dir.join("instantstart.db");
    if dir.join("ready").exists() {
        return Ok(db);
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    eprintln!("seeding {clusters} clusters and {} operations into {} (once; cached)", per * clusters, db.display());
    let started = Instant::now();
    drop(instantstart_store::SqliteStore::open(&db)?);
    let mut conn = rusqlite::Connection::open(&db)?;
    conn.pragma_update(None, "synchronous", "OFF")?;
    conn.pragma_update(None, "cache_size", -262_144)?; // 256 MiB
    let now = chrono::Utc::now();
    let ts = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
    let retention_cutoff = now - chrono::Duration::days(RETENTION_DAYS);
    let spacing = chrono::Duration::seconds(HISTORY_DAYS * 86_400 / per as i64);
    let tx = conn.transaction()?;
    {
        let mut put_cluster = tx.prepare(
            "INSERT INTO clusters (name, region, source, eks_cluster, record, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
        )?;
        let mut put_op = tx.prepare(
            "INSERT INTO operations (id, kind, target, status, actor_face, actor_principal, request, \
             idempotency_key, request_hash, error, created_at, updated_at, finished_at, archived) \
             VALUES (?1, ?2, ?3, ?4, 'api', 'bench-seed', ?5, NULL, ?6, ?7, ?8, ?9, ?9, ?10)",
        )?;
        let mut put_step = tx.prepare(
            "INSERT INTO steps (operation_id, key, position, title, depends_on, phase, attempts, \
             idempotency_token, resource, outputs, detail, error, expected_secs, started_at, finished_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7, NULL, 'null', NULL, ?8, ?9, ?10, ?11, ?11)",
        )?;
        for c in 0..clusters {
            let name = format!("bench-{c:05}");
            let target = cluster_target(&name);
            let req: ClusterCreateRequest = decode(&create_request(&name))?;
            let create_json = serde_json::to_value(&req)?;
            let names = instantstart_core::names::DerivedNames::for_cluster(&name);
            // Oldest first; clusters a millisecond apart so no two operations share a time.
            let first = now - chrono::Duration::days(HISTORY_DAYS) + chrono::Duration::milliseconds(c as i64);
            let record = ClusterRecord {
                name: name.clone(),
                region: req.region.clone(),
                source: ClusterSource::Created,
                eks_cluster: names.eks_cluster.clone(),
                hyperpod_cluster: Some(names.hyperpod_cluster.clone()),
                vpc_id: Some(format!("vpc-{c:017x}")),
                bucket: Some(format!("is-{name}-123456789012-use1")),
                kubernetes_version: Some(req.kubernetes_version.clone()),
                request: Some(req.clone()),
                created_at: first,
                updated_at: first,
            };
            put_cluster.execute(params![
                name,
                req.region,
                "created",
                names.eks_cluster,
                serde_json::to_string(&record)?,
                ts(first)
            ])?;
            for o in 0..per {
                let created = first + spacing * o as i32;
                let finished = created + chrono::Duration::minutes(5);
                let id = OperationId::generate();
                let failed = o % 10 == 5;
                let (kind, request, steps) = if o == 0 {
                    (OperationKind::CreateCluster, create_json.clone(), plan_steps(&req))
                } else {
                    let r = json!({ "cluster": name, "group": "workers", "patch": { "count": 1 + o % 4 } });
                    let s = vec![instantstart_core::operation::StepSpec {
                        key: "update_instance_group".into(),
                        title: format!("Scale instance group workers of {} to {}", names.hyperpod_cluster, 1 + o % 4),
                        depends_on: vec![],
                        expected_secs: Some(60),
                    }];
                    (OperationKind::UpdateInstanceGroup, r, s)
                };
                let (status, error) = if failed {
                    ("failed", Some("update_instance_group: InsufficientCapacity (seeded)"))
                } else {
                    ("succeeded", None)
                };
                put_op.execute(params![
                    id.0,
                    kind.as_str(),
                    target,
                    status,
                    request.to_string(),
                    request_hash(kind, "", &request),
                    error,
                    ts(created),
                    ts(finished),
                    i64::from(finished < retention_cutoff),
                ])?;
                let last = steps.len() - 1;
                for (position, s) in steps.iter().enumerate() {
                    let (phase, step_error) =
                        if failed && position == last { ("failed", error) } else { ("succeeded", None) };
                    put_step.execute(params![
                        id.0,
                        s.key,
                        position as i64,
                        s.title,
                        serde_json::to_string(&s.depends_on)?,
                        phase,
                        instantstart_core::engine::step_token(&id, &s.key),
                        step_error,
                        s.expected_secs.map(|v| v as i64),
                        ts(created),
                        ts(finished),
                    ])?;
                }
            }
        }
    }
    tx.commit()?;
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
    drop(conn);
    std::fs::write(dir.join("ready"), format!("seeded in {:.1?}\n", started.elapsed()))?;
    eprintln!("seeded in {:.1?}", started.elapsed());
    Ok(db)
}

/// A fresh data directory holding a copy of the database `db`.
fn copy_of(db: &Path, label: &str) -> Result<TempDir> {
    let dir = TempDir::new(label)?;
    for suffix in ["", "-wal", "-shm"] {
        let from = PathBuf::from(format!("{}{suffix}", db.display()));
        if from.exists() {
            std::fs::copy(&from, dir.path().join(format!("instantstart.db{suffix}")))?;
        }
    }
    Ok(dir)
}

// ---------------------------------------------------------------------------------------------
// Lists over 10,000 clusters and 1,000,000 operations.

pub async fn scale(bin: &Path, duration: Duration) -> Result<Value> {
    let db = tokio::task::spawn_blocking(|| fast_seed(SCALE_CLUSTERS, SCALE_OPERATIONS)).await??;
    let db_bytes = std::fs::metadata(&db)?.len();
    let data = copy_of(&db, "bench-scale")?;
    let server = Server::start(bin, data.path(), 60.0).await?;
    let api = server.api();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss_idle, _) = server.rss_kib()?;
    let page = api.get("/api/clusters?limit=50").await?;
    ensure!(page.as_array().map(Vec::len) == Some(50), "GET /api/clusters?limit=50 did not answer 50 clusters");

    let paths = [
        ("GET /api/clusters?limit=50", "/api/clusters?limit=50"),
        ("GET /api/operations?limit=50", "/api/operations?limit=50"),
        ("GET /api/operations?archived=true&limit=50", "/api/operations?archived=true&limit=50"),
        (
            "GET /api/operations?target=cluster/bench-05000&limit=50",
            "/api/operations?target=cluster/bench-05000&limit=50",
        ),
        ("GET /metrics", "/metrics"),
    ];
    let mut single = Table::new(
        format!(
            "Unloaded latency ({SCALE_CLUSTERS} clusters, {SCALE_OPERATIONS} operations, {:.0} MiB database; one request \
             at a time, 5 requests)",
            db_bytes as f64 / 1_048_576.0
        ),
        &["endpoint", "median ms", "max ms", "KiB"],
    );
    let mut unloaded = Vec::new();
    let mut conn = crate::harness::Conn::open(api.port).await?;
    for (label, path) in paths {
        let mut ms = Vec::new();
        let mut size = 0;
        for _ in 0..5 {
            let t = Instant::now();
            size = conn.get_bytes(path).await?.len();
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        ms.sort_by(f64::total_cmp);
        single.row(vec![
            label.into(),
            format!("{:.2}", percentile(&ms, 50.0)),
            format!("{:.2}", ms[ms.len() - 1]),
            format!("{:.1}", size as f64 / 1024.0),
        ]);
        unloaded.push(json!({ "endpoint": label, "median_ms": r2(percentile(&ms, 50.0)), "max_ms": r2(ms[ms.len() - 1]), "response_bytes": size }));
    }
    drop(conn);
    single.print();

    let mut table = Table::new(
        format!("Pages under load: {SCALE_CONNECTIONS} keep-alive connections, {duration:?} each"),
        LOAD_HEADERS,
    );
    let mut rows = Vec::new();
    for (label, path) in &paths[..3] {
        let l = load(&[api.port], path, SCALE_CONNECTIONS, duration).await.with_context(|| format!("load {path}"))?;
        rows.push(measure_row(&mut table, label, &l, None));
    }
    table.print();
    let (rss_after, rss_peak) = server.rss_kib()?;
    let p99 = rows[0]["p99_ms"].as_f64().unwrap_or(f64::NAN);
    println!(
        "  RSS idle {:.1} MiB, after the load {:.1} MiB (peak {:.1} MiB); target (clusters page p99 < 20 ms): {}",
        mib(rss_idle),
        mib(rss_after),
        mib(rss_peak),
        if p99 < 20.0 { "met" } else { "NOT met" }
    );
    Ok(json!({
        "benchmark": "scale",
        "seed": { "clusters": SCALE_CLUSTERS, "operations": SCALE_OPERATIONS, "database_bytes": db_bytes,
                  "history_days": HISTORY_DAYS, "archived_before_days": RETENTION_DAYS },
        "connections": SCALE_CONNECTIONS,
        "duration_secs": duration.as_secs_f64(),
        "unloaded": unloaded,
        "endpoints": rows,
        "clusters_page_p99_target_met": p99 < 20.0,
        "rss_idle_mib": mib(rss_idle),
        "rss_after_mib": mib(rss_after),
        "rss_peak_mib": mib(rss_peak),
    }))
}

// ---------------------------------------------------------------------------------------------
// Memory.

pub async fn memory(bin: &Path) -> Result<Value> {
    let empty = TempDir::new("bench-memory-empty")?;
    let server = Server::start(bin, empty.path(), 60.0).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (idle, _) = server.rss_kib()?;
    drop(server);

    let db = tokio::task::spawn_blocking(|| fast_seed(MEMORY_CLUSTERS, MEMORY_OPERATIONS)).await??;
    let data = copy_of(&db, "bench-memory")?;
    let server = Server::start(bin, data.path(), 60.0).await?;
    let api = server.api();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (seeded_idle, _) = server.rss_kib()?;
    // Every cluster page once (the store's page cache warms), then the followers.
    let mut pages = 0;
    for c in (0..MEMORY_CLUSTERS).step_by(100) {
        api.get(&format!("/api/operations?target=cluster/bench-{c:05}&limit=100")).await?;
        pages += 1;
    }
    let _ = api.get("/api/clusters?limit=500").await?;
    // A principal holds at most 32 WebSockets: the followers use read tokens of 25 each.
    let tokens = crate::harness::follower_tokens(&api, MEMORY_FOLLOWERS, "follower").await?;
    let mut followers = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let query = format!("target=cluster/bench-{:05}", i * 10);
        followers.push(Follower::connect_as(api.port, &query, token).await?);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (with_followers, peak) = server.rss_kib()?;
    drop(followers);
    let mut table = Table::new("Server memory (RSS)", &["state", "MiB"]);
    table.row(vec!["idle, empty data directory, 2 s after start".into(), format!("{:.1}", mib(idle))]);
    table.row(vec![
        format!("idle, {MEMORY_CLUSTERS} clusters and {MEMORY_OPERATIONS} operations stored"),
        format!("{:.1}", mib(seeded_idle)),
    ]);
    table.row(vec![
        format!("the same after {pages} operation pages and a cluster page of 500, with {MEMORY_FOLLOWERS} WebSocket followers"),
        format!("{:.1}", mib(with_followers)),
    ]);
    table.row(vec!["peak (VmHWM)".into(), format!("{:.1}", mib(peak))]);
    table.print();
    println!("  target (idle < 30 MiB): {}", if mib(idle) < 30.0 { "met" } else { "NOT met" });
    Ok(json!({
        "benchmark": "memory",
        "rss_idle_empty_mib": mib(idle),
        "rss_idle_seeded_mib": mib(seeded_idle),
        "seed": { "clusters": MEMORY_CLUSTERS, "operations": MEMORY_OPERATIONS },
        "followers": MEMORY_FOLLOWERS,
        "rss_with_followers_mib": mib(with_followers),
        "rss_peak_mib": mib(peak),
    }))
}
