//! Errors of the Kubernetes adapter, and how they map to [`ProviderErrorKind`]s.
//!
//! | source | kind |
//! | --- | --- |
//! | HTTP 404 | `NotFound` |
//! | HTTP 409 `AlreadyExists` / other 409 | `AlreadyExists` / `Conflict` |
//! | HTTP 429 | `Throttled` |
//! | HTTP 5xx, connect/IO failures, timeouts | `Transient` |
//! | HTTP 401, 403 | `AccessDenied` |
//! | HTTP 400, 405, 415, 422 | `InvalidRequest` |
//! | configuration, TLS setup, unknown kinds, token signing | `InvalidRequest` / `Failed` |

use instantstart_core::provider::{ProviderError, ProviderErrorKind};

/// What went wrong talking to a Kubernetes API server.
#[derive(Debug, thiserror::Error)]
pub enum K8sError {
    /// The API server answered with an error status.
    #[error("{message} (HTTP {code}{})", if reason.is_empty() { String::new() } else { format!(", {reason}") })]
    Api { code: u16, reason: String, message: String },
    /// The API server could not be reached, or the connection broke.
    #[error("cannot reach the Kubernetes API: {0}")]
    Connect(String),
    /// The response could not be decoded.
    #[error("unexpected response from the Kubernetes API: {0}")]
    Decode(String),
    /// The client could not be configured (kubeconfig, certificate, URL).
    #[error("Kubernetes client configuration: {0}")]
    Config(String),
    /// Neither the built-in table nor discovery knows this kind.
    #[error("the API server does not serve {kind} in {api_version}")]
    UnknownKind { api_version: String, kind: String },
    /// The object given to apply is not usable.
    #[error("invalid object: {0}")]
    InvalidObject(String),
    /// An EKS bearer token could not be created.
    #[error("cannot create an EKS token: {0}")]
    Token(String),
    /// Resolving the target (its EKS endpoint, its credentials) failed with a provider error.
    #[error(transparent)]
    Provider(#[from] ProviderError),
}

impl K8sError {
    /// What the caller should do about this error.
    pub fn kind(&self) -> ProviderErrorKind {
        match self {
            K8sError::Api { code, reason, .. } => kind_of_status(*code, reason),
            K8sError::Connect(_) => ProviderErrorKind::Transient,
            K8sError::Decode(_) => ProviderErrorKind::Failed,
            K8sError::Config(_) => ProviderErrorKind::InvalidRequest,
            K8sError::UnknownKind { .. } => ProviderErrorKind::InvalidRequest,
            K8sError::InvalidObject(_) => ProviderErrorKind::InvalidRequest,
            K8sError::Token(_) => ProviderErrorKind::AccessDenied,
            K8sError::Provider(e) => e.kind,
        }
    }

    /// Whether this is the API server's "object not found" (404 with reason `NotFound`), as
    /// opposed to a missing endpoint or cluster.
    pub fn is_object_not_found(&self) -> bool {
        matches!(self, K8sError::Api { code: 404, reason, .. } if reason == "NotFound")
    }

    /// The provider error for a call of `api` (e.g. `k8s:Apply`).
    pub fn into_provider(self, api: &str) -> ProviderError {
        match self {
            K8sError::Provider(e) => e,
            other => ProviderError::new(api, other.kind(), other.to_string()),
        }
    }
}

/// The kind of an API server error status.
pub fn kind_of_status(code: u16, reason: &str) -> ProviderErrorKind {
    match code {
        404 | 410 => ProviderErrorKind::NotFound,
        409 if reason == "AlreadyExists" => ProviderErrorKind::AlreadyExists,
        409 => ProviderErrorKind::Conflict,
        429 => ProviderErrorKind::Throttled,
        401 | 403 => ProviderErrorKind::AccessDenied,
        400 | 405 | 406 | 413 | 415 | 422 => ProviderErrorKind::InvalidRequest,
        408 | 500..=599 => ProviderErrorKind::Transient,
        _ => ProviderErrorKind::Failed,
    }
}

impl From<kube::Error> for K8sError {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(status) => {
                K8sError::Api { code: status.code, reason: status.reason.clone(), message: status.message.clone() }
            }
            kube::Error::HyperError(e) => K8sError::Connect(e.to_string()),
            kube::Error::Service(e) => K8sError::Connect(error_chain(e.as_ref())),
            kube::Error::ReadEvents(e) => K8sError::Connect(e.to_string()),
            kube::Error::SerdeError(e) => K8sError::Decode(e.to_string()),
            kube::Error::FromUtf8(e) => K8sError::Decode(e.to_string()),
            kube::Error::LinesCodecMaxLineLengthExceeded => K8sError::Decode("line too long".into()),
            kube::Error::BuildRequest(e) => K8sError::InvalidObject(e.to_string()),
            kube::Error::Discovery(e) => K8sError::Decode(e.to_string()),
            other => K8sError::Config(other.to_string()),
        }
    }
}

/// An error and its sources, `: `-separated (hyper's errors hide the cause otherwise).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_kinds() {
        use ProviderErrorKind::*;
        for (code, reason, kind) in [
            (404, "NotFound", NotFound),
            (409, "AlreadyExists", AlreadyExists),
            (409, "Conflict", Conflict),
            (429, "TooManyRequests", Throttled),
            (500, "InternalError", Transient),
            (503, "ServiceUnavailable", Transient),
            (403, "Forbidden", AccessDenied),
            (401, "Unauthorized", AccessDenied),
            (422, "Invalid", InvalidRequest),
            (400, "BadRequest", InvalidRequest),
        ] {
            assert_eq!(kind_of_status(code, reason), kind, "{code} {reason}");
        }
        let e = K8sError::Api { code: 404, reason: "NotFound".into(), message: "pods \"x\" not found".into() };
        assert!(e.is_object_not_found());
        let p = e.into_provider("k8s:Get");
        assert_eq!((p.api.as_str(), p.kind), ("k8s:Get", NotFound));
        assert!(!K8sError::Api { code: 404, reason: String::new(), message: String::new() }.is_object_not_found());
        assert_eq!(K8sError::Connect("refused".into()).kind(), Transient);
    }
}
