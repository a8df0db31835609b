//! SQLite and PostgreSQL implementations of InstantStart's
//! [`Store`](instantstart_core::store::Store) trait.
//!
//! [`SqliteStore`] keeps the control plane's durable state — operations and their steps, the
//! append-only audit log, the cluster registry and settings — in one SQLite file (the default).
//! [`PostgresStore`] keeps the same state, with the same guarantees, in a PostgreSQL database
//! that several servers can share (see its module docs for how each guarantee is kept there).
//! [`StoreUrl`] and [`open_store`] choose between them from a URL. [`backup_store`] takes an
//! online backup of a SQLite store (SQLite's backup API) while the server runs.
//!
//! # Guarantees (both backends; described here for SQLite)
//! - Every trait call is exactly one transaction (writes use `BEGIN IMMEDIATE`), committed
//!   before the call returns. The database runs in WAL mode with `synchronous=FULL`, so a
//!   committed call survives a process crash (and a power loss, as far as the disk honours
//!   `fsync`).
//! - At most one operation per target is `running`: checked by
//!   [`insert_operation`](instantstart_core::store::Store::insert_operation) and
//!   [`reopen_operation`](instantstart_core::store::Store::reopen_operation), and backed by a
//!   partial unique index in the schema.
//! - The schema is versioned ([`SCHEMA_VERSION`]); migrations run at open, each in its own
//!   transaction. Opening a database written by a newer build is refused.
//! - Timestamps round-trip exactly (RFC 3339 text with nanosecond precision, which also sorts
//!   chronologically).
//! - Tokens and sessions ([`CredentialStore`](instantstart_core::credentials::CredentialStore))
//!   are kept as hashes; revoking a token deletes its sessions in the same transaction.

mod backup;
mod codec;
mod credentials;
mod lease;
mod postgres;
mod schema;
mod sqlite;
mod url;

pub use backup::{BACKUP_PREFIX, BACKUP_SUFFIX, Backup, BackupError, backup_file_name, backup_sqlite, backup_store};
pub use postgres::{PostgresStore, RustlsConnect};
pub use schema::SCHEMA_VERSION;
pub use sqlite::SqliteStore;
pub use url::{InvalidStoreUrl, StoreBackend, StoreUrl, open_store};
