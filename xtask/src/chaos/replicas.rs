//! `cargo xtask chaos --replicas N`: several `instantstart-server` processes on one PostgreSQL
//! database ([`crate::pg`]), each with its own data directory and `--replica-id`, sharing one
//! store and, with `--provider sim` (the default), one simulated account.
//!
//! - **kill -9 of the driver.** A create pipeline is sent to replica `r0`; the replica holding
//!   the operation's lease (read from the store's `leases` row) is killed with SIGKILL at a step
//!   boundary (triggers of the single-server plans) or at a seeded random moment; with three
//!   replicas some plans kill the new driver again. Every run must: be taken over by a survivor
//!   within the lease TTL + one sweep period (a quarter of the TTL) + [`TAKEOVER_SLACK`] (each
//!   takeover time is reported: the distribution is the measurement), end `succeeded` with
//!   exactly one create per resource (the shared world's counters), record one
//!   `operation.takeover` audit entry per kill naming the killed replica, and every WebSocket
//!   follower on a survivor (connected before the request) must have seen each step go
//!   `submitting → submitted → polling → succeeded`, in that order, none missing.
//! - **A paused driver (fencing).** The driver is stopped with SIGSTOP past the lease TTL; a
//!   survivor takes over and advances the pipeline; then SIGCONT. The paused replica must write
//!   nothing after the takeover: in the step history (the store's change feed, each change with
//!   the replica that made it) every change after the takeover is the new owner's, the audit
//!   log names only the new owner, and the paused replica's own log records that its lease
//!   moved on (the refused write) while it keeps serving.

use super::{StepInfo, Trigger, reach};
use crate::harness::{Follower, Server, Table, TempDir, create_mismatches, create_request, percentile, progress, step};
use crate::pg::PgServer;
use anyhow::{Context, Result, anyhow, bail, ensure};
use instantstart_core::operation::{AuditEntry, Operation, OperationId};
use instantstart_core::store::{Lease, OperationChange, Store, StoreError};
use instantstart_store::PostgresStore;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Time allowed beyond TTL + one sweep period for a takeover (a debug build on a loaded
/// machine: the sweep's query, the store's clock read, process scheduling).
pub const TAKEOVER_SLACK: Duration = Duration::from_millis(1500);

/// What the replica runs do.
#[derive(Debug, Clone)]
pub struct Opts {
    /// Replica counts to run (2, 3).
    pub counts: Vec<usize>,
    pub quick: bool,
    pub speed: f64,
    pub ttl: Duration,
    /// Seed of the random kill moments.
    pub seed: u64,
    /// Random-moment kills per replica count.
    pub random_kills: usize,
    /// Runs at a time.
    pub jobs: usize,
}

/// A small deterministic generator (splitmix64) for the random kill moments.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, max)`.
    fn below(&mut self, max: Duration) -> Duration {
        let ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX).max(1);
        Duration::from_millis(self.next() % ms)
    }
}

/// The shared store, read by the harness through the store's own API.
#[derive(Clone)]
struct Db(Arc<PostgresStore>);

impl Db {
    async fn connect(url: &str) -> Result<Db> {
        let url = url.to_string();
        let store = tokio::task::spawn_blocking(move || PostgresStore::connect(&url)).await??;
        Ok(Db(Arc::new(store)))
    }

    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&PostgresStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T> {
        let store = self.0.clone();
        Ok(tokio::task::spawn_blocking(move || f(&store)).await??)
    }

    async fn lease(&self, id: &str) -> Result<Option<Lease>> {
        let id = OperationId(id.into());
        self.with(move |s| s.get_lease(&id)).await
    }

    async fn operation(&self, id: &str) -> Result<Operation> {
        let id = OperationId(id.into());
        self.with(move |s| s.get_operation(&id)).await?.ok_or_else(|| anyhow!("no operation in the store"))
    }

    /// The change feed of one operation, oldest first: every published state and its writer.
    async fn changes(&self, id: &str) -> Result<Vec<OperationChange>> {
        let id = id.to_string();
        self.with(move |s| {
            let (mut out, mut after) = (Vec::new(), 0);
            loop {
                let page = s.changes_since(after, 512)?;
                let Some(last) = page.last() else { return Ok(out) };
                after = last.seq;
                out.extend(page.into_iter().filter(|c| c.operation.id.0 == id));
            }
        })
        .await
    }

