//! [`SqliteStore`]: the [`Store`] trait over one SQLite connection.
//!
//! The connection sits behind a [`Mutex`]; every trait call takes the lock, runs exactly one
//! transaction and commits before returning. Writes begin with `BEGIN IMMEDIATE`, so they take
//! the database write lock up front: a check-then-insert (idempotency key, one running
//! operation per target) cannot race with another writer, even one in another process.
//! Reads run in a deferred transaction, so a multi-statement read (an operation and its steps)
//! sees one snapshot.

use crate::codec::{
    Context, corrupt, cursor_position, enum_str, from_json, opt_ts, parse_opt_ts, parse_ts, to_json, ts, u32_from_sql,
    u64_from_sql, u64_to_sql,
};
use crate::lease::{self, LeaseRow};
use crate::schema;
use chrono::Utc;
use instantstart_core::engine::step_token;
use instantstart_core::operation::{
    Actor, AuditEntry, Face, NewOperation, Operation, OperationId, OperationKind, OperationStatus, Step, StepPhase,
    StepUpdate,
};
use instantstart_core::page::{Cursor, Page, PageRequest};
use instantstart_core::store::{
    ARCHIVABLE, AUDIT_LIST, CHANGE_FEED_KEEP, CLUSTERS_LIST, ClusterRecord, Inserted, Lease, OPERATIONS_LIST,
    OperationChange, OperationFilter, OperationHead, Store, StoreError,
};
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OpenFlags, OptionalExtension, Row, Transaction, TransactionBehavior, params};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 128;

/// How long a call waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The SQLite store. See the crate docs for its guarantees.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: Option<PathBuf>,
    /// Write transactions run by this handle ([`Store::generation`]).
    writes: AtomicU64,
}

/// Creates `path` empty with mode `0600` when it is missing, and narrows it to `0600` when it
/// exists with a wider mode (a database made by an older version under the process umask).
fn private_file(path: &Path) -> Result<(), StoreError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let failed = |e: std::io::Error| StoreError::Backend(format!("{}: {e}", path.display()));
        match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let mode = std::fs::metadata(path).map_err(failed)?.permissions().mode();
                if mode & 0o077 != 0 {
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o700)).map_err(failed)?;
                }
            }
            Err(e) => return Err(failed(e)),
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

impl SqliteStore {
    /// Opens (creating if needed, along with its parent directory) the database at `path`,
    /// configures it (WAL, `synchronous=FULL`, foreign keys, busy timeout) and migrates it.
    ///
    /// # Guarantees
    /// The database file is readable by its owner only (mode `0600`, also when it existed with
    /// a wider mode); SQLite gives its `-wal` and `-shm` files the database's mode.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Backend(format!("create directory {}: {e}", dir.display())))?;
        }
        private_file(path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).ctx(&format!("open {}", path.display()))?;
        let store = Self::init(conn, Some(path.to_path_buf()))?;
        for suffix in ["-wal", "-shm"] {
            let mut side = path.as_os_str().to_owned();
            side.push(suffix);
            let side = PathBuf::from(side);
            if side.exists() {
                private_file(&side)?;
            }
        }
        Ok(store)
    }

    /// A private in-memory database (for tests and dry runs); nothing survives the value.
    pub fn open_in_memory() -> Result<Self, StoreError> {
        let conn = Connection::open_in_memory().ctx("open in-memory database")?;
        Self::init(conn, None)
    }

    fn init(mut conn: Connection, path: Option<PathBuf>) -> Result<Self, StoreError> {
        conn.busy_timeout(BUSY_TIMEOUT).ctx("set busy_timeout")?;
        if path.is_some() {
            let mode: String =
                conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0)).ctx("set journal_mode=WAL")?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(StoreError::Backend(format!("cannot enable WAL journal mode (got {mode})")));
            }
        }
        conn.pragma_update(None, "synchronous", "FULL").ctx("set synchronous=FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON").ctx("enable foreign keys")?;
        let fk: i64 = conn.pragma_query_value(None, "foreign_keys", |r| r.get(0)).ctx("read foreign_keys")?;
        if fk != 1 {
            return Err(StoreError::Backend("this SQLite build cannot enforce foreign keys".into()));
        }
        schema::migrate(&mut conn)?;
        // Every statement the store runs, prepared once (rusqlite keeps 16 by default; the
        // store has more shapes than that, and a read that recompiles its SQL costs more than
        // the read).
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(SqliteStore { conn: Mutex::new(conn), path, writes: AtomicU64::new(0) })
    }

    /// The database file, or `None` for an in-memory store.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The schema version recorded in the database.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        schema::current_version(&self.lock())
    }

    /// Runs `PRAGMA integrity_check`; `Ok` when SQLite reports `ok`, otherwise the problems.
    pub fn integrity_check(&self) -> Result<(), StoreError> {
        let conn = self.lock();
        let mut stmt = conn.prepare("PRAGMA integrity_check").ctx("integrity check")?;
        let lines: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .ctx("integrity check")?
            .collect::<rusqlite::Result<_>>()
            .ctx("integrity check")?;
        if lines.len() == 1 && lines[0] == "ok" {
            Ok(())
        } else {
            Err(StoreError::Backend(format!("integrity check failed: {}", lines.join("; "))))
        }
    }

    /// The connection. A panic while the lock was held cannot leave a half-done transaction
    /// behind (dropping a `Transaction` rolls it back), so a poisoned lock is recovered; an
    /// open transaction is rolled back defensively.
    fn lock(&self) -> MutexGuard<'_, Connection> {
        let guard = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        if !guard.is_autocommit() {
            let _ = guard.execute_batch("ROLLBACK");
        }
        guard
    }

    /// Runs `f` in one write transaction, committed before returning.
    pub(crate) fn write<T>(
        &self,
        what: &str,
        f: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).ctx(&format!("{what}: begin"))?;
        let out = f(&tx).map_err(|e| with_context(what, e));
        let committed = out.and_then(|out| tx.commit().ctx(&format!("{what}: commit")).map(|()| out));
        // Under the connection's lock, so a reader of the generation after this write sees it.
        self.writes.fetch_add(1, Ordering::Release);
        committed
    }

    /// Runs `f` in one read transaction (one consistent snapshot).
    pub(crate) fn read<T>(
        &self,
        what: &str,
        f: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred).ctx(&format!("{what}: begin"))?;
        let out = f(&tx).map_err(|e| with_context(what, e))?;
        tx.commit().ctx(&format!("{what}: end"))?;
        Ok(out)
    }
}

