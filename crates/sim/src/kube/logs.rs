//! Simulated container logs. A pod's log is a pure function of the pod and its state: a few
//! startup lines when the container starts, then periodic lines while it runs (training steps
//! for batch pods, health checks for servers, errors for failing ones) and a last line when it
//! ends. Every reader therefore sees the same log, across calls and restarts.
//!
//! A workload can ask for extra numbered lines at a fixed rate, for load tests of log
//! followers: [`LOG_RATE_ANNOTATION`] on the pod template (or the [`LOG_RATE_ENV`] variable of
//! its first container, for workloads whose manifest only takes environment variables), in
//! lines per **simulated** second. Line `k` (from 1) is emitted at `start + k / rate` and reads
//! `sim-log line <k> t=<that time in simulated seconds>` ([`rate_line`]), so a reader can tell
//! a lost line (a gap in `k`) and how late a line arrived. A follower gets the lines after its
//! cursor computed from the cursor on (no rebuilding the whole log per poll).

use super::pod::{PodState, PodView};
use serde_json::Value;

/// At most this many periodic lines are returned (the newest), like a rotated container log.
const MAX_PERIODIC_LINES: u64 = 5000;

/// Pod-template annotation: numbered log lines per simulated second.
pub const LOG_RATE_ANNOTATION: &str = "sim.instantstart.io/log-lines-per-second";
/// The same as an environment variable of the pod's first container.
pub const LOG_RATE_ENV: &str = "SIM_LOG_LINES_PER_SECOND";
/// Highest accepted rate (lines per simulated second); higher values are clamped.
pub const MAX_LOG_RATE: f64 = 1_000_000.0;

/// The numbered line `k`, emitted at simulated time `t`.
pub fn rate_line(k: u64, t: f64) -> String {
    format!("sim-log line {k} t={t:.6}")
}

/// `(k, t)` of a [`rate_line`] (also inside a longer line, e.g. after a prefix).
pub fn parse_rate_line(line: &str) -> Option<(u64, f64)> {
    let rest = &line[line.find("sim-log line ")? + "sim-log line ".len()..];
    let (k, rest) = rest.split_once(" t=")?;
    Some((k.parse().ok()?, rest.trim_end().parse().ok()?))
}

