//! Following a training job's logs over the WebSocket
//! `GET /api/clusters/{cluster}/jobs/{job}/logs/stream?pod=&tail=`.
//!
//! The server sends text frames, one JSON document per line: `{"pod": …, "line": …}` for each
//! log line (the last `tail` lines first, then new ones as they are written) and a final
//! `{"end": true, "reason": …}` when the followed pods ended. [`LogStream::next`] yields them in
//! order and returns `None` after the end; a connection that drops before the end is an
//! [`Error::Connection`], so a caller can tell "the job ended" from "the stream broke". A
//! follower that fell too far behind gets `{"skipped": <frames>, "unit": "frames"}` instead of
//! silently losing lines ([`LogEvent::Skipped`]).
//!
//! [`ResumingLogStream`] follows across dropped connections (a server restart, a network
//! blip): it reconnects with backoff asking for the last [`RESUME_TAIL`] lines, drops the ones
//! it already yielded (cut after the tail's line whose predecessors match the end of what it
//! yielded; the web UI applies the same rule), and says so with [`LogEvent::Reconnected`]
//! (`gap: true` when the new tail does not overlap what it had, so lines written meanwhile may
//! be missing).

use crate::follow::{Socket, open_socket};
use crate::{Client, Error};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

/// Lines asked for when a [`ResumingLogStream`] reconnects (the server's largest tail), and the
/// number of yielded lines it keeps to match them against.
pub const RESUME_TAIL: u32 = 5000;

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
    /// The server dropped `skipped` frames of lines for this follower (it fell too far behind).
    Skipped {
        skipped: u64,
        #[serde(default)]
        unit: Option<String>,
    },
    /// Not sent by the server: a [`ResumingLogStream`] reconnected (`reconnected` = how many
    /// times so far); `gap` when lines written while it was away may be missing.
    Reconnected { reconnected: u32, gap: bool },
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
            match self.frame().await? {
                Ok(events) => self.queued.extend(events),
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// The events of the next WebSocket message (a frame may carry several lines); `None`
    /// once the stream is over.
    async fn frame(&mut self) -> Option<Result<Vec<LogEvent>, Error>> {
        loop {
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
            let mut events = Vec::new();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                match serde_json::from_str::<LogEvent>(line) {
                    Ok(e) => events.push(e),
                    Err(e) => {
                        self.done = true;
                        return Some(Err(Error::Decode { url: self.url.clone(), message: format!("{e}: {line}") }));
                    }
                }
            }
            return Some(Ok(events));
        }
    }

    fn fail(&mut self, message: String) -> Error {
        self.done = true;
        Error::Connection { url: self.url.clone(), message }
    }
}

/// When a [`ResumingLogStream`] reconnects, and when it gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconnectPolicy {
    /// Wait before the first reconnect; doubled after each failed attempt.
    pub first_delay: Duration,
    pub max_delay: Duration,
    /// Give up (return the last error) once the stream has been broken this long (no frame
    /// since the first drop).
    pub give_up_after: Duration,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        ReconnectPolicy {
            first_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(5),
            give_up_after: Duration::from_secs(120),
        }
    }
}

/// Which job log to follow (and reopen).
#[derive(Debug, Clone)]
pub(crate) struct LogSource {
    pub client: Client,
    pub cluster: String,
    pub job: String,
    pub pod: Option<String>,
}

/// A job's log followed across dropped connections; see the module docs.
pub struct ResumingLogStream {
    source: LogSource,
    policy: ReconnectPolicy,
    stream: LogStream,
    /// The last lines yielded (at most [`RESUME_TAIL`]), to drop them from a reconnect's tail.
    recent: VecDeque<(String, String)>,
    queued: VecDeque<LogEvent>,
    /// The next frame is the tail sent after a reconnect.
    resumed: bool,
    reconnects: u32,
    /// Since when the stream has been broken: set by a drop, cleared by the next frame (a server
    /// that accepts the upgrade but drops every stream at once still runs out
    /// [`ReconnectPolicy::give_up_after`]).
    failing_since: Option<tokio::time::Instant>,
    done: bool,
}

