//! Retries of the read-only provider calls an assessment makes (explicit diff, preflight)
//! before an operation is recorded.
//!
//! A throttled or transient read there used to fail the whole request (HTTP 502) although
//! nothing had been changed yet. [`Engine::submit_checked`](super::Engine::submit_checked) and
//! [`Engine::dry_run_checked`](super::Engine::dry_run_checked) run [`Workflow::assess`](super::Workflow::assess)
//! inside [`with_read_retries`]; every [`read`] inside it retries retryable errors
//! ([`ProviderErrorKind::is_retryable`](crate::provider::ProviderErrorKind::is_retryable)) with
//! the engine's retry backoff capped at [`READ_DELAY_CAP`] times its first delay (4 s at real
//! speed: an uncapped backoff let one unlucky read of a preflight that makes twenty spend the
//! whole budget), at most `max_retries` times in a row per call and within a wait
//! budget for the whole assessment ([`ReadRetries::budget`]: three times the longest retry
//! delay, 60 s at real speed), so a request under throttling answers late rather than never.
//! Outside an assessment (step executors: the engine retries those itself) [`read`] calls once.

use super::{Backoff, EngineConfig};
use crate::provider::ProviderError;
use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

/// The longest delay between two tries of one read, in first delays.
pub const READ_DELAY_CAP: u32 = 8;

/// The retry policy of the reads of one assessment, and the time it waited so far.
#[derive(Debug)]
pub struct ReadRetries {
    backoff: Backoff,
    max_retries: u32,
    budget: Duration,
    waited: Cell<Duration>,
}

impl ReadRetries {
    /// The engine's retry backoff (its longest delay capped at [`READ_DELAY_CAP`] times the
    /// first) and count; the total wait is capped by [`ReadRetries::budget`].
    pub fn new(config: &EngineConfig) -> Self {
        let cap = config.retry.initial * READ_DELAY_CAP;
        ReadRetries {
            backoff: Backoff { max: config.retry.max.min(cap), ..config.retry },
            max_retries: config.max_retries,
            budget: Self::budget(config),
            waited: Cell::new(Duration::ZERO),
        }
    }

    /// How long one assessment may wait in total between retries: three times the longest
    /// retry delay (60 s at real speed, scaled with the simulated cloud's speed).
    pub fn budget(config: &EngineConfig) -> Duration {
        config.retry.max * 3
    }

    /// Total time waited between retries so far.
    pub fn waited(&self) -> Duration {
        self.waited.get()
    }

    /// The delay before retry `n` (0-based), or `None` when the policy is exhausted.
    fn next_delay(&self, n: u32) -> Option<Duration> {
        if n >= self.max_retries {
            return None;
        }
        let delay = self.backoff.delay(n);
        let waited = self.waited.get() + delay;
        (waited <= self.budget).then(|| {
            self.waited.set(waited);
            delay
        })
    }
}

tokio::task_local! {
    static READS: ReadRetries;
}

/// Runs `fut` (an assessment) with `policy` for the [`read`] calls made inside it.
pub async fn with_read_retries<F: Future>(policy: ReadRetries, fut: F) -> F::Output {
    READS.scope(policy, fut).await
}

/// A read-only provider call: retried while it fails with a retryable error, under the policy
/// of the surrounding [`with_read_retries`]; called once outside one. `call` must be safe to
/// repeat (it reads).
pub async fn read<T, F, Fut>(mut call: F) -> Result<T, ProviderError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ProviderError>>,
{
    let mut n = 0;
    loop {
        match call().await {
            Err(e) if e.is_retryable() => {
                let delay = READS.try_with(|p| p.next_delay(n)).ok().flatten();
                let Some(delay) = delay else { return Err(e) };
                tracing::debug!(api = %e.api, retry = n + 1, ?delay, "retrying a throttled/transient read");
                tokio::time::sleep(delay).await;
                n += 1;
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ProviderErrorKind;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn failing(kind: ProviderErrorKind, times: u32, calls: &AtomicU32) -> Result<u32, ProviderError> {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        if n < times { Err(ProviderError::new("ec2:DescribeVpcs", kind, "Rate exceeded")) } else { Ok(n) }
    }

    fn config() -> EngineConfig {
        EngineConfig::scaled(1000.0)
    }

    #[tokio::test]
    async fn throttled_and_transient_reads_are_retried_inside_an_assessment() {
        for kind in [ProviderErrorKind::Throttled, ProviderErrorKind::Transient, ProviderErrorKind::Conflict] {
            let calls = AtomicU32::new(0);
            let got = with_read_retries(ReadRetries::new(&config()), read(|| async { failing(kind, 5, &calls) })).await;
            assert_eq!(got, Ok(5), "{kind:?}");
            assert_eq!(calls.load(Ordering::SeqCst), 6, "{kind:?}: 5 failures, then the answer");
        }
    }

    #[tokio::test]
    async fn permanent_errors_and_reads_outside_an_assessment_are_not_retried() {
        let calls = AtomicU32::new(0);
        let got = with_read_retries(
            ReadRetries::new(&config()),
            read(|| async { failing(ProviderErrorKind::AccessDenied, 1, &calls) }),
        )
        .await;
        assert_eq!(got.unwrap_err().kind, ProviderErrorKind::AccessDenied);
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let calls = AtomicU32::new(0);
        let got = read(|| async { failing(ProviderErrorKind::Throttled, 1, &calls) }).await;
        assert_eq!(got.unwrap_err().kind, ProviderErrorKind::Throttled, "a step's read: the engine retries steps");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn retries_stop_at_the_retry_count_and_at_the_wait_budget() {
        let config = config();
        let calls = AtomicU32::new(0);
        let got = with_read_retries(
            ReadRetries::new(&config),
            read(|| async { failing(ProviderErrorKind::Throttled, u32::MAX, &calls) }),
        )
        .await;
        assert_eq!(got.unwrap_err().kind, ProviderErrorKind::Throttled);
        let calls = calls.load(Ordering::SeqCst);
        assert!(calls > 1 && calls <= config.max_retries + 1, "{calls} calls");

        // The budget is shared by every read of one assessment.
        let policy = ReadRetries::new(&config);
        let budget = ReadRetries::budget(&config);
        let mut delays = Vec::new();
        for n in 0.. {
            match policy.next_delay(n % 4) {
                Some(d) => delays.push(d),
                None => break,
            }
        }
        let total: Duration = delays.iter().sum();
        assert!(total <= budget && total == policy.waited(), "{total:?} of {budget:?}");
        assert!(total + config.retry.delay(3) > budget, "stopped only when the next delay would exceed the budget");
    }
}
