//! Hostile load (part of `cargo xtask chaos`, `--quick` included): against one real server on
//! loopback, at the same time,
//! - **slowloris**: [`SLOW_CONNECTIONS`] connections that send their headers a byte at a time
//!   must each be closed by the server (its header-read timeout) within [`SLOW_DEADLINE`];
//! - **invented methods**: [`INVENTED_METHODS`] requests with made-up methods must not grow
//!   `/metrics` (no invented method appears, the request series stay few);
//! - **100 MB bodies**: a declared 100 MB body is answered `413` without being read, and a
//!   chunked 100 MB body is cut off at the body limit;
//!
//! while a prober asks `/healthz` every [`PROBE_EVERY`] over a fresh connection: every probe
//! must answer `200`, within [`HEALTHZ_BUDGET`] at the 99th percentile (the maximum is
//! reported), and the resident memory may grow by at most [`RSS_GROWTH_KIB`]. Every loop is
//! bounded and stops by itself; only 127.0.0.1 is contacted.

use crate::harness::{Server, TempDir, percentile};
use anyhow::{Context, Result, anyhow};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Slow connections held open at once (below the server's connection cap).
const SLOW_CONNECTIONS: usize = 200;
/// Gap between two header bytes of a slow connection.
const SLOW_BYTE_EVERY: Duration = Duration::from_millis(250);
/// By when every slow connection must have been closed (the server's header-read timeout is
/// 10 s).
const SLOW_DEADLINE: Duration = Duration::from_secs(13);
/// Requests with invented methods.
const INVENTED_METHODS: usize = 4000;
/// Connections the invented methods are spread over.
const FLOOD_CONNECTIONS: usize = 4;
/// Size of the hostile bodies.
const BIG_BODY: u64 = 100 * 1024 * 1024;
const PROBE_EVERY: Duration = Duration::from_millis(25);
/// `/healthz` latency budget (99th percentile).
const HEALTHZ_BUDGET: Duration = Duration::from_millis(100);
/// Allowed growth of the server's resident memory over the run.
const RSS_GROWTH_KIB: u64 = 64 * 1024;

/// Runs the scenario; the JSON result has `ok` and, when not ok, `problems`.
pub async fn hostile_load(bin: &Path, speed: f64) -> Result<Value> {
    let dir = TempDir::new("hostile")?;
    let server = Server::start(bin, dir.path(), speed).await?;
    let port = server.port;
    // Warm up (first requests allocate caches), then take the baseline.
    for _ in 0..20 {
        probe(port).await?;
    }
    let (rss_before, _) = server.rss_kib()?;
    let stop = Arc::new(AtomicBool::new(false));
    let prober = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut latencies = Vec::new();
            let mut failures = 0u32;
            while !stop.load(Ordering::Relaxed) {
                match probe(port).await {
                    Ok(d) => latencies.push(d.as_secs_f64() * 1000.0),
                    Err(_) => failures += 1,
                }
                tokio::time::sleep(PROBE_EVERY).await;
            }
            (latencies, failures)
        }
    });
    let started = Instant::now();
    let (slow, flood, bodies) = tokio::join!(slowloris(port), invented_methods(port), big_bodies(port));
    stop.store(true, Ordering::Relaxed);
    let (mut latencies, probe_failures) = prober.await?;
    let (rss_after, hwm) = server.rss_kib()?;
    let metrics = metrics_text(port).await?;
    let secs = started.elapsed().as_secs_f64();

    let mut problems = Vec::new();
    let slow = slow?;
    let closed_in_time = slow.iter().filter(|d| d.is_some_and(|d| d <= SLOW_DEADLINE)).count();
    let slow_max = slow.iter().flatten().max().copied().unwrap_or_default();
    if closed_in_time != SLOW_CONNECTIONS {
        problems.push(format!("slowloris: {closed_in_time}/{SLOW_CONNECTIONS} slow connections closed in time"));
    }
    let (sent, flood_secs) = flood?;
    let invented_in_metrics = metrics.contains("XYZ");
    let series = metrics.lines().filter(|l| l.starts_with("instantstart_http_requests_total{")).count();
    if invented_in_metrics || series > 20 {
        problems.push(format!(
            "invented methods: /metrics has {series} request series (invented shown: {invented_in_metrics})"
        ));
    }
    let bodies = bodies?;
    if bodies["declared"]["status"] != 413 {
        problems.push(format!("declared 100 MB body: answered {}", bodies["declared"]["status"]));
    }
    if !bodies["chunked"]["status"].as_u64().is_some_and(|s| s == 400 || s == 413) {
        problems.push(format!("chunked 100 MB body: answered {}", bodies["chunked"]["status"]));
    }
    latencies.sort_by(f64::total_cmp);
    let p50 = percentile(&latencies, 50.0);
    let p99 = percentile(&latencies, 99.0);
    let max = latencies.last().copied().unwrap_or_default();
    if probe_failures > 0 || latencies.is_empty() {
        problems.push(format!("/healthz: {probe_failures} probes failed"));
    }
    if p99 > HEALTHZ_BUDGET.as_secs_f64() * 1000.0 {
        problems.push(format!("/healthz: p99 {p99:.1} ms over {} ms", HEALTHZ_BUDGET.as_millis()));
    }
    let growth = rss_after.saturating_sub(rss_before);
    if growth > RSS_GROWTH_KIB {
        problems.push(format!("memory: RSS grew {growth} KiB (budget {RSS_GROWTH_KIB} KiB)"));
    }
    Ok(json!({
        "ok": problems.is_empty(),
        "problems": problems,
        "secs": (secs * 10.0).round() / 10.0,
        "slowloris": { "connections": SLOW_CONNECTIONS, "closed_in_time": closed_in_time,
                       "slowest_close_secs": slow_max.as_secs_f64() },
        "invented_methods": { "sent": sent, "secs": flood_secs, "request_series_in_metrics": series,
                              "invented_method_in_metrics": invented_in_metrics },
        "big_bodies": bodies,
        "healthz_ms": { "probes": latencies.len(), "failures": probe_failures, "p50": p50, "p99": p99, "max": max },
        "rss_kib": { "before": rss_before, "after": rss_after, "peak": hwm, "growth": growth },
    }))
}

