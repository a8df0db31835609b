//! One upstream log follow per pod, shared by every WebSocket follower of that pod.
//!
//! The first follower of `(cluster, namespace, pod)` starts an upstream task that follows the
//! pod's log through [`KubeApi::logs`] (prefilled with the last [`RING_LINES`] lines), turns
//! every batch of ready lines into one pre-serialized frame (newline-delimited
//! `{"pod","line"}` documents) and broadcasts it. A follower joining later gets its `tail` from
//! the ring and then the broadcast, both taken under the same lock, so it sees every line once,
//! in order, without a gap. The ring is primed with the pod's whole tail before any follower
//! reads it: at least as many lines as a non-following read of the log (to its end) counted
//! when the follow began, so a tail is never cut by a slow upstream or a busy machine (a
//! reconnecting client matches its last lines against that tail). A follower that falls more than [`BACKLOG_FRAMES`] frames behind
//! gets an explicit `{"skipped": <frames>}` document instead of silently losing lines. The
//! upstream stops when its last follower leaves or the container ends (then every follower gets
//! the `{"end": true, "reason": …}` document). Each line is capped at
//! [`MAX_LOG_LINE_BYTES`](instantstart_core::log_lines::MAX_LOG_LINE_BYTES), so the ring holds
//! at most [`RING_LINES`] × that per pod.

use axum::extract::ws::Utf8Bytes;
use instantstart_core::provider::{KubeApi, KubeTarget, ProviderErrorKind};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast;

/// Lines kept for followers that join later (their `tail`).
pub const RING_LINES: usize = 5000;
/// Frames a follower may fall behind before it is told lines were skipped.
const BACKLOG_FRAMES: usize = 4096;
/// A frame carries the lines already available, up to about this size.
const MAX_FRAME_BYTES: usize = 64 * 1024;
/// The pod's earlier lines fill the ring until none arrives for [`PRIME_IDLE`], for at most
/// [`PRIME_MAX`]: an API answers a log's tail in chunks (HTTP body frames, the simulator's
/// batches), so "what is ready right now" would cut the tail after the first chunk and send the
/// rest as live frames — and a reconnecting follower matching its last lines against the tail
/// (the client's resume) would find a gap that is not there.
const PRIME_IDLE: Duration = Duration::from_millis(50);
const PRIME_MAX: Duration = Duration::from_millis(500);
/// How long the ring waits for the lines a non-following read counted ([`PRIME_IDLE`] only
/// ends the priming after those arrived).
const PRIME_COUNTED_MAX: Duration = Duration::from_secs(10);
/// How often the upstream retries while the container has not started, and for how long.
const START_RETRY: Duration = Duration::from_secs(1);
const START_TIMEOUT: Duration = Duration::from_secs(600);

type Key = (String, String, String);

/// What a follower receives from the hub.
pub enum Frame {
    /// Newline-delimited JSON documents, ready to send as one text frame; every follower sends
    /// the same bytes (a clone is a reference count, not a copy).
    Text(Utf8Bytes),
    /// The last frame: `{"end": true, "reason": …}`.
    End(Arc<str>),
}

struct Upstream {
    /// The last lines, each already serialized as a `{"pod","line"}` document.
    ring: VecDeque<Arc<str>>,
    tx: broadcast::Sender<Arc<Frame>>,
    ended: Option<Arc<str>>,
    /// True once the pod's earlier lines are in the ring (only later ones are broadcast).
    primed: tokio::sync::watch::Sender<bool>,
    /// Followers waiting for `primed` (they hold no receiver yet but keep the upstream alive).
    waiting: usize,
}

/// Decrements `waiting` when a waiting follower subscribes or gives up.
struct Waiting(Arc<Mutex<Upstream>>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).waiting -= 1;
    }
}

/// The shared upstreams of the server (one per followed pod).
#[derive(Default)]
pub struct LogHub {
    upstreams: Mutex<HashMap<Key, Arc<Mutex<Upstream>>>>,
}

/// A follower's view: its tail, then the shared frames.
pub struct Subscription {
    /// The last `tail` lines (newline-delimited documents), if any.
    pub tail: Option<String>,
    /// Set when the upstream had already ended.
    pub ended: Option<Arc<str>>,
    pub frames: broadcast::Receiver<Arc<Frame>>,
}

fn end_doc(reason: &str) -> Arc<str> {
    Arc::from(json!({ "end": true, "reason": reason }).to_string())
}

