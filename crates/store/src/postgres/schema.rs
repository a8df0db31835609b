//! The PostgreSQL schema and its versioned migrations.
//!
//! [`MIGRATIONS`] mirrors the SQLite list (`crate::schema`) version for version, so "schema
//! version *n*" means the same tables and rules on either backend; it is ordered and
//! append-only. The `schema_migrations` table records each applied version. [`migrate`] runs
//! at connect: each migration in its own transaction holding the store's write lock
//! ([`WRITE_LOCK`], a transaction-scoped advisory lock), so concurrent servers cannot apply one
//! twice; a database whose version is newer than this build knows is refused.
//!
//! Differences from SQLite, all invisible to the trait: every text column uses the `"C"`
//! collation (byte order, as in SQLite, so RFC 3339 timestamps sort chronologically whatever
//! the database's locale); `operations.seq` (an identity column) replaces SQLite's `rowid` as
//! the tie-break between operations created in the same nanosecond; the audit log's
//! append-only rule is a PL/pgSQL trigger function refusing `UPDATE`, `DELETE` and `TRUNCATE`.
//!
//! Never edit a released migration; add a new one.

use crate::codec::{Context, ts};
use crate::schema::SCHEMA_VERSION;
use ::postgres::{Client, GenericClient};
use chrono::Utc;
use instantstart_core::store::StoreError;

/// The advisory lock every write transaction (and migration) takes first: writers are
/// serialized across every connection and every server, as SQLite's `BEGIN IMMEDIATE` does.
pub(crate) const WRITE_LOCK: i64 = 0x1a57_a125_7a27;

