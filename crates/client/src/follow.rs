//! Following an operation to a terminal status.
//!
//! [`Follower`] yields the operation each time it changes, ending after it yields a terminal
//! one (`succeeded`, `failed`, `needs_attention`, `cancelled`). It listens on the WebSocket
//! `GET /api/operations/stream?operation_id=…` (bearer token on the upgrade request; messages
//! `{"type":"operation","operation":{…}}` and `{"type":"heartbeat"}`), which sends a snapshot
//! first and then every phase change, so nothing is missed between connecting and listening.
//!
//! The follower first reads the operation once (`GET /api/operations/{id}`), so an unknown id
//! fails at once and a finished operation needs no stream. When the stream cannot be opened, drops, or goes quiet past the heartbeat timeout, the
//! follower polls `GET /api/operations/{id}` once and reconnects; after
//! [`FollowOptions::max_stream_failures`] consecutive failures it keeps polling. Transient
//! connection errors while polling are retried with backoff; authentication errors and an
//! unknown operation end the stream with the error. Updates are deduplicated, so a reconnect's
//! snapshot does not repeat an update already seen.

use crate::{Client, Error, FACE_HEADER, Problem};
use futures::{Stream, StreamExt};
use instantstart_core::operation::Operation;
use serde::Deserialize;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub(crate) type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How a [`Follower`] follows.
#[derive(Debug, Clone, PartialEq)]
pub struct FollowOptions {
    /// Use the WebSocket stream (otherwise poll only).
    pub websocket: bool,
    /// Interval between polls when not streaming.
    pub poll_interval: Duration,
    /// A stream silent for this long is considered dead (the server sends heartbeats every 15 s).
    pub heartbeat_timeout: Duration,
    /// Consecutive stream failures after which the follower only polls.
    pub max_stream_failures: u32,
    /// Consecutive connection errors while polling before giving up.
    pub max_poll_errors: u32,
}

