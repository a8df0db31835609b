//! `cargo xtask bench logs`: job-log fan-out. One simulated HyperPod training job writes
//! numbered lines at a fixed rate (the sim's `SIM_LOG_LINES_PER_SECOND` container variable, in
//! lines per **simulated** second: 10,000 lines per wall-clock second at sim speed 200 is 50 per
//! simulated second); N WebSocket followers read its log through
//! `/api/clusters/{cluster}/jobs/{job}/logs/stream?tail=0` for a fixed window.
//!
//! Line `k` reads `sim-log line <k> t=<simulated emission time>`. The simulated clock is mapped
//! to wall time with `GET /api/sim/clock` (the sample with the shortest round trip, its middle),
//! so a line's delivery latency is its arrival at the follower minus the wall time the sim
//! reached its emission time. Expected lines of a follower: every `k` emitted within the window
//! (the same range for every follower); a line that did not arrive by the end of the window plus
//! a grace period, or that the server announced as skipped, is lost.
//!
//! The followers run in this process, which then reads up to millions of lines per second: a
//! numbered line's document is read by a prefix match and two number parses ([`fast_doc`]),
//! anything else with the JSON parser. Building a JSON tree per line made the load generator —
//! not the server — the bottleneck in debug builds (100 followers: p99 4.7 s → 69 ms, same server).

use crate::harness::{Api, Server, Table, TempDir, create_request, percentile};
use anyhow::{Context, Result, anyhow, bail, ensure};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// The same sim speed as the pipeline benchmark.
pub const SPEED: f64 = 200.0;
/// Lines per wall-clock second the job writes (default of `--log-rate`).
pub const LINES_PER_SEC: f64 = 10_000.0;
const CLUSTER: &str = "logs";
const JOB: &str = "logs";
/// After the window, followers keep reading this long for lines still in flight.
const GRACE: Duration = Duration::from_secs(5);

/// Parses `sim-log line <k> t=<t>` (the sim's `rate_line`).
fn parse_line(line: &str) -> Option<(u64, f64)> {
    let rest = &line[line.find("sim-log line ")? + "sim-log line ".len()..];
    let (k, rest) = rest.split_once(" t=")?;
    Some((k.parse().ok()?, rest.trim_end().parse().ok()?))
}

/// Maps simulated seconds to wall time.
#[derive(Debug, Clone, Copy)]
struct SimClock {
    at: DateTime<Utc>,
    sim: f64,
    speed: f64,
    rtt_ms: f64,
}

impl SimClock {
    async fn read(api: Api) -> Result<SimClock> {
        let mut best: Option<SimClock> = None;
        for _ in 0..20 {
            let before = Utc::now();
            let v = api.get("/api/sim/clock").await?;
            let after = Utc::now();
            let rtt = after - before;
            let c = SimClock {
                at: before + rtt / 2,
                sim: v["sim_seconds"].as_f64().ok_or_else(|| anyhow!("no sim_seconds in {v}"))?,
                speed: v["speed"].as_f64().ok_or_else(|| anyhow!("no speed in {v}"))?,
                rtt_ms: rtt.num_microseconds().unwrap_or(0) as f64 / 1000.0,
            };
            if best.is_none_or(|b| c.rtt_ms < b.rtt_ms) {
                best = Some(c);
            }
        }
        best.ok_or_else(|| anyhow!("no clock sample"))
    }

    fn wall(&self, sim: f64) -> DateTime<Utc> {
        self.at + chrono::Duration::microseconds(((sim - self.sim) / self.speed * 1e6) as i64)
    }

    fn sim_at(&self, wall: DateTime<Utc>) -> f64 {
        self.sim + (wall - self.at).num_microseconds().unwrap_or(0) as f64 / 1e6 * self.speed
    }
}