impl LogHub {
    /// Subscribes to the pod's log, starting the upstream follow if this is the first follower;
    /// waits until the upstream has read the pod's earlier lines (its `tail` comes from them).
    pub async fn subscribe(
        self: &Arc<Self>,
        kube: Arc<dyn KubeApi>,
        target: KubeTarget,
        namespace: String,
        pod: String,
        tail: u32,
    ) -> Subscription {
        // Followers share an upstream only when they act as the same identity (each identity's
        // follow is authorized by the cluster's RBAC).
        let who = target.identity.as_ref().map(|i| format!("@{}#{}", i.user, i.groups.join(","))).unwrap_or_default();
        let key: Key = (format!("{}/{}{who}", target.region, target.eks_cluster), namespace.clone(), pod.clone());
        let (upstream, fresh, mut primed) = {
            let mut map = self.upstreams.lock().unwrap_or_else(|p| p.into_inner());
            let (upstream, fresh) = match map.get(&key) {
                Some(u) => (u.clone(), false),
                None => {
                    let (tx, _) = broadcast::channel(BACKLOG_FRAMES);
                    let (primed, _) = tokio::sync::watch::channel(false);
                    let u =
                        Arc::new(Mutex::new(Upstream { ring: VecDeque::new(), tx, ended: None, primed, waiting: 0 }));
                    map.insert(key.clone(), u.clone());
                    (u, true)
                }
            };
            let mut g = upstream.lock().unwrap_or_else(|p| p.into_inner());
            g.waiting += 1;
            let primed = g.primed.subscribe();
            drop(g);
            (upstream, fresh, primed)
        };
        let waiting = Waiting(upstream.clone());
        if fresh {
            let hub = self.clone();
            let u = upstream.clone();
            tokio::spawn(async move { hub.follow(kube, target, key, u).await });
        }
        let _ = primed.wait_for(|p| *p).await;
        let u = upstream.lock().unwrap_or_else(|p| p.into_inner());
        let n = (tail as usize).min(u.ring.len());
        let tail = (n > 0).then(|| {
            let mut text = String::new();
            for doc in u.ring.iter().skip(u.ring.len() - n) {
                text.push_str(doc);
                text.push('\n');
            }
            text
        });
        let sub = Subscription { tail, ended: u.ended.clone(), frames: u.tx.subscribe() };
        drop(u);
        drop(waiting);
        sub
    }

    /// Drops the upstream if nobody follows or waits (checked under the hub's lock, so a
    /// follower subscribing at the same time either keeps it or starts a new one).
    fn remove_if_idle(&self, key: &Key, upstream: &Arc<Mutex<Upstream>>) -> bool {
        let mut map = self.upstreams.lock().unwrap_or_else(|p| p.into_inner());
        let u = upstream.lock().unwrap_or_else(|p| p.into_inner());
        if u.tx.receiver_count() > 0 || u.waiting > 0 {
            return false;
        }
        if map.get(key).is_some_and(|x| Arc::ptr_eq(x, upstream)) {
            map.remove(key);
        }
        true
    }

    fn remove(&self, key: &Key, upstream: &Arc<Mutex<Upstream>>) {
        let mut map = self.upstreams.lock().unwrap_or_else(|p| p.into_inner());
        if map.get(key).is_some_and(|u| Arc::ptr_eq(u, upstream)) {
            map.remove(key);
        }
    }

    /// Ends the upstream: every follower gets the end document.
    fn finish(&self, key: &Key, upstream: &Arc<Mutex<Upstream>>, reason: &str) {
        // Removed first: a follower arriving now starts a fresh upstream instead of joining one
        // that is over.
        self.remove(key, upstream);
        let mut u = upstream.lock().unwrap_or_else(|p| p.into_inner());
        let doc = end_doc(reason);
        u.ended = Some(doc.clone());
        let _ = u.tx.send(Arc::new(Frame::End(doc)));
        u.primed.send_replace(true);
    }