fn with_context(what: &str, e: StoreError) -> StoreError {
    match e {
        StoreError::Backend(m) => StoreError::Backend(format!("{what}: {m}")),
        other => other,
    }
}

fn op_not_found(id: &OperationId) -> StoreError {
    StoreError::NotFound { what: format!("operation {id}") }
}

const OP_COLUMNS: &str = "id, kind, target, status, actor_face, actor_principal, request, idempotency_key, \
                          request_hash, error, created_at, updated_at, finished_at";

/// An `operations` row as stored, before decoding.
struct OpRow {
    id: String,
    kind: String,
    target: String,
    status: String,
    actor_face: String,
    actor_principal: String,
    request: String,
    idempotency_key: Option<String>,
    request_hash: String,
    error: Option<String>,
    created_at: String,
    updated_at: String,
    finished_at: Option<String>,
}

impl OpRow {
    fn from_row(r: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(OpRow {
            id: r.get(0)?,
            kind: r.get(1)?,
            target: r.get(2)?,
            status: r.get(3)?,
            actor_face: r.get(4)?,
            actor_principal: r.get(5)?,
            request: r.get(6)?,
            idempotency_key: r.get(7)?,
            request_hash: r.get(8)?,
            error: r.get(9)?,
            created_at: r.get(10)?,
            updated_at: r.get(11)?,
            finished_at: r.get(12)?,
        })
    }

    fn decode(self, steps: Vec<Step>) -> Result<Operation, StoreError> {
        Ok(Operation {
            kind: OperationKind::parse(&self.kind).ok_or_else(|| corrupt("operations.kind", &self.kind))?,
            status: parse_status(&self.status)?,
            actor: Actor {
                face: Face::parse(&self.actor_face)
                    .ok_or_else(|| corrupt("operations.actor_face", &self.actor_face))?,
                principal: self.actor_principal,
            },
            request: from_json("operations.request", &self.request)?,
            idempotency_key: self.idempotency_key,
            request_hash: self.request_hash,
            steps,
            error: self.error,
            created_at: parse_ts("operations.created_at", &self.created_at)?,
            updated_at: parse_ts("operations.updated_at", &self.updated_at)?,
            finished_at: parse_opt_ts("operations.finished_at", self.finished_at.as_deref())?,
            target: self.target,
            id: OperationId(self.id),
        })
    }
}

fn parse_status(s: &str) -> Result<OperationStatus, StoreError> {
    OperationStatus::parse(s).ok_or_else(|| corrupt("operations.status", s))
}

const STEP_COLUMNS: &str = "key, title, depends_on, phase, attempts, idempotency_token, resource, outputs, detail, \
                            error, expected_secs, started_at, finished_at, updated_at";

/// A `steps` row as stored, before decoding.
struct StepRow {
    key: String,
    title: String,
    depends_on: String,
    phase: String,
    attempts: i64,
    idempotency_token: String,
    resource: Option<String>,
    outputs: String,
    detail: Option<String>,
    error: Option<String>,
    expected_secs: Option<i64>,
    started_at: Option<String>,
    finished_at: Option<String>,
    updated_at: String,
}

impl StepRow {
    fn from_row(r: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(StepRow {
            key: r.get(0)?,
            title: r.get(1)?,
            depends_on: r.get(2)?,
            phase: r.get(3)?,
            attempts: r.get(4)?,
            idempotency_token: r.get(5)?,
            resource: r.get(6)?,
            outputs: r.get(7)?,
            detail: r.get(8)?,
            error: r.get(9)?,
            expected_secs: r.get(10)?,
            started_at: r.get(11)?,
            finished_at: r.get(12)?,
            updated_at: r.get(13)?,
        })
    }

    fn decode(self) -> Result<Step, StoreError> {
        Ok(Step {
            title: self.title,
            depends_on: from_json("steps.depends_on", &self.depends_on)?,
            phase: StepPhase::parse(&self.phase).ok_or_else(|| corrupt("steps.phase", &self.phase))?,
            attempts: u32_from_sql("steps.attempts", self.attempts)?,
            idempotency_token: self.idempotency_token,
            resource: self.resource.as_deref().map(|r| from_json("steps.resource", r)).transpose()?,
            outputs: from_json("steps.outputs", &self.outputs)?,
            detail: self.detail,
            error: self.error,
            expected_secs: self.expected_secs.map(|v| u64_from_sql("steps.expected_secs", v)).transpose()?,
            started_at: parse_opt_ts("steps.started_at", self.started_at.as_deref())?,
            finished_at: parse_opt_ts("steps.finished_at", self.finished_at.as_deref())?,
            updated_at: parse_ts("steps.updated_at", &self.updated_at)?,
            key: self.key,
        })
    }
}

fn load_steps(conn: &Connection, id: &str) -> Result<Vec<Step>, StoreError> {
    let mut stmt = conn
        .prepare_cached(&format!("SELECT {STEP_COLUMNS} FROM steps WHERE operation_id = ?1 ORDER BY position"))
        .ctx("prepare step query")?;
    let rows: Vec<StepRow> = stmt
        .query_map([id], StepRow::from_row)
        .ctx("query steps")?
        .collect::<rusqlite::Result<_>>()
        .ctx("read steps")?;
    rows.into_iter().map(StepRow::decode).collect()
}

fn load_step(conn: &Connection, id: &OperationId, key: &str) -> Result<Option<Step>, StoreError> {
    let mut stmt = conn
        .prepare_cached(&format!("SELECT {STEP_COLUMNS} FROM steps WHERE operation_id = ?1 AND key = ?2"))
        .ctx("prepare step query")?;
    let row = stmt.query_row(params![id.0, key], StepRow::from_row).optional().ctx("read step")?;
    row.map(StepRow::decode).transpose()
}

