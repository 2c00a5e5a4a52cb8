//! A simulated vCluster's API endpoint (the pod's port 8443): TLS with a
//! certificate from the cluster's own CA, client certificates checked against that
//! CA, and each connection relayed to the real kube-apiserver, as admin when the
//! client presented a valid certificate and anonymously otherwise (so the real
//! server answers 401/403 exactly as it would).

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use anyhow::{Context, Result};
use rustls::{ClientConfig, ServerConfig};
use rustls_pki_types::ServerName;
use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::kubeconfig::Credentials;
use crate::tls;

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
    tls: Arc<RwLock<Arc<ServerConfig>>>,
    task: JoinHandle<()>,
}

impl ApiListener {
    pub async fn start(server: Arc<ServerConfig>, upstream: Arc<Upstream>) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
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
                        conns.spawn(serve(sock, cfg, upstream.clone()));
                    }
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        });
        Ok(Self { addr, tls, task })
    }

    /// Swaps the serving certificate for new connections (vCluster regenerates its
    /// certificate when a SAN is missing).
    pub fn set_tls(&self, server: Arc<ServerConfig>) {
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

async fn serve(sock: TcpStream, cfg: Arc<ServerConfig>, upstream: Arc<Upstream>) {
    let Ok(mut client) = TlsAcceptor::from(cfg).accept(sock).await else {
        return; // the client rejected our certificate, or sent garbage
    };
    let authenticated = client.get_ref().1.peer_certificates().is_some();
    let identity = if authenticated {
        &upstream.admin
    } else {
        &upstream.anonymous
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
