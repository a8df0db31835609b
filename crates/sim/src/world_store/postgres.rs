//! [`PostgresWorldStore`]: the simulated world in one row of a PostgreSQL table, so separate
//! server processes on one database share one simulated account.
//!
//! The table `sim_world` (one row, `id = 1`: `version BIGINT`, `world BYTEA`) is created on
//! connect when missing; it sits beside the control plane's tables in the same database but
//! belongs to the simulator (the store's migrations do not know it).
//!
//! # Guarantees
//! - [`WorldStore::lock`] runs `SELECT … FOR UPDATE` on the row inside a transaction that stays
//!   open until the [`WorldLock`] is committed or dropped: holders in every process wait for
//!   each other. The row exists before anyone locks it (inserted on connect), so even the first
//!   world is created under the lock, once.
//! - A commit writes the new body and `version + 1` in that transaction; a dropped lock, or a
//!   lock whose connection broke, rolls back: the stored world never holds half a call.
//! - The blocking client never runs on the caller's thread (it would panic inside tokio): one
//!   thread per handle owns the connection, reconnecting after it breaks; calls on one handle
//!   are serialized, as the simulator's own mutex serializes them anyway.
//! - [`Snapshot::now`] is the database server's `clock_timestamp()`.
//! - A lock whose holder stops acting (its process paused) is released by the server after
//!   [`IDLE_IN_TRANSACTION_TIMEOUT_MS`]; the holder's commit then fails and changes nothing.

use super::{Snapshot, WorldLock, WorldStore, WorldStoreError};
use ::postgres::{Client, Config, NoTls, Transaction};
use chrono::{DateTime, Utc};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::time::Duration;

/// How long (ms) a connection may sit idle holding the world's row lock before the server ends
/// its session and the lock is released: a paused holder cannot stall the other replicas for
/// longer (the store's connections use the same bound).
pub const IDLE_IN_TRANSACTION_TIMEOUT_MS: u64 = 2_000;

/// How long connecting may take when the URL does not say.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Serializes the `CREATE TABLE IF NOT EXISTS` of replicas starting together (two concurrent
/// creations of one table collide in PostgreSQL's catalog).
const CREATE_LOCK: i64 = 0x5349_4d57_4f52_4c44; // "SIMWORLD"

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS sim_world (\
     id SMALLINT PRIMARY KEY CHECK (id = 1), version BIGINT NOT NULL, world BYTEA); \
     INSERT INTO sim_world (id, version, world) VALUES (1, 0, NULL) ON CONFLICT (id) DO NOTHING";

/// The version, the body when it changed, and the database clock in microseconds.
const READ: &str = "SELECT version, CASE WHEN version <> $1 THEN world END, \
                    (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT FROM sim_world WHERE id = 1";

/// What the connection thread is asked to do.
enum Job {
    Peek { known: u64, reply: SyncSender<Result<Snapshot, WorldStoreError>> },
    Lock { known: u64, reply: SyncSender<Result<Snapshot, WorldStoreError>>, finish: Receiver<Finish> },
}

/// How a lock ends: the new body (or none) and where to answer with the stored version.
struct Finish {
    body: Option<Vec<u8>>,
    reply: SyncSender<Result<u64, WorldStoreError>>,
}

/// The world in PostgreSQL; see the module docs.
pub struct PostgresWorldStore {
    jobs: Mutex<Sender<Job>>,
}

impl std::fmt::Debug for PostgresWorldStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresWorldStore").finish_non_exhaustive()
    }
}

fn err(what: &str, e: impl std::fmt::Display) -> WorldStoreError {
    WorldStoreError(format!("{what}: {e}"))
}

impl PostgresWorldStore {
    /// Connects to the database at `url` (any form the `postgres` crate accepts; the password
    /// is never shown in errors) and creates the `sim_world` table when missing.
    pub fn connect(url: &str) -> Result<Self, WorldStoreError> {
        let mut config: Config = url
            .parse()
            .map_err(|e| err("invalid PostgreSQL URL for the simulated world (the password is not shown)", e))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("instantstart-sim");
        }
        let (jobs, rx) = channel::<Job>();
        let (ready, started) = sync_channel(1);
        std::thread::Builder::new()
            .name("instantstart-sim-world".into())
            .spawn(move || {
                let mut conn = Connection { config, client: None };
                let _ = ready.send(conn.client().and_then(|c| {
                    let mut tx = c.transaction().map_err(|e| err("begin", e))?;
                    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CREATE_LOCK]).map_err(|e| err("lock", e))?;
                    tx.batch_execute(SCHEMA).map_err(|e| err("create the sim_world table", e))?;
                    tx.commit().map_err(|e| err("commit", e))
                }));
                while let Ok(job) = rx.recv() {
                    conn.run(job);
                }
            })
            .map_err(|e| err("start the simulated world's connection thread", e))?;
        started.recv().map_err(|e| err("the simulated world's connection thread stopped", e))??;
        Ok(PostgresWorldStore { jobs: Mutex::new(jobs) })
    }

    fn send(&self, job: Job) -> Result<(), WorldStoreError> {
        let jobs = self.jobs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        jobs.send(job).map_err(|_| WorldStoreError("the simulated world's connection thread stopped".into()))
    }
}

fn stopped<T>(_: T) -> WorldStoreError {
    WorldStoreError("the simulated world's connection thread stopped".into())
}