/// The operations query of `filter`, newest first, after `after` (a cursor of
/// [`OPERATIONS_LIST`]), at most `limit` rows (negative: no limit).
fn operations_query(
    filter: &OperationFilter,
    after: Option<&Cursor>,
    limit: i64,
) -> Result<(String, Vec<SqlValue>), StoreError> {
    let mut sql = format!("SELECT {OP_COLUMNS} FROM operations WHERE 1 = 1");
    let mut args = Vec::new();
    if let Some(target) = &filter.target {
        args.push(SqlValue::Text(target.clone()));
        sql.push_str(&format!(" AND target = ?{}", args.len()));
    }
    if let Some(status) = filter.status {
        args.push(SqlValue::Text(status.as_str().into()));
        sql.push_str(&format!(" AND status = ?{}", args.len()));
    }
    // Literal, not a parameter: SQLite uses a partial index only when the query states its
    // condition.
    match filter.archived {
        Some(false) => sql.push_str(" AND archived = 0"),
        Some(true) => sql.push_str(" AND archived = 1"),
        None => {}
    }
    if let Some(after) = after {
        let (created, rowid) = cursor_position(after)?;
        args.push(SqlValue::Text(created));
        args.push(SqlValue::Integer(rowid));
        sql.push_str(&format!(" AND (created_at, rowid) < (?{}, ?{})", args.len() - 1, args.len()));
    }
    // A negative LIMIT means no limit in SQLite.
    args.push(SqlValue::Integer(limit));
    sql.push_str(&format!(" ORDER BY created_at DESC, rowid DESC LIMIT ?{}", args.len()));
    Ok((sql, args))
}

/// Audit entries with their id, newest first, of `target` (all when `None`), after `after`
/// (at, id), at most `limit` (negative: no limit).
fn query_audit(
    tx: &Transaction<'_>,
    target: Option<&str>,
    after: Option<(String, i64)>,
    limit: i64,
) -> Result<Vec<(i64, AuditEntry)>, StoreError> {
    // One statement per shape rather than `?1 IS NULL OR …`, so each can use its index.
    let mut sql = "SELECT id, at, actor_face, actor_principal, action, target, operation_id, detail FROM audit \
                   WHERE 1 = 1"
        .to_string();
    let mut args: Vec<SqlValue> = Vec::new();
    if let Some(t) = target {
        args.push(SqlValue::Text(t.to_string()));
        sql.push_str(&format!(" AND target = ?{}", args.len()));
    }
    if let Some((at, id)) = after {
        args.push(SqlValue::Text(at));
        args.push(SqlValue::Integer(id));
        sql.push_str(&format!(" AND (at, id) < (?{}, ?{})", args.len() - 1, args.len()));
    }
    args.push(SqlValue::Integer(limit));
    sql.push_str(&format!(" ORDER BY at DESC, id DESC LIMIT ?{}", args.len()));
    type AuditRow = (i64, String, String, String, String, String, Option<String>, String);
    let mut stmt = tx.prepare_cached(&sql).ctx("prepare audit query")?;
    let rows: Vec<AuditRow> = stmt
        .query_map(rusqlite::params_from_iter(&args), |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?))
        })
        .ctx("query audit")?
        .collect::<rusqlite::Result<_>>()
        .ctx("read audit")?;
    rows.into_iter()
        .map(|(id, at, face, principal, action, target, operation_id, detail)| {
            Ok((
                id,
                AuditEntry {
                    at: parse_ts("audit.at", &at)?,
                    actor: Actor {
                        face: Face::parse(&face).ok_or_else(|| corrupt("audit.actor_face", &face))?,
                        principal,
                    },
                    action,
                    target,
                    operation_id: operation_id.map(OperationId),
                    detail: from_json("audit.detail", &detail)?,
                },
            ))
        })
        .collect()
}

/// Runs an operations query (`SELECT {OP_COLUMNS} FROM operations …`) and loads each
/// operation's steps.
fn query_operations(conn: &Connection, sql: &str, args: &[SqlValue]) -> Result<Vec<Operation>, StoreError> {
    let mut stmt = conn.prepare_cached(sql).ctx("prepare operation query")?;
    let rows: Vec<OpRow> = stmt
        .query_map(rusqlite::params_from_iter(args), OpRow::from_row)
        .ctx("query operations")?
        .collect::<rusqlite::Result<_>>()
        .ctx("read operations")?;
    rows.into_iter()
        .map(|row| {
            let steps = load_steps(conn, &row.id)?;
            row.decode(steps)
        })
        .collect()
}

fn load_operation(conn: &Connection, id: &OperationId) -> Result<Option<Operation>, StoreError> {
    let sql = format!("SELECT {OP_COLUMNS} FROM operations WHERE id = ?1");
    Ok(query_operations(conn, &sql, &[SqlValue::Text(id.0.clone())])?.pop())
}

fn load_operation_by_key(conn: &Connection, key: &str) -> Result<Option<Operation>, StoreError> {
    let sql = format!("SELECT {OP_COLUMNS} FROM operations WHERE idempotency_key = ?1");
    Ok(query_operations(conn, &sql, &[SqlValue::Text(key.to_string())])?.pop())
}

/// The running operation on `target` other than `except`, if any.
fn running_on(
    conn: &Connection,
    target: &str,
    except: Option<&OperationId>,
) -> Result<Option<OperationId>, StoreError> {
    conn.query_row(
        "SELECT id FROM operations WHERE target = ?1 AND status = 'running' AND id IS NOT ?2 \
         ORDER BY created_at, rowid LIMIT 1",
        params![target, except.map(|e| e.0.as_str())],
        |r| r.get::<_, String>(0),
    )
    .optional()
    .ctx("look for a running operation")
    .map(|id| id.map(OperationId))
}

/// Sets an operation's status; `Running` is refused while another operation holds the target.
fn set_status(
    tx: &Transaction<'_>,
    id: &OperationId,
    status: OperationStatus,
    error: Option<&str>,
) -> Result<(), StoreError> {
    let target: String = tx
        .prepare_cached("SELECT target FROM operations WHERE id = ?1")
        .and_then(|mut s| s.query_row([&id.0], |r| r.get(0)))
        .optional()
        .ctx("read operation")?
        .ok_or_else(|| op_not_found(id))?;
    if status == OperationStatus::Running
        && let Some(running) = running_on(tx, &target, Some(id))?
    {
        return Err(StoreError::Conflict { target, running });
    }
    let now = ts(&Utc::now());
    let finished_at = status.is_terminal().then(|| now.clone());
    tx.execute(
        "UPDATE operations SET status = ?2, error = ?3, updated_at = ?4, finished_at = ?5, archived = 0 WHERE id = ?1",
        params![id.0, status.as_str(), error, now, finished_at],
    )
    .ctx("update operation status")?;
    Ok(())
}

