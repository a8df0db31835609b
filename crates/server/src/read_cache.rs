//! Responses of the hottest reads, kept while the store is unchanged.
//!
//! The UI, `--watch` and agents re-read one cluster, one operation and the first pages of the
//! lists every one to three seconds, and almost every re-read finds the store as the last one
//! did. Reading the rows again, decoding their JSON columns and serializing the same document
//! was most of the cost of such a read (docs/benchmarks.md, "Cheap reads"): this cache keeps
//! the tagged `200` of `GET /api/clusters`, `/api/clusters/{cluster}`, `/api/operations` and
//! `/api/operations/{id}` under its request URI and serves it again while the store's
//! [`generation`](instantstart_core::store::Store::generation) is the same.
//!
//! # Guarantees
//!
//! - **Never older than the store:** an entry is served only while the store's generation is
//!   the one read *before* the response was built, so any write by this process, or by another
//!   process on the same database, retires every entry. A store that cannot tell
//!   (PostgreSQL shared by replicas: generation `None`) caches nothing.
//! - **Live state:** a cluster's live EKS/HyperPod part changes without a store write; its
//!   entry lives at most [`LIVE_ENTRY_TTL`] on top of the live read's own sharing
//!   (`core::api::live`), so what a page shows is at most `LIVE_READ_TTL + LIVE_ENTRY_TTL` old.
//! - **Same answer:** the cached response is the one the handler gave (status `200`, its
//!   headers, `ETag` included), answered `304` when `If-None-Match` names its tag, as
//!   `crate::conditional` does. Only the four routes above, whose answer does not depend on
//!   who asks (authentication and scope are checked before the cache), are kept.
//! - **Bounded:** at most [`MAX_ENTRIES`] entries and [`MAX_BYTES`] of bodies; entries of an
//!   older generation are dropped first, then everything.

use crate::AppState;
use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a cluster's cached detail may be served (its live part is not in the store).
pub const LIVE_ENTRY_TTL: Duration = Duration::from_millis(500);

/// Entries kept at most.
pub const MAX_ENTRIES: usize = 512;

/// Body bytes kept at most (a body larger than a quarter of it is not kept).
pub const MAX_BYTES: usize = 16 * 1024 * 1024;

/// The cached routes (axum route templates) and how long an entry may live besides the
/// generation (`None`: as long as the store is unchanged).
const ROUTES: [(&str, Option<Duration>); 4] = [
    ("/api/clusters", None),
    ("/api/clusters/{cluster}", Some(LIVE_ENTRY_TTL)),
    ("/api/operations", None),
    ("/api/operations/{id}", None),
];

struct Entry {
    generation: u64,
    at: Instant,
    headers: HeaderMap,
    body: Bytes,
}

/// The cache ([`crate::AppInner::read_cache`]).
pub struct ReadCache {
    enabled: bool,
    entries: Mutex<(HashMap<String, Entry>, usize)>,
}

/// The environment variable that turns the cache off (`off`): to measure what a read costs
/// when the store has just changed (docs/benchmarks.md).
pub const DISABLE_ENV: &str = "INSTANTSTART_READ_CACHE";

impl Default for ReadCache {
    fn default() -> Self {
        ReadCache::new(true)
    }
}

impl ReadCache {
    pub fn new(enabled: bool) -> Self {
        ReadCache { enabled, entries: Mutex::new((HashMap::new(), 0)) }
    }

    /// On unless [`DISABLE_ENV`] is `off`.
    pub fn from_env() -> Self {
        ReadCache::new(std::env::var(DISABLE_ENV).as_deref() != Ok("off"))
    }

    fn get(&self, key: &str, generation: u64, ttl: Option<Duration>) -> Option<(HeaderMap, Bytes)> {
        let entries = self.entries.lock().expect("read cache lock");
        let e = entries.0.get(key)?;
        let fresh = e.generation == generation && ttl.is_none_or(|ttl| e.at.elapsed() < ttl);
        fresh.then(|| (e.headers.clone(), e.body.clone()))
    }

