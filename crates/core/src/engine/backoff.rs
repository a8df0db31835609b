//! Adaptive backoff for polling and for retrying throttled or transient provider calls, and
//! the engine's timing configuration (including the lease TTL).

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Poll fast at first, then slower for long waits: `initial * factor^n`, capped at `max`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
    pub factor: f64,
}

impl Backoff {
    /// Delay before attempt `n` (0-based).
    pub fn delay(&self, n: u32) -> Duration {
        let scaled = self.initial.as_secs_f64() * self.factor.powi(n.min(64) as i32);
        Duration::from_secs_f64(scaled.min(self.max.as_secs_f64()))
    }

    /// The same policy with every duration divided by `speed` (for the simulated cloud).
    pub fn scaled(&self, speed: f64) -> Backoff {
        let speed = speed.max(1.0);
        Backoff { initial: self.initial.div_f64(speed), max: self.max.div_f64(speed), factor: self.factor }
    }
}

/// Engine timing: how to poll, and how to retry retryable provider errors.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EngineConfig {
    /// Between status checks of a submitted resource.
    pub poll: Backoff,
    /// Between retries of a throttled/transient call.
    pub retry: Backoff,
    /// Retries of retryable errors before a step fails: in a row while polling, and per
    /// provider API (at most four times as many in all) while submitting.
    pub max_retries: u32,
    /// How long a replica's lease on an operation lasts unless renewed (renewed every
    /// quarter of it): after a replica dies, another takes its operations over within about
    /// this long. Not scaled by the simulator's speed.
    pub lease_ttl: Duration,
}

/// The default [`EngineConfig::lease_ttl`].
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(15);

impl Default for EngineConfig {
    /// Real-cloud defaults: first poll after 2 s, settling at 30 s; up to 24 retries in a row (each observes first; the retry delay caps at 20 s).
    fn default() -> Self {
        EngineConfig {
            poll: Backoff { initial: Duration::from_secs(2), max: Duration::from_secs(30), factor: 1.5 },
            retry: Backoff { initial: Duration::from_millis(500), max: Duration::from_secs(20), factor: 2.0 },
            max_retries: 24,
            lease_ttl: DEFAULT_LEASE_TTL,
        }
    }
}

impl EngineConfig {
    /// Defaults with every duration divided by `speed` (simulated cloud running faster).
    pub fn scaled(speed: f64) -> Self {
        let d = Self::default();
        EngineConfig { poll: d.poll.scaled(speed), retry: d.retry.scaled(speed), ..d }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_then_caps() {
        let b = Backoff { initial: Duration::from_secs(2), max: Duration::from_secs(30), factor: 2.0 };
        let d: Vec<u64> = (0..6).map(|n| b.delay(n).as_secs()).collect();
        assert_eq!(d, [2, 4, 8, 16, 30, 30]);
        assert_eq!(b.scaled(1000.0).delay(0), Duration::from_millis(2));
    }
}