/// Applies `update` to one step (and touches its operation) inside `tx`; the stored step.
fn apply_step_update(
    tx: &Transaction<'_>,
    id: &OperationId,
    key: &str,
    update: &StepUpdate,
) -> Result<Step, StoreError> {
    let Some(mut step) = load_step(tx, id, key)? else {
        let op_exists = tx
            .query_row("SELECT 1 FROM operations WHERE id = ?1", [&id.0], |_| Ok(()))
            .optional()
            .ctx("read operation")?
            .is_some();
        return Err(if op_exists {
            StoreError::NotFound { what: format!("step {key} of operation {id}") }
        } else {
            op_not_found(id)
        });
    };
    if let Some(phase) = update.phase {
        step.phase = phase;
    }
    if let Some(attempts) = update.attempts {
        step.attempts = attempts;
    }
    if let Some(resource) = &update.resource {
        step.resource = Some(resource.clone());
    }
    if let Some(outputs) = &update.outputs {
        step.outputs = outputs.clone();
    }
    if let Some(detail) = &update.detail {
        step.detail = detail.clone();
    }
    if let Some(error) = &update.error {
        step.error = error.clone();
    }
    if let Some(started_at) = update.started_at {
        step.started_at = Some(started_at);
    }
    if let Some(finished_at) = update.finished_at {
        step.finished_at = finished_at;
    }
    let now = ts(&Utc::now());
    tx.execute(
        "UPDATE steps SET phase = ?3, attempts = ?4, resource = ?5, outputs = ?6, detail = ?7, error = ?8, \
             started_at = ?9, finished_at = ?10, updated_at = ?11 WHERE operation_id = ?1 AND key = ?2",
        params![
            id.0,
            key,
            step.phase.as_str(),
            i64::from(step.attempts),
            step.resource.as_ref().map(|r| to_json("steps.resource", r)).transpose()?,
            to_json("steps.outputs", &step.outputs)?,
            step.detail,
            step.error,
            opt_ts(step.started_at.as_ref()),
            opt_ts(step.finished_at.as_ref()),
            now,
        ],
    )
    .ctx("write step")?;
    // A step change is a change of its operation.
    tx.execute("UPDATE operations SET updated_at = ?2 WHERE id = ?1", params![id.0, now]).ctx("touch operation")?;
    load_step(tx, id, key)?
        .ok_or_else(|| StoreError::Backend(format!("step {key} of operation {id} vanished while updated")))
}

/// The lease row and the status of operation `id` (either may be absent).
fn lease_state(tx: &Transaction<'_>, id: &OperationId) -> Result<(Option<String>, Option<LeaseRow>), StoreError> {
    let status: Option<String> = tx
        .query_row("SELECT status FROM operations WHERE id = ?1", [&id.0], |r| r.get(0))
        .optional()
        .ctx("read operation status")?;
    let row = tx
        .query_row("SELECT replica, token, expires_at FROM leases WHERE operation_id = ?1", [&id.0], |r| {
            Ok(LeaseRow { replica: r.get(0)?, token: r.get(1)?, expires_us: r.get(2)? })
        })
        .optional()
        .ctx("read lease")?;
    Ok((status, row))
}

/// Refuses the write unless `lease` is still the operation's live lease ([`lease::check`]).
fn check_fence(tx: &Transaction<'_>, lease: &Lease) -> Result<(), StoreError> {
    let (status, row) = lease_state(tx, &lease.operation_id)?;
    lease::check(lease, status.as_deref(), row.as_ref(), lease::micros(Utc::now()))
}

/// Appends one change to the feed and prunes the oldest beyond [`CHANGE_FEED_KEEP`].
fn insert_change(tx: &Transaction<'_>, replica: &str, operation: &Operation, json: &str) -> Result<u64, StoreError> {
    tx.execute(
        "INSERT INTO operation_changes (replica, operation_id, operation) VALUES (?1, ?2, ?3)",
        params![replica, operation.id.0, json],
    )
    .ctx("insert change")?;
    let seq = tx.last_insert_rowid();
    let keep = i64::try_from(CHANGE_FEED_KEEP).unwrap_or(i64::MAX);
    tx.execute("DELETE FROM operation_changes WHERE seq <= ?1", [seq - keep]).ctx("prune changes")?;
    u64_from_sql("operation_changes.seq", seq)
}

/// Writes the lease row of `id`.
fn put_lease(tx: &Transaction<'_>, id: &OperationId, row: &LeaseRow) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO leases (operation_id, replica, token, expires_at) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (operation_id) DO UPDATE SET replica = excluded.replica, token = excluded.token, \
         expires_at = excluded.expires_at",
        params![id.0, row.replica, row.token, row.expires_us],
    )
    .ctx("write lease")?;
    Ok(())
}

pub(crate) fn insert_audit(tx: &Transaction<'_>, entry: &AuditEntry) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO audit (at, actor_face, actor_principal, action, target, operation_id, detail) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            ts(&entry.at),
            entry.actor.face.as_str(),
            entry.actor.principal,
            entry.action,
            entry.target,
            entry.operation_id.as_ref().map(|id| id.0.as_str()),
            to_json("audit.detail", &entry.detail)?,
        ],
    )
    .ctx("insert audit entry")?;
    Ok(())
}

