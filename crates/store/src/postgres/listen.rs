//! The change feed's wake-up on PostgreSQL: one thread per store `LISTEN`s on the feed's
//! channel on its own connection and wakes the store's change signal on every notification
//! ([`Store::change_signal`](instantstart_core::store::Store::change_signal)).
//!
//! # Guarantees
//! - Started on the first request for the signal; stopped (within [`WAIT`]) when the store is
//!   dropped.
//! - A broken connection is reopened (after [`RETRY`]) and the signal woken once on
//!   reconnecting, since notifications sent meanwhile are lost; the relay reading the feed by
//!   sequence number, with its own safety poll, does the rest.

use super::CHANGES_CHANNEL;
use super::tls::RustlsConnect;
use ::postgres::fallible_iterator::FallibleIterator;
use ::postgres::{Client, Config};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// How long one wait for a notification lasts before the thread checks whether to stop.
const WAIT: Duration = Duration::from_millis(500);
/// How long to wait before reconnecting after the connection broke.
const RETRY: Duration = Duration::from_secs(1);

/// The listener of one store; stops its thread when dropped.
#[derive(Debug)]
pub(crate) struct Listener {
    pub signal: Arc<Notify>,
    stop: Arc<AtomicBool>,
}

impl Listener {
    /// Starts the listening thread on a connection of its own.
    pub(crate) fn start(config: Config, tls: RustlsConnect) -> Listener {
        let signal = Arc::new(Notify::new());
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (signal.clone(), stop.clone());
        let spawned = std::thread::Builder::new()
            .name("instantstart-pg-listen".into())
            .spawn(move || run(&config, &tls, &s, &st));
        if let Err(e) = spawned {
            tracing_free_warn(&format!("cannot start the change feed's listener (the relay polls instead): {e}"));
        }
        Listener { signal, stop }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// The store has no logging dependency: a failure to start is written to stderr.
fn tracing_free_warn(message: &str) {
    eprintln!("instantstart-store: {message}");
}

fn run(config: &Config, tls: &RustlsConnect, signal: &Notify, stop: &AtomicBool) {
    let mut first = true;
    while !stop.load(Ordering::SeqCst) {
        let mut client = match listen(config, tls) {
            Ok(c) => c,
            Err(_) => {
                std::thread::sleep(RETRY);
                continue;
            }
        };
        if !first {
            // Whatever was notified while the connection was down is lost: read the feed.
            signal.notify_one();
        }
        first = false;
        while !stop.load(Ordering::SeqCst) {
            let mut notifications = client.notifications();
            let mut batch = notifications.timeout_iter(WAIT);
            match batch.next() {
                Ok(Some(_)) => signal.notify_one(),
                Ok(None) => {}
                Err(_) => break, // reconnect
            }
        }
    }
}

fn listen(config: &Config, tls: &RustlsConnect) -> Result<Client, ::postgres::Error> {
    let mut client = config.connect(tls.clone())?;
    client.batch_execute(&format!("LISTEN {CHANGES_CHANNEL}"))?;
    Ok(client)
}