    async fn audit(&self, target: &str) -> Result<Vec<AuditEntry>> {
        let target = target.to_string();
        self.with(move |s| s.list_audit(Some(&target), 1000)).await
    }
}

fn replica_id(i: usize) -> String {
    format!("r{i}")
}

/// `n` replicas on a fresh database of `pg`; slot `i` is replica `r<i>` (`None` once killed).
struct Replicas {
    servers: Vec<Option<Server>>,
    _dirs: Vec<TempDir>,
    db: Db,
}

impl Replicas {
    async fn start(bin: &Path, pg: &PgServer, n: usize, speed: f64, ttl: Duration) -> Result<Replicas> {
        let url = pg.create_database()?;
        // Opening the store migrates the database before the replicas start.
        let db = Db::connect(&url).await.context("connecting to the chaos database")?;
        let (mut servers, mut dirs) = (Vec::new(), Vec::new());
        for i in 0..n {
            let dir = TempDir::new("chaos-replica")?;
            let args = [
                "--store-url".to_string(),
                url.clone(),
                "--replica-id".into(),
                replica_id(i),
                "--lease-ttl".into(),
                format!("{}ms", ttl.as_millis()),
            ];
            let server = Server::start_with(bin, dir.path(), speed, &args).await.with_context(|| replica_id(i))?;
            servers.push(Some(server));
            dirs.push(dir);
        }
        Ok(Replicas { servers, _dirs: dirs, db })
    }

    fn server(&self, i: usize) -> Result<&Server> {
        self.servers[i].as_ref().ok_or_else(|| anyhow!("replica {} was killed", replica_id(i)))
    }

    fn alive(&self) -> impl Iterator<Item = (usize, &Server)> {
        self.servers.iter().enumerate().filter_map(|(i, s)| s.as_ref().map(|s| (i, s)))
    }

    fn index_of(&self, replica: &str) -> Result<usize> {
        (0..self.servers.len()).find(|i| replica_id(*i) == replica).ok_or_else(|| anyhow!("unknown replica {replica}"))
    }