impl Store for SqliteStore {
    fn insert_operation(&self, op: NewOperation) -> Result<Inserted, StoreError> {
        self.write("insert operation", |tx| {
            if let Some(key) = &op.idempotency_key
                && let Some(existing) = load_operation_by_key(tx, key)?
            {
                return if existing.request_hash == op.request_hash {
                    Ok(Inserted::Existing(existing))
                } else {
                    Err(StoreError::IdempotencyMismatch { key: key.clone(), operation: existing.id })
                };
            }
            if let Some(running) = running_on(tx, &op.target, None)? {
                return Err(StoreError::Conflict { target: op.target.clone(), running });
            }
            let now = Utc::now();
            let now_s = ts(&now);
            tx.execute(
                "INSERT INTO operations (id, kind, target, status, actor_face, actor_principal, request, \
                 idempotency_key, request_hash, error, created_at, updated_at, finished_at) \
                 VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?7, ?8, NULL, ?9, ?9, NULL)",
                params![
                    op.id.0,
                    op.kind.as_str(),
                    op.target,
                    op.actor.face.as_str(),
                    op.actor.principal,
                    to_json("operations.request", &op.request)?,
                    op.idempotency_key,
                    op.request_hash,
                    now_s,
                ],
            )
            .ctx(&format!("insert operation {}", op.id))?;
            {
                let mut stmt = tx
                    .prepare_cached(
                        "INSERT INTO steps (operation_id, key, position, title, depends_on, phase, attempts, \
                         idempotency_token, resource, outputs, detail, error, expected_secs, started_at, \
                         finished_at, updated_at) \
                         VALUES (?1, ?2, ?3, ?4, ?5, 'pending', 0, ?6, NULL, 'null', NULL, NULL, ?7, NULL, NULL, ?8)",
                    )
                    .ctx("prepare step insert")?;
                for (position, s) in op.steps.iter().enumerate() {
                    let expected = s.expected_secs.map(|v| u64_to_sql("steps.expected_secs", v)).transpose()?;
                    stmt.execute(params![
                        op.id.0,
                        s.key,
                        position as i64,
                        s.title,
                        to_json("steps.depends_on", &s.depends_on)?,
                        step_token(&op.id, &s.key),
                        expected,
                        now_s,
                    ])
                    .ctx(&format!("insert step {}", s.key))?;
                }
            }
            insert_audit(
                tx,
                &AuditEntry {
                    at: now,
                    actor: op.actor.clone(),
                    action: "operation.create".into(),
                    target: op.target.clone(),
                    operation_id: Some(op.id.clone()),
                    detail: op.request.clone(),
                },
            )?;
            let stored = load_operation(tx, &op.id)?
                .ok_or_else(|| StoreError::Backend(format!("operation {} vanished while being inserted", op.id)))?;
            Ok(Inserted::New(stored))
        })
    }

    fn get_operation(&self, id: &OperationId) -> Result<Option<Operation>, StoreError> {
        self.read("get operation", |tx| load_operation(tx, id))
    }

    fn find_by_idempotency_key(&self, key: &str) -> Result<Option<Operation>, StoreError> {
        self.read("find operation by idempotency key", |tx| load_operation_by_key(tx, key))
    }

    fn list_operations(&self, filter: &OperationFilter) -> Result<Vec<Operation>, StoreError> {
        let (sql, args) = operations_query(filter, None, filter.limit.map_or(-1, i64::from))?;
        self.read("list operations", |tx| query_operations(tx, &sql, &args))
    }

    /// Keyset: the cursor is (created_at, rowid) of the last operation returned; the row-value
    /// comparison seeks in `operations_created_at` (or the target's or status's index, each
    /// ending in created_at, and SQLite indexes carry the rowid).
    fn page_operations(&self, filter: &OperationFilter, page: &PageRequest) -> Result<Page<Operation>, StoreError> {
        let (sql, args) = operations_query(filter, page.after.as_ref(), i64::from(page.limit) + 1)?;
        self.read("page operations", |tx| {
            let items = query_operations(tx, &sql, &args)?;
            let mut page = Page::from_probe(items, page.limit, OPERATIONS_LIST, |_| Vec::new());
            if let (Some(next), Some(last)) = (&mut page.next, page.items.last()) {
                let rowid: i64 = tx
                    .prepare_cached("SELECT rowid FROM operations WHERE id = ?1")
                    .and_then(|mut s| s.query_row([&last.id.0], |r| r.get(0)))
                    .ctx("read operation position")?;
                *next = Cursor::new(OPERATIONS_LIST, vec![ts(&last.created_at), rowid.to_string()]);
            }
            Ok(page)
        })
    }

    fn running_operations(&self) -> Result<Vec<Operation>, StoreError> {
        let sql = format!("SELECT {OP_COLUMNS} FROM operations WHERE status = 'running' ORDER BY created_at, rowid");
        self.read("list running operations", |tx| query_operations(tx, &sql, &[]))
    }

