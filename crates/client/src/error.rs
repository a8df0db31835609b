//! Client errors, classified by what the caller should do about them.
//!
//! The server answers every failure with RFC 9457 `application/problem+json`; [`Error::Api`]
//! carries that [`Problem`] with every validation [`Finding`] (field path and rule), so a
//! frontend can show `name: must start with a lowercase letter` instead of raw HTTP.

use instantstart_core::Finding;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;

/// RFC 9457 problem details as the InstantStart server sends them, with validation findings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// A URI naming the problem type, e.g. `urn:instantstart:problem:validation`.
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub status: u16,
    #[serde(default)]
    pub detail: String,
    /// Every broken rule with its field path (validation problems only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// The operation involved, e.g. the one holding a conflicting target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<String>,
}

impl Problem {
    /// A problem for a response that was not problem+json (a proxy's error page, plain text).
    pub fn from_status(status: u16, body: &str) -> Problem {
        let title = match status {
            400 => "Bad request",
            401 => "Authentication required",
            403 => "Not allowed",
            404 => "Not found",
            409 => "Conflict",
            422 => "Request cannot be applied",
            500..=599 => "Server error",
            _ => "Unexpected response",
        };
        let detail = body.trim();
        let detail = if detail.is_empty() { title.to_string() } else { detail.chars().take(500).collect() };
        Problem {
            kind: "about:blank".into(),
            title: title.into(),
            status,
            detail,
            findings: vec![],
            operation_id: None,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.findings.is_empty() {
            if self.detail.is_empty() { write!(f, "{}", self.title) } else { write!(f, "{}", self.detail) }
        } else {
            let parts: Vec<String> = self.findings.iter().map(ToString::to_string).collect();
            write!(f, "{}: {}", self.title, parts.join("; "))
        }
    }
}

/// Every way a call through [`crate::Client`] can fail.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with an error status and a problem document.
    #[error("{problem}")]
    Api { status: u16, problem: Box<Problem> },
    /// The server could not be reached (refused, timed out, connection dropped).
    #[error("cannot reach the InstantStart server at {url}: {message}")]
    Connection { url: String, message: String },
    /// The server answered with something this client does not understand.
    #[error("unexpected response from {url}: {message}")]
    Decode { url: String, message: String },
    /// The base URL is not a usable `http(s)://` URL.
    #[error("invalid server URL {url:?}: {message}")]
    InvalidUrl { url: String, message: String },
    /// The configuration file could not be read or written.
    #[error("config file {}: {message}", path.display())]
    Config { path: PathBuf, message: String },
}

impl Error {
    /// HTTP status of an API error.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The problem document of an API error.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Error::Api { problem, .. } => Some(problem),
            _ => None,
        }
    }

    /// 401 or 403: the token is missing, invalid, or lacks the scope.
    pub fn is_auth(&self) -> bool {
        matches!(self.status(), Some(401 | 403))
    }

    /// 400 or 422: the request broke a rule; [`Problem::findings`] says which.
    pub fn is_validation(&self) -> bool {
        matches!(self.status(), Some(400 | 422))
    }

    /// 409: another mutation of the target is running, or an idempotency key was reused.
    pub fn is_conflict(&self) -> bool {
        self.status() == Some(409)
    }

    /// 404.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// The server could not be reached.
    pub fn is_connection(&self) -> bool {
        matches!(self, Error::Connection { .. })
    }

    pub(crate) fn connection(url: &impl fmt::Display, e: &reqwest::Error) -> Error {
        // reqwest's own message is generic ("error sending request for url …"); the innermost
        // cause says what happened ("Connection refused", "operation timed out").
        let mut message = if e.is_timeout() { "timed out".to_string() } else { e.to_string() };
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            message = s.to_string();
            source = s.source();
        }
        Error::Connection { url: url.to_string(), message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_decode_with_findings_and_classify() {
        let p: Problem = serde_json::from_value(serde_json::json!({
            "type": "urn:instantstart:problem:validation", "title": "Invalid request", "status": 400,
            "detail": "name: bad", "findings": [{"field": "name", "rule": "must start with a lowercase letter"}]
        }))
        .unwrap();
        assert_eq!(p.to_string(), "Invalid request: name: must start with a lowercase letter");
        let e = Error::Api { status: 400, problem: Box::new(p) };
        assert!(e.is_validation() && !e.is_auth() && !e.is_conflict());
        let e = Error::Api { status: 401, problem: Box::new(Problem::from_status(401, "")) };
        assert!(e.is_auth());
        assert_eq!(e.to_string(), "Authentication required");
        let e = Error::Api { status: 409, problem: Box::new(Problem::from_status(409, "busy")) };
        assert!(e.is_conflict());
        assert_eq!(e.to_string(), "busy");
    }
}
