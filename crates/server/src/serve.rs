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

#[cfg(test)]
mod tests {
    //! The accept loop's limits in process, on loopback, with small limits.
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// A server answering `GET /healthz` with the given limits; its address and a stop switch.
    async fn start(limits: ServeLimits) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new().route("/healthz", axum::routing::get(|| async { "ok" }));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve_with(listener, app, async move { stopped.await.unwrap_or(()) }, limits));
        (addr, stop)
    }

    /// Whether the server closes `s` (EOF or reset) within `within`, without answering.
    async fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
        let mut buf = [0u8; 64];
        matches!(tokio::time::timeout(within, s.read(&mut buf)).await, Ok(Ok(0) | Err(_)))
    }

    async fn healthz(addr: std::net::SocketAddr) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut out = String::new();
        tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut out)).await.unwrap().unwrap();
        out
    }

    #[tokio::test]
    async fn a_connection_beyond_the_cap_is_closed_and_the_server_keeps_answering() {
        let limits = ServeLimits {
            header_read_timeout: Duration::from_millis(500),
            max_connections: 2,
            shutdown_grace: Duration::from_secs(1),
            ..ServeLimits::default()
        };
        let (addr, stop) = start(limits).await;
        // Two silent connections hold both slots until their header-read timeout.
        let mut held = [TcpStream::connect(addr).await.unwrap(), TcpStream::connect(addr).await.unwrap()];
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut third = TcpStream::connect(addr).await.unwrap();
        assert!(closed_within(&mut third, Duration::from_millis(400)).await, "beyond the cap: closed at once");
        // The silent ones are closed by the header-read timeout, which frees their slots.
        for s in &mut held {
            assert!(closed_within(s, Duration::from_secs(5)).await, "a silent connection is closed");
        }
        assert!(healthz(addr).await.ends_with("ok"), "the server answers again");
        stop.send(()).unwrap();
    }

    #[tokio::test]
    async fn headers_sent_byte_by_byte_are_cut_off_at_the_header_read_timeout() {
        let limits = ServeLimits { header_read_timeout: Duration::from_millis(400), ..ServeLimits::default() };
        let (addr, stop) = start(limits).await;
        let mut slow = TcpStream::connect(addr).await.unwrap();
        let started = std::time::Instant::now();
        let mut cut = false;
        for b in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ".iter().cycle().take(200) {
            if slow.write_all(&[*b]).await.is_err() {
                cut = true;
                break;
            }
            if closed_within(&mut slow, Duration::from_millis(50)).await {
                cut = true;
                break;
            }
        }
        assert!(cut, "a slowloris connection is closed");
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        assert!(healthz(addr).await.ends_with("ok"), "others are answered meanwhile");
        stop.send(()).unwrap();
    }
}