/// Version 1: operations, steps, audit, clusters, settings.
const V1: &str = r#"
CREATE TABLE operations (
    seq             BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id              TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    kind            TEXT COLLATE "C" NOT NULL,
    target          TEXT COLLATE "C" NOT NULL,
    status          TEXT COLLATE "C" NOT NULL,
    actor_face      TEXT COLLATE "C" NOT NULL,
    actor_principal TEXT COLLATE "C" NOT NULL,
    request         TEXT COLLATE "C" NOT NULL,   -- JSON
    idempotency_key TEXT COLLATE "C",
    request_hash    TEXT COLLATE "C" NOT NULL,
    error           TEXT COLLATE "C",
    created_at      TEXT COLLATE "C" NOT NULL,
    updated_at      TEXT COLLATE "C" NOT NULL,
    finished_at     TEXT COLLATE "C"
);
CREATE INDEX operations_target_status ON operations (target, status);
CREATE INDEX operations_status_created ON operations (status, created_at);
CREATE INDEX operations_created_at ON operations (created_at);
-- One running mutation per target (the store also checks it, to report a typed conflict).
CREATE UNIQUE INDEX operations_one_running_per_target ON operations (target) WHERE status = 'running';
CREATE UNIQUE INDEX operations_idempotency_key ON operations (idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE steps (
    operation_id      TEXT COLLATE "C" NOT NULL REFERENCES operations (id) ON DELETE CASCADE,
    key               TEXT COLLATE "C" NOT NULL,
    position          BIGINT NOT NULL,  -- order in which the workflow listed the steps
    title             TEXT COLLATE "C" NOT NULL,
    depends_on        TEXT COLLATE "C" NOT NULL,     -- JSON array of step keys
    phase             TEXT COLLATE "C" NOT NULL,
    attempts          BIGINT NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    idempotency_token TEXT COLLATE "C" NOT NULL,
    resource          TEXT COLLATE "C",              -- JSON ResourceRef
    outputs           TEXT COLLATE "C" NOT NULL,     -- JSON
    detail            TEXT COLLATE "C",
    error             TEXT COLLATE "C",
    expected_secs     BIGINT CHECK (expected_secs IS NULL OR expected_secs >= 0),
    started_at        TEXT COLLATE "C",
    finished_at       TEXT COLLATE "C",
    updated_at        TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (operation_id, key),
    UNIQUE (operation_id, position)
);

-- Append-only: the trigger below refuses updates, deletes and truncation. No foreign key on
-- operation_id: recording who did what must never fail because of what it refers to.
CREATE TABLE audit (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at              TEXT COLLATE "C" NOT NULL,
    actor_face      TEXT COLLATE "C" NOT NULL,
    actor_principal TEXT COLLATE "C" NOT NULL,
    action          TEXT COLLATE "C" NOT NULL,
    target          TEXT COLLATE "C" NOT NULL,
    operation_id    TEXT COLLATE "C",
    detail          TEXT COLLATE "C" NOT NULL    -- JSON
);
CREATE INDEX audit_at ON audit (at);
CREATE INDEX audit_target_at ON audit (target, at);
CREATE INDEX audit_operation ON audit (operation_id);
CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only';
END
$$;
CREATE TRIGGER audit_no_change BEFORE UPDATE OR DELETE OR TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();

CREATE TABLE clusters (
    name        TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    region      TEXT COLLATE "C" NOT NULL,
    source      TEXT COLLATE "C" NOT NULL,
    eks_cluster TEXT COLLATE "C" NOT NULL,
    record      TEXT COLLATE "C" NOT NULL,   -- JSON ClusterRecord (the source of truth; the columns are for queries)
    created_at  TEXT COLLATE "C" NOT NULL,
    updated_at  TEXT COLLATE "C" NOT NULL
);
CREATE INDEX clusters_region ON clusters (region);

CREATE TABLE settings (
    key        TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    value      TEXT COLLATE "C" NOT NULL,
    updated_at TEXT COLLATE "C" NOT NULL
);
"#;

/// Version 2: each target's operations newest first, for the latest operation of many targets
/// in one query (the cluster list).
const V2: &str = r#"
CREATE INDEX operations_target_created ON operations (target, created_at, seq);
"#;

/// Version 3: API tokens and browser sessions (hashes only), shared by every server on the
/// database so a revocation is seen everywhere at once.
const V3: &str = r#"
CREATE TABLE tokens (
    name        TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    scope       TEXT COLLATE "C" NOT NULL,
    sha256      TEXT COLLATE "C" NOT NULL UNIQUE,
    created_at  TEXT COLLATE "C" NOT NULL,
    expires_at  TEXT COLLATE "C",
    created_by  TEXT COLLATE "C" NOT NULL
);
CREATE TABLE sessions (
    id_sha256    TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    token_name   TEXT COLLATE "C" NOT NULL,
    token_sha256 TEXT COLLATE "C" NOT NULL,
    scope        TEXT COLLATE "C" NOT NULL,
    csrf         TEXT COLLATE "C" NOT NULL,
    created_at   TEXT COLLATE "C" NOT NULL,
    expires_at   TEXT COLLATE "C" NOT NULL
);
CREATE INDEX sessions_token_name ON sessions (token_name);
CREATE INDEX sessions_expires_at ON sessions (expires_at);
"#;

/// Version 4: several replicas on one store. `leases`: who drives each running operation,
/// until when (microseconds since the epoch on the database's clock; 0 once released), and the
/// fencing token every driver write carries. `operation_changes`: the change feed replicas
/// relay to their live streams (sequence numbers are taken under the write lock, so they
/// commit in order and a reader never skips one).
const V4: &str = r#"
CREATE TABLE leases (
    operation_id TEXT COLLATE "C" PRIMARY KEY NOT NULL REFERENCES operations (id) ON DELETE CASCADE,
    replica      TEXT COLLATE "C" NOT NULL,
    token        BIGINT NOT NULL CHECK (token > 0),
    expires_at   BIGINT NOT NULL
);
CREATE TABLE operation_changes (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    replica      TEXT COLLATE "C" NOT NULL,
    operation_id TEXT COLLATE "C" NOT NULL,
    operation    TEXT COLLATE "C" NOT NULL   -- JSON Operation, right after the change
);
"#;

/// Version 5: keyset pagination (`instantstart_core::page`). Each list's index ends in its
/// tie-break column (SQLite's indexes carry the rowid implicitly; here `seq` and `id` are named).
const V5: &str = r#"
CREATE INDEX operations_created_seq ON operations (created_at, seq);
CREATE INDEX operations_status_created_seq ON operations (status, created_at, seq);
DROP INDEX operations_created_at;
DROP INDEX operations_status_created;
CREATE INDEX audit_at_id ON audit (at, id);
CREATE INDEX audit_target_at_id ON audit (target, at, id);
DROP INDEX audit_at;
DROP INDEX audit_target_at;
"#;

/// Version 6: the Kubernetes bindings of a token (JSON array of `KubeBinding`; `[]` = unbound).
const V6: &str = r#"
ALTER TABLE tokens ADD COLUMN kube_bindings TEXT COLLATE "C" NOT NULL DEFAULT '[]';
"#;

/// Version 7: the operations archive (`Store::archive_operations`), as in SQLite: archived
/// operations keep their rows with `archived = TRUE`; the faces' lists read the hot ones
/// through partial indexes. And an index for the newest operation of some kinds per target.
const V7: &str = r#"
ALTER TABLE operations ADD COLUMN archived BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX operations_hot_created_seq ON operations (created_at, seq) WHERE NOT archived;
CREATE INDEX operations_hot_finished ON operations (finished_at) WHERE NOT archived AND finished_at IS NOT NULL;
CREATE INDEX operations_archived_created_seq ON operations (created_at, seq) WHERE archived;
CREATE INDEX operations_target_kind_created_seq ON operations (target, kind, created_at, seq);
"#;

/// Version 8: operations counted by status without reading them, as in SQLite: one row per
/// status in `operation_counts`, kept by a trigger in the transaction of every insert, status
/// change and delete (writers already serialize on [`WRITE_LOCK`], so the rows add no
/// contention). Filled from the table once, here.
const V8: &str = r#"
CREATE TABLE operation_counts (
    status TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    n      BIGINT NOT NULL CHECK (n >= 0)
);
INSERT INTO operation_counts (status, n) SELECT status, COUNT(*) FROM operations GROUP BY status;
CREATE FUNCTION operation_counts_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE operation_counts SET n = n - 1 WHERE status = OLD.status;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO operation_counts (status, n) VALUES (NEW.status, 1)
            ON CONFLICT (status) DO UPDATE SET n = operation_counts.n + 1;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER operation_counts_insert_delete AFTER INSERT OR DELETE ON operations
    FOR EACH ROW EXECUTE FUNCTION operation_counts_keep();
CREATE TRIGGER operation_counts_update AFTER UPDATE OF status ON operations
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION operation_counts_keep();
"#;

/// Every migration, oldest first. Append only; one per SQLite migration.
pub(crate) const MIGRATIONS: &[&str] = &[V1, V2, V3, V4, V5, V6, V7, V8];

/// Highest applied version (0 for a fresh database).
pub(crate) fn current_version(conn: &mut impl GenericClient) -> Result<u32, StoreError> {
    let v: i64 = conn
        .query_one("SELECT COALESCE(MAX(version), 0)::BIGINT FROM schema_migrations", &[])
        .and_then(|r| r.try_get(0))
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
pub(crate) fn migrate(client: &mut Client) -> Result<(), StoreError> {
    let mut tx = client.transaction().ctx("begin")?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK]).ctx("take the write lock")?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             version    BIGINT PRIMARY KEY NOT NULL,
             applied_at TEXT NOT NULL
         )",
    )
    .ctx("create schema_migrations")?;
    let found = current_version(&mut tx)?;
    tx.commit().ctx("commit schema_migrations")?;
    if found > SCHEMA_VERSION {
        return Err(too_new(found));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        let version = i as u32 + 1;
        let mut tx = client.transaction().ctx("begin migration")?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK]).ctx("take the write lock")?;
        // Re-read under the lock: another server may have migrated meanwhile.
        let current = current_version(&mut tx)?;
        if current > SCHEMA_VERSION {
            return Err(too_new(current));
        }
        if current >= version {
            continue;
        }
        tx.batch_execute(sql).ctx(&format!("apply migration {version}"))?;
        tx.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)",
            &[&i64::from(version), &ts(&Utc::now())],
        )
        .ctx(&format!("record migration {version}"))?;
        tx.commit().ctx(&format!("commit migration {version}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_sqlite_migration_has_its_postgres_twin() {
        assert_eq!(super::MIGRATIONS.len(), crate::schema::MIGRATIONS.len());
    }
}
