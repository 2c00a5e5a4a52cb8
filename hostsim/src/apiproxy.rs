//! A simulated vCluster's API endpoint (the pod's port 8443): TLS with a
//! certificate from the cluster's own CA; a client certificate is requested, not
//! required. Each connection is relayed to the real kube-apiserver: as admin when
//! the client presented a certificate from the cluster's CA, anonymously when it
//! presented none (the real server then answers as for `system:anonymous`, as
//! vCluster's own API server does with anonymous auth on), and a certificate from
//! another CA or an expired one gets HTTP 401 with a `Status` body, as
//! kube-apiserver's x509 authenticator answers (vCluster: `pkg/server/server.go`).

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use anyhow::{Context, Result};
use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt, copy_bidirectional};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::kubeconfig::Credentials;
use crate::tls::{self, ClientIdentity, ServerTls};

/// The real API server the virtual clusters are backed by.
pub struct Upstream {
    addr: String,
    server_name: ServerName<'static>,
    admin: Arc<ClientConfig>,
    anonymous: Arc<ClientConfig>,
}

impl Upstream {
    pub fn new(creds: &Credentials) -> Result<Arc<Self>> {
        let addr = creds
            .server
            .strip_prefix("https://")
            .context("upstream server must be https")?
            .trim_end_matches('/')
            .to_owned();
        let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(&addr);
        Ok(Arc::new(Self {
            server_name: ServerName::try_from(host.to_owned())?,
            addr,
            admin: tls::client_config(&creds.ca_pem, Some(&creds.client))?,
            anonymous: tls::client_config(&creds.ca_pem, None)?,
        }))
    }
}

/// A running listener; stops (with its open connections) when dropped.
pub struct ApiListener {
    pub addr: SocketAddr,
    tls: Arc<RwLock<ServerTls>>,
    task: JoinHandle<()>,
}

impl ApiListener {
    pub async fn start(server: ServerTls, upstream: Arc<Upstream>) -> Result<Self> {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), server, upstream).await
    }

    /// [`Self::start`] on a given address (a pod's IP and container port).
    pub async fn start_on(bind: SocketAddr, server: ServerTls, upstream: Arc<Upstream>) -> Result<Self> {
        Self::serve_on(bind, server, move |sock, cfg| serve(sock, cfg, upstream.clone())).await
    }

    /// A TLS endpoint on `bind` whose connections `handle` serves, each with
    /// the serving configuration current when it was accepted.
    pub async fn serve_on<F, Fut>(bind: SocketAddr, server: ServerTls, handle: F) -> Result<Self>
    where
        F: Fn(TcpStream, ServerTls) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind(bind).await.with_context(|| format!("listening on {bind}"))?;
        let addr = listener.local_addr()?;
        let tls = Arc::new(RwLock::new(server));
        let current = tls.clone();
        let task = tokio::spawn(async move {
            let mut conns = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((sock, _)) = accepted else { continue };
                        let cfg = current.read().map(|c| c.clone());
                        let Ok(cfg) = cfg else { continue };
                        conns.spawn(handle(sock, cfg));
                    }
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        });
        Ok(Self { addr, tls, task })
    }

    /// Swaps the serving certificate for new connections (vCluster regenerates its
    /// certificate when a SAN is missing).
    pub fn set_tls(&self, server: ServerTls) {
        if let Ok(mut cur) = self.tls.write() {
            *cur = server;
        }
    }
}

impl Drop for ApiListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// kube-apiserver's answer to a request whose credentials do not verify.
pub const UNAUTHORIZED: &str = concat!(
    "HTTP/1.1 401 Unauthorized\r\n",
    "Audit-Id: 00000000-0000-0000-0000-000000000000\r\n",
    "Cache-Control: no-cache, private\r\n",
    "Content-Type: application/json\r\n",
    "Content-Length: 129\r\n",
    "Connection: close\r\n\r\n",
    r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#,
    "\n"
);

async fn serve(sock: TcpStream, tls: ServerTls, upstream: Arc<Upstream>) {
    let Ok(mut client) = TlsAcceptor::from(tls.config.clone()).accept(sock).await else {
        return; // the client rejected our certificate, or sent garbage
    };
    let identity = match tls.client_verified(client.get_ref().1.peer_certificates()) {
        ClientIdentity::Verified => &upstream.admin,
        ClientIdentity::None => &upstream.anonymous,
        ClientIdentity::Rejected => {
            // Read the request head, then answer as kube-apiserver does.
            let mut buf = [0u8; 4096];
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), client.read(&mut buf)).await;
            let _ = client.write_all(UNAUTHORIZED.as_bytes()).await;
            let _ = client.shutdown().await;
            return;
        }
    };
    let Ok(sock) = TcpStream::connect(&upstream.addr).await else {
        return;
    };
    let connector = TlsConnector::from(identity.clone());
    let Ok(mut server) = connector.connect(upstream.server_name.clone(), sock).await else {
        return;
    };
    let _ = copy_bidirectional(&mut client, &mut server).await;
}
