//! Shared machinery of `cargo xtask bench` and `cargo xtask chaos`: the real server binary on
//! loopback with a temporary data directory (always killed by a drop guard), a small HTTP/1.1
//! client, followers of the live operation stream, percentiles, tables and JSON reports under
//! `target/bench/`.

use anyhow::{Context, Result, anyhow, bail, ensure};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Admin token of every server started here (loopback only, temporary data directories).
pub const TOKEN: &str = "ist_bench_token_for_loopback_only";

/// The cargo target directory (`CARGO_TARGET_DIR` or `<workspace>/target`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| crate::root().join("target"))
}

/// Builds `instantstart-server` (release or dev profile) and returns the binary, or returns
/// `INSTANTSTART_SERVER_BIN` when set (a binary built beforehand; nothing is built).
pub fn build_server(release: bool) -> Result<PathBuf> {
    if let Some(bin) = std::env::var_os("INSTANTSTART_SERVER_BIN").map(PathBuf::from) {
        ensure!(bin.is_file(), "INSTANTSTART_SERVER_BIN={} is not a file", bin.display());
        return Ok(bin);
    }
    if !release {
        // The dev binary is the one `cargo test --workspace` builds (same feature set): a plain
        // `cargo build -p` would unify features differently and rebuild shared dependencies.
        crate::build_bins()?;
        let bin = target_dir().join("debug").join("instantstart-server");
        ensure!(bin.exists(), "{} was not built", bin.display());
        return Ok(bin);
    }
    crate::run(crate::cargo().args(["build", "--quiet", "--release", "-p", "instantstart-server"]))?;
    let bin = target_dir().join("release").join("instantstart-server");
    ensure!(bin.exists(), "{} was not built", bin.display());
    Ok(bin)
}

/// A temporary directory, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> Result<TempDir> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("instantstart-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(TempDir(dir))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A running `instantstart-server` on 127.0.0.1. Dropping it kills the process (SIGKILL), so no
/// server outlives a run, whatever happens.
pub struct Server {
    child: Option<Child>,
    pub port: u16,
    pub dir: PathBuf,
    /// From spawning the process to the first `200` on `/healthz`.
    pub cold_start: Duration,
}

impl Server {
    /// Starts the binary on a free port with `dir` as its data directory (created if needed;
    /// the server's log is appended to `dir/server.log`) and waits for `/healthz`.
    pub async fn start(bin: &Path, dir: &Path, speed: f64) -> Result<Server> {
        Server::start_with(bin, dir, speed, &[]).await
    }

    /// [`Server::start`] with more command-line arguments (a replica's `--store-url`,
    /// `--replica-id`, `--lease-ttl`).
    pub async fn start_with(bin: &Path, dir: &Path, speed: f64, extra: &[String]) -> Result<Server> {
        std::fs::create_dir_all(dir)?;
        let port = free_port()?;
        let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("server.log"))?;
        let started = Instant::now();
        let child = Command::new(bin)
            .args(["--listen", &format!("127.0.0.1:{port}"), "--sim-speed", &speed.to_string(), "--data-dir"])
            .arg(dir)
            .args(extra)
            .env("INSTANTSTART_TOKEN", TOKEN)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let mut server = Server { child: Some(child), port, dir: dir.to_path_buf(), cold_start: Duration::ZERO };
        let deadline = started + Duration::from_secs(60);
        loop {
            if healthz(port).await {
                server.cold_start = started.elapsed();
                return Ok(server);
            }
            if let Some(child) = server.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                bail!("the server exited with {status} before serving; log:\n{}", server.log_tail());
            }
            if Instant::now() > deadline {
                bail!("the server did not answer /healthz within 60 s; log:\n{}", server.log_tail());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `kill -9` and reap the process.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Resident set size and its peak (high-water mark), in KiB, from `/proc/<pid>/status`.
    pub fn rss_kib(&self) -> Result<(u64, u64)> {
        let pid = self.pid().ok_or_else(|| anyhow!("the server is not running"))?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).context("reading /proc/<pid>/status")?;
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| anyhow!("no {name} in /proc/{pid}/status"))
        };
        Ok((field("VmRSS:")?, field("VmHWM:")?))
    }

    pub fn api(&self) -> Api {
        Api { port: self.port }
    }

    /// Sends `signal` (`STOP`, `CONT`) to the process with `kill`.
    pub fn signal(&self, signal: &str) -> Result<()> {
        let pid = self.pid().ok_or_else(|| anyhow!("the server is not running"))?;
        let status = Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status()?;
        ensure!(status.success(), "kill -{signal} {pid}: {status}");
        Ok(())
    }

    /// The server's log (stderr) so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// One `GET /healthz` over a fresh connection: true on `200`.
