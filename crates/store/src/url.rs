//! Choosing a backend from a store URL: `sqlite://<path>` or `postgres://…`/`postgresql://…`.
//!
//! [`StoreUrl::parse`] only classifies the URL (the PostgreSQL part is checked when
//! connecting); [`open_store`] opens the chosen backend and returns it as one
//! [`StoreBackend`] (a [`Store`] that is also a [`CredentialStore`]), so a server can take a
//! `--store-url` without knowing the backends.
//!
//! # Guarantees
//! - Anything but the three schemes, or a `sqlite://` URL without a path, is an
//!   [`InvalidStoreUrl`] naming the rule; the error never shows what follows `://` (a
//!   PostgreSQL URL may carry a password).

use crate::{PostgresStore, SqliteStore};
use instantstart_core::credentials::CredentialStore;
use instantstart_core::store::{Store, StoreError};
use std::path::PathBuf;
use std::sync::Arc;

/// Where the control plane's state lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// A SQLite database file (created when missing).
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL, kept whole (it may hold a password: do not log it).
    Postgres(String),
}

/// A store URL that names no backend.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid store URL (scheme {scheme:?}): {rule}")]
pub struct InvalidStoreUrl {
    /// The text before `://` (or the whole value when it has none, up to 16 characters).
    pub scheme: String,
    /// The rule the URL breaks.
    pub rule: &'static str,
}

const SCHEME_RULE: &str = "a store URL is sqlite://<path> or postgres://user@host/dbname (also postgresql://)";

impl StoreUrl {
    /// Classifies `url`; see the module docs.
    pub fn parse(url: &str) -> Result<Self, InvalidStoreUrl> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(InvalidStoreUrl { scheme: url.chars().take(16).collect(), rule: SCHEME_RULE });
        };
        match scheme.to_ascii_lowercase().as_str() {
            "sqlite" if rest.is_empty() => Err(InvalidStoreUrl {
                scheme: scheme.into(),
                rule: "a sqlite:// URL names the database file: sqlite:///var/lib/instantstart/state.db",
            }),
            "sqlite" => Ok(StoreUrl::Sqlite(PathBuf::from(rest))),
            "postgres" | "postgresql" => Ok(StoreUrl::Postgres(url.to_string())),
            _ => Err(InvalidStoreUrl { scheme: scheme.into(), rule: SCHEME_RULE }),
        }
    }

    /// The backend's name, for logs (never the URL itself).
    pub fn backend(&self) -> &'static str {
        match self {
            StoreUrl::Sqlite(_) => "sqlite",
            StoreUrl::Postgres(_) => "postgres",
        }
    }
}

/// A store that also keeps credentials: what a server needs from its backend.
pub trait StoreBackend: Store + CredentialStore {}

impl<T: Store + CredentialStore> StoreBackend for T {}

/// Opens (and migrates) the store `url` names.
pub fn open_store(url: &StoreUrl) -> Result<Arc<dyn StoreBackend>, StoreError> {
    Ok(match url {
        StoreUrl::Sqlite(path) => Arc::new(SqliteStore::open(path)?),
        StoreUrl::Postgres(url) => Arc::new(PostgresStore::connect(url)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_urls_name_their_backend_or_the_rule_they_break() {
        let ok: &[(&str, StoreUrl)] = &[
            ("sqlite:///var/lib/is/state.db", StoreUrl::Sqlite("/var/lib/is/state.db".into())),
            ("sqlite://state.db", StoreUrl::Sqlite("state.db".into())),
            ("SQLITE://a/b.db", StoreUrl::Sqlite("a/b.db".into())),
            ("postgres://is@db:5432/is", StoreUrl::Postgres("postgres://is@db:5432/is".into())),
            (
                "postgresql://is:pw@db/is?sslmode=disable",
                StoreUrl::Postgres("postgresql://is:pw@db/is?sslmode=disable".into()),
            ),
        ];
        for (url, want) in ok {
            assert_eq!(StoreUrl::parse(url).as_ref(), Ok(want), "{url}");
        }
        let bad: &[(&str, &str, &str)] = &[
            ("state.db", "state.db", "sqlite://<path>"),
            ("sqlite://", "sqlite", "names the database file"),
            ("mysql://u:secret@h/db", "mysql", "sqlite://<path>"),
            ("", "", "sqlite://<path>"),
        ];
        for (url, scheme, rule) in bad {
            let err = StoreUrl::parse(url).unwrap_err();
            assert_eq!(err.scheme, *scheme, "{url}");
            assert!(err.to_string().contains(rule), "{url}: {err}");
            assert!(!err.to_string().contains("secret"), "{url}: {err}");
        }
    }

    #[test]
    fn open_store_opens_sqlite_as_a_store_and_a_credential_store() {
        let dir = tempfile::tempdir().unwrap();
        let url = StoreUrl::parse(&format!("sqlite://{}", dir.path().join("s.db").display())).unwrap();
        assert_eq!(url.backend(), "sqlite");
        let store = open_store(&url).unwrap();
        store.set_setting("k", Some("v")).unwrap();
        assert_eq!(store.get_setting("k").unwrap().as_deref(), Some("v"));
        assert_eq!(store.list_tokens().unwrap(), vec![]);
        let as_store: Arc<dyn Store> = store;
        assert_eq!(as_store.get_setting("k").unwrap().as_deref(), Some("v"));
    }
}
