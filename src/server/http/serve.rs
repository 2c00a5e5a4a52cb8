//! The server loop: HTTP/1.1 connections served by hyper with the limits
//! `axum::serve` does not set (docs/security.md):
//!
//! - **connections**: at most `max_connections` open at once; past that the
//!   listener stops accepting (the kernel's backlog holds the rest) until one
//!   closes; and at most `per_client` from one client address (an IPv6
//!   client by its /64: `auth::client::client_key`), past which a new one is
//!   closed at once; trusted proxies (`KUBEBYON_TRUSTED_PROXIES`) carry many
//!   clients and are not held to it;
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

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt;

use crate::server::auth::client::{Cidr, client_key};

/// The server's limits (`KUBEBYON_MAX_CONNECTIONS`,
/// `KUBEBYON_MAX_CONNECTIONS_PER_CLIENT`, `KUBEBYON_HEADER_TIMEOUT_SECS`).
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_connections: usize,
    /// Connections one client address may hold open at once.
    pub per_client: usize,
    /// Peers not held to `per_client` (trusted proxies).
    pub exempt: Vec<Cidr>,
    pub header_read: Duration,
    pub request: Duration,
    pub drain: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 4096,
            per_client: 64,
            exempt: Vec::new(),
            header_read: Duration::from_secs(15),
            request: Duration::from_secs(60),
            drain: Duration::from_secs(25),
        }
    }
}

/// Connections open per client address.
#[derive(Debug)]
struct Peers {
    per_client: usize,
    exempt: Vec<Cidr>,
    open: Mutex<HashMap<String, usize>>,
}

/// One admitted connection of a counted client: counted down when dropped.
struct PeerSlot {
    peers: Arc<Peers>,
    key: String,
}

/// Whether a new connection from one address is served.
enum Admission {
    /// The client holds `per_client` connections already.
    Refused,
    /// A trusted proxy: not counted.
    Exempt,
    /// Counted until the slot drops.
    Counted(PeerSlot),
}

impl Peers {
    fn admit(self: &Arc<Self>, ip: IpAddr) -> Admission {
        if self.exempt.iter().any(|c| c.contains(ip)) {
            return Admission::Exempt;
        }
        let key = client_key(ip);
        let Ok(mut open) = self.open.lock() else { return Admission::Refused };
        let n = open.entry(key.clone()).or_default();
        if *n >= self.per_client {
            return Admission::Refused;
        }
        *n += 1;
        Admission::Counted(PeerSlot { peers: self.clone(), key })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        if let Ok(mut open) = self.peers.open.lock()
            && let Some(n) = open.get_mut(&self.key)
        {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.key);
            }
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
    let peers =
        Arc::new(Peers { per_client: limits.per_client.max(1), exempt: limits.exempt.clone(), open: Mutex::default() });
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
        let peer_slot = match peers.admit(peer.ip()) {
            Admission::Refused => {
                tracing::debug!(peer = %peer, "connection closed: the client holds its share already");
                drop(tcp);
                continue;
            }
            Admission::Exempt => None,
            Admission::Counted(slot) => Some(slot),
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
            drop((slot, peer_slot));
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.drain, graceful.shutdown()).await.is_err() {
        tracing::warn!("connections still open after the drain time: closed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peers(per_client: usize, exempt: &str) -> Arc<Peers> {
        Arc::new(Peers { per_client, exempt: Cidr::parse_list(exempt).unwrap(), open: Mutex::default() })
    }

    #[test]
    fn a_client_holds_its_share_and_trusted_proxies_are_not_counted() {
        let p = peers(2, "10.0.0.0/8");
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let counted = |a: &Admission| matches!(a, Admission::Counted(_));
        let refused = |a: Admission| matches!(a, Admission::Refused);
        let a = [p.admit(ip("192.0.2.1")), p.admit(ip("192.0.2.1"))];
        assert!(a.iter().all(counted));
        assert!(refused(p.admit(ip("192.0.2.1"))), "a third from one address");
        assert!(refused(p.admit(ip("::ffff:192.0.2.1"))), "the same address mapped to IPv6");
        assert!(counted(&p.admit(ip("192.0.2.2"))), "another address");
        // An IPv6 client by its /64.
        let b = [p.admit(ip("2001:db8::1")), p.admit(ip("2001:db8::2"))];
        assert!(refused(p.admit(ip("2001:db8::3"))), "a third from one /64");
        assert!(counted(&p.admit(ip("2001:db8:0:1::1"))), "another /64");
        let proxies: Vec<_> = (0..10).map(|_| p.admit(ip("10.1.2.3"))).collect();
        assert!(proxies.iter().all(|s| matches!(s, Admission::Exempt)), "a trusted proxy is not counted");
        drop(a);
        assert!(counted(&p.admit(ip("192.0.2.1"))), "closed connections give their place back");
        drop(b);
        assert_eq!(p.open.lock().unwrap().len(), 0, "no entry is kept for a client with none open");
    }
}