/// One `GET /healthz` over a fresh connection; its latency when it answers `200`.
async fn probe(port: u16) -> Result<Duration> {
    let started = Instant::now();
    let attempt = async {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await?;
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        anyhow::ensure!(
            buf.starts_with(b"HTTP/1.1 200"),
            "answered {:?}",
            String::from_utf8_lossy(&buf[..buf.len().min(20)])
        );
        Ok(())
    };
    tokio::time::timeout(Duration::from_secs(2), attempt).await.map_err(|_| anyhow!("no answer within 2 s"))??;
    Ok(started.elapsed())
}

/// Opens the slow connections; for each, when the server closed it (`None`: still open at the
/// deadline).
async fn slowloris(port: u16) -> Result<Vec<Option<Duration>>> {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..SLOW_CONNECTIONS {
        tasks.spawn(async move {
            let started = Instant::now();
            let mut s = TcpStream::connect(("127.0.0.1", port)).await?;
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ").await?;
            let mut buf = [0u8; 256];
            while started.elapsed() < SLOW_DEADLINE + Duration::from_secs(1) {
                tokio::select! {
                    read = s.read(&mut buf) => match read {
                        Ok(0) | Err(_) => return anyhow::Ok(Some(started.elapsed())),
                        Ok(_) => {}
                    },
                    _ = tokio::time::sleep(SLOW_BYTE_EVERY) => {
                        if s.write_all(b"a").await.is_err() {
                            return Ok(Some(started.elapsed()));
                        }
                    }
                }
            }
            Ok(None)
        });
    }
    let mut out = Vec::new();
    while let Some(r) = tasks.join_next().await {
        out.push(r??);
    }
    Ok(out)
}

/// Sends [`INVENTED_METHODS`] requests with made-up methods; how many were answered, and the
/// time it took.
async fn invented_methods(port: u16) -> Result<(usize, f64)> {
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..FLOOD_CONNECTIONS {
        tasks.spawn(async move {
            let stream = TcpStream::connect(("127.0.0.1", port)).await?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(conn);
            let mut answered = 0;
            for i in (c..INVENTED_METHODS).step_by(FLOOD_CONNECTIONS) {
                let method = hyper::Method::from_bytes(format!("XYZ{i}").as_bytes())?;
                let req = hyper::Request::builder()
                    .method(method)
                    .uri("/healthz")
                    .header("host", "127.0.0.1")
                    .body(Empty::<Bytes>::new())?;
                let resp = sender.send_request(req).await?;
                let _ = resp.into_body().collect().await?;
                answered += 1;
                sender.ready().await?;
            }
            anyhow::Ok(answered)
        });
    }
    let mut sent = 0;
    while let Some(r) = tasks.join_next().await {
        sent += r??;
    }
    Ok((sent, (started.elapsed().as_secs_f64() * 10.0).round() / 10.0))
}

/// A 100 MB body declared up front, and one sent chunked: the status each was answered with
/// and how many bytes the server took before answering.
async fn big_bodies(port: u16) -> Result<Value> {
    let declared = big_body(port, true).await.context("declared 100 MB body")?;
    let chunked = big_body(port, false).await.context("chunked 100 MB body")?;
    Ok(json!({ "declared": declared, "chunked": chunked }))
}

async fn big_body(port: u16, declared: bool) -> Result<Value> {
    let started = Instant::now();
    let stream = TcpStream::connect(("127.0.0.1", port)).await?;
    let (mut rd, mut wr) = stream.into_split();
    let framing =
        if declared { format!("Content-Length: {BIG_BODY}") } else { "Transfer-Encoding: chunked".to_string() };
    let head =
        format!("POST /api/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{framing}\r\n\r\n");
    wr.write_all(head.as_bytes()).await?;
    let writer = tokio::spawn(async move {
        let chunk = vec![b' '; 64 * 1024];
        let framed: Vec<u8> = if declared {
            chunk
        } else {
            let mut f = format!("{:x}\r\n", chunk.len()).into_bytes();
            f.extend_from_slice(&chunk);
            f.extend_from_slice(b"\r\n");
            f
        };
        let mut sent = 0u64;
        while sent < BIG_BODY {
            if wr.write_all(&framed).await.is_err() {
                break;
            }
            sent += 64 * 1024;
        }
        sent
    });
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(20), async {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = rd.read(&mut tmp).await?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&tmp[..n]);
        }
        anyhow::Ok(())
    })
    .await;
    let answered_secs = started.elapsed().as_secs_f64();
    drop(rd);
    writer.abort();
    read.map_err(|_| anyhow!("no answer within 20 s"))??;
    let status: u64 = String::from_utf8_lossy(&buf)
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("no status line in {:?}", String::from_utf8_lossy(&buf)))?;
    Ok(json!({ "status": status, "answered_secs": (answered_secs * 100.0).round() / 100.0 }))
}

/// The `/metrics` text.
async fn metrics_text(port: u16) -> Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await?;
    // `/metrics` needs a token (unless the server runs with --public-metrics).
    let req = format!(
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        crate::harness::TOKEN
    );
    s.write_all(req.as_bytes()).await?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await??;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}
