//! The database schema and its versioned migrations.
//!
//! [`MIGRATIONS`] is an ordered, append-only list of SQL scripts; migration *n* (1-based) brings
//! the schema to version *n*. The `schema_migrations` table records each applied version with
//! the time it was applied. [`migrate`] runs at open: it applies every missing migration, each
//! in its own `BEGIN IMMEDIATE` transaction (so concurrent openers cannot apply one twice), and
//! refuses a database whose version is newer than this build knows.
//!
//! Never edit a released migration; add a new one.

use crate::codec::{Context, ts};
use chrono::Utc;
use instantstart_core::store::StoreError;
use rusqlite::{Connection, TransactionBehavior};

/// Version 1: operations, steps, audit, clusters, settings.
const V1: &str = r#"
CREATE TABLE operations (
    id              TEXT PRIMARY KEY NOT NULL,
    kind            TEXT NOT NULL,
    target          TEXT NOT NULL,
    status          TEXT NOT NULL,
    actor_face      TEXT NOT NULL,
    actor_principal TEXT NOT NULL,
    request         TEXT NOT NULL,   -- JSON
    idempotency_key TEXT,
    request_hash    TEXT NOT NULL,
    error           TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    finished_at     TEXT
);
CREATE INDEX operations_target_status ON operations (target, status);
CREATE INDEX operations_status_created ON operations (status, created_at);
CREATE INDEX operations_created_at ON operations (created_at);
-- One running mutation per target (the store also checks it, to report a typed conflict).
CREATE UNIQUE INDEX operations_one_running_per_target ON operations (target) WHERE status = 'running';
CREATE UNIQUE INDEX operations_idempotency_key ON operations (idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE steps (
    operation_id      TEXT NOT NULL REFERENCES operations (id) ON DELETE CASCADE,
    key               TEXT NOT NULL,
    position          INTEGER NOT NULL,  -- order in which the workflow listed the steps
    title             TEXT NOT NULL,
    depends_on        TEXT NOT NULL,     -- JSON array of step keys
    phase             TEXT NOT NULL,
    attempts          INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    idempotency_token TEXT NOT NULL,
    resource          TEXT,              -- JSON ResourceRef
    outputs           TEXT NOT NULL,     -- JSON
    detail            TEXT,
    error             TEXT,
    expected_secs     INTEGER CHECK (expected_secs IS NULL OR expected_secs >= 0),
    started_at        TEXT,
    finished_at       TEXT,
    updated_at        TEXT NOT NULL,
    PRIMARY KEY (operation_id, key),
    UNIQUE (operation_id, position)
) WITHOUT ROWID;

-- Append-only: the triggers below refuse updates and deletes. No foreign key on operation_id:
-- recording who did what must never fail because of what it refers to.
CREATE TABLE audit (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    at              TEXT NOT NULL,
    actor_face      TEXT NOT NULL,
    actor_principal TEXT NOT NULL,
    action          TEXT NOT NULL,
    target          TEXT NOT NULL,
    operation_id    TEXT,
    detail          TEXT NOT NULL    -- JSON
);
CREATE INDEX audit_at ON audit (at);
CREATE INDEX audit_target_at ON audit (target, at);
CREATE INDEX audit_operation ON audit (operation_id);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;

CREATE TABLE clusters (
    name        TEXT PRIMARY KEY NOT NULL,
    region      TEXT NOT NULL,
    source      TEXT NOT NULL,
    eks_cluster TEXT NOT NULL,
    record      TEXT NOT NULL,   -- JSON ClusterRecord (the source of truth; the columns are for queries)
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE INDEX clusters_region ON clusters (region);

CREATE TABLE settings (
    key        TEXT PRIMARY KEY NOT NULL,
    value      TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
"#;

/// Version 2: each target's operations newest first, for the latest operation of many targets
/// in one query (the cluster list).
const V2: &str = r#"
CREATE INDEX operations_target_created ON operations (target, created_at);
"#;

/// Version 3: API tokens and browser sessions (hashes only), shared by every server on the
/// database so a revocation is seen everywhere at once.
const V3: &str = r#"
CREATE TABLE tokens (
    name        TEXT PRIMARY KEY NOT NULL,
    scope       TEXT NOT NULL,
    sha256      TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL,
    expires_at  TEXT,
    created_by  TEXT NOT NULL
);
CREATE TABLE sessions (
    id_sha256    TEXT PRIMARY KEY NOT NULL,
    token_name   TEXT NOT NULL,
    token_sha256 TEXT NOT NULL,
    scope        TEXT NOT NULL,
    csrf         TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    expires_at   TEXT NOT NULL
);
CREATE INDEX sessions_token_name ON sessions (token_name);
CREATE INDEX sessions_expires_at ON sessions (expires_at);
"#;

/// Version 4: several replicas on one store. `leases`: who drives each running operation,
/// until when, and the fencing token every driver write carries (times are microseconds since
/// the epoch; a released lease has `expires_at = 0`). `operation_changes`: the change feed
/// replicas relay to their live streams (each operation's state after a change, by sequence
/// number; pruned to the newest rows).
const V4: &str = r#"
CREATE TABLE leases (
    operation_id TEXT PRIMARY KEY NOT NULL REFERENCES operations (id) ON DELETE CASCADE,
    replica      TEXT NOT NULL,
    token        INTEGER NOT NULL CHECK (token > 0),
    expires_at   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE operation_changes (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    replica      TEXT NOT NULL,
    operation_id TEXT NOT NULL,
    operation    TEXT NOT NULL   -- JSON Operation, right after the change
);
"#;

/// Version 5: keyset pagination (`instantstart_core::page`). SQLite's indexes already end in
/// the rowid, the tie-break of every list (`operations_created_at`, `operations_status_created`,
/// `operations_target_created`, `audit_at`, `audit_target_at`), so nothing changes here; the
/// version exists so that "schema version 5" means the same on both backends (PostgreSQL adds
/// its `seq`/`id` columns to those indexes).
const V5: &str = "-- no change: see the doc comment";

/// Version 6: the Kubernetes bindings of a token (JSON array of `KubeBinding`; `[]` = unbound).
const V6: &str = r#"
ALTER TABLE tokens ADD COLUMN kube_bindings TEXT NOT NULL DEFAULT '[]';
"#;

/// Version 7: the operations archive (`Store::archive_operations`). Archived operations stay in
/// the table (steps, audit, reads by id unchanged) with `archived = 1`; the faces' lists read
/// `archived = 0` through partial indexes that hold the hot operations only. And an index for
/// the newest operation of some kinds per target.
const V7: &str = r#"
ALTER TABLE operations ADD COLUMN archived INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1));
CREATE INDEX operations_hot_created ON operations (created_at) WHERE archived = 0;
CREATE INDEX operations_hot_finished ON operations (finished_at) WHERE archived = 0 AND finished_at IS NOT NULL;
CREATE INDEX operations_archived_created ON operations (created_at) WHERE archived = 1;
-- The newest operation of some kinds per target (a cluster's lifecycle status) in one seek per
-- target and kind, instead of a scan back over every change since the cluster was created.
CREATE INDEX operations_target_kind_created ON operations (target, kind, created_at);
"#;

/// Version 8: operations counted by status (`Store::count_operations`, behind `/metrics`)
/// without reading the operations: `operation_counts` holds one row per status, kept by
/// triggers in the transaction of every insert, status change and delete, so it cannot drift
/// from the table whichever statement changes it. Filled from the table once, here.
const V8: &str = r#"
CREATE TABLE operation_counts (
    status TEXT PRIMARY KEY NOT NULL,
    n      INTEGER NOT NULL CHECK (n >= 0)
) WITHOUT ROWID;
INSERT INTO operation_counts (status, n) SELECT status, COUNT(*) FROM operations GROUP BY status;
CREATE TRIGGER operation_counts_insert AFTER INSERT ON operations BEGIN
    INSERT INTO operation_counts (status, n) VALUES (NEW.status, 1)
        ON CONFLICT (status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER operation_counts_update AFTER UPDATE OF status ON operations
WHEN OLD.status IS NOT NEW.status BEGIN
    UPDATE operation_counts SET n = n - 1 WHERE status = OLD.status;
    INSERT INTO operation_counts (status, n) VALUES (NEW.status, 1)
        ON CONFLICT (status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER operation_counts_delete AFTER DELETE ON operations BEGIN
    UPDATE operation_counts SET n = n - 1 WHERE status = OLD.status;
END;
"#;

/// Every migration, oldest first. Append only.
pub(crate) const MIGRATIONS: &[&str] = &[V1, V2, V3, V4, V5, V6, V7, V8];

/// The schema version this build writes: the number of known migrations.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Highest applied version (0 for a fresh database).
pub(crate) fn current_version(conn: &Connection) -> Result<u32, StoreError> {
    let v: i64 = conn
        .query_row("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", [], |r| r.get(0))
        .ctx("read schema version")?;
    u32::try_from(v).map_err(|_| StoreError::Backend(format!("invalid schema version {v} in schema_migrations")))
}

fn too_new(found: u32) -> StoreError {
    StoreError::Backend(format!(
        "database schema version {found} is newer than this build of InstantStart supports \
         (version {SCHEMA_VERSION}); upgrade InstantStart to open it"
    ))
}

/// Brings the schema to [`SCHEMA_VERSION`]; see the module docs.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             version    INTEGER PRIMARY KEY NOT NULL,
             applied_at TEXT NOT NULL
         )",
    )
    .ctx("create schema_migrations")?;
    let found = current_version(conn)?;
    if found > SCHEMA_VERSION {
        return Err(too_new(found));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        let version = i as u32 + 1;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).ctx("begin migration")?;
        // Re-read under the write lock: another process may have migrated meanwhile.
        let current = current_version(&tx)?;
        if current > SCHEMA_VERSION {
            return Err(too_new(current));
        }
        if current >= version {
            continue;
        }
        tx.execute_batch(sql).ctx(&format!("apply migration {version}"))?;
        tx.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (?1, ?2)",
            rusqlite::params![version, ts(&Utc::now())],
        )
        .ctx(&format!("record migration {version}"))?;
        tx.commit().ctx(&format!("commit migration {version}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrating_twice_applies_each_version_once() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        migrate(&mut conn).unwrap();
        let n: i64 = conn.query_row("SELECT COUNT(*) FROM schema_migrations", [], |r| r.get(0)).unwrap();
        assert_eq!(n, i64::from(SCHEMA_VERSION));
        assert_eq!(current_version(&conn).unwrap(), SCHEMA_VERSION);
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        conn.execute("INSERT INTO schema_migrations VALUES (?1, 'x')", [SCHEMA_VERSION + 1]).unwrap();
        let err = migrate(&mut conn).unwrap_err();
        assert!(matches!(&err, StoreError::Backend(m) if m.contains("newer")), "{err}");
    }

    #[test]
    fn a_failing_migration_leaves_no_trace() {
        // The body of a migration and its version row commit together or not at all.
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL); CREATE TABLE operations (x)").unwrap();
        assert!(migrate(&mut conn).is_err());
        assert_eq!(current_version(&conn).unwrap(), 0);
        let steps: i64 =
            conn.query_row("SELECT COUNT(*) FROM sqlite_master WHERE name = 'steps'", [], |r| r.get(0)).unwrap();
        assert_eq!(steps, 0);
    }
}