impl Default for FollowOptions {
    fn default() -> Self {
        FollowOptions {
            websocket: true,
            poll_interval: Duration::from_secs(1),
            heartbeat_timeout: Duration::from_secs(45),
            max_stream_failures: 3,
            max_poll_errors: 10,
        }
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamMessage {
    Operation {
        operation: Box<Operation>,
    },
    Heartbeat,
    #[serde(other)]
    Unknown,
}

enum Turn {
    Update(Box<Operation>),
    Nothing,
    Fatal(Error),
}

/// Yields an operation's updates until it reaches a terminal status. See the module docs.
pub struct Follower {
    client: Client,
    id: String,
    opts: FollowOptions,
    socket: Option<Socket>,
    stream_failures: u32,
    poll_errors: u32,
    next_poll: Option<Instant>,
    last: Option<Operation>,
    done: bool,
    /// Whether the operation was read once with a GET (the stream does not report unknown ids).
    checked: bool,
}

impl Follower {
    pub(crate) fn new(client: Client, id: String, opts: FollowOptions) -> Follower {
        Follower {
            client,
            id,
            opts,
            socket: None,
            stream_failures: 0,
            poll_errors: 0,
            next_poll: None,
            last: None,
            done: false,
            checked: false,
        }
    }

    /// The latest state seen.
    pub fn last(&self) -> Option<&Operation> {
        self.last.as_ref()
    }

    /// Whether updates currently come from the WebSocket stream (rather than polling).
    pub fn streaming(&self) -> bool {
        self.socket.is_some()
    }

    /// The next changed state of the operation; `None` after the terminal one was yielded.
    /// An `Err` ends the sequence.
    pub async fn next(&mut self) -> Option<Result<Operation, Error>> {
        loop {
            if self.done {
                return None;
            }
            let use_stream = self.opts.websocket && self.stream_failures < self.opts.max_stream_failures;
            // The first turn reads the operation: an unknown id is an error at once, and a
            // finished operation needs no stream.
            let turn = if use_stream && self.checked {
                self.stream_turn().await
            } else {
                self.checked = true;
                self.next_poll = None;
                self.poll_turn().await
            };
            match turn {
                Turn::Update(op) => {
                    if let Some(op) = self.accept(*op) {
                        return Some(Ok(op));
                    }
                }
                Turn::Nothing => {}
                Turn::Fatal(e) => {
                    self.done = true;
                    self.close().await;
                    return Some(Err(e));
                }
            }
        }
    }

    /// This follower as a [`Stream`].
    pub fn into_stream(self) -> impl Stream<Item = Result<Operation, Error>> + Send {
        futures::stream::unfold(self, |mut f| async move { f.next().await.map(|item| (item, f)) })
    }

    fn accept(&mut self, op: Operation) -> Option<Operation> {
        if op.id.0 != self.id {
            return None;
        }
        if op.status.is_terminal() {
            self.done = true;
        }
        if self.last.as_ref() == Some(&op) {
            return None;
        }
        self.last = Some(op.clone());
        Some(op)
    }

    async fn close(&mut self) {
        if let Some(mut s) = self.socket.take() {
            let _ = tokio::time::timeout(Duration::from_secs(1), s.close(None)).await;
        }
    }

    async fn stream_turn(&mut self) -> Turn {
        if self.socket.is_none() {
            match self.connect().await {
                Ok(s) => self.socket = Some(s),
                Err(e) if e.is_auth() => return Turn::Fatal(e),
                Err(e) => {
                    self.stream_failures += 1;
                    tracing::debug!(error = %e, failures = self.stream_failures, "operation stream unavailable; polling");
                    return self.poll_turn().await;
                }
            }
        }
        let socket = self.socket.as_mut().expect("connected above");
        let received = tokio::time::timeout(self.opts.heartbeat_timeout, socket.next()).await;
        match received {
            Ok(Some(Ok(Message::Text(text)))) => match serde_json::from_str::<StreamMessage>(&text) {
                Ok(StreamMessage::Operation { operation }) => {
                    self.stream_failures = 0;
                    Turn::Update(operation)
                }
                Ok(StreamMessage::Heartbeat | StreamMessage::Unknown) => {
                    self.stream_failures = 0;
                    Turn::Nothing
                }
                Err(e) => {
                    tracing::debug!(error = %e, "ignoring an undecodable stream message");
                    Turn::Nothing
                }
            },
            Ok(Some(Ok(Message::Close(_)))) | Ok(Some(Err(_))) | Ok(None) | Err(_) => {
                // Dropped or silent: reconnect; poll once meanwhile so a terminal state is not missed.
                self.socket = None;
                self.stream_failures += 1;
                tracing::debug!(failures = self.stream_failures, "operation stream ended; reconnecting");
                self.poll_turn().await
            }
            Ok(Some(Ok(_))) => Turn::Nothing,
        }
    }

    async fn connect(&self) -> Result<Socket, Error> {
        let url = self.client.url(&["api", "operations", "stream"], &[("operation_id", self.id.clone())]);
        open_socket(&self.client, url).await
    }

    async fn poll_turn(&mut self) -> Turn {
        if let Some(at) = self.next_poll {
            tokio::time::sleep_until(at).await;
        }
        self.next_poll = Some(Instant::now() + self.opts.poll_interval);
        match self.client.get_operation(&self.id).await {
            Ok(op) => {
                self.poll_errors = 0;
                Turn::Update(Box::new(op))
            }
            Err(e) if e.is_connection() || matches!(e.status(), Some(502..=504)) => {
                self.poll_errors += 1;
                if self.poll_errors > self.opts.max_poll_errors {
                    return Turn::Fatal(e);
                }
                let backoff = self.opts.poll_interval * 2u32.pow(self.poll_errors.min(4));
                self.next_poll = Some(Instant::now() + backoff.min(Duration::from_secs(15)));
                tracing::debug!(error = %e, attempt = self.poll_errors, "polling failed; retrying");
                Turn::Nothing
            }
            Err(e) => Turn::Fatal(e),
        }
    }
}

/// Opens a WebSocket to an API URL of `client` (`http(s)` becomes `ws(s)`), with the bearer
/// token and the face on the upgrade request; an HTTP refusal is an [`Error::Api`] with the
/// server's problem document.
pub(crate) async fn open_socket(client: &Client, mut url: reqwest::Url) -> Result<Socket, Error> {
    let scheme = if url.scheme() == "https" { "wss" } else { "ws" };
    url.set_scheme(scheme).expect("ws and wss are valid schemes for an http(s) URL");
    let stream_err = |message: String| Error::Connection { url: url.to_string(), message };
    let mut req = url.as_str().into_client_request().map_err(|e| stream_err(e.to_string()))?;
    let headers = req.headers_mut();
    if let Some(t) = client.token() {
        let value = format!("Bearer {t}").parse().map_err(|_| stream_err("token is not a valid header".into()))?;
        headers.insert("authorization", value);
    }
    headers.insert(FACE_HEADER, client.face().as_str().parse().expect("static ASCII"));
    #[cfg(feature = "tls")]
    let connecting = tokio_tungstenite::connect_async_tls_with_config(
        req,
        None,
        false,
        Some(tokio_tungstenite::Connector::Rustls(std::sync::Arc::new(crate::tls::client_config()))),
    );
    #[cfg(not(feature = "tls"))]
    let connecting = tokio_tungstenite::connect_async(req);
    match tokio::time::timeout(Duration::from_secs(10), connecting).await {
        Err(_) => Err(stream_err("timed out opening the stream".into())),
        Ok(Ok((socket, _))) => Ok(socket),
        Ok(Err(tokio_tungstenite::tungstenite::Error::Http(resp))) => {
            let status = resp.status().as_u16();
            let body = resp.body().as_deref().unwrap_or_default();
            let problem = serde_json::from_slice::<Problem>(body)
                .unwrap_or_else(|_| Problem::from_status(status, &String::from_utf8_lossy(body)));
            Err(Error::Api { status, problem: Box::new(problem) })
        }
        Ok(Err(e)) => Err(stream_err(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::extract::ws::{Message as AxMessage, WebSocketUpgrade};
    use axum::extract::{Path, State};
    use axum::routing::get;
    use instantstart_core::operation::{Actor, Face, OperationId, OperationKind, OperationStatus};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn operation(status: OperationStatus) -> Operation {
        let now = chrono::DateTime::<chrono::Utc>::from_timestamp(1_700_000_000, 0).unwrap();
        Operation {
            id: OperationId("op-1".into()),
            kind: OperationKind::CreateCluster,
            target: "cluster/demo".into(),
            status,
            actor: Actor { face: Face::Cli, principal: "admin".into() },
            request: serde_json::json!({}),
            idempotency_key: None,
            request_hash: "h".into(),
            steps: vec![],
            error: None,
            created_at: now,
            updated_at: now,
            finished_at: None,
        }
    }

    #[derive(Clone, Default)]
    struct Fake {
        polls: Arc<AtomicU32>,
        streams: Arc<AtomicU32>,
    }

    async fn poll(State(f): State<Fake>, Path(id): Path<String>) -> axum::response::Response {
        use axum::response::IntoResponse;
        if id != "op-1" {
            return (axum::http::StatusCode::NOT_FOUND, "no such operation").into_response();
        }
        let n = f.polls.fetch_add(1, Ordering::SeqCst);
        let status = if n < 2 { OperationStatus::Running } else { OperationStatus::Succeeded };
        axum::Json(operation(status)).into_response()
    }

    /// Sends a running snapshot, then drops the connection (first time) or sends the terminal
    /// state (second time).
    async fn stream(State(f): State<Fake>, ws: WebSocketUpgrade) -> axum::response::Response {
        let n = f.streams.fetch_add(1, Ordering::SeqCst);
        ws.on_upgrade(move |mut socket| async move {
            let send = |op: Operation| {
                AxMessage::Text(serde_json::json!({ "type": "operation", "operation": op }).to_string().into())
            };
            let _ = socket.send(AxMessage::Text(r#"{"type":"heartbeat"}"#.into())).await;
            let _ = socket.send(send(operation(OperationStatus::Running))).await;
            if n > 0 {
                let _ = socket.send(send(operation(OperationStatus::Succeeded))).await;
            }
        })
    }

    async fn serve(router: axum::Router) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        format!("http://{addr}")
    }

    fn fast() -> FollowOptions {
        FollowOptions { poll_interval: Duration::from_millis(20), ..FollowOptions::default() }
    }

    async fn collect(mut f: Follower) -> Vec<Result<OperationStatus, String>> {
        let mut out = vec![];
        while let Some(u) = f.next().await {
            out.push(u.map(|o| o.status).map_err(|e| e.to_string()));
        }
        out
    }

    #[tokio::test]
    async fn falls_back_to_polling_when_there_is_no_stream() {
        let fake = Fake::default();
        let url = serve(axum::Router::new().route("/api/operations/{id}", get(poll)).with_state(fake.clone())).await;
        let client = Client::new(&url, Some("t".into()), Face::Cli).unwrap();
        let updates = collect(client.follow("op-1", fast())).await;
        assert_eq!(updates, [Ok(OperationStatus::Running), Ok(OperationStatus::Succeeded)], "deduplicated");
        assert_eq!(fake.polls.load(Ordering::SeqCst), 3);
        // An unknown operation ends the stream with the API error.
        let updates = collect(client.follow("op-404", fast())).await;
        assert!(matches!(updates.as_slice(), [Err(e)] if e.contains("no such operation")), "{updates:?}");
        assert_eq!(client.wait("op-1").await.unwrap().status, OperationStatus::Succeeded);
    }

    #[tokio::test]
    async fn streams_and_reconnects_after_a_drop() {
        let fake = Fake::default();
        let router = axum::Router::new()
            .route("/api/operations/stream", get(stream))
            .route("/api/operations/{id}", get(poll))
            .with_state(fake.clone());
        let url = serve(router).await;
        let client = Client::new(&url, None, Face::Agent).unwrap();
        let updates: Vec<_> = client.follow("op-1", fast()).into_stream().collect().await;
        let statuses: Vec<_> = updates.into_iter().map(|u| u.unwrap().status).collect();
        assert_eq!(statuses, [OperationStatus::Running, OperationStatus::Succeeded]);
        assert_eq!(fake.streams.load(Ordering::SeqCst), 2, "reconnected once");
        assert_eq!(fake.polls.load(Ordering::SeqCst), 2, "read once first, polled once while the stream was down");
    }
}
