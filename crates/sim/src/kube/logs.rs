//! Simulated container logs. A pod's log is a pure function of the pod and its state: a few
//! startup lines when the container starts, then periodic lines while it runs (training steps
//! for batch pods, health checks for servers, errors for failing ones) and a last line when it
//! ends. Every reader therefore sees the same log, across calls and restarts.

use super::workload::{PodState, PodView};

/// At most this many periodic lines are returned (the newest), like a rotated container log.
const MAX_PERIODIC_LINES: u64 = 5000;

/// Lines at fixed offsets from the container start.
type Header = Vec<(f64, String)>;
/// The `k`-th periodic line.
type Periodic = Box<dyn Fn(u64) -> String>;

/// Log lines with their simulated times, up to `until`.
pub(crate) fn lines(pod: &PodView, st: &PodState, until: f64) -> Vec<(f64, String)> {
    if let Some(run) = &pod.run {
        return super::training::log_lines(pod, run, st, until);
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
        if start + dt <= until && start + dt <= end {
            out.push((start + dt, line));
        }
    }
    let last_t = until.min(end);
    if last_t >= start + period {
        let k_max = ((last_t - start) / period).floor() as u64;
        let k_min = k_max.saturating_sub(MAX_PERIODIC_LINES - 1).max(1);
        for k in k_min..=k_max {
            let t = start + k as f64 * period;
            if t <= end {
                out.push((t, periodic(k)));
            }
        }
    }
    if let (Some(run), true) = (pod.batch_run, end <= until) {
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

    #[test]
    fn failing_pods_log_their_reason() {
        let l = lines(&pod(Some(20.0), Some("CUDA out of memory")), &state(Some(0.0), Some(20.0)), 50.0);
        assert_eq!(l[l.len() - 2].1, "RuntimeError: CUDA out of memory");
        let s = lines(&pod(None, Some("bad image")), &state(Some(0.0), None), 65.0);
        assert_eq!(s.iter().filter(|(_, x)| x.starts_with("Error: bad image")).count(), 2);
    }
}
