//! The server loop: HTTP/1.1 connections served by hyper with the limits
//! `axum::serve` does not set (docs/security.md):
//!
//! - **connections**: at most `max_connections` open at once; past that the
//!   listener stops accepting (the kernel's backlog holds the rest) until one
//!   closes;
//! - **header read / idle**: a request's headers must arrive within
//!   [`Limits::header_read`], and a kept-alive connection waiting for its
//!   next request is closed after the same time (hyper arms the timer when it
//!   starts reading a request head, also on an idle connection), so a
//!   client trickling bytes (slowloris) cannot hold a connection;
//! - **body**: read whole within `KUBEBYON_BODY_TIMEOUT_SECS` of its headers
//!   (`guard::read_body`, `408` and the connection closed);
//! - **request**: a whole request (body read and answer) within
//!   [`Limits::request`] (the router's `TimeoutLayer`, `408`);
//! - **shutdown**: on SIGTERM the listener closes, connections finish their
//!   requests, and whatever is left after [`Limits::drain`] is dropped.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt;

/// The server's limits (`KUBEBYON_MAX_CONNECTIONS`, `KUBEBYON_HEADER_TIMEOUT_SECS`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub header_read: Duration,
    pub request: Duration,
    pub drain: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 4096,
            header_read: Duration::from_secs(15),
            request: Duration::from_secs(60),
            drain: Duration::from_secs(25),
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else { break };
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait, do not spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // A response written in more than one piece must not wait for the
        // client's delayed ACK (every asset on a kept-alive connection took ~40 ms).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
        let app = app.clone().map_request(move |mut req: axum::http::Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(peer));
            req.map(axum::body::Body::new)
        });
        let service = TowerToHyperService::new(app.map_err(|e: Infallible| match e {}));
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new()).header_read_timeout(limits.header_read).keep_alive(true);
        // No upgrades (no WebSockets here): plain HTTP/1.1 connections.
        let conn = graceful.watch(http.serve_connection(TokioIo::new(tcp), service));
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::trace!(error = %e, peer = %peer, "connection ended");
            }
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.drain, graceful.shutdown()).await.is_err() {
        tracing::warn!("connections still open after the drain time: closed");
    }
}
