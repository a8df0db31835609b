//! A small pool of std threads, each owning one blocking PostgreSQL connection.
//!
//! The `postgres` crate's blocking client drives its own tokio runtime, so it must not be
//! called from a tokio worker thread (it panics there), yet the [`Store`] trait is synchronous
//! and is called from exactly such threads. [`Pool::call`] therefore ships the work (a closure
//! over a `&mut Client`) to a dedicated thread over a channel and blocks on a per-call reply
//! channel, the way the SQLite store blocks on its mutex.
//!
//! # Guarantees
//! - Each closure runs on one connection, alone: a call's transaction never interleaves with
//!   another call's statements on the same connection.
//! - A connection is opened lazily and reopened after it breaks; a closure that panics gets its
//!   connection dropped (whatever transaction it had open is rolled back by the server) and its
//!   caller gets a [`StoreError::Backend`], not a panic.
//! - Dropping the pool closes the channel and joins every thread (each closes its connection).
//! - A session idle inside a transaction for [`IDLE_IN_TRANSACTION_TIMEOUT_MS`] (its process
//!   paused mid-call) is ended by the server, releasing the write lock for the other replicas.
//!
//! [`Store`]: instantstart_core::store::Store

use super::tls::RustlsConnect;
use crate::codec::Context;
use ::postgres::{Client, Config};
use instantstart_core::store::StoreError;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{Receiver, Sender, channel, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

/// How long (ms) a connection may sit idle inside an open transaction before the server ends
/// the session, releasing its locks (see [`Connection::client`]); well under the default lease
/// TTL (15 s), so a paused replica cannot delay a takeover beyond it.
pub(crate) const IDLE_IN_TRANSACTION_TIMEOUT_MS: u64 = 2_000;

/// One unit of work for a pool thread.
type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// A pool thread's connection, opened on first use.
pub(crate) struct Connection {
    config: Arc<Config>,
    tls: RustlsConnect,
    client: Option<Client>,
}

impl Connection {
    /// The open connection, (re)connecting when there is none or it broke.
    fn client(&mut self) -> Result<&mut Client, StoreError> {
        if self.client.as_ref().is_some_and(Client::is_closed) {
            self.client = None;
        }
        if self.client.is_none() {
            let mut client = self
                .config
                .connect(self.tls.clone())
                .map_err(|e| StoreError::Backend(format!("connect to PostgreSQL: {}", with_causes(&e))))?;
            // A commit returns only once its WAL is flushed, whatever the server's default.
            client.batch_execute("SET synchronous_commit = on").ctx("set synchronous_commit")?;
            // A process paused inside a transaction (a long GC, SIGSTOP) would keep the write
            // lock and stall every replica's writes, takeovers included: the server ends such
            // a session after this long and its transaction rolls back (ours last microseconds
            // between statements).
            client
                .batch_execute(&format!("SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_TIMEOUT_MS}"))
                .ctx("set idle_in_transaction_session_timeout")?;
            self.client = Some(client);
        }
        self.client.as_mut().ok_or_else(|| StoreError::Backend("no PostgreSQL connection".into()))
    }
}

/// An error with its causes (`error performing TLS handshake: invalid peer certificate:
/// UnknownIssuer`), so a refused certificate says why.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

/// The pool; see the module docs.
pub(crate) struct Pool {
    jobs: Option<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("threads", &self.threads.len()).finish()
    }
}

impl Pool {
    /// Starts `size` threads (at least one) connecting with `config`.
    pub(crate) fn start(config: Config, tls: RustlsConnect, size: usize) -> Result<Self, StoreError> {
        let config = Arc::new(config);
        let (jobs, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let threads = (0..size.max(1))
            .map(|i| {
                let rx = rx.clone();
                let conn = Connection { config: config.clone(), tls: tls.clone(), client: None };
                std::thread::Builder::new()
                    .name(format!("instantstart-pg-{i}"))
                    .spawn(move || worker(&rx, conn))
                    .map_err(|e| StoreError::Backend(format!("start a PostgreSQL connection thread: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Pool { jobs: Some(jobs), threads })
    }

    /// Runs `f` with a connection on a pool thread and returns its result.
    pub(crate) fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = sync_channel(1);
        let job: Job = Box::new(move |conn: &mut Connection| {
            let out = match catch_unwind(AssertUnwindSafe(|| conn.client().and_then(f))) {
                Ok(out) => out,
                Err(_) => {
                    conn.client = None;
                    Err(StoreError::Backend("a PostgreSQL call panicked; its transaction was rolled back".into()))
                }
            };
            let _ = reply.send(out);
        });
        let jobs = self.jobs.as_ref().ok_or_else(|| StoreError::Backend("the PostgreSQL pool is closed".into()))?;
        jobs.send(job).map_err(|_| StoreError::Backend("the PostgreSQL pool is closed".into()))?;
        answer.recv().map_err(|_| StoreError::Backend("a PostgreSQL connection thread stopped".into()))?
    }
}

fn worker(rx: &Mutex<Receiver<Job>>, mut conn: Connection) {
    loop {
        // Hold the lock only while taking a job, so the other threads can take the next one.
        let job = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
        match job {
            Ok(job) => job(&mut conn),
            Err(_) => return, // the pool was dropped
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        drop(self.jobs.take());
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
