//! The accept loop: HTTP/1.1 over hyper with the limits of [`crate::limits`] (header-read
//! timeout, header size, connection cap) and graceful shutdown. `axum::serve` installs no
//! timer, so its header-read timeout would be inert; this loop sets one.
//!
//! # Guarantees
//! - See [`crate::limits`]: a connection beyond the cap is closed at once; a connection that
//!   does not complete its headers in time is closed.
//! - On shutdown the loop stops accepting, asks every open connection to finish its current
//!   request, and returns once they have (or after the grace period).

use crate::limits::ServeLimits;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Serves `app` on `listener` with the default limits until `shutdown` completes.
pub async fn serve(listener: TcpListener, app: axum::Router, shutdown: impl Future<Output = ()>) {
    serve_with(listener, app, shutdown, ServeLimits::default()).await
}

/// [`serve`] with explicit limits.
pub async fn serve_with(
    listener: TcpListener,
    app: axum::Router,
    shutdown: impl Future<Output = ()>,
    limits: ServeLimits,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192))
        .keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        while connections.try_join_next().is_some() {}
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::warn!(%peer, max = limits.max_connections, "connection cap reached: closing a new connection");
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let builder = builder.clone();
        let mut stop = stop_rx.clone();
        connections.spawn(async move {
            let _permit = permit;
            let conn = builder.serve_connection(TokioIo::new(stream), service).with_upgrades();
            tokio::pin!(conn);
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(%peer, error = %e, "connection ended");
                    }
                    return;
                }
                _ = stop.changed() => {}
            }
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        });
    }
    let _ = stop_tx.send(true);
    let drained =
        tokio::time::timeout(limits.shutdown_grace, async { while connections.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!("connections still open after the shutdown grace period; closing them");
        connections.abort_all();
    }
}