    /// One statement for any number of targets: the targets (and kinds) travel as JSON arrays
    /// (`json_each`). Every kind: for each target, one backward seek in the
    /// `operations_target_created` index. Some kinds: for each target and kind, one backward
    /// seek in `operations_target_kind_created` (a covering index), the newest of them kept
    /// here; scanning a target's operations backwards until one of the kinds would read every
    /// day-2 change since the cluster was created. Either way the cost grows with the number of
    /// targets, not with the number of operations stored.
    fn latest_operations(
        &self,
        targets: &[String],
        kinds: &[OperationKind],
    ) -> Result<BTreeMap<String, OperationHead>, StoreError> {
        if targets.is_empty() {
            return Ok(BTreeMap::new());
        }
        const HEAD: &str =
            "o.rowid, o.id, o.kind, o.target, o.status, o.error, o.created_at, o.updated_at, o.finished_at";
        let targets_json = to_json("targets", &targets)?;
        let (sql, kinds_json) = if kinds.is_empty() {
            (
                format!(
                    "SELECT {HEAD} FROM json_each(?1) t, operations o WHERE o.rowid = (SELECT p.rowid FROM operations p \
                     WHERE p.target = t.value ORDER BY p.created_at DESC, p.rowid DESC LIMIT 1)"
                ),
                None,
            )
        } else {
            (
                format!(
                    "SELECT {HEAD} FROM json_each(?1) t, json_each(?2) k, operations o WHERE o.rowid = \
                     (SELECT p.rowid FROM operations p WHERE p.target = t.value AND p.kind = k.value \
                     ORDER BY p.created_at DESC, p.rowid DESC LIMIT 1)"
                ),
                Some(to_json("kinds", &kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>())?),
            )
        };
        type HeadRow = (i64, String, String, String, String, Option<String>, String, String, Option<String>);
        self.read("latest operations", |tx| {
            let mut stmt = tx.prepare_cached(&sql).ctx("prepare latest operations query")?;
            let rows: Vec<HeadRow> = stmt
                .query_map(rusqlite::params_from_iter(std::iter::once(&targets_json).chain(&kinds_json)), |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                        r.get(6)?,
                        r.get(7)?,
                        r.get(8)?,
                    ))
                })
                .ctx("query latest operations")?
                .collect::<rusqlite::Result<_>>()
                .ctx("read latest operations")?;
            let mut out: BTreeMap<String, (String, i64, OperationHead)> = BTreeMap::new();
            for (rowid, id, kind, target, status, error, created_at, updated_at, finished_at) in rows {
                // The newest of the target's rows (one per kind): by (created_at, rowid), the
                // order of the lists.
                if out.get(&target).is_some_and(|(c, r, _)| (c.as_str(), *r) > (created_at.as_str(), rowid)) {
                    continue;
                }
                let head = OperationHead {
                    id: OperationId(id),
                    kind: OperationKind::parse(&kind).ok_or_else(|| corrupt("operations.kind", &kind))?,
                    status: parse_status(&status)?,
                    error,
                    created_at: parse_ts("operations.created_at", &created_at)?,
                    updated_at: parse_ts("operations.updated_at", &updated_at)?,
                    finished_at: parse_opt_ts("operations.finished_at", finished_at.as_deref())?,
                    target: target.clone(),
                };
                out.insert(target, (created_at, rowid, head));
            }
            Ok(out.into_iter().map(|(t, (_, _, head))| (t, head)).collect())
        })
    }

    fn count_operations(&self) -> Result<Vec<(OperationStatus, u64)>, StoreError> {
        self.read("count operations", |tx| {
            let mut stmt = tx
                .prepare_cached("SELECT status, n FROM operation_counts WHERE n > 0 ORDER BY status")
                .ctx("prepare operation count")?;
            let rows: Vec<(String, i64)> = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .ctx("count operations")?
                .collect::<rusqlite::Result<_>>()
                .ctx("read operation counts")?;
            rows.into_iter()
                .map(|(status, n)| Ok((parse_status(&status)?, u64_from_sql("operations count", n)?)))
                .collect()
        })
    }

    fn update_step(&self, id: &OperationId, key: &str, update: &StepUpdate) -> Result<Step, StoreError> {
        self.write("update step", |tx| apply_step_update(tx, id, key, update))
    }

    fn set_operation_status(
        &self,
        id: &OperationId,
        status: OperationStatus,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        self.write("set operation status", |tx| set_status(tx, id, status, error))
    }

    fn reopen_operation(&self, id: &OperationId) -> Result<(), StoreError> {
        self.write("reopen operation", |tx| set_status(tx, id, OperationStatus::Running, None))
    }

    /// One statement: the oldest finished operations of the hot set (`operations_hot_finished`),
    /// flagged archived.
    fn archive_operations(&self, finished_before: chrono::DateTime<Utc>, limit: u32) -> Result<u64, StoreError> {
        let statuses = to_json("statuses", &ARCHIVABLE.iter().map(|s| s.as_str()).collect::<Vec<_>>())?;
        self.write("archive operations", |tx| {
            let n = tx
                .prepare_cached(
                    "UPDATE operations SET archived = 1 WHERE rowid IN (SELECT rowid FROM operations \
                     WHERE archived = 0 AND finished_at IS NOT NULL AND finished_at < ?1 \
                     AND status IN (SELECT value FROM json_each(?2)) ORDER BY finished_at LIMIT ?3)",
                )
                .ctx("prepare archive")?
                .execute(params![ts(&finished_before), statuses, i64::from(limit)])
                .ctx("archive operations")?;
            Ok(n as u64)
        })
    }

    /// This handle's write count and SQLite's `PRAGMA data_version`, which changes when another
    /// connection (another handle, another process) commits to the database; read under the
    /// connection's lock, so both are those of the data a read right after would see. `None`
    /// if the pragma cannot be read.
    fn generation(&self) -> Option<u64> {
        let conn = self.lock();
        let external: i64 =
            conn.prepare_cached("PRAGMA data_version").and_then(|mut s| s.query_row([], |r| r.get(0))).ok()?;
        let own = self.writes.load(Ordering::Acquire);
        Some(own.wrapping_shl(32) | (external as u64 & 0xffff_ffff))
    }

    fn append_audit(&self, entry: &AuditEntry) -> Result<(), StoreError> {
        self.write("append audit entry", |tx| insert_audit(tx, entry))
    }

    fn list_audit(&self, target: Option<&str>, limit: u32) -> Result<Vec<AuditEntry>, StoreError> {
        self.read("list audit", |tx| {
            query_audit(tx, target, None, i64::from(limit)).map(|rows| rows.into_iter().map(|(_, e)| e).collect())
        })
    }

    /// Keyset: the cursor is (at, id) of the last entry returned, seeking in `audit_at` or
    /// `audit_target_at` (whose rowid is the id).
    fn page_audit(&self, target: Option<&str>, page: &PageRequest) -> Result<Page<AuditEntry>, StoreError> {
        let after = page.after.as_ref().map(cursor_position).transpose()?;
        self.read("page audit", |tx| {
            let rows = query_audit(tx, target, after, i64::from(page.limit) + 1)?;
            let page = Page::from_probe(rows, page.limit, AUDIT_LIST, |(id, e)| vec![ts(&e.at), id.to_string()]);
            Ok(page.map(|(_, e)| e))
        })
    }

    fn put_cluster(&self, record: &ClusterRecord) -> Result<(), StoreError> {
        let json = to_json("clusters.record", record)?;
        let source = enum_str("clusters.source", &record.source)?;
        self.write("put cluster", |tx| {
            tx.execute(
                "INSERT INTO clusters (name, region, source, eks_cluster, record, created_at, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
                 ON CONFLICT (name) DO UPDATE SET region = excluded.region, source = excluded.source, \
                 eks_cluster = excluded.eks_cluster, record = excluded.record, created_at = excluded.created_at, \
                 updated_at = excluded.updated_at",
                params![
                    record.name,
                    record.region,
                    source,
                    record.eks_cluster,
                    json,
                    ts(&record.created_at),
                    ts(&record.updated_at)
                ],
            )
            .ctx(&format!("write cluster {}", record.name))?;
            Ok(())
        })
    }

    fn get_cluster(&self, name: &str) -> Result<Option<ClusterRecord>, StoreError> {
        self.read("get cluster", |tx| {
            let json: Option<String> = tx
                .prepare_cached("SELECT record FROM clusters WHERE name = ?1")
                .and_then(|mut s| s.query_row([name], |r| r.get(0)))
                .optional()
                .ctx("read cluster")?;
            json.map(|j| from_json("clusters.record", &j)).transpose()
        })
    }

    /// Keyset on the primary key: the cursor is the name of the last cluster returned.
    fn page_clusters(&self, page: &PageRequest) -> Result<Page<ClusterRecord>, StoreError> {
        let after = page.after.as_ref().map(|c| c.key().first().cloned().ok_or(StoreError::BadCursor)).transpose()?;
        self.read("page clusters", |tx| {
            let mut stmt = tx
                .prepare_cached("SELECT record FROM clusters WHERE ?1 IS NULL OR name > ?1 ORDER BY name LIMIT ?2")
                .ctx("prepare cluster page query")?;
            let rows: Vec<String> = stmt
                .query_map(params![after, i64::from(page.limit) + 1], |r| r.get(0))
                .ctx("query clusters")?
                .collect::<rusqlite::Result<_>>()
                .ctx("read clusters")?;
            let records =
                rows.iter().map(|j| from_json("clusters.record", j)).collect::<Result<Vec<ClusterRecord>, _>>()?;
            Ok(Page::from_probe(records, page.limit, CLUSTERS_LIST, |c| vec![c.name.clone()]))
        })
    }

    fn list_clusters(&self) -> Result<Vec<ClusterRecord>, StoreError> {
        self.read("list clusters", |tx| {
            let mut stmt =
                tx.prepare_cached("SELECT record FROM clusters ORDER BY name").ctx("prepare cluster query")?;
            let rows: Vec<String> = stmt
                .query_map([], |r| r.get(0))
                .ctx("query clusters")?
                .collect::<rusqlite::Result<_>>()
                .ctx("read clusters")?;
            rows.iter().map(|j| from_json("clusters.record", j)).collect()
        })
    }

    /// Deleting a cluster that is not registered is not an error (the unregister step may run
    /// again after a restart).
    fn delete_cluster(&self, name: &str) -> Result<(), StoreError> {
        self.write("delete cluster", |tx| {
            tx.execute("DELETE FROM clusters WHERE name = ?1", [name]).ctx("delete cluster")?;
            Ok(())
        })
    }

    fn get_setting(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.read("get setting", |tx| {
            tx.prepare_cached("SELECT value FROM settings WHERE key = ?1")
                .and_then(|mut s| s.query_row([key], |r| r.get(0)))
                .optional()
                .ctx(&format!("read setting {key}"))
        })
    }

    fn set_setting(&self, key: &str, value: Option<&str>) -> Result<(), StoreError> {
        self.write("set setting", |tx| {
            match value {
                Some(v) => tx.execute(
                    "INSERT INTO settings (key, value, updated_at) VALUES (?1, ?2, ?3) \
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                    params![key, v, ts(&Utc::now())],
                ),
                None => tx.execute("DELETE FROM settings WHERE key = ?1", [key]),
            }
            .ctx(&format!("write setting {key}"))?;
            Ok(())
        })
    }

    fn acquire_lease(&self, id: &OperationId, replica: &str, ttl: Duration) -> Result<Option<Lease>, StoreError> {
        self.write("acquire lease", |tx| {
            let (status, row) = lease_state(tx, id)?;
            let now = lease::micros(Utc::now());
            let Some(token) = lease::acquire(id, status.as_deref(), row.as_ref(), replica, now)? else {
                return Ok(None);
            };
            let row = LeaseRow { replica: replica.to_string(), token, expires_us: now + lease::ttl_us(ttl) };
            put_lease(tx, id, &row)?;
            lease::lease_of(id, &row).map(Some)
        })
    }

    fn renew_lease(&self, held: &Lease, ttl: Duration) -> Result<Lease, StoreError> {
        self.write("renew lease", |tx| {
            check_fence(tx, held)?;
            let token = i64::try_from(held.token).map_err(|_| StoreError::Backend("lease token too large".into()))?;
            let row = LeaseRow {
                replica: held.replica.clone(),
                token,
                expires_us: lease::micros(Utc::now()) + lease::ttl_us(ttl),
            };
            put_lease(tx, &held.operation_id, &row)?;
            lease::lease_of(&held.operation_id, &row)
        })
    }

    fn release_lease(&self, held: &Lease) -> Result<(), StoreError> {
        let token = i64::try_from(held.token).unwrap_or(-1);
        self.write("release lease", |tx| {
            tx.execute(
                "UPDATE leases SET expires_at = 0 WHERE operation_id = ?1 AND token = ?2 AND replica = ?3",
                params![held.operation_id.0, token, held.replica],
            )
            .ctx("release lease")?;
            Ok(())
        })
    }

    fn get_lease(&self, id: &OperationId) -> Result<Option<Lease>, StoreError> {
        self.read("get lease", |tx| lease_state(tx, id)?.1.map(|r| lease::lease_of(id, &r)).transpose())
    }

    fn unleased_running_operations(&self) -> Result<Vec<OperationId>, StoreError> {
        let now = lease::micros(Utc::now());
        self.read("list unleased operations", |tx| {
            let mut stmt = tx
                .prepare(
                    "SELECT o.id FROM operations o LEFT JOIN leases l ON l.operation_id = o.id \
                     WHERE o.status = 'running' AND (l.operation_id IS NULL OR l.expires_at <= ?1) \
                     ORDER BY o.created_at, o.rowid",
                )
                .ctx("prepare unleased operations")?;
            let ids = stmt
                .query_map([now], |r| r.get::<_, String>(0))
                .ctx("query unleased operations")?
                .collect::<rusqlite::Result<Vec<_>>>()
                .ctx("read unleased operations")?;
            Ok(ids.into_iter().map(OperationId).collect())
        })
    }

    fn update_step_fenced(&self, held: &Lease, key: &str, update: &StepUpdate) -> Result<Step, StoreError> {
        self.write("update step (fenced)", |tx| {
            check_fence(tx, held)?;
            apply_step_update(tx, &held.operation_id, key, update)
        })
    }

    fn set_operation_status_fenced(
        &self,
        held: &Lease,
        status: OperationStatus,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        self.write("set operation status (fenced)", |tx| {
            check_fence(tx, held)?;
            set_status(tx, &held.operation_id, status, error)
        })
    }

    fn publish_change(&self, replica: &str, operation: &Operation) -> Result<u64, StoreError> {
        let json = to_json("operation_changes.operation", operation)?;
        self.write("publish change", |tx| insert_change(tx, replica, operation, &json))
    }

    fn publish_change_fenced(&self, held: &Lease, operation: &Operation) -> Result<u64, StoreError> {
        let json = to_json("operation_changes.operation", operation)?;
        self.write("publish change (fenced)", |tx| {
            let (_, row) = lease_state(tx, &held.operation_id)?;
            lease::check_holder(held, row.as_ref())?;
            insert_change(tx, &held.replica, operation, &json)
        })
    }

    fn changes_since(&self, after: u64, limit: u32) -> Result<Vec<OperationChange>, StoreError> {
        let after = u64_to_sql("operation_changes.seq", after)?;
        self.read("read changes", |tx| {
            let mut stmt = tx
                .prepare("SELECT seq, replica, operation FROM operation_changes WHERE seq > ?1 ORDER BY seq LIMIT ?2")
                .ctx("prepare changes")?;
            let rows = stmt
                .query_map(params![after, i64::from(limit)], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
                })
                .ctx("query changes")?
                .collect::<rusqlite::Result<Vec<_>>>()
                .ctx("read changes")?;
            rows.into_iter()
                .map(|(seq, replica, op)| {
                    Ok(OperationChange {
                        seq: u64_from_sql("operation_changes.seq", seq)?,
                        replica,
                        operation: from_json("operation_changes.operation", &op)?,
                    })
                })
                .collect()
        })
    }

    fn latest_change_seq(&self) -> Result<u64, StoreError> {
        self.read("read the newest change", |tx| {
            let seq: i64 = tx
                .query_row("SELECT COALESCE(MAX(seq), 0) FROM operation_changes", [], |r| r.get(0))
                .ctx("read the newest change")?;
            u64_from_sql("operation_changes.seq", seq)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn the_store_is_send_and_sync_and_object_safe() {
        assert_send_sync::<SqliteStore>();
        let store: std::sync::Arc<dyn Store> = std::sync::Arc::new(SqliteStore::open_in_memory().unwrap());
        assert_eq!(store.get_setting("x").unwrap(), None);
    }

    #[test]
    fn the_generation_moves_with_every_write_by_any_handle_and_not_with_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let (a, b) = (SqliteStore::open(&path).unwrap(), SqliteStore::open(&path).unwrap());
        let g0 = a.generation().expect("sqlite knows");
        assert_eq!(a.get_setting("x").unwrap(), None);
        assert_eq!(a.generation(), Some(g0), "a read changes nothing");
        a.set_setting("x", Some("1")).unwrap();
        let g1 = a.generation().unwrap();
        assert_ne!(g1, g0, "this handle's write");
        b.set_setting("x", Some("2")).unwrap();
        let g2 = a.generation().unwrap();
        assert_ne!(g2, g1, "another handle's write");
        assert_eq!(a.get_setting("x").unwrap().as_deref(), Some("2"));
        // A failed write may have changed nothing, but counts: never a stale reuse.
        assert!(a.write("fail", |_| Err::<(), _>(StoreError::Backend("no".into()))).is_err());
        assert_ne!(a.generation().unwrap(), g2);
    }

    #[test]
    fn a_file_database_uses_wal_full_sync_and_foreign_keys() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("nested/dir/state.db")).unwrap();
        let conn = store.lock();
        let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0)).unwrap();
        let sync: i64 = conn.pragma_query_value(None, "synchronous", |r| r.get(0)).unwrap();
        let fk: i64 = conn.pragma_query_value(None, "foreign_keys", |r| r.get(0)).unwrap();
        assert_eq!((mode.as_str(), sync, fk), ("wal", 2, 1));
    }

    /// Review #13: the database holds tokens' hashes, sessions and every request; other local
    /// users must not read it, whatever the umask or an older version left.
    #[cfg(unix)]
    #[test]
    fn database_files_are_private_to_the_owner() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let store = SqliteStore::open(&path).unwrap();
        store.set_setting("x", Some("1")).unwrap();
        drop(store);
        assert_eq!(mode(&path), 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let store = SqliteStore::open(&path).unwrap();
        store.set_setting("x", Some("2")).unwrap();
        assert_eq!(mode(&path), 0o600, "a wider mode is narrowed");
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        assert_eq!(mode(Path::new(&wal)), 0o600, "the WAL has the database's mode");
    }

    #[test]
    fn a_poisoned_lock_is_recovered_and_an_open_transaction_rolled_back() {
        let store = std::sync::Arc::new(SqliteStore::open_in_memory().unwrap());
        let s2 = store.clone();
        let _ = std::thread::spawn(move || {
            let conn = s2.conn.lock().unwrap();
            conn.execute_batch("BEGIN; INSERT INTO settings VALUES ('k', 'v', 'now');").unwrap();
            panic!("poison the lock");
        })
        .join();
        assert!(store.conn.is_poisoned());
        assert_eq!(store.get_setting("k").unwrap(), None);
        store.set_setting("k", Some("w")).unwrap();
        assert_eq!(store.get_setting("k").unwrap().as_deref(), Some("w"));
    }

    #[test]
    fn the_audit_log_refuses_updates_and_deletes() {
        let store = SqliteStore::open_in_memory().unwrap();
        store
            .append_audit(&AuditEntry {
                at: Utc::now(),
                actor: Actor::system(),
                action: "test".into(),
                target: "t".into(),
                operation_id: None,
                detail: serde_json::Value::Null,
            })
            .unwrap();
        let conn = store.lock();
        assert!(conn.execute("UPDATE audit SET action = 'x'", []).is_err());
        assert!(conn.execute("DELETE FROM audit", []).is_err());
    }
}