async fn healthz(port: u16) -> bool {
    let attempt = async {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await.ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        Some(buf.starts_with(b"HTTP/1.1 200"))
    };
    tokio::time::timeout(Duration::from_secs(2), attempt).await.ok().flatten().unwrap_or(false)
}

/// A minimal client of the REST API (one connection per call).
#[derive(Debug, Clone, Copy)]
pub struct Api {
    pub port: u16,
}

impl Api {
    /// Sends one request; returns the status and the JSON body (a string when not JSON).
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Result<(u16, Value)> {
        let attempt = async {
            let stream = TcpStream::connect(("127.0.0.1", self.port)).await?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(conn);
            let mut req = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header("host", format!("127.0.0.1:{}", self.port))
                .header("authorization", format!("Bearer {TOKEN}"))
                .header("x-instantstart-face", "api");
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            let payload = match body {
                Some(b) => {
                    req = req.header("content-type", "application/json");
                    Bytes::from(b.to_string())
                }
                None => Bytes::new(),
            };
            let resp = sender.send_request(req.body(Full::new(payload))?).await?;
            let status = resp.status().as_u16();
            let bytes = resp.into_body().collect().await?.to_bytes();
            let value = serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
            anyhow::Ok((status, value))
        };
        tokio::time::timeout(Duration::from_secs(120), attempt)
            .await
            .map_err(|_| anyhow!("{method} {path}: no answer within 120 s"))?
            .with_context(|| format!("{method} {path}"))
    }

    /// `GET path`, which must answer `200`.
    pub async fn get(&self, path: &str) -> Result<Value> {
        let (status, body) = self.call("GET", path, None, &[]).await?;
        ensure!(status == 200, "GET {path}: {status} {body}");
        Ok(body)
    }

