//! Where a simulated world lives when several control planes share it: the [`WorldStore`]
//! trait, and [`MemoryWorldStore`] (one process, for tests). [`PostgresWorldStore`] keeps the
//! world in a PostgreSQL database, so separate server processes (replicas on one `--store-url`)
//! see one simulated account (issue #22).
//!
//! A world store holds one encoded [`World`](crate::world::World) with a version that grows by
//! one on every write. [`SimCloud`](crate::SimCloud) keeps a decoded copy (the per-process
//! cache) with the version it was decoded from, and runs every simulated call as: lock the
//! stored world → load it only if its version moved → act → write it back → unlock
//! ([`WorldStore::lock`], [`WorldLock::commit`]). Reads outside the call pipeline (counters,
//! the clock) refresh the cache without locking ([`WorldStore::peek`]).
//!
//! # Guarantees
//! - While a [`WorldLock`] is held, no other holder of any handle on the same stored world (in
//!   this process or another) can take one: simulated calls are serialized across replicas.
//! - [`Snapshot::body`] is present exactly when the stored version differs from the caller's
//!   `known` one (and a world is stored): an unchanged world costs no transfer and no decoding.
//! - Dropping a [`WorldLock`] without committing releases it and changes nothing.
//! - [`Snapshot::now`] is the store's clock (the database server's for PostgreSQL), so replicas
//!   whose own clocks disagree still compute one simulated time.

mod postgres;

use chrono::{DateTime, Utc};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

pub use self::postgres::{IDLE_IN_TRANSACTION_TIMEOUT_MS, PostgresWorldStore};

/// A failure of the world store itself (the database is unreachable, a query failed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("simulated world store: {0}")]
pub struct WorldStoreError(pub String);

/// What a [`WorldStore`] returns: the stored version, the world when it changed, the store's
/// clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The stored world's version; 0 while no world was ever stored.
    pub version: u64,
    /// The encoded world, present only when `version` differs from the caller's `known` one.
    pub body: Option<Vec<u8>>,
    /// The store's clock at the time of the read.
    pub now: DateTime<Utc>,
}

/// The exclusive right to change the stored world, from [`WorldStore::lock`] until
/// [`WorldLock::commit`] (or drop, which changes nothing).
pub trait WorldLock: Send {
    /// Stores `body` as the next version (`None`: leaves the world as it is) and releases the
    /// lock; returns the stored version.
    fn commit(self: Box<Self>, body: Option<Vec<u8>>) -> Result<u64, WorldStoreError>;
}

/// Where a shared world lives; see the module docs.
pub trait WorldStore: Send + Sync + std::fmt::Debug {
    /// The stored world if its version is not `known`, without locking.
    fn peek(&self, known: u64) -> Result<Snapshot, WorldStoreError>;
    /// Waits until nobody else holds the world, locks it, and returns it as [`Self::peek`]
    /// does, with the lock.
    fn lock(&self, known: u64) -> Result<(Snapshot, Box<dyn WorldLock>), WorldStoreError>;
}

/// A world store in this process's memory: several [`SimCloud`](crate::SimCloud)s on one
/// handle behave as replicas in separate processes on one database would (each keeps its own
/// cache and clock anchor), which the tests use without a database.
#[derive(Debug, Clone, Default)]
pub struct MemoryWorldStore {
    inner: Arc<MemoryInner>,
}

#[derive(Debug, Default)]
struct MemoryInner {
    state: Mutex<MemoryState>,
    released: Condvar,
}

#[derive(Debug, Default)]
struct MemoryState {
    version: u64,
    body: Vec<u8>,
    locked: bool,
}

impl MemoryWorldStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn snapshot(st: &MemoryState, known: u64) -> Snapshot {
        let body = (st.version != known && st.version != 0).then(|| st.body.clone());
        Snapshot { version: st.version, body, now: Utc::now() }
    }
}

impl WorldStore for MemoryWorldStore {
    fn peek(&self, known: u64) -> Result<Snapshot, WorldStoreError> {
        let st = self.inner.state.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(Self::snapshot(&st, known))
    }

    fn lock(&self, known: u64) -> Result<(Snapshot, Box<dyn WorldLock>), WorldStoreError> {
        let mut st = self.inner.state.lock().unwrap_or_else(PoisonError::into_inner);
        while st.locked {
            st = self.inner.released.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
        st.locked = true;
        Ok((Self::snapshot(&st, known), Box::new(MemoryLock { inner: Some(self.inner.clone()) })))
    }
}

/// [`WorldLock`] of a [`MemoryWorldStore`].
struct MemoryLock {
    inner: Option<Arc<MemoryInner>>,
}

impl MemoryLock {
    fn release(&mut self, body: Option<Vec<u8>>) -> u64 {
        let Some(inner) = self.inner.take() else { return 0 };
        let mut st = inner.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(body) = body {
            st.body = body;
            st.version += 1;
        }
        st.locked = false;
        inner.released.notify_one();
        st.version
    }
}

impl WorldLock for MemoryLock {
    fn commit(mut self: Box<Self>, body: Option<Vec<u8>>) -> Result<u64, WorldStoreError> {
        Ok(self.release(body))
    }
}

impl Drop for MemoryLock {
    fn drop(&mut self) {
        self.release(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_store_versions_transfers_only_changes_and_excludes_other_holders() {
        let store = MemoryWorldStore::new();
        let (snap, lock) = store.lock(0).unwrap();
        assert_eq!((snap.version, snap.body), (0, None), "nothing stored yet");
        assert_eq!(lock.commit(Some(b"one".to_vec())).unwrap(), 1);
        assert_eq!(store.peek(0).unwrap().body.as_deref(), Some(&b"one"[..]));
        assert_eq!(store.peek(1).unwrap().body, None, "unchanged: no body");
        // A dropped lock changes nothing and lets the next holder in.
        let (_, lock) = store.lock(1).unwrap();
        drop(lock);
        let (snap, lock) = store.lock(1).unwrap();
        assert_eq!(snap.version, 1);
        // Another holder waits until the first commits.
        let other = store.clone();
        let waiter = std::thread::spawn(move || {
            let (snap, lock) = other.lock(1).unwrap();
            lock.commit(None).unwrap();
            snap
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "the second holder waits");
        assert_eq!(lock.commit(Some(b"two".to_vec())).unwrap(), 2);
        let seen = waiter.join().unwrap();
        assert_eq!((seen.version, seen.body.as_deref()), (2, Some(&b"two"[..])));
    }
}