    async fn follow(self: Arc<Self>, kube: Arc<dyn KubeApi>, target: KubeTarget, key: Key, u: Arc<Mutex<Upstream>>) {
        use futures::{FutureExt, StreamExt};
        let (_, namespace, pod) = &key;
        let started = tokio::time::Instant::now();
        let mut lines = loop {
            match kube.logs(&target, namespace, pod, true, Some(RING_LINES as u32)).await {
                Ok(stream) => break stream,
                // The container has not started yet: wait for it while someone follows.
                Err(e) if e.kind == ProviderErrorKind::InvalidRequest && started.elapsed() < START_TIMEOUT => {
                    tokio::time::sleep(START_RETRY).await;
                    if self.remove_if_idle(&key, &u) {
                        return;
                    }
                }
                Err(e) => return self.finish(&key, &u, &format!("error: {}", e.message)),
            }
        };
        // The log as it is now, read to its end: the follow's first lines are its tail at least.
        let counted = match kube.logs(&target, namespace, pod, false, Some(RING_LINES as u32)).await {
            Ok(snapshot) => snapshot.count().await,
            Err(_) => 0,
        };
        let pod_json = Value::String(pod.clone()).to_string();
        // Every line is capped (whatever the KubeApi), so the ring's memory is bounded.
        let doc = |line: &str| -> Arc<str> {
            let line = instantstart_core::log_lines::cap_log_line(line.to_string());
            Arc::from(format!("{{\"pod\":{pod_json},\"line\":{}}}", Value::String(line)))
        };
        // The pod's earlier lines fill the ring unbroadcast: the `counted` ones however slowly
        // they come (at most PRIME_COUNTED_MAX), then what follows without a pause of
        // PRIME_IDLE (at most PRIME_MAX in all).
        {
            let mut early = Vec::new();
            let mut last = None;
            let start = tokio::time::Instant::now();
            while early.len() < RING_LINES {
                let now = tokio::time::Instant::now();
                let wait = if early.len() < counted {
                    (start + PRIME_COUNTED_MAX).saturating_duration_since(now)
                } else {
                    PRIME_IDLE.min((start + PRIME_MAX).saturating_duration_since(now))
                };
                match tokio::time::timeout(wait, lines.next()).await {
                    Ok(Some(Ok(line))) => early.push(doc(&line)),
                    Ok(other) => {
                        last = Some(other);
                        break;
                    }
                    Err(_) => break,
                }
            }
            {
                let mut g = u.lock().unwrap_or_else(|p| p.into_inner());
                g.ring.extend(early);
                g.primed.send_replace(true);
            }
            match last {
                Some(Some(Err(e))) => return self.finish(&key, &u, &format!("error: {}", e.message)),
                Some(None) => return self.finish(&key, &u, &format!("pod {pod}: the container ended")),
                _ => {}
            }
        }
        loop {
            let first = match lines.next().await {
                Some(Ok(line)) => line,
                Some(Err(e)) => return self.finish(&key, &u, &format!("error: {}", e.message)),
                None => return self.finish(&key, &u, &format!("pod {pod}: the container ended")),
            };
            let mut docs = vec![doc(&first)];
            let mut size = docs[0].len();
            let mut last = None;
            while size < MAX_FRAME_BYTES {
                match lines.next().now_or_never() {
                    Some(Some(Ok(line))) => {
                        let d = doc(&line);
                        size += d.len() + 1;
                        docs.push(d);
                    }
                    Some(other) => {
                        last = Some(other);
                        break;
                    }
                    None => break,
                }
            }
            let mut text = String::with_capacity(size + docs.len());
            for d in &docs {
                text.push_str(d);
                text.push('\n');
            }
            let alive = {
                let mut g = u.lock().unwrap_or_else(|p| p.into_inner());
                for d in docs {
                    if g.ring.len() == RING_LINES {
                        g.ring.pop_front();
                    }
                    g.ring.push_back(d);
                }
                // Sent under the lock: a follower subscribing now gets these lines either in
                // its tail or in the broadcast, never both, never neither.
                g.tx.send(Arc::new(Frame::Text(Utf8Bytes::from(text)))).is_ok()
            };
            match last {
                Some(Some(Err(e))) => return self.finish(&key, &u, &format!("error: {}", e.message)),
                Some(None) => return self.finish(&key, &u, &format!("pod {pod}: the container ended")),
                _ => {}
            }
            if !alive && self.remove_if_idle(&key, &u) {
                // Nobody follows any more.
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use futures::StreamExt;
    use instantstart_core::provider::{KubeObject, ListParams, LogStream, ObjectRef, ProviderError};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A pod's log of `lines` numbered lines: the first `written` already written (what a
    /// non-following read answers), every line delivered to a follow after `gap`, then the end
    /// (or, unless `ends`, nothing more). Counts follows.
    struct NumberedLog {
        lines: usize,
        written: usize,
        gap: Duration,
        ends: bool,
        follows: AtomicUsize,
    }

    impl NumberedLog {
        fn new(lines: usize, written: usize, gap: Duration, ends: bool) -> Self {
            NumberedLog { lines, written, gap, ends, follows: AtomicUsize::new(0) }
        }
    }

    #[async_trait]
    impl KubeApi for NumberedLog {
        async fn apply(&self, _: &KubeTarget, o: &KubeObject) -> Result<KubeObject, ProviderError> {
            Ok(o.clone())
        }
        async fn get(&self, _: &KubeTarget, _: &ObjectRef) -> Result<Option<KubeObject>, ProviderError> {
            Ok(None)
        }
        async fn list(&self, _: &KubeTarget, _: &ListParams) -> Result<Vec<KubeObject>, ProviderError> {
            Ok(Vec::new())
        }
        async fn delete(&self, _: &KubeTarget, _: &ObjectRef) -> Result<(), ProviderError> {
            Ok(())
        }
        async fn logs(
            &self,
            _: &KubeTarget,
            _: &str,
            _: &str,
            follow: bool,
            _: Option<u32>,
        ) -> Result<LogStream, ProviderError> {
            if !follow {
                return Ok(futures::stream::iter((0..self.written).map(|i| Ok(format!("line {i}")))).boxed());
            }
            self.follows.fetch_add(1, Ordering::SeqCst);
            let gap = self.gap;
            let lines = futures::stream::iter(0..self.lines).then(move |i| async move {
                tokio::time::sleep(gap).await;
                Ok(format!("line {i}"))
            });
            Ok(if self.ends { lines.boxed() } else { lines.chain(futures::stream::pending()).boxed() })
        }
    }

    async fn collect(mut sub: Subscription) -> (Vec<String>, Option<String>) {
        let mut got = Vec::new();
        let mut push = |text: &str| {
            for doc in text.lines() {
                let v: Value = serde_json::from_str(doc).unwrap();
                got.push(v["line"].as_str().unwrap().to_string());
            }
        };
        if let Some(t) = &sub.tail {
            push(t);
        }
        loop {
            match sub.frames.recv().await {
                Ok(f) => match f.as_ref() {
                    Frame::Text(t) => push(t.as_str()),
                    Frame::End(e) => return (got, Some(e.to_string())),
                },
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// The first follower's tail is the whole log written so far, however slowly the follow
    /// delivers it: a tail cut at a pause would make a reconnecting client show lines twice.
    #[tokio::test]
    async fn the_tail_holds_every_line_written_before_the_follow_however_slowly_it_comes() {
        let kube = Arc::new(NumberedLog::new(6, 6, PRIME_IDLE * 3, false));
        let hub = Arc::new(LogHub::default());
        let sub = hub.subscribe(kube, KubeTarget::new("r", "c"), "ns".into(), "pod-0".into(), 100).await;
        let tail: Vec<String> = sub
            .tail
            .unwrap_or_default()
            .lines()
            .map(|d| serde_json::from_str::<Value>(d).unwrap()["line"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(tail, (0..6).map(|i| format!("line {i}")).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn followers_share_one_upstream_and_late_ones_get_their_tail_without_gaps() {
        let kube = Arc::new(NumberedLog::new(200, 0, Duration::from_millis(5), true));
        let hub = Arc::new(LogHub::default());
        let target = KubeTarget::new("r", "c");
        let subscribe = |tail| {
            let (hub, kube, target) = (hub.clone(), kube.clone(), target.clone());
            async move { hub.subscribe(kube, target, "ns".into(), "pod-0".into(), tail).await }
        };
        let mut early = Vec::new();
        // Early followers ask for everything the ring has: every line once, from the first.
        for _ in 0..10 {
            early.push(tokio::spawn(collect(subscribe(RING_LINES as u32).await)));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let late = tokio::spawn(collect(subscribe(20).await));
        for f in early {
            let (lines, end) = f.await.unwrap();
            assert_eq!(lines, (0..200).map(|i| format!("line {i}")).collect::<Vec<_>>());
            assert!(end.unwrap().contains("the container ended"));
        }
        let (lines, _) = late.await.unwrap();
        // Its tail then the live lines: consecutive, no line twice, up to the last.
        let first: usize = lines[0].trim_start_matches("line ").parse().unwrap();
        assert_eq!(lines, (first..200).map(|i| format!("line {i}")).collect::<Vec<_>>());
        assert!(lines.len() > 20, "the tail plus the live lines: {}", lines.len());
        assert_eq!(kube.follows.load(Ordering::SeqCst), 1, "one upstream follow for 11 followers");
        assert!(hub.upstreams.lock().unwrap().is_empty(), "the ended upstream is dropped");
    }
}
