//! [`PostgresStore`]: the [`Store`] and [`CredentialStore`] traits over PostgreSQL, with the
//! semantics of the SQLite store, so that several servers can share one database (issue #22).
//!
//! Values are stored exactly as SQLite stores them (RFC 3339 text timestamps with nanoseconds,
//! JSON text; see `codec`), so both backends round-trip the same values bit for bit.
//!
//! # Guarantees
//! - Every trait call is exactly one transaction, committed before the call returns; commits
//!   wait for the WAL flush (`synchronous_commit = on` on every connection).
//! - Writes take one transaction-scoped advisory lock first (`schema::WRITE_LOCK`), so writers
//!   are serialized across every connection of every server, as with SQLite's
//!   `BEGIN IMMEDIATE`: the check-then-insert of an idempotency key or of the one running
//!   operation per target cannot race, and the loser of a race gets the typed
//!   [`StoreError::Conflict`] / [`StoreError::IdempotencyMismatch`]. The partial unique index
//!   `operations_one_running_per_target` backs the rule in the database.
//! - Reads run in one `REPEATABLE READ, READ ONLY` transaction: an operation and its steps come
//!   from one snapshot.
//! - The schema is versioned ([`SCHEMA_VERSION`](crate::SCHEMA_VERSION), the same numbering as
//!   SQLite); migrations run at connect, each in its own transaction; a newer schema is refused.
//!   The audit log is append-only in the database (a trigger refuses `UPDATE`, `DELETE`,
//!   `TRUNCATE`).
//! - Calls never run the blocking client on the caller's thread (it would panic inside tokio):
//!   they run on the store's own connection threads (`pool`).
//! - Every published change is also `NOTIFY`'d at commit; [`Store::change_signal`] wakes on
//!   it (`LISTEN` on a connection of its own, `listen`), so other replicas relay a change at
//!   once rather than on their next poll.

mod credentials;
mod listen;
mod pool;
mod schema;
mod tls;

pub use tls::RustlsConnect;

use crate::codec::{
    Context, corrupt, cursor_position, enum_str, from_json, opt_ts, parse_opt_ts, parse_ts, to_json, ts, u32_from_sql,
    u64_from_sql, u64_to_sql,
};
use crate::lease::{self, LeaseRow};
use ::postgres::types::{FromSql, ToSql};
use ::postgres::{Config, IsolationLevel, Row, Transaction};
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
use pool::Pool;
use schema::WRITE_LOCK;
use std::collections::BTreeMap;
use std::time::Duration;

/// The `NOTIFY` channel of the change feed (payload: the new sequence number).
pub(crate) const CHANGES_CHANNEL: &str = "instantstart_changes";

/// Connections each store keeps (one per concurrently running call).
const POOL_SIZE: usize = 4;
/// How long connecting may take when the URL does not say (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The PostgreSQL store. See the module docs for its guarantees.
#[derive(Debug)]
pub struct PostgresStore {
    pool: Pool,
    /// Connects the change feed's listener (`listen`), started on first use.
    config: Config,
    tls: RustlsConnect,
    listener: std::sync::OnceLock<listen::Listener>,
}