/// What one follower received.
#[derive(Default)]
struct Received {
    /// `(line number, delivery latency in ms)` in arrival order.
    lines: Vec<(u64, f32)>,
    /// The first numbered line: `(k, simulated emission time)` (fixes the rate's start time).
    first: Option<(u64, f64)>,
    /// Lines the server said it skipped for this follower.
    skipped: u64,
    other_frames: u64,
    end: Option<String>,
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(port: u16, token: &str) -> Result<Ws> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let url = format!("ws://127.0.0.1:{port}/api/clusters/{CLUSTER}/jobs/{JOB}/logs/stream?tail=0");
    let mut req = url.into_client_request()?;
    req.headers_mut().insert("authorization", format!("Bearer {token}").parse()?);
    let (ws, _) = tokio::time::timeout(Duration::from_secs(30), tokio_tungstenite::connect_async(req))
        .await
        .map_err(|_| anyhow!("log stream connect timed out (30 s)"))??;
    Ok(ws)
}

/// Reads one `{"pod","line"}` document of a numbered line without building a JSON tree: the
/// follower's 10,000 lines per second (a million per second for 100 followers, all in this one
/// process) must not make the load generator the bottleneck. `prefix` is `{"pod":<pod>,"line":"`,
/// learnt from the first document (parsed in full); a document that does not match it, or whose
/// line needs JSON unescaping, is parsed in full instead.
fn fast_doc(doc: &str, prefix: &str) -> Option<(u64, f64)> {
    let line = doc.strip_prefix(prefix)?.strip_suffix("\"}")?;
    if line.contains('\\') || line.contains('"') {
        return None;
    }
    parse_line(line)
}

/// Reads numbered lines until `stop` turns true or the stream ends; a line's latency is its
/// frame's arrival minus the wall time the sim reached its emission time.
async fn follow(mut ws: Ws, clock: SimClock, mut stop: tokio::sync::watch::Receiver<bool>) -> Result<Received> {
    let mut out = Received::default();
    let mut prefix = String::new();
    loop {
        let msg = tokio::select! {
            m = ws.next() => m,
            _ = stop.wait_for(|s| *s) => break,
        };
        let Some(Ok(msg)) = msg else { break };
        let at = Utc::now();
        if msg.is_close() {
            break;
        }
        let Ok(text) = msg.to_text() else { continue };
        // A frame is newline-delimited JSON: every line that was ready when it was sent.
        let mut ended = false;
        for doc in text.split('\n').filter(|l| !l.is_empty()) {
            let numbered = match (!prefix.is_empty()).then(|| fast_doc(doc, &prefix)).flatten() {
                Some(kt) => Some(kt),
                None => {
                    let v: Value = serde_json::from_str(doc).unwrap_or(Value::Null);
                    if let Some(kt) = v["line"].as_str().and_then(parse_line) {
                        if let Some(pod) = v.get("pod") {
                            prefix = format!("{{\"pod\":{pod},\"line\":\"");
                        }
                        Some(kt)
                    } else {
                        if let Some(n) = v["skipped"].as_u64() {
                            out.skipped += n;
                        } else if v["end"] == true {
                            out.end = Some(v["reason"].as_str().unwrap_or_default().to_string());
                            ended = true;
                        } else {
                            out.other_frames += 1;
                        }
                        None
                    }
                }
            };
            if let Some((k, t)) = numbered {
                out.first.get_or_insert((k, t));
                let latency = (at - clock.wall(t)).num_microseconds().unwrap_or(0) as f32 / 1000.0;
                out.lines.push((k, latency));
            }
        }
        if ended {
            break;
        }
    }
    let _ = ws.close(None).await;
    Ok(out)
}