    /// The replica holding `id`'s lease, waiting (10 s at most) for one to hold it.
    async fn driver(&self, id: &str) -> Result<Lease> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(l) = self.db.lease(id).await? {
                return Ok(l);
            }
            ensure!(Instant::now() < deadline, "no replica took operation {id}'s lease");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Follows `target=cluster/chaos` until the operation ends: every snapshot received.
async fn follow_to_end(mut f: Follower) -> Result<Vec<Value>> {
    let mut seen = Vec::new();
    loop {
        let Some((op, _)) = f.next_within(Duration::from_secs(180)).await? else {
            bail!("the stream ended before the operation did");
        };
        let done = op["status"] != "running" && op["id"].is_string();
        seen.push(op);
        if done {
            return Ok(seen);
        }
    }
}

/// The phases each step went through on a stream of snapshots (pending and repeats folded),
/// and what differs from every step going `submitting → submitted → polling → succeeded`.
fn phase_gaps(snapshots: &[Value]) -> Vec<String> {
    const PATH: [&str; 4] = ["submitting", "submitted", "polling", "succeeded"];
    let Some(last) = snapshots.last() else { return vec!["no snapshot".into()] };
    let mut gaps = Vec::new();
    for s in last["steps"].as_array().into_iter().flatten() {
        let key = s["key"].as_str().unwrap_or("?");
        let mut seen: Vec<&str> = Vec::new();
        for op in snapshots {
            let phase = step(op, key).and_then(|s| s["phase"].as_str()).unwrap_or("pending");
            if phase != "pending" && seen.last() != Some(&phase) {
                seen.push(phase);
            }
        }
        if seen != PATH {
            gaps.push(format!("{key}: {}", seen.join("→")));
        }
    }
    gaps
}

struct KillRun {
    label: String,
    observed: Vec<String>,
    /// Kill → a survivor holds the lease, per kill.
    takeovers: Vec<Duration>,
    /// Last kill → the operation finished.
    completion: Duration,
    status: String,
    mismatches: Vec<String>,
    follower_gaps: Vec<String>,
    followers_checked: usize,
    audit_problems: Vec<String>,
    detail: String,
}

impl KillRun {
    fn ok(&self, bound: Duration) -> bool {
        self.status == "succeeded"
            && self.mismatches.is_empty()
            && self.follower_gaps.is_empty()
            && self.followers_checked > 0
            && self.audit_problems.is_empty()
            && self.takeovers.iter().all(|t| *t <= bound)
    }
}

/// One pipeline on `n` fresh replicas; each trigger kills the replica then driving.
async fn kill_run(
    bin: &Path,
    pg: &PgServer,
    n: usize,
    opts: &Opts,
    triggers: &[Trigger],
    expected: &[(String, f64)],
) -> Result<KillRun> {
    let mut r = Replicas::start(bin, pg, n, opts.speed, opts.ttl).await?;
    // A follower on every replica (those on survivors are checked: the lease may move before
    // a trigger, so any replica may be the one killed), and the trigger's own on r0, all
    // subscribed before the request.
    let mut followers = tokio::task::JoinSet::new();
    for (i, s) in r.alive() {
        let f = Follower::connect(s.port, "target=cluster/chaos").await?;
        followers.spawn(async move { (i, follow_to_end(f).await) });
    }
    let mut early = Some(Follower::connect(r.server(0)?.port, "target=cluster/chaos").await?);
    let id = r.server(0)?.api().create_cluster(&create_request("chaos"), "chaos-replicas").await?;
    let mut driver = r.index_of(&r.driver(&id).await?.replica)?;
    let (mut observed, mut takeovers, mut killed) = (Vec::new(), Vec::new(), Vec::new());
    let mut last_kill = Instant::now();
    for trigger in triggers {
        let follower = if driver == 0 { early.take() } else { None };
        let seen = reach(r.server(driver)?, &id, trigger, opts.speed, expected, follower).await?;
        let held = r.db.lease(&id).await?.ok_or_else(|| anyhow!("no lease at the kill"))?;
        ensure!(held.replica == replica_id(driver), "the lease moved to {} before the kill", held.replica);
        if let Some(mut s) = r.servers[driver].take() {
            s.kill9();
        }
        last_kill = Instant::now();
        killed.push(replica_id(driver));
        let at_kill = r.db.operation(&id).await?;
        if at_kill.status.as_str() != "running" {
            observed.push(format!(
                "{}: {seen}; operation {} before the kill",
                replica_id(driver),
                at_kill.status.as_str()
            ));
            break;
        }
        // Wait for a survivor to hold a newer lease.
        let deadline = last_kill + Duration::from_secs(60);
        let took = loop {
            if let Some(l) = r.db.lease(&id).await?
                && l.replica != held.replica
                && l.token > held.token
            {
                break l;
            }
            ensure!(Instant::now() < deadline, "no survivor took the operation over within 60 s");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        takeovers.push(last_kill.elapsed());
        observed.push(format!(
            "{} killed at {seen}; {} took over in {} ms",
            held.replica,
            took.replica,
            last_kill.elapsed().as_millis()
        ));
        driver = r.index_of(&took.replica)?;
    }
    let (_, survivor) = r.alive().next().ok_or_else(|| anyhow!("no survivor"))?;
    let api = survivor.api();
    let op = api.wait_terminal(&id, Duration::from_secs(180)).await?;
    let completion = last_kill.elapsed();
    let mismatches = create_mismatches(&api.stats().await?);
    let (mut follower_gaps, mut followers_checked) = (Vec::new(), 0);
    while let Some(joined) = followers.join_next().await {
        let (i, result) = joined?;
        if r.servers[i].is_none() {
            continue; // killed by a later trigger: not a survivor
        }
        followers_checked += 1;
        match result {
            Ok(snapshots) => {
                follower_gaps.extend(phase_gaps(&snapshots).into_iter().map(|g| format!("{}: {g}", replica_id(i))))
            }
            Err(e) => follower_gaps.push(format!("{}: {e:#}", replica_id(i))),
        }
    }
    // One takeover entry per kill that was taken over, each naming the killed replica.
    let target = op["target"].as_str().unwrap_or("cluster/chaos").to_string();
    let takeover_entries: Vec<AuditEntry> =
        r.db.audit(&target).await?.into_iter().filter(|e| e.action == "operation.takeover").collect();
    let mut audit_problems = Vec::new();
    let from: Vec<String> =
        takeover_entries.iter().map(|e| e.detail["previous_replica"].as_str().unwrap_or("?").to_string()).collect();
    let mut want = killed.clone();
    want.truncate(takeovers.len());
    let (mut from_sorted, mut want_sorted) = (from.clone(), want.clone());
    from_sorted.sort();
    want_sorted.sort();
    if from_sorted != want_sorted {
        audit_problems.push(format!("takeover audit entries from {from:?}, killed {want:?}"));
    }
    Ok(KillRun {
        label: triggers.iter().map(Trigger::label).collect::<Vec<_>>().join(", then "),
        observed,
        takeovers,
        completion,
        status: op["status"].as_str().unwrap_or("?").to_string(),
        mismatches,
        follower_gaps,
        followers_checked,
        audit_problems,
        detail: progress(&op),
    })
}

/// The kill plans for `n` replicas: every step boundary (full) or a few (quick), random
/// moments within the undisturbed pipeline's duration, and with three replicas, runs killing
/// the driver twice.
fn plans(steps: &[StepInfo], n: usize, opts: &Opts, baseline: Duration, rng: &mut Rng) -> Vec<Vec<Trigger>> {
    let b = |step: &str, phase: &'static str| Trigger::Boundary { step: step.into(), phase };
    let mut out: Vec<Vec<Trigger>> = Vec::new();
    if opts.quick {
        out.push(vec![b("eks_cluster", "polling")]);
        if n >= 3 {
            out.push(vec![b("vpc", "submitted"), b("hyperpod_cluster", "submitting")]);
        }
    } else {
        for s in steps {
            for phase in ["submitting", "submitted", "polling", "succeeded"] {
                out.push(vec![b(&s.key, phase)]);
            }
        }
        if n >= 3 {
            out.push(vec![b("vpc", "submitted"), b("eks_cluster", "polling")]);
            out.push(vec![b("eks_cluster", "submitting"), b("hyperpod_cluster", "polling")]);
        }
    }
    for _ in 0..opts.random_kills {
        let first = rng.below(baseline);
        if n >= 3 && rng.next().is_multiple_of(2) {
            let second = rng.below(baseline.saturating_sub(first).max(Duration::from_millis(1)));
            out.push(vec![Trigger::After(first), Trigger::After(second)]);
        } else {
            out.push(vec![Trigger::After(first)]);
        }
    }
    out
}

/// An undisturbed pipeline on `n` replicas: how long it takes (the range of the random kill
/// moments) and that followers on every replica see every phase.
async fn baseline(bin: &Path, pg: &PgServer, n: usize, opts: &Opts) -> Result<(Duration, Vec<String>)> {
    let r = Replicas::start(bin, pg, n, opts.speed, opts.ttl).await?;
    let mut followers = Vec::new();
    for (_, s) in r.alive() {
        followers.push(tokio::spawn(follow_to_end(Follower::connect(s.port, "target=cluster/chaos").await?)));
    }
    let api = r.server(0)?.api();
    let started = Instant::now();
    let id = api.create_cluster(&create_request("chaos"), "chaos-baseline").await?;
    let op = api.wait_terminal(&id, Duration::from_secs(180)).await?;
    let took = started.elapsed();
    ensure!(op["status"] == "succeeded", "the undisturbed pipeline on {n} replicas: {}", progress(&op));
    let mut gaps = Vec::new();
    for (i, f) in followers.into_iter().enumerate() {
        gaps.extend(phase_gaps(&f.await??).into_iter().map(|g| format!("{}: {g}", replica_id(i))));
    }
    Ok((took, gaps))
}

/// The paused-driver run: SIGSTOP past the TTL, takeover, SIGCONT; see the module docs.
async fn pause_run(bin: &Path, pg: &PgServer, opts: &Opts) -> Result<Value> {
    let mut r = Replicas::start(bin, pg, 2, opts.speed, opts.ttl).await?;
    let early = Follower::connect(r.server(0)?.port, "target=cluster/chaos").await?;
    let id = r.server(0)?.api().create_cluster(&create_request("chaos"), "chaos-pause").await?;
    let held = r.driver(&id).await?;
    ensure!(held.replica == "r0", "r0 was asked, {} drives", held.replica);
    let trigger = Trigger::Boundary { step: "eks_cluster".into(), phase: "polling" };
    let seen = reach(r.server(0)?, &id, &trigger, opts.speed, &[], Some(early)).await?;
    r.server(0)?.signal("STOP")?;
    let stopped = Instant::now();
    let mut problems = Vec::new();
    // r1 takes over once the lease lapses, and advances the pipeline.
    let deadline = stopped + Duration::from_secs(60);
    let took = loop {
        if let Some(l) = r.db.lease(&id).await?
            && l.replica == "r1"
        {
            break l;
        }
        if Instant::now() > deadline {
            r.server(0)?.signal("CONT")?;
            bail!("r1 did not take over the paused r0's operation within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let takeover = stopped.elapsed();
    let advanced_from = r.db.operation(&id).await?;
    let succeeded = |op: &Operation| op.steps.iter().filter(|s| s.phase.as_str() == "succeeded").count();
    let before = succeeded(&advanced_from);
    let deadline = Instant::now() + Duration::from_secs(60);
    while succeeded(&r.db.operation(&id).await?) <= before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let advanced = succeeded(&r.db.operation(&id).await?) - before;
    if advanced == 0 {
        problems.push("r1 did not advance the pipeline after the takeover".to_string());
    }
    let paused_for = stopped.elapsed();
    r.server(0)?.signal("CONT")?;
    let resumed = Instant::now();
    let api = r.server(1)?.api();
    let op = api.wait_terminal(&id, Duration::from_secs(180)).await?;
    // Give the resumed replica time to try: its renewal and step tasks wake at once.
    tokio::time::sleep(opts.ttl.max(Duration::from_secs(1))).await;
    if op["status"] != "succeeded" {
        problems.push(format!("the operation ended {}", progress(&op)));
    }
    let mismatches = create_mismatches(&api.stats().await?);
    if !mismatches.is_empty() {
        problems.push(format!("creates: {}", mismatches.join(", ")));
    }
    // The step history: every change after the first one r1 published is r1's.
    let changes = r.db.changes(&id).await?;
    let first_new = changes.iter().position(|c| c.replica == "r1");
    let stale: Vec<String> = first_new
        .map(|i| {
            changes[i..].iter().filter(|c| c.replica != "r1").map(|c| format!("#{} by {}", c.seq, c.replica)).collect()
        })
        .unwrap_or_default();
    if first_new.is_none() {
        problems.push("the change feed holds no change by r1".into());
    }
    if !stale.is_empty() {
        problems.push(format!("changes after the takeover not by the new owner: {}", stale.join(", ")));
    }
    let by = |who: &str| changes.iter().filter(|c| c.replica == who).count();
    // The audit: the takeover by r1 from r0, and nothing by r0.
    let audit = r.db.audit(op["target"].as_str().unwrap_or("cluster/chaos")).await?;
    let takeovers: Vec<&AuditEntry> = audit.iter().filter(|e| e.action == "operation.takeover").collect();
    if takeovers.len() != 1
        || takeovers[0].actor.principal != "replica:r1"
        || takeovers[0].detail["previous_replica"] != "r0"
    {
        problems.push(format!("takeover audit entries: {takeovers:?}"));
    }
    let by_r0: Vec<&AuditEntry> = audit.iter().filter(|e| e.actor.principal == "replica:r0").collect();
    if !by_r0.is_empty() {
        problems.push(format!("audit entries by the paused replica: {by_r0:?}"));
    }
    // The paused replica logged that its lease moved on, and still serves.
    let log = r.server(0)?.log();
    let refused: Vec<&str> = log.lines().filter(|l| l.contains("lost the operation's lease")).collect();
    if refused.is_empty() {
        problems.push("the paused replica logged no lost lease".into());
    }
    let health = r.server(0)?.api().call("GET", "/healthz", None, &[]).await.map(|(s, _)| s).unwrap_or(0);
    if health != 200 {
        problems.push(format!("the resumed replica answers /healthz with {health}"));
    }
    let last = r.db.lease(&id).await?;
    if last.as_ref().is_some_and(|l| l.replica != "r1") {
        problems.push(format!("the resumed replica took the lease back: {last:?}"));
    }
    if let Some(mut s) = r.servers[0].take() {
        s.kill9();
    }
    let reason = refused.first().map(|l| {
        let l = strip_ansi(l.trim());
        l.find("error=").map_or(l.as_str(), |i| &l[i..]).chars().take(240).collect::<String>()
    });
    Ok(json!({
        "ok": problems.is_empty(),
        "problems": problems,
        "paused_at": seen,
        "paused_secs": (paused_for.as_secs_f64() * 100.0).round() / 100.0,
        "takeover_ms": takeover.as_millis() as u64,
        "token": { "paused_replica": held.token, "new_owner": took.token },
        "steps_advanced_by_new_owner_while_paused": advanced,
        "resumed_to_finished_ms": resumed.elapsed().as_millis() as u64,
        "status": op["status"],
        "create_mismatches": mismatches,
        "changes_by_replica": { "r0": by("r0"), "r1": by("r1") },
        "changes_after_takeover_not_by_new_owner": stale,
        "takeover_audit_entries": takeovers.len(),
        "audit_entries_by_paused_replica": by_r0.len(),
        "paused_replica_refused_writes_logged": refused.len(),
        "paused_replica_log": reason,
    }))
}

/// `line` without its terminal colour codes (`ESC [ … m`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Durations in ms: p50 / p90 / max.
fn distribution(values: &[Duration]) -> Value {
    let mut ms: Vec<f64> = values.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    json!({
        "n": ms.len(),
        "min_ms": ms.first().map(|v| v.round()),
        "p50_ms": percentile(&ms, 50.0).round(),
        "p90_ms": percentile(&ms, 90.0).round(),
        "max_ms": ms.last().map(|v| v.round()),
    })
}

/// Every replica run; prints its tables and answers its report and the failed properties.
pub async fn run(bin: &Path, pg: &Arc<PgServer>, steps: &[StepInfo], opts: &Opts) -> Result<(Value, Vec<String>)> {
    let expected: Arc<Vec<(String, f64)>> = Arc::new(steps.iter().map(|s| (s.key.clone(), s.expected_secs)).collect());
    let bound = opts.ttl + opts.ttl / 4 + TAKEOVER_SLACK;
    let mut rng = Rng(opts.seed);
    let mut failures = Vec::new();
    // The paused-driver run alongside the kill runs, on its own database and replicas.
    let pause = {
        let (bin, pg, o) = (bin.to_path_buf(), pg.clone(), opts.clone());
        tokio::spawn(async move { pause_run(&bin, &pg, &o).await })
    };
    let mut per_count = Vec::new();
    let mut summary = Table::new(
        format!(
            "Replicas on one PostgreSQL ({}; lease TTL {} ms, takeover bound TTL + TTL/4 + {} ms = {} ms; random \
             moments seeded {})",
            pg.version,
            opts.ttl.as_millis(),
            TAKEOVER_SLACK.as_millis(),
            bound.as_millis(),
            opts.seed
        ),
        &[
            "replicas",
            "runs ok",
            "kills",
            "takeover p50 / p90 / max ms",
            "finish after last kill p50 / max ms",
            "undisturbed ms",
        ],
    );
    for &n in &opts.counts {
        let (base, base_gaps) = baseline(bin, pg, n, opts).await.with_context(|| format!("{n} replicas"))?;
        if !base_gaps.is_empty() {
            failures.push(format!("{n} replicas, undisturbed: followers missed phases: {}", base_gaps.join("; ")));
        }
        let plans = plans(steps, n, opts, base, &mut rng);
        let sem = Arc::new(tokio::sync::Semaphore::new(opts.jobs));
        let mut tasks = tokio::task::JoinSet::new();
        for (i, plan) in plans.into_iter().enumerate() {
            let (bin, sem, expected, pg, o) =
                (bin.to_path_buf(), sem.clone(), expected.clone(), pg.clone(), opts.clone());
            tasks.spawn(async move {
                let _permit = sem.acquire_owned().await;
                (i, kill_run(&bin, &pg, n, &o, &plan, &expected).await, plan)
            });
        }
        let mut runs = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            runs.push(joined?);
        }
        runs.sort_by_key(|(i, _, _)| *i);
        let mut table = Table::new(
            format!("kill -9 of the driving replica, {n} replicas on one database (each run on a fresh database)"),
            &["#", "kill point", "what happened", "result", "takeover ms", "finish ms"],
        );
        let (mut ok, mut takeovers, mut finishes, mut run_json) = (0, Vec::new(), Vec::new(), Vec::new());
        for (i, result, plan) in &runs {
            let label = plan.iter().map(Trigger::label).collect::<Vec<_>>().join(", then ");
            match result {
                Ok(k) => {
                    let good = k.ok(bound);
                    ok += usize::from(good);
                    takeovers.extend(k.takeovers.iter().copied());
                    finishes.push(k.completion);
                    let mut why = Vec::new();
                    if k.status != "succeeded" {
                        why.push(k.detail.clone());
                    }
                    why.extend(k.mismatches.iter().cloned());
                    why.extend(k.follower_gaps.iter().map(|g| format!("follower {g}")));
                    why.extend(k.audit_problems.iter().cloned());
                    if k.takeovers.iter().any(|t| *t > bound) {
                        why.push(format!("takeover beyond {} ms", bound.as_millis()));
                    }
                    table.row(vec![
                        (i + 1).to_string(),
                        k.label.clone(),
                        k.observed.join(" | "),
                        if good { "ok".into() } else { format!("FAIL: {}", why.join("; ")) },
                        k.takeovers.iter().map(|t| t.as_millis().to_string()).collect::<Vec<_>>().join(", "),
                        k.completion.as_millis().to_string(),
                    ]);
                    run_json.push(json!({
                        "plan": k.label, "ok": good, "observed": k.observed, "status": k.status,
                        "takeover_ms": k.takeovers.iter().map(|t| t.as_millis() as u64).collect::<Vec<_>>(),
                        "finished_after_last_kill_ms": k.completion.as_millis() as u64,
                        "create_mismatches": k.mismatches, "follower_gaps": k.follower_gaps,
                        "followers_checked": k.followers_checked, "audit_problems": k.audit_problems,
                        "final": k.detail,
                    }));
                }
                Err(e) => {
                    table.row(vec![
                        (i + 1).to_string(),
                        label.clone(),
                        "-".into(),
                        format!("FAIL: {e:#}"),
                        "-".into(),
                        "-".into(),
                    ]);
                    run_json.push(json!({ "plan": label, "ok": false, "error": format!("{e:#}") }));
                }
            }
        }
        table.print();
        if ok != runs.len() {
            failures.push(format!("{n} replicas: {} of {} kill runs failed", runs.len() - ok, runs.len()));
        }
        let t = distribution(&takeovers);
        let f = distribution(&finishes);
        summary.row(vec![
            n.to_string(),
            format!("{ok}/{}", runs.len()),
            takeovers.len().to_string(),
            format!("{} / {} / {}", t["p50_ms"], t["p90_ms"], t["max_ms"]),
            format!("{} / {}", f["p50_ms"], f["max_ms"]),
            base.as_millis().to_string(),
        ]);
        per_count.push(json!({
            "replicas": n,
            "undisturbed_pipeline_ms": base.as_millis() as u64,
            "undisturbed_follower_gaps": base_gaps,
            "runs_ok": ok,
            "runs": runs.len(),
            "takeover": t,
            "finished_after_last_kill": f,
            "kill_runs": run_json,
        }));
    }
    let pause = pause.await?;
    summary.print();
    let mut paused =
        Table::new("A paused driver (SIGSTOP past the lease TTL, then SIGCONT), 2 replicas", &["property", "result"]);
    let pause_json = match pause {
        Ok(v) => {
            paused.row(vec![
                "the new owner took over / advanced while the old one was stopped".into(),
                format!(
                    "in {} ms (token {} → {}); {} steps finished by r1 during the pause of {} s",
                    v["takeover_ms"],
                    v["token"]["paused_replica"],
                    v["token"]["new_owner"],
                    v["steps_advanced_by_new_owner_while_paused"],
                    v["paused_secs"]
                ),
            ]);
            paused.row(vec![
                "step history (change feed) after the takeover: only the new owner's writes".into(),
                format!(
                    "{} (r0 {} changes, r1 {} changes; after takeover by others: {})",
                    if v["changes_after_takeover_not_by_new_owner"].as_array().is_some_and(|a| a.is_empty()) {
                        "yes"
                    } else {
                        "NO"
                    },
                    v["changes_by_replica"]["r0"],
                    v["changes_by_replica"]["r1"],
                    v["changes_after_takeover_not_by_new_owner"]
                ),
            ]);
            paused.row(vec![
                "audit: one operation.takeover by r1, nothing by r0".into(),
                format!(
                    "{} takeover entries, {} by r0",
                    v["takeover_audit_entries"], v["audit_entries_by_paused_replica"]
                ),
            ]);
            paused.row(vec![
                "the resumed replica logged its refused write and kept serving".into(),
                format!("{} log lines: {}", v["paused_replica_refused_writes_logged"], v["paused_replica_log"]),
            ]);
            paused.row(vec![
                "result".into(),
                if v["ok"] == true { "ok".into() } else { format!("FAIL: {}", v["problems"]) },
            ]);
            if v["ok"] != true {
                failures.push(format!("paused replica: {}", v["problems"]));
            }
            v
        }
        Err(e) => {
            paused.row(vec!["paused replica".into(), format!("FAIL: {e:#}")]);
            failures.push(format!("paused replica: {e:#}"));
            json!({ "ok": false, "error": format!("{e:#}") })
        }
    };
    paused.print();
    Ok((
        json!({
            "postgres": pg.version,
            "lease_ttl_ms": opts.ttl.as_millis() as u64,
            "takeover_bound_ms": bound.as_millis() as u64,
            "seed": opts.seed,
            "by_replica_count": per_count,
            "paused_replica": pause_json,
        }),
        failures,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(phases: &[(&str, &str)], status: &str) -> Value {
        json!({ "id": "op-1", "status": status,
                "steps": phases.iter().map(|(k, p)| json!({ "key": k, "phase": p })).collect::<Vec<_>>() })
    }

    #[test]
    fn phase_gaps_name_every_step_that_skipped_or_reordered_a_phase() {
        let path = ["submitting", "submitted", "polling", "succeeded"];
        let full: Vec<Value> = std::iter::once(snapshot(&[("a", "pending")], "running"))
            .chain(path.iter().map(|p| snapshot(&[("a", p)], "running")))
            .chain(std::iter::once(snapshot(&[("a", "succeeded")], "succeeded")))
            .collect();
        // (snapshots, gaps)
        let cases: Vec<(Vec<Value>, Vec<String>)> = vec![
            (full.clone(), vec![]),
            // Repeats fold.
            (full.iter().flat_map(|s| [s.clone(), s.clone()]).collect(), vec![]),
            // A phase never seen.
            (
                vec![
                    snapshot(&[("a", "submitting")], "running"),
                    snapshot(&[("a", "polling")], "running"),
                    snapshot(&[("a", "succeeded")], "succeeded"),
                ],
                vec!["a: submitting→polling→succeeded".into()],
            ),
            // Out of order.
            (
                vec![
                    snapshot(&[("a", "submitted")], "running"),
                    snapshot(&[("a", "submitting")], "running"),
                    snapshot(&[("a", "polling")], "running"),
                    snapshot(&[("a", "succeeded")], "succeeded"),
                ],
                vec!["a: submitted→submitting→polling→succeeded".into()],
            ),
            (vec![], vec!["no snapshot".into()]),
        ];
        for (snapshots, want) in cases {
            assert_eq!(phase_gaps(&snapshots), want, "{snapshots:?}");
        }
    }

    #[test]
    fn log_lines_lose_their_colour_codes() {
        for (raw, want) in [
            ("\u{1b}[2m2026\u{1b}[0m \u{1b}[33m WARN\u{1b}[0m lost", "2026  WARN lost"),
            ("plain", "plain"),
            ("\u{1b}[3merror\u{1b}[0m\u{1b}[2m=\u{1b}[0mmoved on", "error=moved on"),
        ] {
            assert_eq!(strip_ansi(raw), want);
        }
    }

    #[test]
    fn random_moments_are_seeded_and_in_range() {
        let draw = |seed| {
            let mut r = Rng(seed);
            (0..50).map(|_| r.below(Duration::from_millis(700))).collect::<Vec<_>>()
        };
        assert_eq!(draw(22), draw(22), "same seed, same moments");
        assert_ne!(draw(22), draw(23));
        assert!(draw(22).iter().all(|d| *d < Duration::from_millis(700)));
    }
}
