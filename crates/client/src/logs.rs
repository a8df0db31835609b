//! Following a training job's logs over the WebSocket
//! `GET /api/clusters/{cluster}/jobs/{job}/logs/stream?pod=&tail=`.
//!
//! The server sends text frames, one JSON document per line: `{"pod": …, "line": …}` for each
//! log line (the last `tail` lines first, then new ones as they are written) and a final
//! `{"end": true, "reason": …}` when the followed pods ended. [`LogStream::next`] yields them in
//! order and returns `None` after the end; a connection that drops before the end is an
//! [`Error::Connection`], so a caller can tell "the job ended" from "the stream broke".

use crate::follow::{Socket, open_socket};
use crate::{Client, Error};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use tokio_tungstenite::tungstenite::Message;

/// One message of the log stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LogEvent {
    /// A log line of one pod (without its newline).
    Line { pod: String, line: String },
    /// The stream is over: the pods ended (`reason` says how), or the server stopped it.
    End {
        end: bool,
        #[serde(default)]
        reason: Option<String>,
    },
}

/// The log lines of a job as they are written; see the module docs.
pub struct LogStream {
    socket: Socket,
    url: String,
    queued: VecDeque<LogEvent>,
    done: bool,
}

impl LogStream {
    pub(crate) async fn open(client: &Client, url: reqwest::Url) -> Result<LogStream, Error> {
        let display = url.to_string();
        let socket = open_socket(client, url).await?;
        Ok(LogStream { socket, url: display, queued: VecDeque::new(), done: false })
    }

    /// The next line, then the end event; `None` once the end was yielded. An `Err` (the
    /// connection dropped before the end, or a message that is not a log event) ends it too.
    pub async fn next(&mut self) -> Option<Result<LogEvent, Error>> {
        loop {
            if let Some(event) = self.queued.pop_front() {
                if matches!(event, LogEvent::End { .. }) {
                    self.queued.clear();
                    self.done = true;
                }
                return Some(Ok(event));
            }
            if self.done {
                return None;
            }
            let message = match self.socket.next().await {
                Some(Ok(m)) => m,
                Some(Err(e)) => return Some(Err(self.fail(e.to_string()))),
                None => return Some(Err(self.fail("the log stream closed before its end message".into()))),
            };
            let text = match message {
                Message::Text(t) => t.to_string(),
                Message::Binary(b) => String::from_utf8_lossy(&b).into_owned(),
                Message::Close(frame) => {
                    let why = frame.map(|f| f.reason.to_string()).filter(|r| !r.is_empty());
                    let message = why.unwrap_or_else(|| "the server closed the log stream before its end".into());
                    return Some(Err(self.fail(message)));
                }
                _ => continue,
            };
            // A frame may carry several JSON lines.
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                match serde_json::from_str::<LogEvent>(line) {
                    Ok(e) => self.queued.push_back(e),
                    Err(e) => {
                        self.done = true;
                        return Some(Err(Error::Decode { url: self.url.clone(), message: format!("{e}: {line}") }));
                    }
                }
            }
        }
    }

    fn fail(&mut self, message: String) -> Error {
        self.done = true;
        Error::Connection { url: self.url.clone(), message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::extract::ws::{Message as AxMessage, WebSocketUpgrade};
    use axum::extract::{Query, State};
    use axum::http::HeaderMap;
    use axum::routing::get;
    use instantstart_core::operation::Face;
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    /// What the fake server saw: the query and the authorization header of each upgrade.
    type Seen = Arc<Mutex<Vec<(HashMap<String, String>, Option<String>)>>>;

    /// Streams two lines (the second frame carries two JSON lines), then ends — unless the pod
    /// is `broken`, which drops the connection after one line.
    async fn stream(
        State(seen): State<Seen>,
        Query(q): Query<HashMap<String, String>>,
        headers: HeaderMap,
        ws: WebSocketUpgrade,
    ) -> axum::response::Response {
        let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_string);
        seen.lock().unwrap().push((q.clone(), auth));
        let broken = q.get("pod").map(String::as_str) == Some("broken");
        ws.on_upgrade(move |mut socket| async move {
            let line = |l: &str| AxMessage::Text(serde_json::json!({ "pod": "job-0", "line": l }).to_string().into());
            let _ = socket.send(line("step 1 loss=2.0")).await;
            if broken {
                return;
            }
            let two = format!(
                "{}\n{}",
                serde_json::json!({ "pod": "job-0", "line": "step 2 loss=1.5" }),
                serde_json::json!({ "end": true, "reason": "Succeeded" })
            );
            let _ = socket.send(AxMessage::Text(two.into())).await;
            let _ = socket.send(line("never read: after the end")).await;
        })
    }

    async fn client() -> (Client, Seen) {
        let seen: Seen = Arc::default();
        let router = axum::Router::new()
            .route("/api/clusters/{cluster}/jobs/{job}/logs/stream", get(stream))
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        (Client::new(&format!("http://{addr}"), Some("tok".into()), Face::Cli).unwrap(), seen)
    }

    #[tokio::test]
    async fn lines_then_the_end_and_nothing_after() {
        let (c, seen) = client().await;
        let mut s = c.follow_job_logs("demo", "train", None, Some(5)).await.unwrap();
        let mut events = vec![];
        while let Some(e) = s.next().await {
            events.push(e.unwrap());
        }
        assert_eq!(
            events,
            vec![
                LogEvent::Line { pod: "job-0".into(), line: "step 1 loss=2.0".into() },
                LogEvent::Line { pod: "job-0".into(), line: "step 2 loss=1.5".into() },
                LogEvent::End { end: true, reason: Some("Succeeded".into()) },
            ]
        );
        let (query, auth) = seen.lock().unwrap()[0].clone();
        assert_eq!((query.get("tail").map(String::as_str), query.get("pod")), (Some("5"), None));
        assert_eq!(auth.as_deref(), Some("Bearer tok"));
    }

    #[tokio::test]
    async fn a_stream_that_drops_before_its_end_is_a_connection_error() {
        let (c, _) = client().await;
        let mut s = c.follow_job_logs("demo", "train", Some("broken"), None).await.unwrap();
        assert!(matches!(s.next().await, Some(Ok(LogEvent::Line { .. }))));
        let e = s.next().await.unwrap().unwrap_err();
        assert!(e.is_connection(), "{e:?}");
        assert!(s.next().await.is_none(), "nothing after the error");
    }
}
