//! The one error of a read through `api` (jobs, downloads, endpoints, pools, tracking servers):
//! what the faces map to an HTTP status once (the server's `error.rs`).
//!
//! # Guarantees
//!
//! - A name that finds nothing is [`ReadError::Missing`] (`404`), whichever noun it names: a
//!   replayed delete tells "gone" from every other failure by this variant alone
//!   ([`super::workloads::delete`]).
//! - A malformed name or query is [`ReadError::Validation`] (`400`, naming the field), decided
//!   before anything is asked of a provider.
//! - Engine errors met on the way (an unknown cluster, a namespace outside the caller's access)
//!   keep their own meaning ([`ReadError::Engine`]); the ones that are read outcomes (missing,
//!   invalid, a provider failure) are converted to the variants above.

use crate::engine::EngineError;
use crate::provider::ProviderError;
use crate::validate::ValidationError;

/// Why a read failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Validation(#[from] ValidationError),
    /// Nothing by that name (HTTP 404).
    #[error("{0} not found")]
    Missing(String),
    /// The name exists in several namespaces; the request must name one (HTTP 409).
    #[error("{0}")]
    Ambiguous(String),
    /// The object exists but cannot be read yet: a pod without a log, a tracking server that
    /// is not active (HTTP 409).
    #[error("{0}")]
    NotReady(String),
    /// The engine or the store refused what the read names: an unknown cluster (HTTP 404), a
    /// namespace outside the caller's access (HTTP 403), a store failure.
    #[error(transparent)]
    Engine(EngineError),
}

impl From<EngineError> for ReadError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Missing(what) => ReadError::Missing(what),
            EngineError::Validation(v) => ReadError::Validation(v),
            EngineError::Provider(p) => ReadError::Provider(p),
            other => ReadError::Engine(other),
        }
    }
}

impl From<crate::store::StoreError> for ReadError {
    fn from(e: crate::store::StoreError) -> Self {
        ReadError::Engine(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine error becomes the read error of the same meaning; the rest keep theirs.
    #[test]
    fn engine_errors_convert_by_meaning() {
        let cases: Vec<(EngineError, &str)> = vec![
            (EngineError::Missing("endpoint e".into()), "Missing"),
            (ValidationError::invalid("endpoint", "bad").into(), "Validation"),
            (
                ProviderError::new("ListPods", crate::provider::ProviderErrorKind::Throttled, "slow down").into(),
                "Provider",
            ),
            (EngineError::UnknownCluster("c".into()), "Engine"),
            (EngineError::Forbidden("namespace: no".into()), "Engine"),
        ];
        for (e, want) in cases {
            let r = ReadError::from(e);
            let got = format!("{r:?}");
            assert!(got.starts_with(want), "{got} is not {want}");
        }
        assert_eq!(ReadError::Missing("x".into()), ReadError::Missing("x".into()));
        assert_ne!(ReadError::Missing("x".into()), ReadError::NotReady("x not found".into()));
    }
}
