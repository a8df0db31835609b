//! Every limit that keeps the server answering under hostile load, in one place.
//!
//! # Guarantees
//! - A connection must send a request's complete headers within [`HEADER_READ_TIMEOUT`]
//!   (counted from when the server starts waiting for them, so a silent or byte-by-byte
//!   "slowloris" connection is closed), and headers may not exceed [`MAX_HEADER_BYTES`].
//! - At most [`MAX_CONNECTIONS`] HTTP connections are served at once; a connection beyond that is
//!   closed as soon as it is accepted, so the process never runs out of file descriptors and
//!   the accept queue keeps draining.
//! - No request body is read past [`MAX_BODY_BYTES`]: a larger declared `Content-Length` is
//!   answered `413` before anything is read, and every body extractor is limited too.
//! - A handler that has not answered within [`REQUEST_TIMEOUT`] is answered `503` (WebSocket
//!   upgrades, which stream on, are exempt).
//! - WebSocket messages from clients are at most [`MAX_WS_MESSAGE_BYTES`] (frames
//!   [`MAX_WS_FRAME_BYTES`]); the server never needs more, it ignores what clients send.
//! - One principal holds at most [`crate::ws_slots::MAX_WS_PER_PRINCIPAL`] open WebSockets
//!   (see [`crate::ws_slots`]); one more is a `429`.
//! - A log line is at most [`MAX_LOG_LINE_BYTES`] (see [`instantstart_core::log_lines`]).
//! - Request metrics have a fixed label set (see [`crate::metrics`]).

use std::time::Duration;

pub use instantstart_core::log_lines::MAX_LOG_LINE_BYTES;

/// Time a connection has to send a request's complete headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request head (request line and headers) accepted.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// HTTP connections served at once.
pub const MAX_CONNECTIONS: usize = 512;
/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// Time a handler has to answer (model chats through the service proxy included).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(180);
/// Largest WebSocket message accepted from a client.
pub const MAX_WS_MESSAGE_BYTES: usize = 16 * 1024;
/// Largest WebSocket frame accepted from a client.
pub const MAX_WS_FRAME_BYTES: usize = 16 * 1024;
/// How long a stopping server waits for open connections to finish their requests.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// A WebSocket upgrade with the message and frame caps.
pub fn capped_ws(ws: axum::extract::ws::WebSocketUpgrade) -> axum::extract::ws::WebSocketUpgrade {
    ws.max_message_size(MAX_WS_MESSAGE_BYTES).max_frame_size(MAX_WS_FRAME_BYTES)
}

/// The limits of the accept loop ([`crate::serve`]); tests shrink them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeLimits {
    pub header_read_timeout: Duration,
    pub max_header_bytes: usize,
    pub max_connections: usize,
    pub shutdown_grace: Duration,
}

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits {
            header_read_timeout: HEADER_READ_TIMEOUT,
            max_header_bytes: MAX_HEADER_BYTES,
            max_connections: MAX_CONNECTIONS,
            shutdown_grace: SHUTDOWN_GRACE,
        }
    }
}
