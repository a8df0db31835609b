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