impl WorldStore for PostgresWorldStore {
    fn peek(&self, known: u64) -> Result<Snapshot, WorldStoreError> {
        let (reply, answer) = sync_channel(1);
        self.send(Job::Peek { known, reply })?;
        answer.recv().map_err(stopped)?
    }

    fn lock(&self, known: u64) -> Result<(Snapshot, Box<dyn WorldLock>), WorldStoreError> {
        let (reply, answer) = sync_channel(1);
        let (finish, finished) = channel();
        self.send(Job::Lock { known, reply, finish: finished })?;
        let snapshot = answer.recv().map_err(stopped)??;
        Ok((snapshot, Box::new(PostgresLock { finish })))
    }
}

/// [`WorldLock`] of a [`PostgresWorldStore`]: the connection thread holds the transaction
/// until this says how it ends (dropping it closes the channel: rollback).
struct PostgresLock {
    finish: Sender<Finish>,
}

impl WorldLock for PostgresLock {
    fn commit(self: Box<Self>, body: Option<Vec<u8>>) -> Result<u64, WorldStoreError> {
        let (reply, answer) = sync_channel(1);
        self.finish.send(Finish { body, reply }).map_err(stopped)?;
        answer.recv().map_err(stopped)?
    }
}

/// The connection thread's connection, opened on first use and after it broke.
struct Connection {
    config: Config,
    client: Option<Client>,
}

impl Connection {
    fn client(&mut self) -> Result<&mut Client, WorldStoreError> {
        if self.client.as_ref().is_some_and(Client::is_closed) {
            self.client = None;
        }
        if self.client.is_none() {
            let mut client = self.config.connect(NoTls).map_err(|e| err("connect to PostgreSQL", e))?;
            client.batch_execute("SET synchronous_commit = on").map_err(|e| err("set synchronous_commit", e))?;
            // A process paused while it holds the world (a long GC, SIGSTOP) would stall every
            // replica's simulated calls: the server ends the session after this long idle in
            // the transaction, which rolls back (a call holds it for microseconds of work).
            client
                .batch_execute(&format!("SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_TIMEOUT_MS}"))
                .map_err(|e| err("set idle_in_transaction_session_timeout", e))?;
            self.client = Some(client);
        }
        self.client.as_mut().ok_or_else(|| WorldStoreError("no PostgreSQL connection".into()))
    }

    fn run(&mut self, job: Job) {
        match job {
            Job::Peek { known, reply } => {
                let out = self.client().and_then(|c| {
                    let mut tx = c.build_transaction().read_only(true).start().map_err(|e| err("begin", e))?;
                    let snap = read(&mut tx, known, false)?;
                    tx.commit().map_err(|e| err("end", e))?;
                    Ok(snap)
                });
                let _ = reply.send(out);
            }
            Job::Lock { known, reply, finish } => {
                let client = match self.client() {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = reply.send(Err(e));
                        return;
                    }
                };
                let mut tx = match client.transaction() {
                    Ok(tx) => tx,
                    Err(e) => {
                        let _ = reply.send(Err(err("begin", e)));
                        return;
                    }
                };
                match read(&mut tx, known, true) {
                    Ok(snap) => {
                        if reply.send(Ok(snap)).is_err() {
                            return; // the caller went away: roll back
                        }
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e));
                        return;
                    }
                }
                // A closed channel (the lock dropped) ends the transaction without a commit.
                let Ok(Finish { body, reply }) = finish.recv() else { return };
                let _ = reply.send(finish_lock(tx, body));
            }
        }
    }
}

/// Reads the row (locking it when `for_update`).
fn read(tx: &mut Transaction<'_>, known: u64, for_update: bool) -> Result<Snapshot, WorldStoreError> {
    let known = i64::try_from(known).unwrap_or(-1);
    let sql = if for_update { format!("{READ} FOR UPDATE") } else { READ.to_string() };
    let row = tx.query_one(&sql, &[&known]).map_err(|e| err("read the simulated world", e))?;
    let version: i64 = row.try_get(0).map_err(|e| err("decode sim_world.version", e))?;
    let body: Option<Vec<u8>> = row.try_get(1).map_err(|e| err("decode sim_world.world", e))?;
    let now_us: i64 = row.try_get(2).map_err(|e| err("decode the database clock", e))?;
    Ok(Snapshot {
        version: u64::try_from(version).map_err(|e| err("sim_world.version", e))?,
        body: body.filter(|_| version != 0),
        now: DateTime::<Utc>::from_timestamp_micros(now_us).unwrap_or_else(Utc::now),
    })
}

/// Writes `body` (when given) as the next version and commits; the stored version.
fn finish_lock(mut tx: Transaction<'_>, body: Option<Vec<u8>>) -> Result<u64, WorldStoreError> {
    let version: i64 = match body {
        Some(body) => tx
            .query_one(
                "UPDATE sim_world SET version = version + 1, world = $1 WHERE id = 1 RETURNING version",
                &[&body],
            )
            .and_then(|r| r.try_get(0))
            .map_err(|e| err("write the simulated world", e))?,
        None => tx
            .query_one("SELECT version FROM sim_world WHERE id = 1", &[])
            .and_then(|r| r.try_get(0))
            .map_err(|e| err("read the simulated world's version", e))?,
    };
    tx.commit().map_err(|e| err("commit the simulated world", e))?;
    u64::try_from(version).map_err(|e| err("sim_world.version", e))
}
