//! Conditional reads: a strong `ETag` on every successful JSON `GET` of the API, and `304 Not
//! Modified` when the request's `If-None-Match` names it.
//!
//! The UI re-reads clusters, operations, jobs and endpoints every one to three seconds while
//! something changes, and most re-reads find nothing new. With `Cache-Control: no-cache` a
//! browser keeps the body and revalidates each time (the page's `fetch` still sees `200` and
//! the body, from its cache), so an unchanged read costs a few hundred bytes instead of the
//! whole document. The CLI and agents may send `If-None-Match` themselves.
//!
//! # Guarantees
//!
//! - The tag is a function of the response body's bytes and its `Link` header, if any (a
//!   page's next link; length + std's 64-bit SipHash with fixed keys): two bodies that differ get different tags (up to hash collisions), the same body
//!   gets the same tag on every server of one version.
//! - Only `GET`/`HEAD` answers with status `200` and a JSON content type are tagged; errors,
//!   mutations, WebSocket upgrades and streams pass through untouched.
//! - `If-None-Match` is compared with the weak comparison RFC 9110 §13.1.2 prescribes (a `W/`
//!   prefix is ignored; `*` matches any tag); a match answers `304` with the tag and no body.
//! - [`DISABLE_ENV`]` = off` (read at start, meant for measurement only: `cargo xtask bench
//!   ui-traffic` compares a page's traffic with and without revalidation in one build) leaves
//!   every response untouched: no tag, no `304`, and so nothing for `crate::read_cache` to keep.

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::hash::{Hash, Hasher};

/// Largest body the middleware buffers to tag (larger ones pass through untagged).
const MAX_TAGGED_BYTES: usize = 32 * 1024 * 1024;

/// The strong entity tag of `body`.
pub fn entity_tag(body: &[u8]) -> String {
    // Fixed keys: the same tag in every process of one build.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut h);
    format!("\"{:x}-{:016x}\"", body.len(), h.finish())
}

/// Whether `If-None-Match` in `headers` matches `tag`.
pub fn none_match(headers: &HeaderMap, tag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').map(str::trim).any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == tag))
}

/// The environment variable that turns conditional reads off (`off`): to measure what a page
/// costs without them (docs/benchmarks.md, "UI traffic").
pub const DISABLE_ENV: &str = "INSTANTSTART_CONDITIONAL";

/// Whether responses are tagged and revalidated (the state of [`conditional_get`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switch {
    pub enabled: bool,
}

impl Default for Switch {
    fn default() -> Self {
        Switch { enabled: true }
    }
}

impl Switch {
    /// On unless [`DISABLE_ENV`] is `off`.
    pub fn from_env() -> Self {
        Switch { enabled: std::env::var(DISABLE_ENV).as_deref() != Ok("off") }
    }
}

/// The middleware: tags successful JSON reads and answers `304` to a matching revalidation
/// (nothing when `switch` is off).
pub async fn conditional_get(State(switch): State<Switch>, request: Request, next: Next) -> Response {
    if !switch.enabled || !matches!(*request.method(), Method::GET | Method::HEAD) {
        return next.run(request).await;
    }
    let headers = request.headers().clone();
    let response = next.run(request).await;
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if response.status() != StatusCode::OK || !json || response.headers().contains_key(header::ETAG) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = to_bytes(body, MAX_TAGGED_BYTES).await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "response body too large to tag").into_response();
    };
    // A page's `Link` (its next page) is part of what it says: fold it into the tag.
    let tag = match parts.headers.get(header::LINK) {
        Some(link) => entity_tag(&[&bytes[..], b"\nLink: ", link.as_bytes()].concat()),
        None => entity_tag(&bytes),
    };
    let value = HeaderValue::from_str(&tag).expect("a quoted hex tag is a valid header value");
    parts.headers.insert(header::ETAG, value.clone());
    parts.headers.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-cache"));
    if none_match(&headers, &tag) {
        let mut not_modified = Response::new(Body::empty());
        *not_modified.status_mut() = StatusCode::NOT_MODIFIED;
        let h = not_modified.headers_mut();
        h.insert(header::ETAG, value);
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        return not_modified;
    }
    Response::from_parts(parts, Body::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_follow_the_bytes_and_revalidation_compares_weakly() {
        let a = entity_tag(br#"{"a":1}"#);
        assert_eq!(a, entity_tag(br#"{"a":1}"#));
        assert_ne!(a, entity_tag(br#"{"a":2}"#));
        assert!(a.starts_with('"') && a.ends_with('"'));
        let cases: &[(&str, bool)] = &[
            (&a, true),
            (&format!("W/{a}"), true),
            (&format!("\"x\", {a}"), true),
            ("*", true),
            ("\"other\"", false),
            ("", false),
        ];
        for (header, matches) in cases {
            let mut h = HeaderMap::new();
            h.insert(header::IF_NONE_MATCH, HeaderValue::from_str(header).unwrap());
            assert_eq!(none_match(&h, &a), *matches, "If-None-Match: {header}");
        }
        assert!(!none_match(&HeaderMap::new(), &a));
    }

    /// (switch, If-None-Match sent with the body's tag, status, tagged)
    #[tokio::test]
    async fn the_switch_turns_tags_and_304s_off() {
        use tower::ServiceExt;
        let body = r#"{"a":1}"#;
        let tag = entity_tag(body.as_bytes());
        let cases =
            [(true, false, 200, true), (true, true, 304, true), (false, false, 200, false), (false, true, 200, false)];
        for (enabled, revalidate, status, tagged) in cases {
            let app = axum::Router::new()
                .route("/x", axum::routing::get(|| async { axum::Json(serde_json::json!({"a": 1})) }))
                .layer(axum::middleware::from_fn_with_state(Switch { enabled }, conditional_get));
            let mut request = Request::get("/x");
            if revalidate {
                request = request.header(header::IF_NONE_MATCH, &tag);
            }
            let response = app.oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
            let case = format!("enabled {enabled}, revalidate {revalidate}");
            assert_eq!(response.status().as_u16(), status, "{case}");
            assert_eq!(response.headers().contains_key(header::ETAG), tagged, "{case}");
            let bytes = to_bytes(response.into_body(), 1024).await.unwrap();
            assert_eq!(bytes.len(), if status == 304 { 0 } else { body.len() }, "{case}");
        }
    }
}