async fn submit_job(api: Api, lines_per_sec: f64) -> Result<()> {
    let per_sim_second = lines_per_sec / SPEED;
    let body = json!({
        "runtime": "hyperpod",
        "job": {
            "name": JOB, "namespace": "default", "image": "pytorch/pytorch:2.5.1",
            "instance_type": "ml.g5.2xlarge", "nodes": 1,
            "env": [
                { "name": "SIM_LOG_LINES_PER_SECOND", "value": per_sim_second.to_string() },
                // Runs far longer than the benchmark (a simulated training job ends after 300 s).
                { "name": "SIM_DURATION_SECONDS", "value": "10000000" }
            ]
        },
        "recipe": { "kind": "torch", "script": "scripts/train.py" }
    });
    let path = format!("/api/clusters/{CLUSTER}/jobs");
    let (status, resp) = api.call("POST", &path, Some(&body), &[("idempotency-key", "bench-logs-job")]).await?;
    ensure!(status == 202, "POST {path}: {status} {resp}");
    let id = resp["operation"]["id"].as_str().ok_or_else(|| anyhow!("no operation id: {resp}"))?;
    let op = api.wait_terminal(id, Duration::from_secs(120)).await?;
    ensure!(op["status"] == "succeeded", "submit_job did not succeed: {}", crate::harness::progress(&op));
    // Wait for the container to start (the log read answers 200 with lines).
    let logs = format!("/api/clusters/{CLUSTER}/jobs/{JOB}/logs?tail=5");
    for _ in 0..600 {
        let (status, v) = api.call("GET", &logs, None, &[]).await?;
        if status == 200
            && v["lines"]
                .as_array()
                .is_some_and(|l| l.iter().any(|x| x.as_str().is_some_and(|s| parse_line(s).is_some())))
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("the job's container did not start writing numbered lines")
}

/// One run: a fresh server, a cluster, the job, `followers` followers for `window`.
pub async fn run(bin: &Path, followers: usize, lines_per_sec: f64, window: Duration) -> Result<Value> {
    let dir = TempDir::new("bench-logs")?;
    let server = Server::start(bin, dir.path(), SPEED).await?;
    let api = server.api();
    let id = api.create_cluster(&create_request(CLUSTER), "bench-logs").await?;
    let op = api.wait_terminal(&id, Duration::from_secs(180)).await?;
    ensure!(op["status"] == "succeeded", "the cluster pipeline did not succeed: {}", crate::harness::progress(&op));
    submit_job(api, lines_per_sec).await.context("submitting the logging job")?;
    let clock = SimClock::read(api).await?;
    ensure!((clock.speed - SPEED).abs() < 1e-9, "sim speed {} (expected {SPEED})", clock.speed);

    // Every follower connects (all at once; each starts reading once all are connected), then
    // one second to settle, then the window.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    let connect_started = std::time::Instant::now();
    let tokens = crate::harness::follower_tokens(&api, followers, "log-follower").await?;
    let connected = futures::future::join_all(tokens.iter().map(|t| connect(api.port, t))).await;
    for c in connected {
        match c {
            Ok(ws) => {
                tasks.spawn(follow(ws, clock, stop_rx.clone()));
            }
            Err(e) => {
                tasks.spawn(async move { Err::<Received, _>(e) });
            }
        }
    }
    let connect_secs = connect_started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let w0 = Utc::now();
    let s0 = clock.sim_at(w0);
    tokio::time::sleep(window).await;
    let w1 = Utc::now();
    let s1 = clock.sim_at(w1);
    tokio::time::sleep(GRACE).await;
    let _ = stop_tx.send(true);
    let mut results = Vec::new();
    while let Some(r) = tasks.join_next().await {
        results.push(r?);
    }
    let rss = server.rss_kib().ok();
    drop(server);

    let ok: Vec<&Received> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    let errors: Vec<String> = results.iter().filter_map(|r| r.as_ref().err().map(|e| format!("{e:#}"))).collect();
    // The line numbers emitted within [s0, s1]: from any received line, k ↔ t is t = start + k/rate.
    let rate = lines_per_sec / SPEED;
    let sample = ok.iter().find_map(|r| r.first);
    let Some((k_ref, t_ref)) = sample else { bail!("no follower received a numbered line ({errors:?})") };
    let start = t_ref - k_ref as f64 / rate;
    let k_lo = ((s0 - start) * rate).ceil().max(1.0) as u64;
    let k_hi = ((s1 - start) * rate).floor() as u64;
    ensure!(k_hi >= k_lo, "empty window");
    let expected = k_hi - k_lo + 1;
    let mut per: Vec<Value> = Vec::new();
    let mut lat: Vec<f32> = Vec::new();
    let (mut lost_total, mut received_total, mut dup_total, mut skipped_total) = (0u64, 0u64, 0u64, 0u64);
    for r in &ok {
        // Arrival order is line order on a healthy stream; sorted anyway, so a reordering would
        // show up as neither a loss nor a duplicate, only as latency.
        let mut lines = r.lines.clone();
        lines.sort_by_key(|(k, _)| *k);
        let before = lines.len();
        lines.dedup_by_key(|(k, _)| *k);
        let duplicates = (before - lines.len()) as u64;
        let got: Vec<f32> = lines.iter().filter(|(k, _)| (k_lo..=k_hi).contains(k)).map(|(_, l)| *l).collect();
        let received = got.len() as u64;
        let lost = expected - received;
        lat.extend(got);
        lost_total += lost;
        received_total += received;
        dup_total += duplicates;
        skipped_total += r.skipped;
        per.push(json!({ "expected": expected, "received": received, "lost": lost, "duplicates": duplicates,
                         "skipped_frames": r.skipped, "other_frames": r.other_frames, "ended": r.end }));
    }
    let lost_followers = per.iter().filter(|p| p["lost"].as_u64() != Some(0)).count();
    lat.sort_by(f32::total_cmp);
    let lat: Vec<f64> = lat.into_iter().map(f64::from).collect();
    let received_per: Vec<u64> = per.iter().filter_map(|p| p["received"].as_u64()).collect();
    // The window as it ran (a loaded runtime wakes from the sleep late; the expected lines are
    // counted over the same span).
    let window_secs = (w1 - w0).num_microseconds().unwrap_or(0) as f64 / 1e6;
    Ok(json!({
        "followers": followers,
        "connected": ok.len(),
        "connect_secs": connect_secs,
        "follower_errors": errors,
        "sim_speed": SPEED,
        "lines_per_sec": lines_per_sec,
        "lines_per_sim_sec": rate,
        "window_secs": window_secs,
        "grace_secs": GRACE.as_secs_f64(),
        "expected_per_follower": expected,
        "received_per_follower": { "min": received_per.iter().min(), "max": received_per.iter().max() },
        "lines_expected": expected * ok.len() as u64,
        "lines_received": received_total,
        "lines_lost": lost_total + expected * (followers - ok.len()) as u64,
        "followers_with_loss": lost_followers + (followers - ok.len()),
        "duplicates": dup_total,
        "skipped_announced": skipped_total,
        "delivered_per_sec": received_total as f64 / window_secs,
        "latency_ms": { "p50": percentile(&lat, 50.0), "p99": percentile(&lat, 99.0),
                        "max": lat.last().copied().unwrap_or(f64::NAN) },
        "clock_sample_rtt_ms": clock.rtt_ms,
        "server_rss_kib": rss.map(|(cur, peak)| json!({ "current": cur, "peak": peak })),
        "per_follower": per,
    }))
}

/// The `logs` benchmark: 1 follower (the baseline) and `followers` followers.
pub async fn bench(bin: &Path, followers: usize, lines_per_sec: f64, window: Duration) -> Result<Value> {
    ensure!(lines_per_sec > 0.0 && lines_per_sec / SPEED <= 1_000_000.0, "--log-rate must be in (0, 2e8]");
    let mut counts = vec![1, followers];
    counts.dedup();
    let mut table = Table::new(
        format!(
            "Job-log fan-out: WebSocket followers of one simulated job writing {lines_per_sec:.0} lines/s \
             (sim speed {SPEED}, {:.0} lines per simulated second), {:.0} s window + {:.0} s grace; latency = arrival − \
             the wall time the sim reached the line's emission time",
            lines_per_sec / SPEED,
            window.as_secs_f64(),
            GRACE.as_secs_f64()
        ),
        &[
            "followers",
            "expected/follower",
            "received (min–max)",
            "lost",
            "skipped",
            "delivered/s",
            "p50 ms",
            "p99 ms",
            "max ms",
        ],
    );
    let mut runs = Vec::new();
    let mut lost = 0;
    for n in counts {
        let r = run(bin, n, lines_per_sec, window).await?;
        lost += r["lines_lost"].as_u64().unwrap_or(u64::MAX);
        let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
        table.row(vec![
            n.to_string(),
            r["expected_per_follower"].to_string(),
            format!("{}–{}", r["received_per_follower"]["min"], r["received_per_follower"]["max"]),
            r["lines_lost"].to_string(),
            r["skipped_announced"].to_string(),
            format!("{:.0}", f(&r["delivered_per_sec"])),
            format!("{:.1}", f(&r["latency_ms"]["p50"])),
            format!("{:.1}", f(&r["latency_ms"]["p99"])),
            format!("{:.1}", f(&r["latency_ms"]["max"])),
        ]);
        if let Some(e) = r["follower_errors"].as_array().filter(|e| !e.is_empty()) {
            println!("  follower errors with {n} followers: {e:?}");
        }
        runs.push(r);
    }
    table.print();
    Ok(json!({
        "benchmark": "logs",
        "stream": format!("/api/clusters/{CLUSTER}/jobs/{JOB}/logs/stream?tail=0"),
        "runs": runs,
        "lines_lost": lost,
        "latency_definition": "arrival at the follower minus the wall time the sim clock reached the line's emission \
                               time (GET /api/sim/clock, shortest round trip of 20, its middle)",
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_path_reads_what_the_json_parser_reads_or_defers_to_it() {
        let prefix = r#"{"pod":"logs-worker-0","line":""#;
        for (doc, fast) in [
            (r#"{"pod":"logs-worker-0","line":"sim-log line 7 t=1.500000"}"#, Some((7, 1.5))),
            (r#"{"pod":"logs-worker-0","line":"[rank0]: sim-log line 12 t=3.250000"}"#, Some((12, 3.25))),
            // Escapes, another pod, other documents: the full parser decides.
            (r#"{"pod":"logs-worker-0","line":"sim-log line 7 t=1.5 "q""}"#, None),
            (r#"{"pod":"logs-worker-0","line":"sim-log line 7 t=1.5\n"}"#, None),
            (r#"{"pod":"logs-worker-1","line":"sim-log line 7 t=1.500000"}"#, None),
            (r#"{"skipped":3,"unit":"frames"}"#, None),
            (r#"{"pod":"logs-worker-0","line":"step 1 | loss 2.3"}"#, None),
        ] {
            assert_eq!(fast_doc(doc, prefix), fast, "{doc}");
            if let Some(kt) = fast {
                let v: Value = serde_json::from_str(doc).unwrap();
                assert_eq!(v["line"].as_str().and_then(parse_line), Some(kt), "{doc}");
            }
        }
    }

    #[test]
    fn parses_numbered_lines() {
        assert_eq!(parse_line("sim-log line 12 t=3.250000"), Some((12, 3.25)));
        assert_eq!(parse_line("step 1 | loss 2.3"), None);
    }

    #[test]
    fn clock_maps_both_ways() {
        let at = Utc::now();
        let c = SimClock { at, sim: 1000.0, speed: 200.0, rtt_ms: 0.5 };
        assert_eq!(c.wall(1200.0), at + chrono::Duration::seconds(1));
        assert!((c.sim_at(at + chrono::Duration::milliseconds(500)) - 1100.0).abs() < 1e-6);
    }
}