    /// Per-API call counters of the simulated cloud.
    pub async fn stats(&self) -> Result<BTreeMap<String, u64>> {
        let v = self.get("/api/sim/stats").await?;
        Ok(v.as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0))).collect())
            .unwrap_or_default())
    }

    pub async fn operation(&self, id: &str) -> Result<Value> {
        self.get(&format!("/api/operations/{id}")).await
    }

    pub async fn set_faults(&self, faults: &Value) -> Result<()> {
        let (status, body) = self.call("PUT", "/api/sim/faults", Some(faults), &[]).await?;
        ensure!(status == 200, "PUT /api/sim/faults: {status} {body}");
        Ok(())
    }

    /// Polls the operation until it is no longer `running`.
    pub async fn wait_terminal(&self, id: &str, timeout: Duration) -> Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let op = self.operation(id).await?;
            if op["status"] != "running" {
                return Ok(op);
            }
            if Instant::now() > deadline {
                bail!("operation {id} still running after {timeout:?}: {}", progress(&op));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `POST /api/clusters` with an idempotency key, retrying while the server answers 5xx/429
    /// (the preflight reads the provider, which fault injection may fail); returns the
    /// operation id.
    pub async fn create_cluster(&self, request: &Value, key: &str) -> Result<String> {
        let mut last = (0, Value::Null);
        for _ in 0..40 {
            let (status, body) = self.call("POST", "/api/clusters", Some(request), &[("idempotency-key", key)]).await?;
            if status == 202 {
                return body["operation"]["id"].as_str().map(str::to_string).ok_or_else(|| anyhow!("no id: {body}"));
            }
            if !(status >= 500 || status == 429) {
                bail!("POST /api/clusters: {status} {body}");
            }
            last = (status, body);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        bail!("POST /api/clusters kept failing: {} {}", last.0, last.1)
    }
}

/// One keep-alive connection, for tight polling loops.
pub struct Conn {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    port: u16,
}

impl Conn {
    pub async fn open(port: u16) -> Result<Conn> {
        let stream = TcpStream::connect(("127.0.0.1", port)).await?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        Ok(Conn { sender, port })
    }

    /// `GET path`, which must answer `200`, as JSON.
    pub async fn get(&mut self, path: &str) -> Result<Value> {
        Ok(serde_json::from_slice(&self.get_bytes(path).await?)?)
    }

    /// `GET path`, which must answer `200`: the body.
    pub async fn get_bytes(&mut self, path: &str) -> Result<Bytes> {
        self.sender.ready().await?;
        let req = hyper::Request::get(path)
            .header("host", format!("127.0.0.1:{}", self.port))
            .header("authorization", format!("Bearer {TOKEN}"))
            .body(Full::new(Bytes::new()))?;
        let resp = self.sender.send_request(req).await?;
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await?.to_bytes();
        ensure!(status == 200, "GET {path}: {status}");
        Ok(bytes)
    }
}

/// A follower of the live operation stream (`/api/operations/stream?<query>`).
/// One token per follower of `n`: read tokens minted as `<label>-<i>`, each shared by 25
/// followers (the server lets one principal hold at most 32 WebSockets).
pub async fn follower_tokens(api: &Api, n: usize, label: &str) -> Result<Vec<String>> {
    let mut tokens = Vec::new();
    for t in 0..n.div_ceil(25) {
        let body = json!({ "name": format!("{label}-{t}"), "scope": "read" });
        let (status, minted) = api.call("POST", "/api/tokens", Some(&body), &[]).await?;
        ensure!(status == 200 || status == 201, "minting a read token: {status} {minted}");
        tokens.push(minted["token"].as_str().ok_or_else(|| anyhow!("no token: {minted}"))?.to_string());
    }
    Ok((0..n).map(|i| tokens[i / 25].clone()).collect())
}

pub struct Follower {
    ws: tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>,
}

impl Follower {
    pub async fn connect(port: u16, query: &str) -> Result<Follower> {
        Follower::connect_as(port, query, TOKEN).await
    }

    /// `n` followers of `query`, spread over read tokens minted for them (`follower-<i>`, 25
    /// followers each: the server lets one principal hold at most 32 WebSockets).
    pub async fn connect_many(api: &Api, query: &str, n: usize) -> Result<Vec<Follower>> {
        let tokens = follower_tokens(api, n, "follower").await?;
        let mut out = Vec::new();
        for token in &tokens {
            out.push(Follower::connect_as(api.port, query, token).await?);
        }
        Ok(out)
    }

    /// [`Follower::connect`] with another token (a principal holds at most 32 WebSockets).
    pub async fn connect_as(port: u16, query: &str, token: &str) -> Result<Follower> {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut req = format!("ws://127.0.0.1:{port}/api/operations/stream?{query}").into_client_request()?;
        req.headers_mut().insert("authorization", format!("Bearer {token}").parse()?);
        let (ws, _) = tokio::time::timeout(Duration::from_secs(30), tokio_tungstenite::connect_async(req))
            .await
            .map_err(|_| anyhow!("stream connect timed out"))??;
        Ok(Follower { ws })
    }

    /// The next operation message with the time it arrived (heartbeats skipped); `None` when
    /// the stream ended.
    pub async fn next(&mut self) -> Result<Option<(Value, DateTime<Utc>)>> {
        while let Some(msg) = self.ws.next().await {
            let Ok(msg) = msg else { return Ok(None) };
            let at = Utc::now();
            if let Ok(text) = msg.to_text() {
                let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
                if v["type"] == "operation" {
                    return Ok(Some((v["operation"].clone(), at)));
                }
            }
            if msg.is_close() {
                return Ok(None);
            }
        }
        Ok(None)
    }

    /// The next operation message within `timeout`.
    pub async fn next_within(&mut self, timeout: Duration) -> Result<Option<(Value, DateTime<Utc>)>> {
        tokio::time::timeout(timeout, self.next()).await.map_err(|_| anyhow!("no stream message within {timeout:?}"))?
    }
}

/// The create request every harness run uses: the one of `crates/sim/tests/engine_on_sim.rs`
/// (two AZs, two instance groups in two AZs).
pub fn create_request(name: &str) -> Value {
    json!({
        "name": name,
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 2, "availability_zone": "us-east-1a" },
            { "name": "spot", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1b", "capacity": { "type": "spot" } }
        ]}
    })
}

/// Create calls of one pipeline run of [`create_request`] (as `assert_created_once` in
/// `engine_on_sim.rs`): exactly these, whatever crashed or failed on the way.
pub const EXPECTED_CREATES: [(&str, u64); 11] = [
    ("ec2:CreateVpc", 1),
    // 2 public + 2 private subnets with the VPC, then one /20 compute subnet per group AZ.
    ("ec2:CreateSubnet", 6),
    // The new VPC's S3 gateway endpoint.
    ("ec2:CreateVpcEndpoint", 1),
    // EKS cluster role, HyperPod execution role, the S3 CSI driver's Pod Identity role and the
    // AWS Load Balancer Controller's IRSA role.
    ("iam:CreateRole", 4),
    ("iam:CreateOpenIDConnectProvider", 1),
    ("s3:CreateBucket", 1),
    // The lifecycle script, once.
    ("s3:PutObject", 1),
    ("eks:CreateCluster", 1),
    ("eks:CreateAddon", 4),
    ("eks:CreatePodIdentityAssociation", 1),
    ("sagemaker:CreateCluster", 1),
];