impl ResumingLogStream {
    pub(crate) fn new(source: LogSource, stream: LogStream, policy: ReconnectPolicy) -> Self {
        ResumingLogStream {
            source,
            policy,
            stream,
            recent: VecDeque::new(),
            queued: VecDeque::new(),
            resumed: false,
            reconnects: 0,
            failing_since: None,
            done: false,
        }
    }

    /// How often it reconnected so far.
    pub fn reconnects(&self) -> u32 {
        self.reconnects
    }

    /// Like [`LogStream::next`], but a dropped connection (or a 5xx while reopening) is
    /// reopened instead of ending the stream, until [`ReconnectPolicy::give_up_after`].
    pub async fn next(&mut self) -> Option<Result<LogEvent, Error>> {
        loop {
            if let Some(event) = self.queued.pop_front() {
                match &event {
                    LogEvent::Line { pod, line } => {
                        if self.recent.len() == RESUME_TAIL as usize {
                            self.recent.pop_front();
                        }
                        self.recent.push_back((pod.clone(), line.clone()));
                    }
                    LogEvent::End { .. } => {
                        self.queued.clear();
                        self.done = true;
                    }
                    _ => {}
                }
                return Some(Ok(event));
            }
            if self.done {
                return None;
            }
            match self.stream.frame().await {
                None => {
                    self.done = true;
                    return None;
                }
                Some(Ok(events)) => {
                    self.failing_since = None;
                    if std::mem::take(&mut self.resumed) {
                        let (fresh, gap) = resume(&self.recent, events);
                        self.queued.push_back(LogEvent::Reconnected { reconnected: self.reconnects, gap });
                        self.queued.extend(fresh);
                    } else {
                        self.queued.extend(events);
                    }
                }
                Some(Err(e)) if e.is_connection() => {
                    if let Err(e) = self.reconnect(e).await {
                        self.done = true;
                        return Some(Err(e));
                    }
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }

    async fn reconnect(&mut self, mut last: Error) -> Result<(), Error> {
        let since = *self.failing_since.get_or_insert_with(tokio::time::Instant::now);
        let mut delay = self.policy.first_delay;
        loop {
            if since.elapsed() >= self.policy.give_up_after {
                return Err(last);
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(self.policy.max_delay);
            let s = &self.source;
            match s.client.follow_job_logs(&s.cluster, &s.job, s.pod.as_deref(), Some(RESUME_TAIL)).await {
                Ok(stream) => {
                    self.stream = stream;
                    self.resumed = true;
                    self.reconnects += 1;
                    return Ok(());
                }
                Err(e) if e.is_connection() || e.status().is_some_and(|s| s >= 500) => last = e,
                Err(e) => return Err(e),
            }
        }
    }
}

/// The events of a reconnect's first frame without the lines already yielded. The tail may
/// start before or after the first line still in `recent`: the cut is after the frame's line
/// `i` whose preceding lines equal the end of `recent` (as far as both go), preferring the
/// longest such match and, among equals, the latest (a line is never yielded twice; only a run
/// of identical lines is ambiguous). `gap` is true when both had lines and nothing matches
/// (more lines were written meanwhile than the tail holds, or the log is another one).
fn resume(recent: &VecDeque<(String, String)>, events: Vec<LogEvent>) -> (Vec<LogEvent>, bool) {
    let lines: Vec<(&str, &str)> = events
        .iter()
        .map_while(|e| match e {
            LogEvent::Line { pod, line } => Some((pod.as_str(), line.as_str())),
            _ => None,
        })
        .collect();
    let same = |a: &(String, String), b: &(&str, &str)| a.0 == b.0 && a.1 == b.1;
    let mut best: Option<(usize, usize)> = None; // (matched length, cut after line i)
    if let Some(last) = recent.back() {
        for i in (0..lines.len()).rev().filter(|&i| same(last, &lines[i])) {
            let len = (i + 1).min(recent.len());
            if best.is_some_and(|(l, _)| l >= len) {
                continue;
            }
            if (0..len).all(|j| same(&recent[recent.len() - 1 - j], &lines[i - j])) {
                best = Some((len, i));
            }
        }
    }
    let gap = best.is_none() && !recent.is_empty() && !lines.is_empty();
    let cut = best.map_or(0, |(_, i)| i + 1);
    (events.into_iter().skip(cut).collect(), gap)
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
        if let Some(scenario) = q.get("pod").filter(|p| p.starts_with("resume") || *p == "skipping").cloned() {
            let n = seen.lock().unwrap().iter().filter(|(q, _)| q.get("pod") == Some(&scenario)).count();
            return ws.on_upgrade(move |socket| resuming(socket, scenario, n));
        }
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

    /// Connection `n` (from 1) of a scenario: `resume` drops after l1..l3, then its reconnect tail
    /// repeats them before l4; `resume-gap`'s reconnect tail has none of them; `resume-dead`
    /// drops and the server is gone for good (every later upgrade drops at once); `skipping`
    /// announces skipped frames.
    async fn resuming(mut socket: axum::extract::ws::WebSocket, scenario: String, n: usize) {
        let doc = |l: &str| serde_json::json!({ "pod": "job-0", "line": l }).to_string();
        let frame = |docs: Vec<String>| AxMessage::Text(docs.join("\n").into());
        let end = serde_json::json!({ "end": true, "reason": "Succeeded" }).to_string();
        let frames = match (scenario.as_str(), n) {
            ("resume" | "resume-gap" | "resume-dead", 1) => vec![vec![doc("l1")], vec![doc("l2"), doc("l3")]],
            ("resume", _) => vec![vec![doc("l1"), doc("l2"), doc("l3"), doc("l4")], vec![doc("l5"), end]],
            ("resume-gap", _) => vec![vec![doc("l7"), doc("l8")], vec![end]],
            ("skipping", _) => vec![vec![doc("l1")], vec![r#"{"skipped":2,"unit":"frames"}"#.into(), doc("l9"), end]],
            _ => vec![],
        };
        for f in frames {
            let _ = socket.send(frame(f)).await;
        }
        // Returning drops the connection without a close frame (for the scenarios that end, after
        // the end document).
    }

    async fn events_of(mut s: ResumingLogStream) -> (Vec<LogEvent>, Option<Error>) {
        let mut events = vec![];
        while let Some(e) = s.next().await {
            match e {
                Ok(e) => events.push(e),
                Err(e) => return (events, Some(e)),
            }
        }
        (events, None)
    }

    fn fast() -> ReconnectPolicy {
        ReconnectPolicy {
            first_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(40),
            give_up_after: Duration::from_millis(300),
        }
    }

    fn line(l: &str) -> LogEvent {
        LogEvent::Line { pod: "job-0".into(), line: l.into() }
    }

    fn end() -> LogEvent {
        LogEvent::End { end: true, reason: Some("Succeeded".into()) }
    }

    #[tokio::test]
    async fn a_dropped_stream_reconnects_and_yields_each_line_once() {
        let (c, seen) = client().await;
        let s = c.follow_job_logs_resuming("demo", "train", Some("resume"), Some(10), fast()).await.unwrap();
        let (events, err) = events_of(s).await;
        assert!(err.is_none(), "{err:?}");
        let reconnected = LogEvent::Reconnected { reconnected: 1, gap: false };
        assert_eq!(events, vec![line("l1"), line("l2"), line("l3"), reconnected, line("l4"), line("l5"), end()]);
        let tails: Vec<Option<String>> = seen.lock().unwrap().iter().map(|(q, _)| q.get("tail").cloned()).collect();
        assert_eq!(
            tails,
            vec![Some("10".into()), Some(RESUME_TAIL.to_string())],
            "the reconnect asks for the largest tail"
        );
    }

    #[tokio::test]
    async fn a_reconnect_whose_tail_does_not_overlap_says_lines_may_be_missing() {
        let (c, _) = client().await;
        let s = c.follow_job_logs_resuming("demo", "train", Some("resume-gap"), None, fast()).await.unwrap();
        let (events, err) = events_of(s).await;
        assert!(err.is_none(), "{err:?}");
        let reconnected = LogEvent::Reconnected { reconnected: 1, gap: true };
        assert_eq!(events, vec![line("l1"), line("l2"), line("l3"), reconnected, line("l7"), line("l8"), end()]);
    }

    #[tokio::test]
    async fn a_server_that_stays_away_ends_it_with_the_connection_error() {
        let (c, seen) = client().await;
        let s = c.follow_job_logs_resuming("demo", "train", Some("resume-dead"), None, fast()).await.unwrap();
        let (events, err) = events_of(s).await;
        assert_eq!(events, vec![line("l1"), line("l2"), line("l3")]);
        assert!(err.expect("an error").is_connection());
        assert!(seen.lock().unwrap().len() > 2, "it kept trying until it gave up");
    }

    #[tokio::test]
    async fn skipped_frames_are_an_event_not_a_decode_error() {
        let (c, _) = client().await;
        let s = c.follow_job_logs_resuming("demo", "train", Some("skipping"), None, fast()).await.unwrap();
        let (events, err) = events_of(s).await;
        assert!(err.is_none(), "{err:?}");
        let skipped = LogEvent::Skipped { skipped: 2, unit: Some("frames".into()) };
        assert_eq!(events, vec![line("l1"), skipped, line("l9"), end()]);
    }

    #[test]
    fn resume_drops_the_longest_yielded_suffix_the_tail_starts_with() {
        let l = |p: &str, x: &str| (p.to_string(), x.to_string());
        let recent = |xs: &[&str]| xs.iter().map(|x| l("p", x)).collect::<VecDeque<_>>();
        let ev = |xs: &[&str]| xs.iter().map(|x| LogEvent::Line { pod: "p".into(), line: x.to_string() }).collect();
        let lines = |evs: Vec<LogEvent>| {
            evs.into_iter()
                .map(|e| match e {
                    LogEvent::Line { line, .. } => line,
                    other => format!("{other:?}"),
                })
                .collect::<Vec<_>>()
        };
        for (yielded, tail, fresh, gap) in [
            (&["a", "b", "c"][..], &["a", "b", "c", "d"][..], &["d"][..], false),
            (&["a", "b", "c"], &["b", "c", "d", "e"], &["d", "e"], false),
            // Repeated lines: the longest match wins, not the latest occurrence of the last line;
            // among equally long ones the latest (never a line twice).
            (&["x", "y", "x"], &["y", "x", "x", "z"], &["x", "z"], false),
            (&["x", "x"], &["x", "x", "x"], &[], false),
            // The tail starts before the first line still kept (a short first tail, a long log).
            (&["c", "d"], &["a", "b", "c", "d", "e"], &["e"], false),
            (&["b", "c", "d"], &["a", "b", "c", "d"], &[], false),
            // Nothing new since the drop.
            (&["a", "b"], &["a", "b"], &[], false),
            // No overlap: everything is new, and lines may be missing.
            (&["a", "b"], &["c", "d"], &["c", "d"], true),
            (&[], &["a"], &["a"], false),
            (&["a"], &[], &[], false),
        ] {
            let (got, g) = resume(&recent(yielded), ev(tail));
            assert_eq!((lines(got), g), (fresh.iter().map(|s| s.to_string()).collect(), gap), "{yielded:?} + {tail:?}");
        }
        // Another pod's identical line is not an overlap.
        let (got, gap) = resume(&VecDeque::from([l("q", "a")]), ev(&["a"]));
        assert_eq!((got.len(), gap), (1, true));
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
