//! Live provider reads shared by concurrent readers for a short time.
//!
//! A page that shows a cluster re-reads it every one to three seconds, and every open tab,
//! CLI `--watch` and agent does the same. Without sharing, each read of one cluster costs three
//! provider calls (EKS `DescribeCluster`, SageMaker `DescribeCluster` and `ListClusterNodes`),
//! which on AWS is both the slowest part of the request and a share of the account's API rate.
//!
//! # Guarantees
//!
//! - **Single flight:** concurrent readers of one key wait for one load; at most one load per
//!   key is in flight at a time.
//! - **Bounded staleness:** a loaded value is served for at most `ttl` after its load finished;
//!   the next reader after that loads again. A failed load is not kept: a reader that was
//!   waiting for it, or the next one, loads again.
//! - **Bounded memory:** entries older than `ttl` are dropped whenever a load starts, so the
//!   cache holds at most the keys read within the last `ttl`.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::OnceCell;
use tokio::time::Instant;

/// How long a live read of a cluster is shared: shorter than the UI's fastest re-read (1 s)
/// would share nothing between tabs; much longer would show a change late.
pub const LIVE_READ_TTL: Duration = Duration::from_secs(2);

struct Slot<V> {
    cell: OnceCell<(Instant, V)>,
}

/// A single-flight cache of live reads, by key.
pub struct LiveReads<K, V> {
    ttl: Duration,
    slots: Mutex<HashMap<K, Arc<Slot<V>>>>,
}

impl<K: Eq + Hash + Clone, V: Clone> LiveReads<K, V> {
    pub fn new(ttl: Duration) -> Self {
        LiveReads { ttl, slots: Mutex::new(HashMap::new()) }
    }

    /// The value of `key`: shared from a load that finished within `ttl` or is in flight, or
    /// loaded now with `load`.
    pub async fn get<E, F, Fut>(&self, key: &K, load: F) -> Result<V, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
    {
        let slot = {
            let mut slots = self.slots.lock().expect("live reads lock");
            let now = Instant::now();
            let fresh = |s: &Slot<V>| s.cell.get().is_none_or(|(at, _)| now.duration_since(*at) < self.ttl);
            match slots.get(key) {
                Some(s) if fresh(s) => s.clone(),
                _ => {
                    slots.retain(|_, s| fresh(s));
                    let s = Arc::new(Slot { cell: OnceCell::new() });
                    slots.insert(key.clone(), s.clone());
                    s
                }
            }
        };
        let (_, value) = slot.cell.get_or_try_init(|| async { Ok((Instant::now(), load().await?)) }).await?;
        Ok(value.clone())
    }

    /// Forgets `key`, so the next read loads (after a change the caller made itself).
    pub fn forget(&self, key: &K) {
        self.slots.lock().expect("live reads lock").remove(key);
    }

    /// Keys held (fresh or in flight).
    pub fn len(&self) -> usize {
        self.slots.lock().expect("live reads lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn concurrent_readers_share_one_load_until_it_is_stale() {
        let cache = Arc::new(LiveReads::<String, u32>::new(Duration::from_secs(2)));
        let loads = Arc::new(AtomicU32::new(0));
        let read = |cache: Arc<LiveReads<String, u32>>, loads: Arc<AtomicU32>| async move {
            cache
                .get(&"demo".to_string(), || async {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Ok::<_, String>(loads.fetch_add(1, Ordering::SeqCst) + 1)
                })
                .await
        };
        // Ten readers at once: one load, ten answers from it.
        let answers = futures::future::join_all((0..10).map(|_| read(cache.clone(), loads.clone()))).await;
        assert!(answers.iter().all(|a| a == &Ok(1)), "{answers:?}");
        // Within the TTL: shared.
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert_eq!(read(cache.clone(), loads.clone()).await, Ok(1));
        // After it: loaded again.
        tokio::time::advance(Duration::from_millis(600)).await;
        assert_eq!(read(cache.clone(), loads.clone()).await, Ok(2));
        assert_eq!(loads.load(Ordering::SeqCst), 2);
        // Forgetting a key loads it at the next read.
        cache.forget(&"demo".to_string());
        assert_eq!(read(cache.clone(), loads.clone()).await, Ok(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_load_is_not_kept_and_stale_keys_are_dropped() {
        let cache = LiveReads::<&str, u32>::new(Duration::from_secs(2));
        assert_eq!(cache.get(&"a", || async { Err::<u32, _>("throttled") }).await, Err("throttled"));
        assert_eq!(cache.get(&"a", || async { Ok::<_, &str>(7) }).await, Ok(7));
        assert_eq!(cache.get(&"b", || async { Ok::<_, &str>(8) }).await, Ok(8));
        assert_eq!(cache.len(), 2);
        tokio::time::advance(Duration::from_secs(3)).await;
        // A load of `c` drops the stale `a` and `b`.
        assert_eq!(cache.get(&"c", || async { Ok::<_, &str>(9) }).await, Ok(9));
        assert_eq!(cache.len(), 1);
    }
}
