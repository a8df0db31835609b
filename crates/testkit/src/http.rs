//! Raw HTTP on a served bed, for tests of the REST API itself (status codes, headers, problem
//! documents, cookies, CSRF, host checks) where the typed client would hide what they assert:
//! a request goes through the server's own router ([`Bed::router`]), the same `app` the
//! loopback listener serves, without the socket.
//!
//! ```ignore
//! let app = Bed::temp().serve();
//! let r = app.send(Method::POST, "/api/clusters?dry_run=true", Some(body), &[]).await;
//! assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
//! ```

use crate::{Bed, TOKEN};
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use instantstart_core::operation::OperationId;
use serde_json::{Value, json};
use tower::ServiceExt;

/// A response: its status, its headers, and its body as JSON (a body that is not JSON is a
/// JSON string of its text).
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Bed {
    /// The server's router (what the loopback listener serves) of a served bed.
    ///
    /// # Panics
    /// When the bed was not built with [`crate::BedBuilder::serve`].
    pub fn router(&self) -> axum::Router {
        instantstart_server::app(self.state().clone())
    }

    /// Sends `req` as it is (no credentials added) through the server's router.
    pub async fn call(&self, req: Request<Body>) -> Reply {
        let resp = self.router().oneshot(req).await.expect("the router answers");
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.into_body().collect().await.expect("the response body").to_bytes();
        let body =
            serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
        Reply { status, headers, body }
    }

    /// `method uri` with the admin token ([`TOKEN`]), the JSON `body` if any, and the `extra`
    /// headers.
    pub async fn send(&self, method: Method, uri: &str, body: Option<Value>, extra: &[(&str, &str)]) -> Reply {
        let mut b = Request::builder().method(method).uri(uri).header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
        for (k, v) in extra {
            b = b.header(*k, *v);
        }
        let req = match body {
            Some(v) => b.header(header::CONTENT_TYPE, "application/json").body(Body::from(v.to_string())),
            None => b.body(Body::empty()),
        };
        self.call(req.expect("a request")).await
    }

    /// `GET uri` with the admin token.
    pub async fn get(&self, uri: &str) -> Reply {
        self.send(Method::GET, uri, None, &[]).await
    }

    /// Waits until operation `id` is no longer running ([`Bed::wait_done`]); the operation as
    /// the API renders it.
    pub async fn wait_op(&self, id: &str) -> Value {
        let op = self.wait_done(&OperationId(id.into())).await;
        serde_json::to_value(op).expect("an operation is JSON")
    }

    /// Sends the request `make` builds until `done` holds for the reply (simulated time runs
    /// meanwhile); that reply. `what` names the wait in the panic message.
    ///
    /// # Panics
    /// After the bed's timeout, with the last reply.
    pub async fn call_until(
        &self,
        what: &str,
        make: impl Fn() -> Request<Body>,
        done: impl Fn(&Reply) -> bool,
    ) -> Reply {
        let deadline = tokio::time::Instant::now() + self.config.timeout;
        loop {
            let r = self.call(make()).await;
            if done(&r) {
                return r;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!("{what}: not within {:?}; last answer {} {:#}", self.config.timeout, r.status, r.body);
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// Polls `GET uri` (admin token) until `done` holds for its body; that body.
    ///
    /// # Panics
    /// After the bed's timeout, with the last answer.
    pub async fn get_until(&self, uri: &str, done: impl Fn(&Value) -> bool) -> Value {
        let what = format!("GET {uri} to reach the expected state");
        self.call_until(&what, || admin(Method::GET, uri, None), |r| done(&r.body)).await.body
    }

    /// Logs in with `token` (`POST /api/login`); the `name=value` cookie pair and the CSRF token.
    pub async fn login(&self, token: &str) -> (String, String) {
        let req = Request::post("/api/login")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(json!({ "token": token }).to_string()))
            .expect("a request");
        let r = self.call(req).await;
        assert_eq!(r.status, StatusCode::OK, "login: {:?}", r.body);
        let cookie = r.headers[header::SET_COOKIE].to_str().expect("a cookie").split(';').next().unwrap_or("");
        (cookie.to_string(), r.body["csrf_token"].as_str().expect("a CSRF token").to_string())
    }
}

/// A request with the admin token ([`TOKEN`]) and the JSON `body` if any.
pub fn admin(method: Method, uri: &str, body: Option<Value>) -> Request<Body> {
    as_token(method, uri, TOKEN, body)
}

/// A request with `Authorization: Bearer <token>` (another token than the admin's) and the
/// JSON `body` if any.
pub fn as_token(method: Method, uri: &str, token: &str, body: Option<Value>) -> Request<Body> {
    let b = Request::builder().method(method).uri(uri).header(header::AUTHORIZATION, format!("Bearer {token}"));
    match body {
        Some(v) => b.header(header::CONTENT_TYPE, "application/json").body(Body::from(v.to_string())),
        None => b.body(Body::empty()),
    }
    .expect("a request")
}