fn number(v: &Value) -> Option<f64> {
    v.as_f64().or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// The pod's numbered-line rate (lines per simulated second), if it asks for one.
pub(crate) fn log_rate(pod: &PodView) -> Option<f64> {
    let annotated = pod.annotations.get(LOG_RATE_ANNOTATION).and_then(number);
    let env = || {
        pod.spec
            .pointer("/containers/0/env")
            .and_then(Value::as_array)?
            .iter()
            .find(|e| e.get("name").and_then(Value::as_str) == Some(LOG_RATE_ENV))
            .and_then(|e| e.get("value"))
            .and_then(number)
    };
    annotated.or_else(env).filter(|r| r.is_finite() && *r > 0.0).map(|r| r.min(MAX_LOG_RATE))
}

/// Numbered lines later than `after`, up to `until` and the container's end.
fn rate_lines(rate: f64, start: f64, end: f64, after: f64, until: f64) -> Vec<(f64, String)> {
    let last_t = until.min(end);
    if last_t < start {
        return Vec::new();
    }
    let k_max = ((last_t - start) * rate).floor() as u64;
    // One earlier than the first candidate, for rounding; the time filter below decides.
    let k_min = if after > start { (((after - start) * rate).floor() as u64).max(1) } else { 1 };
    let k_min = if after.is_finite() { k_min } else { k_min.max(k_max.saturating_sub(MAX_PERIODIC_LINES - 1)) };
    (k_min..=k_max)
        .filter_map(|k| {
            let t = start + k as f64 / rate;
            (t > after && t <= last_t).then(|| (t, rate_line(k, t)))
        })
        .collect()
}

/// Lines at fixed offsets from the container start.
type Header = Vec<(f64, String)>;
/// The `k`-th periodic line.
type Periodic = Box<dyn Fn(u64) -> String>;

/// Log lines with their simulated times, up to `until` (the newest ones of a long log).
pub(crate) fn lines(pod: &PodView, st: &PodState, until: f64) -> Vec<(f64, String)> {
    lines_after(pod, st, f64::NEG_INFINITY, until)
}

/// The log lines later than `after`, up to `until`: what a follower whose cursor is `after`
/// gets next. With a finite `after` the numbered lines are not capped.
pub(crate) fn lines_after(pod: &PodView, st: &PodState, after: f64, until: f64) -> Vec<(f64, String)> {
    let mut out = base_lines(pod, st, after, until);
    if let (Some(rate), Some(start)) = (log_rate(pod), st.started_at) {
        let end = st.finished_at.unwrap_or(f64::INFINITY);
        out.extend(rate_lines(rate, start, end, after, until));
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// The workload's own log lines later than `after`.
fn base_lines(pod: &PodView, st: &PodState, after: f64, until: f64) -> Vec<(f64, String)> {
    if let Some(run) = &pod.run {
        return super::training::log_lines_after(pod, run, st, after, until);
    }
    let Some(start) = st.started_at else {
        return Vec::new();
    };
    let end = st.finished_at.unwrap_or(f64::INFINITY);
    let image = pod.image();
    let mut out: Vec<(f64, String)> = Vec::new();
    let (header, period, periodic): (Header, f64, Periodic) = match (&pod.batch_run, &pod.fails) {
        (Some(_), _) => (
            vec![
                (0.0, format!("Starting {image}")),
                (1.0, format!("Initializing distributed environment: world_size={} rank={}", pod.world_size, pod.rank)),
                (2.0, "Loading dataset and model".to_string()),
            ],
            10.0,
            Box::new(|k: u64| {
                let loss = 2.5 / (1.0 + k as f64 * 0.05) + 0.1;
                format!("step {k} | loss {loss:.4} | lr 2.0e-05 | {:.1} samples/s", 118.0 + (k % 7) as f64)
            }),
        ),
        (None, Some(reason)) => (vec![(0.0, format!("Starting {image}"))], 30.0, {
            let reason = reason.clone();
            Box::new(move |k: u64| format!("Error: {reason} (restart {k})"))
        }),
        (None, None) => (
            vec![
                (0.0, format!("Starting {image}")),
                (1.0, "Loading model weights".to_string()),
                (crate::timings::POD_READY, format!("Server listening on 0.0.0.0:{}", pod.port())),
            ],
            15.0,
            Box::new(|_k: u64| "\"GET /health HTTP/1.1\" 200 OK".to_string()),
        ),
    };
    for (dt, line) in header {
        if start + dt <= until && start + dt <= end && start + dt > after {
            out.push((start + dt, line));
        }
    }
    let last_t = until.min(end);
    if last_t >= start + period {
        let k_max = ((last_t - start) / period).floor() as u64;
        let k_min = k_max.saturating_sub(MAX_PERIODIC_LINES - 1).max(1);
        let k_min = if after > start { k_min.max(((after - start) / period).floor() as u64) } else { k_min };
        for k in k_min..=k_max {
            let t = start + k as f64 * period;
            if t <= end && t > after {
                out.push((t, periodic(k)));
            }
        }
    }
    if let (Some(run), true) = (pod.batch_run, end <= until && end > after) {
        match &pod.fails {
            Some(reason) => {
                out.push((end, format!("RuntimeError: {reason}")));
                out.push((end, "Process exited with code 1".to_string()));
            }
            None => {
                let steps = (run / period).floor() as u64;
                out.push((end, format!("Training complete: {steps} steps in {run:.0}s; checkpoint saved")));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(batch_run: Option<f64>, fails: Option<&str>) -> PodView {
        PodView {
            name: "p".into(),
            namespace: "default".into(),
            uid: "u".into(),
            labels: Default::default(),
            annotations: Default::default(),
            owner: None,
            source: String::new(),
            slot: None,
            spec: json!({ "containers": [{ "name": "c", "image": "img:1", "ports": [{ "containerPort": 8000 }] }] }),
            start: 0.0,
            batch_run,
            fails: fails.map(str::to_string),
            world_size: 2,
            rank: 1,
            run: None,
        }
    }

    fn state(started: Option<f64>, finished: Option<f64>) -> PodState {
        PodState {
            phase: "Running",
            node: None,
            scheduled_at: None,
            unschedulable: None,
            started_at: started,
            ready: true,
            finished_at: finished,
            restarts: 0,
            waiting: None,
            waiting_message: None,
            gated: None,
            pod_ip: None,
            host_ip: None,
        }
    }

    #[test]
    fn batch_log_runs_to_completion() {
        let l = lines(&pod(Some(30.0), None), &state(Some(100.0), Some(130.0)), 1000.0);
        let text: Vec<&str> = l.iter().map(|(_, s)| s.as_str()).collect();
        assert_eq!(text[0], "Starting img:1");
        assert_eq!(text[1], "Initializing distributed environment: world_size=2 rank=1");
        assert!(text[3].starts_with("step 1 |"));
        assert!(text[4].starts_with("step 2 |"));
        assert_eq!(*text.last().unwrap(), "Training complete: 3 steps in 30s; checkpoint saved");
        assert!(l.windows(2).all(|w| w[0].0 <= w[1].0), "ordered by time");
    }

    #[test]
    fn server_log_grows_with_time_and_nothing_before_start() {
        let p = pod(None, None);
        assert!(lines(&p, &state(None, None), 1e6).is_empty());
        let early = lines(&p, &state(Some(0.0), None), 10.0);
        let later = lines(&p, &state(Some(0.0), None), 100.0);
        assert_eq!(early.len(), 3);
        assert_eq!(early[2].1, "Server listening on 0.0.0.0:8000");
        assert_eq!(later.len(), 3 + 6);
        assert_eq!(&later[..3], &early[..]);
        let huge = lines(&p, &state(Some(0.0), None), 1e9);
        assert!(huge.len() as u64 <= 3 + MAX_PERIODIC_LINES);
    }

    fn rated(rate: &str, via_env: bool) -> PodView {
        let mut p = pod(None, None);
        if via_env {
            p.spec["containers"][0]["env"] = json!([{ "name": LOG_RATE_ENV, "value": rate }]);
        } else {
            p.annotations.insert(LOG_RATE_ANNOTATION.into(), json!(rate));
        }
        p
    }

    fn numbered(l: &[(f64, String)]) -> Vec<(u64, f64)> {
        l.iter().filter_map(|(_, s)| parse_rate_line(s)).collect()
    }

    #[test]
    fn rate_annotation_numbers_lines_at_their_emission_time() {
        let p = rated("50", false);
        let st = state(Some(10.0), None);
        let l = lines(&p, &st, 12.0);
        let n = numbered(&l);
        // 2 s at 50 lines/s: lines 1..=100, line k at 10 + k/50.
        assert_eq!(n.len(), 100);
        assert_eq!(n[0].0, 1);
        assert_eq!(n[99].0, 100);
        for (k, t) in &n {
            assert!((t - (10.0 + *k as f64 / 50.0)).abs() < 1e-6, "line {k} at {t}");
        }
        assert!(l.windows(2).all(|w| w[0].0 <= w[1].0), "ordered by time");
        // The workload's own lines are still there.
        assert_eq!(l[0].1, "Starting img:1");
        // The environment variable does the same; bad or absent rates add nothing.
        assert_eq!(numbered(&lines(&rated("50", true), &st, 12.0)), n);
        for bad in ["0", "-3", "NaN", "fast"] {
            assert!(numbered(&lines(&rated(bad, false), &st, 12.0)).is_empty(), "{bad}");
        }
        assert_eq!(log_rate(&rated("1e12", false)), Some(MAX_LOG_RATE));
    }

    #[test]
    fn following_from_a_cursor_gets_every_line_once_and_the_same_ones() {
        let p = rated("1000", false);
        let st = state(Some(0.0), None);
        let whole = lines_after(&p, &st, f64::NEG_INFINITY, 3.0);
        // Followers polling at uneven steps, starting at different cursors, together with
        // the tail they got first, see exactly the lines of the whole log after their start.
        for (first, step) in [(0.0_f64, 0.013_f64), (0.5, 0.1), (1.2345, 0.0007), (2.999, 1.0)] {
            let mut got: Vec<(f64, String)> = Vec::new();
            let mut cursor = first;
            while cursor < 3.0 {
                let until = (cursor + step).min(3.0);
                got.extend(lines_after(&p, &st, cursor, until));
                cursor = until;
            }
            let expect: Vec<(f64, String)> = whole.iter().filter(|(t, _)| *t > first).cloned().collect();
            assert_eq!(got, expect, "cursor from {first} by {step}");
        }
        // Not capped like the tail: 3 s at 1000/s = 3000 numbered lines after 0.
        assert_eq!(numbered(&lines_after(&p, &st, 0.0, 3.0)).len(), 3000);
        // The tail keeps the newest numbered lines only.
        let long = numbered(&lines(&p, &st, 60.0));
        assert_eq!(long.len() as u64, MAX_PERIODIC_LINES);
        assert_eq!(long.last().unwrap().0, 60_000);
    }

    #[test]
    fn training_logs_from_a_cursor_match_the_whole_log() {
        use super::super::pod::{PodRun, Role};
        let mut p = rated("1.5", false);
        p.run = Some(PodRun::Training {
            job: "j".into(),
            role: Role::Rank,
            resumed_step: 4,
            total_steps: 200,
            offset: 5.0,
            restarts: vec![(333.3, "NCCL timeout".into()), (700.0, "ECC error".into())],
            killed: None,
        });
        for finished in [None, Some(1500.0), Some(1999.0)] {
            let st = state(Some(100.0), finished);
            let whole = lines_after(&p, &st, f64::NEG_INFINITY, 2000.0);
            assert!(whole.len() < 5000, "under the tail cap");
            assert!(whole.iter().any(|(_, l)| l.contains("restart 2")));
            for after in [0.0, 100.0, 250.5, 433.3, 700.0, 1234.0, 1600.0, 1999.5] {
                let expect: Vec<(f64, String)> = whole.iter().filter(|(t, _)| *t > after).cloned().collect();
                let tail = lines_after(&p, &st, after, 2000.0);
                assert_eq!(tail.len(), expect.len(), "after {after}, finished {finished:?}");
                assert_eq!(tail, expect, "after {after}, finished {finished:?}");
            }
        }
    }

    #[test]
    fn numbered_lines_stop_when_the_container_ends() {
        let mut p = rated("10", false);
        p.batch_run = Some(5.0);
        let l = lines(&p, &state(Some(0.0), Some(5.0)), 100.0);
        assert_eq!(numbered(&l).last().unwrap().0, 50);
        assert!(l.iter().any(|(t, s)| *t == 5.0 && s == "Training complete: 0 steps in 5s; checkpoint saved"));
        assert_eq!(parse_rate_line("[rank0]: sim-log line 7 t=1.500000"), Some((7, 1.5)));
        assert_eq!(parse_rate_line("sim-log line x t=1"), None);
    }

    #[test]
    fn failing_pods_log_their_reason() {
        let l = lines(&pod(Some(20.0), Some("CUDA out of memory")), &state(Some(0.0), Some(20.0)), 50.0);
        assert_eq!(l[l.len() - 2].1, "RuntimeError: CUDA out of memory");
        let s = lines(&pod(None, Some("bad image")), &state(Some(0.0), None), 65.0);
        assert_eq!(s.iter().filter(|(_, x)| x.starts_with("Error: bad image")).count(), 2);
    }
}