/// The create counters that differ from [`EXPECTED_CREATES`] (empty: exactly once).
pub fn create_mismatches(stats: &BTreeMap<String, u64>) -> Vec<String> {
    EXPECTED_CREATES
        .iter()
        .filter_map(|(api, want)| {
            let got = stats.get(*api).copied().unwrap_or(0);
            (got != *want).then(|| format!("{api}={got} (want {want})"))
        })
        .collect()
}

/// A step of an operation (JSON).
pub fn step<'a>(op: &'a Value, key: &str) -> Option<&'a Value> {
    op["steps"].as_array()?.iter().find(|s| s["key"] == key)
}

/// Order of step phases along the happy path (terminal failures rank last).
pub fn phase_rank(phase: &str) -> u8 {
    match phase {
        "pending" => 0,
        "submitting" => 1,
        "submitted" => 2,
        "polling" => 3,
        "succeeded" => 4,
        _ => 5,
    }
}

pub fn phase_of(op: &Value, key: &str) -> String {
    step(op, key).and_then(|s| s["phase"].as_str()).unwrap_or("missing").to_string()
}

pub fn ts(v: &Value) -> Option<DateTime<Utc>> {
    v.as_str().and_then(|s| DateTime::parse_from_rfc3339(s).ok()).map(|t| t.with_timezone(&Utc))
}

/// The time of the latest change recorded in an operation snapshot.
pub fn latest_change(op: &Value) -> Option<DateTime<Utc>> {
    let steps = op["steps"].as_array().into_iter().flatten().filter_map(|s| ts(&s["updated_at"]));
    steps.chain(ts(&op["updated_at"])).max()
}

/// `key=phase` of every step that is not pending, for messages.
pub fn progress(op: &Value) -> String {
    let steps = op["steps"].as_array().into_iter().flatten();
    let phases: Vec<String> = steps
        .filter(|s| s["phase"] != "pending")
        .map(|s| format!("{}={}", s["key"].as_str().unwrap_or("?"), s["phase"].as_str().unwrap_or("?")))
        .collect();
    format!("status={} [{}] error={}", op["status"], phases.join(" "), op["error"])
}

/// Nearest-rank percentile of sorted values (`p` in 0–100).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    percentile(&v, 50.0)
}

/// A plain-text table for stdout.
pub struct Table {
    title: String,
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(title: impl Into<String>, headers: &[&str]) -> Table {
        Table { title: title.into(), headers: headers.iter().map(|h| h.to_string()).collect(), rows: vec![] }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn print(&self) {
        let cols = self.headers.len();
        let mut width: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(cols) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .enumerate()
                .take(cols)
                .map(|(i, c)| format!("{c}{}", " ".repeat(width[i] - c.chars().count())))
                .collect();
            println!("  {}", padded.join("  ").trim_end());
        };
        println!("\n{}", self.title);
        line(&self.headers);
        println!("  {}", width.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("  "));
        for r in &self.rows {
            line(r);
        }
    }
}

/// The machine the numbers were measured on.
pub fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, m)| m.trim().to_string());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok());
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(crate::root())
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    json!({
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu": model,
        "memory_gib": mem_kib.map(|k| (k as f64 / 1024.0 / 1024.0 * 10.0).round() / 10.0),
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|s| s.trim().to_string()),
        // Other work on the machine skews the numbers; the 1/5/15-minute load when writing.
        "loadavg": std::fs::read_to_string("/proc/loadavg").ok().map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")),
        "git_commit": commit,
        "measured_at": Utc::now().to_rfc3339(),
    })
}

/// Writes `target/bench/<name>.json` (with the machine) and returns its path.
pub fn write_report(name: &str, mut report: Value) -> Result<PathBuf> {
    let dir = target_dir().join("bench");
    std::fs::create_dir_all(&dir)?;
    report["machine"] = machine();
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&report)? + "\n")?;
    Ok(path)
}

/// A multi-threaded runtime for the harness (the server runs in its own process).
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

pub fn secs_between(a: &Value, b: &Value) -> Option<f64> {
    Some((ts(b)? - ts(a)?).num_microseconds()? as f64 / 1e6)
}