    fn put(&self, key: String, generation: u64, headers: HeaderMap, body: Bytes) {
        let mut guard = self.entries.lock().expect("read cache lock");
        let (map, bytes) = &mut *guard;
        if map.len() >= MAX_ENTRIES || *bytes + body.len() > MAX_BYTES {
            map.retain(|_, e| e.generation == generation);
            *bytes = map.values().map(|e| e.body.len()).sum();
            if map.len() >= MAX_ENTRIES || *bytes + body.len() > MAX_BYTES {
                map.clear();
                *bytes = 0;
            }
        }
        *bytes += body.len();
        if let Some(old) = map.insert(key, Entry { generation, at: Instant::now(), headers, body }) {
            *bytes -= old.body.len();
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.lock().expect("read cache lock").0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The middleware (inside authentication, outside `crate::conditional`).
pub async fn read_cache(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if request.method() != Method::GET || !state.read_cache.enabled {
        return next.run(request).await;
    }
    let route = request.extensions().get::<MatchedPath>().map(|p| p.as_str());
    let Some(&(_, ttl)) = ROUTES.iter().find(|(r, _)| Some(*r) == route) else {
        return next.run(request).await;
    };
    let Some(generation) = state.store.generation() else {
        return next.run(request).await;
    };
    let key = request.uri().path_and_query().map_or_else(|| request.uri().path().to_string(), |p| p.to_string());
    if let Some((headers, body)) = state.read_cache.get(&key, generation, ttl) {
        let tag = headers.get(header::ETAG).and_then(|t| t.to_str().ok());
        if tag.is_some_and(|t| crate::conditional::none_match(request.headers(), t)) {
            let mut not_modified = Response::new(Body::empty());
            *not_modified.status_mut() = StatusCode::NOT_MODIFIED;
            let h = not_modified.headers_mut();
            if let Some(tag) = headers.get(header::ETAG) {
                h.insert(header::ETAG, tag.clone());
            }
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            return not_modified;
        }
        let mut response = Response::new(Body::from(body));
        *response.headers_mut() = headers;
        return response;
    }
    let response = next.run(request).await;
    let small = axum::body::HttpBody::size_hint(response.body()).exact().is_some_and(|n| n as usize <= MAX_BYTES / 4);
    if response.status() != StatusCode::OK || !response.headers().contains_key(header::ETAG) || !small {
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BYTES / 4).await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "response body could not be read").into_response();
    };
    state.read_cache.put(key, generation, parts.headers.clone(), bytes.clone());
    Response::from_parts(parts, Body::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tagged(tag: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ETAG, HeaderValue::from_str(tag).unwrap());
        h
    }

    #[test]
    fn entries_serve_their_generation_within_their_ttl_and_stay_bounded() {
        let cache = ReadCache::default();
        cache.put("/a".into(), 1, tagged("\"1\""), Bytes::from_static(b"{}"));
        assert!(cache.get("/a", 1, None).is_some(), "same generation");
        assert!(cache.get("/a", 2, None).is_none(), "the store changed");
        assert!(cache.get("/b", 1, None).is_none(), "another URI");
        assert!(cache.get("/a", 1, Some(Duration::ZERO)).is_none(), "past its TTL");
        // A full cache drops the entries of older generations first, then everything.
        for i in 0..MAX_ENTRIES {
            cache.put(format!("/{i}"), 2, tagged("\"2\""), Bytes::from_static(b"{}"));
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
        cache.put("/new".into(), 3, tagged("\"3\""), Bytes::from_static(b"{}"));
        assert_eq!(cache.len(), 1, "every older entry dropped");
        let big = Bytes::from(vec![b' '; MAX_BYTES / 4]);
        for i in 0..5 {
            cache.put(format!("/big{i}"), 3, tagged("\"b\""), big.clone());
        }
        let bytes: usize = cache.entries.lock().unwrap().0.values().map(|e| e.body.len()).sum();
        assert!(bytes <= MAX_BYTES, "{bytes}");
        assert_eq!(cache.entries.lock().unwrap().1, bytes, "the byte count follows the entries");
    }
}