/// A boxed `Send` parameter list (closures shipped to the pool own their arguments).
type Params = Vec<Box<dyn ToSql + Sync + Send>>;

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/dbname?…`, or any
    /// form the `postgres` crate's `Config` accepts, including `host=/socket/dir`) and migrates
    /// it. TLS as the URL's `sslmode` says, the server verified against `sslrootcert` (or the
    /// system's roots): see [`RustlsConnect`].
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        let (url, root_cert) = tls::split_root_cert(url);
        let tls = RustlsConnect::new(root_cert.as_deref())?;
        let mut config: Config = url
            .parse()
            .map_err(|e| StoreError::Backend(format!("invalid PostgreSQL URL (the password is not shown): {e}")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("instantstart");
        }
        let store = PostgresStore {
            pool: Pool::start(config.clone(), tls.clone(), POOL_SIZE)?,
            config,
            tls,
            listener: std::sync::OnceLock::new(),
        };
        store.pool.call(|client| schema::migrate(client).map_err(|e| with_context("migrate", e)))?;
        Ok(store)
    }

    /// The schema version recorded in the database.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        self.read("read schema version", |tx| schema::current_version(tx))
    }

    /// Runs `f` in one write transaction holding the write lock, committed before returning.
    pub(crate) fn write<T: Send + 'static>(
        &self,
        what: &'static str,
        f: impl FnOnce(&mut Transaction<'_>) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.pool.call(move |client| {
            let mut tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::ReadCommitted)
                .start()
                .ctx(&format!("{what}: begin"))?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK]).ctx(&format!("{what}: lock"))?;
            let out = f(&mut tx).map_err(|e| with_context(what, e))?;
            tx.commit().ctx(&format!("{what}: commit"))?;
            Ok(out)
        })
    }

    /// Runs `f` in one read-only transaction (one consistent snapshot).
    pub(crate) fn read<T: Send + 'static>(
        &self,
        what: &'static str,
        f: impl FnOnce(&mut Transaction<'_>) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.pool.call(move |client| {
            let mut tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .ctx(&format!("{what}: begin"))?;
            let out = f(&mut tx).map_err(|e| with_context(what, e))?;
            tx.commit().ctx(&format!("{what}: end"))?;
            Ok(out)
        })
    }
}

fn with_context(what: &str, e: StoreError) -> StoreError {
    match e {
        StoreError::Backend(m) => StoreError::Backend(format!("{what}: {m}")),
        other => other,
    }
}

/// Column `i` of a row, decoding errors as [`StoreError::Backend`].
pub(crate) fn col<'a, T: FromSql<'a>>(r: &'a Row, i: usize) -> Result<T, StoreError> {
    r.try_get(i).ctx(&format!("decode column {i}"))
}

fn params_ref(params: &Params) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)).collect()
}

fn op_not_found(id: &OperationId) -> StoreError {
    StoreError::NotFound { what: format!("operation {id}") }
}

const OP_COLUMNS: &str = "id, kind, target, status, actor_face, actor_principal, request, idempotency_key, \
                          request_hash, error, created_at, updated_at, finished_at";

fn decode_operation(r: &Row, steps: Vec<Step>) -> Result<Operation, StoreError> {
    let kind: String = col(r, 1)?;
    let face: String = col(r, 4)?;
    let status: String = col(r, 3)?;
    let created_at: String = col(r, 10)?;
    let updated_at: String = col(r, 11)?;
    let finished_at: Option<String> = col(r, 12)?;
    let request: String = col(r, 6)?;
    Ok(Operation {
        id: OperationId(col(r, 0)?),
        kind: OperationKind::parse(&kind).ok_or_else(|| corrupt("operations.kind", &kind))?,
        target: col(r, 2)?,
        status: parse_status(&status)?,
        actor: Actor {
            face: Face::parse(&face).ok_or_else(|| corrupt("operations.actor_face", &face))?,
            principal: col(r, 5)?,
        },
        request: from_json("operations.request", &request)?,
        idempotency_key: col(r, 7)?,
        request_hash: col(r, 8)?,
        steps,
        error: col(r, 9)?,
        created_at: parse_ts("operations.created_at", &created_at)?,
        updated_at: parse_ts("operations.updated_at", &updated_at)?,
        finished_at: parse_opt_ts("operations.finished_at", finished_at.as_deref())?,
    })
}

fn parse_status(s: &str) -> Result<OperationStatus, StoreError> {
    OperationStatus::parse(s).ok_or_else(|| corrupt("operations.status", s))
}

const STEP_COLUMNS: &str = "key, title, depends_on, phase, attempts, idempotency_token, resource, outputs, detail, \
                            error, expected_secs, started_at, finished_at, updated_at";

fn decode_step(r: &Row) -> Result<Step, StoreError> {
    let depends_on: String = col(r, 2)?;
    let phase: String = col(r, 3)?;
    let resource: Option<String> = col(r, 6)?;
    let outputs: String = col(r, 7)?;
    let expected_secs: Option<i64> = col(r, 10)?;
    let started_at: Option<String> = col(r, 11)?;
    let finished_at: Option<String> = col(r, 12)?;
    let updated_at: String = col(r, 13)?;
    Ok(Step {
        key: col(r, 0)?,
        title: col(r, 1)?,
        depends_on: from_json("steps.depends_on", &depends_on)?,
        phase: StepPhase::parse(&phase).ok_or_else(|| corrupt("steps.phase", &phase))?,
        attempts: u32_from_sql("steps.attempts", col(r, 4)?)?,
        idempotency_token: col(r, 5)?,
        resource: resource.as_deref().map(|r| from_json("steps.resource", r)).transpose()?,
        outputs: from_json("steps.outputs", &outputs)?,
        detail: col(r, 8)?,
        error: col(r, 9)?,
        expected_secs: expected_secs.map(|v| u64_from_sql("steps.expected_secs", v)).transpose()?,
        started_at: parse_opt_ts("steps.started_at", started_at.as_deref())?,
        finished_at: parse_opt_ts("steps.finished_at", finished_at.as_deref())?,
        updated_at: parse_ts("steps.updated_at", &updated_at)?,
    })
}

fn load_steps(tx: &mut Transaction<'_>, id: &str) -> Result<Vec<Step>, StoreError> {
    let sql = format!("SELECT {STEP_COLUMNS} FROM steps WHERE operation_id = $1 ORDER BY position");
    tx.query(&sql, &[&id]).ctx("query steps")?.iter().map(decode_step).collect()
}

fn load_step(tx: &mut Transaction<'_>, id: &OperationId, key: &str) -> Result<Option<Step>, StoreError> {
    let sql = format!("SELECT {STEP_COLUMNS} FROM steps WHERE operation_id = $1 AND key = $2");
    tx.query_opt(&sql, &[&id.0, &key]).ctx("read step")?.as_ref().map(decode_step).transpose()
}

/// Runs an operations query (`SELECT {OP_COLUMNS} FROM operations …`) and loads each
/// operation's steps.
/// The operations query of `filter`, newest first, after `after` (a cursor of
/// [`OPERATIONS_LIST`]), at most `limit` rows (`None`: no limit).
fn operations_query(
    filter: &OperationFilter,
    after: Option<&Cursor>,
    limit: Option<i64>,
) -> Result<(String, Params), StoreError> {
    let mut sql = format!("SELECT {OP_COLUMNS} FROM operations WHERE TRUE");
    let mut args: Params = Vec::new();
    if let Some(target) = &filter.target {
        args.push(Box::new(target.clone()));
        sql.push_str(&format!(" AND target = ${}", args.len()));
    }
    if let Some(status) = filter.status {
        args.push(Box::new(status.as_str().to_string()));
        sql.push_str(&format!(" AND status = ${}", args.len()));
    }
    // Literal, not a parameter: the planner matches a partial index's condition only then.
    match filter.archived {
        Some(false) => sql.push_str(" AND NOT archived"),
        Some(true) => sql.push_str(" AND archived"),
        None => {}
    }
    if let Some(after) = after {
        let (created, seq) = cursor_position(after)?;
        args.push(Box::new(created));
        args.push(Box::new(seq));
        sql.push_str(&format!(" AND (created_at, seq) < (${}, ${})", args.len() - 1, args.len()));
    }
    // LIMIT NULL means no limit.
    args.push(Box::new(limit));
    sql.push_str(&format!(" ORDER BY created_at DESC, seq DESC LIMIT ${}", args.len()));
    Ok((sql, args))
}

fn query_operations(
    tx: &mut Transaction<'_>,
    sql: &str,
    args: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Operation>, StoreError> {
    let rows = tx.query(sql, args).ctx("query operations")?;
    rows.iter()
        .map(|row| {
            let id: String = col(row, 0)?;
            let steps = load_steps(tx, &id)?;
            decode_operation(row, steps)
        })
        .collect()
}

fn load_operation(tx: &mut Transaction<'_>, id: &OperationId) -> Result<Option<Operation>, StoreError> {
    let sql = format!("SELECT {OP_COLUMNS} FROM operations WHERE id = $1");
    Ok(query_operations(tx, &sql, &[&id.0])?.pop())
}

fn load_operation_by_key(tx: &mut Transaction<'_>, key: &str) -> Result<Option<Operation>, StoreError> {
    let sql = format!("SELECT {OP_COLUMNS} FROM operations WHERE idempotency_key = $1");
    Ok(query_operations(tx, &sql, &[&key])?.pop())
}

/// The running operation on `target` other than `except`, if any.
fn running_on(
    tx: &mut Transaction<'_>,
    target: &str,
    except: Option<&OperationId>,
) -> Result<Option<OperationId>, StoreError> {
    let row = tx
        .query_opt(
            "SELECT id FROM operations WHERE target = $1 AND status = 'running' AND id IS DISTINCT FROM $2::TEXT \
             ORDER BY created_at, seq LIMIT 1",
            &[&target, &except.map(|e| e.0.as_str())],
        )
        .ctx("look for a running operation")?;
    row.map(|r| col::<String>(&r, 0).map(OperationId)).transpose()
}

/// Sets an operation's status; `Running` is refused while another operation holds the target.
fn set_status(
    tx: &mut Transaction<'_>,
    id: &OperationId,
    status: OperationStatus,
    error: Option<&str>,
) -> Result<(), StoreError> {
    let target: String =
        match tx.query_opt("SELECT target FROM operations WHERE id = $1", &[&id.0]).ctx("read operation")? {
            Some(r) => col(&r, 0)?,
            None => return Err(op_not_found(id)),
        };
    if status == OperationStatus::Running
        && let Some(running) = running_on(tx, &target, Some(id))?
    {
        return Err(StoreError::Conflict { target, running });
    }
    let now = ts(&Utc::now());
    let finished_at = status.is_terminal().then(|| now.clone());
    tx.execute(
        "UPDATE operations SET status = $2, error = $3, updated_at = $4, finished_at = $5, archived = FALSE \
         WHERE id = $1",
        &[&id.0, &status.as_str(), &error, &now, &finished_at],
    )
    .ctx("update operation status")?;
    Ok(())
}

/// Applies `update` to one step (and touches its operation) inside `tx`; the stored step.
fn apply_step_update(
    tx: &mut Transaction<'_>,
    id: &OperationId,
    key: &str,
    update: &StepUpdate,
) -> Result<Step, StoreError> {
    let Some(mut step) = load_step(tx, id, key)? else {
        let op_exists =
            tx.query_opt("SELECT 1 FROM operations WHERE id = $1", &[&id.0]).ctx("read operation")?.is_some();
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
        "UPDATE steps SET phase = $3, attempts = $4, resource = $5, outputs = $6, detail = $7, error = $8, \
                 started_at = $9, finished_at = $10, updated_at = $11 WHERE operation_id = $1 AND key = $2",
        &[
            &id.0,
            &key,
            &step.phase.as_str(),
            &i64::from(step.attempts),
            &step.resource.as_ref().map(|r| to_json("steps.resource", r)).transpose()?,
            &to_json("steps.outputs", &step.outputs)?,
            &step.detail,
            &step.error,
            &opt_ts(step.started_at.as_ref()),
            &opt_ts(step.finished_at.as_ref()),
            &now,
        ],
    )
    .ctx("write step")?;
    // A step change is a change of its operation.
    tx.execute("UPDATE operations SET updated_at = $2 WHERE id = $1", &[&id.0, &now]).ctx("touch operation")?;
    load_step(tx, id, key)?
        .ok_or_else(|| StoreError::Backend(format!("step {key} of operation {id} vanished while updated")))
}

/// The database server's clock in microseconds since the epoch (one clock for every replica).
fn db_now_us(tx: &mut Transaction<'_>) -> Result<i64, StoreError> {
    let row = tx
        .query_one("SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT", &[])
        .ctx("read the database clock")?;
    col(&row, 0)
}

/// The status of operation `id` and its lease row, the row locked (`FOR UPDATE`).
fn lease_state(tx: &mut Transaction<'_>, id: &OperationId) -> Result<(Option<String>, Option<LeaseRow>), StoreError> {
    let status = tx
        .query_opt("SELECT status FROM operations WHERE id = $1", &[&id.0])
        .ctx("read operation status")?
        .map(|r| col::<String>(&r, 0))
        .transpose()?;
    let row = tx
        .query_opt("SELECT replica, token, expires_at FROM leases WHERE operation_id = $1 FOR UPDATE", &[&id.0])
        .ctx("read lease")?
        .map(|r| Ok::<_, StoreError>(LeaseRow { replica: col(&r, 0)?, token: col(&r, 1)?, expires_us: col(&r, 2)? }))
        .transpose()?;
    Ok((status, row))
}

/// Refuses the write unless `held` is still the operation's live lease ([`lease::check`]).
fn check_fence(tx: &mut Transaction<'_>, held: &Lease) -> Result<(), StoreError> {
    let (status, row) = lease_state(tx, &held.operation_id)?;
    let now = db_now_us(tx)?;
    lease::check(held, status.as_deref(), row.as_ref(), now)
}

/// Appends one change to the feed, prunes the oldest beyond [`CHANGE_FEED_KEEP`] and wakes the
/// other replicas' relays (`NOTIFY`, delivered at commit).
fn insert_change(tx: &mut Transaction<'_>, replica: &str, id: &str, json: &str) -> Result<u64, StoreError> {
    let row = tx
        .query_one(
            "INSERT INTO operation_changes (replica, operation_id, operation) VALUES ($1, $2, $3) RETURNING seq",
            &[&replica, &id, &json],
        )
        .ctx("insert change")?;
    let seq: i64 = col(&row, 0)?;
    let keep = i64::try_from(CHANGE_FEED_KEEP).unwrap_or(i64::MAX);
    tx.execute("DELETE FROM operation_changes WHERE seq <= $1", &[&(seq - keep)]).ctx("prune changes")?;
    tx.execute("SELECT pg_notify($1, $2)", &[&CHANGES_CHANNEL, &seq.to_string()]).ctx("notify")?;
    u64_from_sql("operation_changes.seq", seq)
}

/// Writes the lease row of `id`.
fn put_lease(tx: &mut Transaction<'_>, id: &OperationId, row: &LeaseRow) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO leases (operation_id, replica, token, expires_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (operation_id) DO UPDATE SET replica = excluded.replica, token = excluded.token, \
         expires_at = excluded.expires_at",
        &[&id.0, &row.replica, &row.token, &row.expires_us],
    )
    .ctx("write lease")?;
    Ok(())
}

pub(crate) fn insert_audit(tx: &mut Transaction<'_>, entry: &AuditEntry) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO audit (at, actor_face, actor_principal, action, target, operation_id, detail) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[
            &ts(&entry.at),
            &entry.actor.face.as_str(),
            &entry.actor.principal,
            &entry.action,
            &entry.target,
            &entry.operation_id.as_ref().map(|id| id.0.as_str()),
            &to_json("audit.detail", &entry.detail)?,
        ],
    )
    .ctx("insert audit entry")?;
    Ok(())
}

fn decode_head(r: &Row) -> Result<(String, OperationHead), StoreError> {
    let kind: String = col(r, 1)?;
    let target: String = col(r, 2)?;
    let status: String = col(r, 3)?;
    let created_at: String = col(r, 5)?;
    let updated_at: String = col(r, 6)?;
    let finished_at: Option<String> = col(r, 7)?;
    let head = OperationHead {
        id: OperationId(col(r, 0)?),
        kind: OperationKind::parse(&kind).ok_or_else(|| corrupt("operations.kind", &kind))?,
        status: parse_status(&status)?,
        error: col(r, 4)?,
        created_at: parse_ts("operations.created_at", &created_at)?,
        updated_at: parse_ts("operations.updated_at", &updated_at)?,
        finished_at: parse_opt_ts("operations.finished_at", finished_at.as_deref())?,
        target: target.clone(),
    };
    Ok((target, head))
}

/// Audit entries with their id, newest first, of `target` (all when `None`), after `after`
/// (at, id), at most `limit`.
fn query_audit(
    tx: &mut Transaction<'_>,
    target: Option<String>,
    after: Option<(String, i64)>,
    limit: i64,
) -> Result<Vec<(i64, AuditEntry)>, StoreError> {
    // One statement per shape rather than `$1 IS NULL OR …`, so each can use its index.
    let mut sql =
        "SELECT at, actor_face, actor_principal, action, target, operation_id, detail, id FROM audit WHERE TRUE"
            .to_string();
    let mut args: Params = Vec::new();
    if let Some(t) = target {
        args.push(Box::new(t));
        sql.push_str(&format!(" AND target = ${}", args.len()));
    }
    if let Some((at, id)) = after {
        args.push(Box::new(at));
        args.push(Box::new(id));
        sql.push_str(&format!(" AND (at, id) < (${}, ${})", args.len() - 1, args.len()));
    }
    args.push(Box::new(limit));
    sql.push_str(&format!(" ORDER BY at DESC, id DESC LIMIT ${}", args.len()));
    let rows = tx.query(&sql, &params_ref(&args)).ctx("query audit")?;
    rows.iter().map(|r| Ok((col::<i64>(r, 7)?, decode_audit(r)?))).collect()
}

fn decode_audit(r: &Row) -> Result<AuditEntry, StoreError> {
    let at: String = col(r, 0)?;
    let face: String = col(r, 1)?;
    let operation_id: Option<String> = col(r, 5)?;
    let detail: String = col(r, 6)?;
    Ok(AuditEntry {
        at: parse_ts("audit.at", &at)?,
        actor: Actor {
            face: Face::parse(&face).ok_or_else(|| corrupt("audit.actor_face", &face))?,
            principal: col(r, 2)?,
        },
        action: col(r, 3)?,
        target: col(r, 4)?,
        operation_id: operation_id.map(OperationId),
        detail: from_json("audit.detail", &detail)?,
    })
}

impl Store for PostgresStore {
    fn insert_operation(&self, op: NewOperation) -> Result<Inserted, StoreError> {
        self.write("insert operation", move |tx| {
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
                 VALUES ($1, $2, $3, 'running', $4, $5, $6, $7, $8, NULL, $9, $9, NULL)",
                &[
                    &op.id.0,
                    &op.kind.as_str(),
                    &op.target,
                    &op.actor.face.as_str(),
                    &op.actor.principal,
                    &to_json("operations.request", &op.request)?,
                    &op.idempotency_key,
                    &op.request_hash,
                    &now_s,
                ],
            )
            .ctx(&format!("insert operation {}", op.id))?;
            let insert_step = tx
                .prepare(
                    "INSERT INTO steps (operation_id, key, position, title, depends_on, phase, attempts, \
                     idempotency_token, resource, outputs, detail, error, expected_secs, started_at, \
                     finished_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, NULL, 'null', NULL, NULL, $7, NULL, NULL, $8)",
                )
                .ctx("prepare step insert")?;
            for (position, s) in op.steps.iter().enumerate() {
                let expected = s.expected_secs.map(|v| u64_to_sql("steps.expected_secs", v)).transpose()?;
                tx.execute(
                    &insert_step,
                    &[
                        &op.id.0,
                        &s.key,
                        &(position as i64),
                        &s.title,
                        &to_json("steps.depends_on", &s.depends_on)?,
                        &step_token(&op.id, &s.key),
                        &expected,
                        &now_s,
                    ],
                )
                .ctx(&format!("insert step {}", s.key))?;
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
        let id = id.clone();
        self.read("get operation", move |tx| load_operation(tx, &id))
    }

    fn find_by_idempotency_key(&self, key: &str) -> Result<Option<Operation>, StoreError> {
        let key = key.to_string();
        self.read("find operation by idempotency key", move |tx| load_operation_by_key(tx, &key))
    }

    fn list_operations(&self, filter: &OperationFilter) -> Result<Vec<Operation>, StoreError> {
        let (sql, args) = operations_query(filter, None, filter.limit.map(i64::from))?;
        self.read("list operations", move |tx| query_operations(tx, &sql, &params_ref(&args)))
    }

    /// Keyset: the cursor is (created_at, seq) of the last operation returned; the row
    /// comparison seeks in `operations_created_seq` (or the target's or status's index, each
    /// ending in created_at, seq).
    fn page_operations(&self, filter: &OperationFilter, page: &PageRequest) -> Result<Page<Operation>, StoreError> {
        let limit = page.limit;
        let (sql, args) = operations_query(filter, page.after.as_ref(), Some(i64::from(limit) + 1))?;
        self.read("page operations", move |tx| {
            let items = query_operations(tx, &sql, &params_ref(&args))?;
            let mut page = Page::from_probe(items, limit, OPERATIONS_LIST, |_| Vec::new());
            if let (Some(next), Some(last)) = (&mut page.next, page.items.last()) {
                let row = tx
                    .query_one("SELECT seq FROM operations WHERE id = $1", &[&last.id.0])
                    .ctx("read operation position")?;
                let seq: i64 = col(&row, 0)?;
                *next = Cursor::new(OPERATIONS_LIST, vec![ts(&last.created_at), seq.to_string()]);
            }
            Ok(page)
        })
    }

    fn running_operations(&self) -> Result<Vec<Operation>, StoreError> {
        let sql = format!("SELECT {OP_COLUMNS} FROM operations WHERE status = 'running' ORDER BY created_at, seq");
        self.read("list running operations", move |tx| query_operations(tx, &sql, &[]))
    }

    /// One statement for any number of targets: the targets and kinds travel as arrays; for
    /// each target, one backward scan of the `operations_target_created` index (a `LATERAL`
    /// subquery) finds its newest operation of the kinds.
    fn latest_operations(
        &self,
        targets: &[String],
        kinds: &[OperationKind],
    ) -> Result<BTreeMap<String, OperationHead>, StoreError> {
        if targets.is_empty() {
            return Ok(BTreeMap::new());
        }
        let targets = targets.to_vec();
        let kinds: Option<Vec<String>> =
            (!kinds.is_empty()).then(|| kinds.iter().map(|k| k.as_str().to_string()).collect());
        self.read("latest operations", move |tx| {
            let rows = tx
                .query(
                    "SELECT o.id, o.kind, o.target, o.status, o.error, o.created_at, o.updated_at, o.finished_at \
                     FROM (SELECT DISTINCT t FROM unnest($1::TEXT[]) AS t) AS targets \
                     CROSS JOIN LATERAL (SELECT * FROM operations p WHERE p.target = targets.t COLLATE \"C\" \
                         AND ($2::TEXT[] IS NULL OR p.kind = ANY ($2::TEXT[])) \
                         ORDER BY p.created_at DESC, p.seq DESC LIMIT 1) AS o",
                    &[&targets, &kinds],
                )
                .ctx("query latest operations")?;
            rows.iter().map(decode_head).collect()
        })
    }

    fn count_operations(&self) -> Result<Vec<(OperationStatus, u64)>, StoreError> {
        self.read("count operations", |tx| {
            let rows = tx
                .query("SELECT status, n FROM operation_counts WHERE n > 0 ORDER BY status", &[])
                .ctx("count operations")?;
            rows.iter()
                .map(|r| {
                    let status: String = col(r, 0)?;
                    Ok((parse_status(&status)?, u64_from_sql("operations count", col(r, 1)?)?))
                })
                .collect()
        })
    }

    fn update_step(&self, id: &OperationId, key: &str, update: &StepUpdate) -> Result<Step, StoreError> {
        let (id, key, update) = (id.clone(), key.to_string(), update.clone());
        self.write("update step", move |tx| apply_step_update(tx, &id, &key, &update))
    }

    fn set_operation_status(
        &self,
        id: &OperationId,
        status: OperationStatus,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        let (id, error) = (id.clone(), error.map(str::to_string));
        self.write("set operation status", move |tx| set_status(tx, &id, status, error.as_deref()))
    }

    fn reopen_operation(&self, id: &OperationId) -> Result<(), StoreError> {
        let id = id.clone();
        self.write("reopen operation", move |tx| set_status(tx, &id, OperationStatus::Running, None))
    }

    /// One statement: the oldest finished operations of the hot set (`operations_hot_finished`),
    /// flagged archived.
    fn archive_operations(&self, finished_before: chrono::DateTime<Utc>, limit: u32) -> Result<u64, StoreError> {
        let before = ts(&finished_before);
        let statuses: Vec<String> = ARCHIVABLE.iter().map(|s| s.as_str().to_string()).collect();
        self.write("archive operations", move |tx| {
            tx.execute(
                "UPDATE operations SET archived = TRUE WHERE seq IN (SELECT seq FROM operations \
                 WHERE NOT archived AND finished_at IS NOT NULL AND finished_at < $1 AND status = ANY($2) \
                 ORDER BY finished_at LIMIT $3)",
                &[&before, &statuses, &i64::from(limit)],
            )
            .ctx("archive operations")
        })
    }

    fn append_audit(&self, entry: &AuditEntry) -> Result<(), StoreError> {
        let entry = entry.clone();
        self.write("append audit entry", move |tx| insert_audit(tx, &entry))
    }

    fn list_audit(&self, target: Option<&str>, limit: u32) -> Result<Vec<AuditEntry>, StoreError> {
        let target = target.map(str::to_string);
        self.read("list audit", move |tx| {
            let rows = query_audit(tx, target, None, i64::from(limit))?;
            Ok(rows.into_iter().map(|(_, e)| e).collect())
        })
    }

    /// Keyset: the cursor is (at, id) of the last entry returned, seeking in `audit_at_id` or
    /// `audit_target_at_id`.
    fn page_audit(&self, target: Option<&str>, page: &PageRequest) -> Result<Page<AuditEntry>, StoreError> {
        let target = target.map(str::to_string);
        let after = page.after.as_ref().map(cursor_position).transpose()?;
        let limit = page.limit;
        self.read("page audit", move |tx| {
            let rows = query_audit(tx, target, after, i64::from(limit) + 1)?;
            let page = Page::from_probe(rows, limit, AUDIT_LIST, |(id, e)| vec![ts(&e.at), id.to_string()]);
            Ok(page.map(|(_, e)| e))
        })
    }

    fn put_cluster(&self, record: &ClusterRecord) -> Result<(), StoreError> {
        let json = to_json("clusters.record", record)?;
        let source = enum_str("clusters.source", &record.source)?;
        let r = record.clone();
        self.write("put cluster", move |tx| {
            tx.execute(
                "INSERT INTO clusters (name, region, source, eks_cluster, record, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) \
                 ON CONFLICT (name) DO UPDATE SET region = excluded.region, source = excluded.source, \
                 eks_cluster = excluded.eks_cluster, record = excluded.record, created_at = excluded.created_at, \
                 updated_at = excluded.updated_at",
                &[&r.name, &r.region, &source, &r.eks_cluster, &json, &ts(&r.created_at), &ts(&r.updated_at)],
            )
            .ctx(&format!("write cluster {}", r.name))?;
            Ok(())
        })
    }

    fn get_cluster(&self, name: &str) -> Result<Option<ClusterRecord>, StoreError> {
        let name = name.to_string();
        self.read("get cluster", move |tx| {
            let row = tx.query_opt("SELECT record FROM clusters WHERE name = $1", &[&name]).ctx("read cluster")?;
            row.map(|r| from_json("clusters.record", &col::<String>(&r, 0)?)).transpose()
        })
    }

    /// Keyset on the primary key: the cursor is the name of the last cluster returned.
    fn page_clusters(&self, page: &PageRequest) -> Result<Page<ClusterRecord>, StoreError> {
        let after = page.after.as_ref().map(|c| c.key().first().cloned().ok_or(StoreError::BadCursor)).transpose()?;
        let limit = page.limit;
        self.read("page clusters", move |tx| {
            let rows = tx
                .query(
                    "SELECT record FROM clusters WHERE $1::TEXT IS NULL OR name > $1 ORDER BY name LIMIT $2",
                    &[&after, &(i64::from(limit) + 1)],
                )
                .ctx("query clusters")?;
            let records = rows
                .iter()
                .map(|r| from_json("clusters.record", &col::<String>(r, 0)?))
                .collect::<Result<Vec<ClusterRecord>, _>>()?;
            Ok(Page::from_probe(records, limit, CLUSTERS_LIST, |c: &ClusterRecord| vec![c.name.clone()]))
        })
    }

    fn list_clusters(&self) -> Result<Vec<ClusterRecord>, StoreError> {
        self.read("list clusters", |tx| {
            let rows = tx.query("SELECT record FROM clusters ORDER BY name", &[]).ctx("query clusters")?;
            rows.iter().map(|r| from_json("clusters.record", &col::<String>(r, 0)?)).collect()
        })
    }

    /// Deleting a cluster that is not registered is not an error (the unregister step may run
    /// again after a restart).
    fn delete_cluster(&self, name: &str) -> Result<(), StoreError> {
        let name = name.to_string();
        self.write("delete cluster", move |tx| {
            tx.execute("DELETE FROM clusters WHERE name = $1", &[&name]).ctx("delete cluster")?;
            Ok(())
        })
    }

    fn get_setting(&self, key: &str) -> Result<Option<String>, StoreError> {
        let key = key.to_string();
        self.read("get setting", move |tx| {
            let row = tx
                .query_opt("SELECT value FROM settings WHERE key = $1", &[&key])
                .ctx(&format!("read setting {key}"))?;
            row.map(|r| col(&r, 0)).transpose()
        })
    }

    fn set_setting(&self, key: &str, value: Option<&str>) -> Result<(), StoreError> {
        let (key, value) = (key.to_string(), value.map(str::to_string));
        self.write("set setting", move |tx| {
            match &value {
                Some(v) => tx.execute(
                    "INSERT INTO settings (key, value, updated_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                    &[&key, v, &ts(&Utc::now())],
                ),
                None => tx.execute("DELETE FROM settings WHERE key = $1", &[&key]),
            }
            .ctx(&format!("write setting {key}"))?;
            Ok(())
        })
    }

    fn acquire_lease(&self, id: &OperationId, replica: &str, ttl: Duration) -> Result<Option<Lease>, StoreError> {
        let (id, replica) = (id.clone(), replica.to_string());
        self.write("acquire lease", move |tx| {
            let (status, row) = lease_state(tx, &id)?;
            let now = db_now_us(tx)?;
            let Some(token) = lease::acquire(&id, status.as_deref(), row.as_ref(), &replica, now)? else {
                return Ok(None);
            };
            let row = LeaseRow { replica, token, expires_us: now + lease::ttl_us(ttl) };
            put_lease(tx, &id, &row)?;
            lease::lease_of(&id, &row).map(Some)
        })
    }

    fn renew_lease(&self, held: &Lease, ttl: Duration) -> Result<Lease, StoreError> {
        let held = held.clone();
        self.write("renew lease", move |tx| {
            check_fence(tx, &held)?;
            let token = i64::try_from(held.token).map_err(|_| StoreError::Backend("lease token too large".into()))?;
            let row =
                LeaseRow { replica: held.replica.clone(), token, expires_us: db_now_us(tx)? + lease::ttl_us(ttl) };
            put_lease(tx, &held.operation_id, &row)?;
            lease::lease_of(&held.operation_id, &row)
        })
    }

    fn release_lease(&self, held: &Lease) -> Result<(), StoreError> {
        let held = held.clone();
        let token = i64::try_from(held.token).unwrap_or(-1);
        self.write("release lease", move |tx| {
            tx.execute(
                "UPDATE leases SET expires_at = 0 WHERE operation_id = $1 AND token = $2 AND replica = $3",
                &[&held.operation_id.0, &token, &held.replica],
            )
            .ctx("release lease")?;
            Ok(())
        })
    }

    fn get_lease(&self, id: &OperationId) -> Result<Option<Lease>, StoreError> {
        let id = id.clone();
        self.read("get lease", move |tx| {
            let row = tx
                .query_opt("SELECT replica, token, expires_at FROM leases WHERE operation_id = $1", &[&id.0])
                .ctx("read lease")?;
            row.map(|r| {
                lease::lease_of(&id, &LeaseRow { replica: col(&r, 0)?, token: col(&r, 1)?, expires_us: col(&r, 2)? })
            })
            .transpose()
        })
    }

    fn unleased_running_operations(&self) -> Result<Vec<OperationId>, StoreError> {
        self.read("list unleased operations", |tx| {
            let now = db_now_us(tx)?;
            let rows = tx
                .query(
                    "SELECT o.id FROM operations o LEFT JOIN leases l ON l.operation_id = o.id \
                     WHERE o.status = 'running' AND (l.operation_id IS NULL OR l.expires_at <= $1) \
                     ORDER BY o.created_at, o.seq",
                    &[&now],
                )
                .ctx("query unleased operations")?;
            rows.iter().map(|r| col::<String>(r, 0).map(OperationId)).collect()
        })
    }

    fn update_step_fenced(&self, held: &Lease, key: &str, update: &StepUpdate) -> Result<Step, StoreError> {
        let (held, key, update) = (held.clone(), key.to_string(), update.clone());
        self.write("update step (fenced)", move |tx| {
            check_fence(tx, &held)?;
            apply_step_update(tx, &held.operation_id, &key, &update)
        })
    }

    fn set_operation_status_fenced(
        &self,
        held: &Lease,
        status: OperationStatus,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        let (held, error) = (held.clone(), error.map(str::to_string));
        self.write("set operation status (fenced)", move |tx| {
            check_fence(tx, &held)?;
            set_status(tx, &held.operation_id, status, error.as_deref())
        })
    }

    fn publish_change(&self, replica: &str, operation: &Operation) -> Result<u64, StoreError> {
        let json = to_json("operation_changes.operation", operation)?;
        let (replica, id) = (replica.to_string(), operation.id.0.clone());
        self.write("publish change", move |tx| insert_change(tx, &replica, &id, &json))
    }

    fn publish_change_fenced(&self, held: &Lease, operation: &Operation) -> Result<u64, StoreError> {
        let json = to_json("operation_changes.operation", operation)?;
        let (held, id) = (held.clone(), operation.id.0.clone());
        self.write("publish change (fenced)", move |tx| {
            let (_, row) = lease_state(tx, &held.operation_id)?;
            lease::check_holder(&held, row.as_ref())?;
            insert_change(tx, &held.replica, &id, &json)
        })
    }

    fn change_signal(&self) -> Option<std::sync::Arc<tokio::sync::Notify>> {
        Some(
            self.listener.get_or_init(|| listen::Listener::start(self.config.clone(), self.tls.clone())).signal.clone(),
        )
    }

    fn changes_since(&self, after: u64, limit: u32) -> Result<Vec<OperationChange>, StoreError> {
        let after = u64_to_sql("operation_changes.seq", after)?;
        self.read("read changes", move |tx| {
            let rows = tx
                .query(
                    "SELECT seq, replica, operation FROM operation_changes WHERE seq > $1 ORDER BY seq LIMIT $2",
                    &[&after, &i64::from(limit)],
                )
                .ctx("query changes")?;
            rows.iter()
                .map(|r| {
                    let op: String = col(r, 2)?;
                    Ok(OperationChange {
                        seq: u64_from_sql("operation_changes.seq", col(r, 0)?)?,
                        replica: col(r, 1)?,
                        operation: from_json("operation_changes.operation", &op)?,
                    })
                })
                .collect()
        })
    }

    fn latest_change_seq(&self) -> Result<u64, StoreError> {
        self.read("read the newest change", |tx| {
            let row = tx.query_one("SELECT COALESCE(MAX(seq), 0) FROM operation_changes", &[]).ctx("newest change")?;
            u64_from_sql("operation_changes.seq", col(&row, 0)?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn the_store_is_send_and_sync() {
        assert_send_sync::<PostgresStore>();
    }

    #[test]
    fn a_malformed_url_is_a_backend_error_that_hides_the_password() {
        let err = PostgresStore::connect("postgres://user:s3cret@host:notaport/db").unwrap_err();
        assert!(
            matches!(&err, StoreError::Backend(m) if m.contains("invalid PostgreSQL URL") && !m.contains("s3cret")),
            "{err}"
        );
    }
}
