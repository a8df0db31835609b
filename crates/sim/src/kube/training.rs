//! Simulated training: the loss/throughput curve every simulated training job follows, and the
//! log line that reports it.
//!
//! The curve is a pure function of the job name and the step, so the container logs, the
//! simulated MLflow runs and the tests all see the same numbers: a loss that decays from
//! about 2.2–3.2 towards a floor of 0.35–0.65 with a little per-step noise, and a throughput
//! (tokens per second, the whole job) that warms up over the first steps and then jitters
//! around a per-job base. One step is logged every [`TRAINING_STEP_SECONDS`] of training time.

use crate::world::stable_hash;

/// Simulated seconds of training per logged step.
pub const TRAINING_STEP_SECONDS: f64 = 10.0;

/// A uniform number in [0, 1) from a hash.
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// `(loss, throughput in tokens/s)` of training job `job` at `step` (steps count from 1; step 0
/// is the untrained model). Rounded as the log prints them (4 and 1 decimals).
pub fn training_curve(job: &str, step: u64) -> (f64, f64) {
    let h = stable_hash(&["training-curve", job]);
    let start = 2.2 + unit(h);
    let floor = 0.35 + 0.3 * unit(stable_hash(&["floor", job]));
    let tau = 30.0 + 90.0 * unit(stable_hash(&["tau", job]));
    let n = unit(stable_hash(&[job, &step.to_string()])) - 0.5;
    let s = step as f64;
    let loss = floor + (start - floor) / (1.0 + s / tau).powf(0.9) * (1.0 + 0.03 * n);
    let base = 6000.0 + 8000.0 * unit(stable_hash(&["throughput", job]));
    let warmup = 0.55 + 0.45 * (s.min(5.0) / 5.0);
    let jitter = 1.0 + 0.04 * (unit(stable_hash(&["jitter", job, &step.to_string()])) - 0.5);
    let throughput = base * warmup * jitter;
    ((loss * 1e4).round() / 1e4, (throughput * 10.0).round() / 10.0)
}

/// The log line of `step`: `step 12 | loss 1.2345 | lr 2.00e-05 | 9123.4 tokens/s`.
pub fn training_log_line(job: &str, step: u64) -> String {
    let (loss, throughput) = training_curve(job, step);
    format!("step {step} | loss {loss:.4} | lr 2.00e-05 | {throughput:.1} tokens/s")
}

/// `(step, loss, throughput)` of a line written by [`training_log_line`] (anywhere in the line,
/// so prefixes such as `[rank0]:` are fine).
pub fn parse_training_log_line(line: &str) -> Option<(u64, f64, f64)> {
    let rest = &line[line.find("step ")? + 5..];
    let mut parts = rest.split(" | ");
    let step = parts.next()?.trim().parse().ok()?;
    let loss = parts.next()?.strip_prefix("loss ")?.trim().parse().ok()?;
    let _lr = parts.next()?;
    let throughput = parts.next()?.strip_suffix(" tokens/s")?.trim().parse().ok()?;
    Some((step, loss, throughput))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_curve_is_deterministic_and_decreasing_on_average() {
        assert_eq!(training_curve("job-a", 7), training_curve("job-a", 7));
        assert_ne!(training_curve("job-a", 7), training_curve("job-b", 7));
        let (l1, t1) = training_curve("job-a", 1);
        let (l100, t100) = training_curve("job-a", 100);
        let (l1000, _) = training_curve("job-a", 1000);
        assert!(l1 > l100 && l100 > l1000, "{l1} {l100} {l1000}");
        assert!((2.0..3.4).contains(&l1) && (0.3..0.9).contains(&l1000), "{l1} {l1000}");
        assert!(t100 > t1, "warm-up: {t1} → {t100}");
        assert!((5000.0..15000.0).contains(&t100), "{t100}");
    }

    #[test]
    fn log_lines_parse_back() {
        let line = training_log_line("verl-grpo", 42);
        let (loss, throughput) = training_curve("verl-grpo", 42);
        assert_eq!(parse_training_log_line(&line), Some((42, loss, throughput)));
        assert_eq!(parse_training_log_line(&format!("[rank0]: {line}")), Some((42, loss, throughput)));
        assert_eq!(parse_training_log_line("Starting img"), None);
    }
}
