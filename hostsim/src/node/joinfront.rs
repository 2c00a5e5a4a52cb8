//! The endpoint of a private-nodes vCluster (`privateNodes.enabled`) with its
//! own API server (`--vcluster-api real`): TLS on the pod's port 8443 with the
//! vCluster's serving certificate, in front of its kube-apiserver (on the
//! pod's port 6443).
//!
//! - `GET /node/join?token=…` is answered here by **our own stand-in**:
//!   vCluster's `/node/join` handler and its script are not open source. The
//!   token is checked by the vCluster's API server itself (a request with it as
//!   bearer token: its bootstrap-token authenticator decides — format, Secret,
//!   expiry, usage, groups); a valid one gets a script of ours that names
//!   `controlPlane.endpoint`, the token and the CA hash (`sha256:` of the CA
//!   certificate's SubjectPublicKeyInfo, as kubeadm's `pubkeypin` computes it);
//!   anything else gets 401.
//! - Every other request is relayed, connection and all, to the API server with
//!   the caller's identity: no client certificate → anonymous (a bearer token
//!   passes through in its header); a certificate from the vCluster's CA → a
//!   certificate minted here by that CA with the same user and groups (the
//!   front holds the CA, as vCluster does); any other → 401, as kube-apiserver's
//!   x509 authenticator answers.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use rustls::ClientConfig;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, copy_bidirectional};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::apiproxy::{ApiListener, UNAUTHORIZED};
use crate::pki::{self, Ca};
use crate::tls::{self, ClientIdentity, ServerTls};

/// The API server behind the front listens on the pod's address, this port.
pub const BACKEND_PORT: u16 = 6443;
/// A request head larger than this is cut off (kube-apiserver's own limit is 1 MiB;
/// nothing the tests send comes near).
const MAX_HEAD: usize = 64 * 1024;

struct Shared {
    backend: SocketAddr,
    ca: Ca,
    anonymous: Arc<ClientConfig>,
    /// Client configurations minted per presented certificate (DER).
    minted: Mutex<HashMap<Vec<u8>, Arc<ClientConfig>>>,
    /// `controlPlane.endpoint`.
    endpoint: String,
    ca_hash: String,
}

/// A running front; stops (with its connections) when dropped.
pub struct JoinFront(ApiListener);

impl JoinFront {
    pub async fn start(
        bind: SocketAddr,
        server: ServerTls,
        backend: SocketAddr,
        ca: &Ca,
        endpoint: &str,
    ) -> Result<Self> {
        let shared = Arc::new(Shared {
            backend,
            ca: ca.clone(),
            anonymous: tls::client_config(&ca.pair.cert_pem, None)?,
            minted: Mutex::default(),
            endpoint: endpoint.to_owned(),
            ca_hash: pki::ca_cert_hash(&ca.pair.cert_pem)?,
        });
        let listener = ApiListener::serve_on(bind, server, move |sock, cfg| serve(sock, cfg, shared.clone())).await?;
        Ok(Self(listener))
    }

    /// Swaps the serving certificate for new connections.
    pub fn set_tls(&self, server: ServerTls) {
        self.0.set_tls(server);
    }
}

impl Shared {
    /// The same user and groups as `leaf`, signed by the vCluster's CA.
    fn minted_for(&self, leaf: &CertificateDer<'_>) -> Result<Arc<ClientConfig>> {
        if let Some(c) = self.minted.lock().ok().and_then(|m| m.get(leaf.as_ref()).cloned()) {
            return Ok(c);
        }
        let (user, groups) = pki::subject(leaf.as_ref())?;
        let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
        let pair = self.ca.issue_client(&user, &groups)?;
        let config = tls::client_config(&self.ca.pair.cert_pem, Some(&pair))?;
        if let Ok(mut m) = self.minted.lock() {
            m.insert(leaf.to_vec(), config.clone());
        }
        Ok(config)
    }

    async fn connect(&self, identity: Arc<ClientConfig>) -> Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let sock = TcpStream::connect(self.backend).await?;
        // The API server's certificate is the vCluster's, which names `localhost`.
        Ok(TlsConnector::from(identity).connect(ServerName::try_from("localhost")?, sock).await?)
    }

    /// Whether the vCluster's API server authenticates `token` as a bearer token.
    async fn authenticates(&self, token: &str) -> bool {
        if token.is_empty() || !token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.') {
            return false;
        }
        let Ok(mut s) = self.connect(self.anonymous.clone()).await else { return false };
        let req = format!(
            "GET /api HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
        );
        if s.write_all(req.as_bytes()).await.is_err() {
            return false;
        }
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut answer)).await;
        answer.starts_with(b"HTTP/1.1 200 ")
    }

    async fn join_answer(&self, token: &str) -> Vec<u8> {
        if !self.authenticates(token).await {
            return plain(401, "Unauthorized", "invalid or expired token\n");
        }
        plain(200, "OK", &script(&self.endpoint, token, &self.ca_hash))
    }
}

/// The stand-in's script. Ours, not vCluster's.
pub fn script(endpoint: &str, token: &str, ca_hash: &str) -> String {
    format!(
        "#!/bin/sh\n\
         # KubeBYON test host: a stand-in for vCluster's /node/join script (vCluster's\n\
         # own is not open source). It names what a kubeadm join needs.\n\
         set -eu\n\
         ENDPOINT='{endpoint}'\n\
         TOKEN='{token}'\n\
         CA_CERT_HASH='{ca_hash}'\n\
         echo \"joining ${{ENDPOINT}}\"\n\
         exec kubeadm join \"${{ENDPOINT}}\" --token \"${{TOKEN}}\" --discovery-token-ca-cert-hash \"${{CA_CERT_HASH}}\"\n"
    )
}

fn plain(code: u16, reason: &str, body: &str) -> Vec<u8> {
    let kind = if code == 200 { "text/x-shellscript" } else { "text/plain; charset=utf-8" };
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads until the end of the request head; what was read (the head and any
/// body bytes after it), or `None` on EOF, a timeout or an oversized head.
async fn read_head(s: &mut (impl AsyncRead + Unpin)) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let read = async {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            if buf.len() > MAX_HEAD {
                return false;
            }
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        true
    };
    matches!(tokio::time::timeout(Duration::from_secs(30), read).await, Ok(true)).then_some(buf)
}

/// `Some(token)` when the head asks `GET /node/join` (the token empty when absent).
pub fn join_request(head: &[u8]) -> Option<String> {
    let line = head.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim_end();
    let mut parts = line.split(' ');
    let (method, target) = (parts.next()?, parts.next()?);
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    (method == "GET" && path == "/node/join")
        .then(|| query.split('&').find_map(|kv| kv.strip_prefix("token=")).unwrap_or_default().to_owned())
}

async fn reply(client: &mut (impl AsyncWrite + Unpin), bytes: &[u8]) {
    let _ = client.write_all(bytes).await;
    let _ = client.shutdown().await;
}

async fn serve(sock: TcpStream, tls: ServerTls, shared: Arc<Shared>) {
    let Ok(mut client) = TlsAcceptor::from(tls.config.clone()).accept(sock).await else { return };
    let peer = client.get_ref().1.peer_certificates().map(<[_]>::to_vec);
    let identity = match tls.client_verified(peer.as_deref()) {
        ClientIdentity::None => Ok(shared.anonymous.clone()),
        ClientIdentity::Verified => match peer.as_ref().and_then(|p| p.first()) {
            Some(leaf) => shared.minted_for(leaf),
            None => Ok(shared.anonymous.clone()),
        },
        ClientIdentity::Rejected => Err(anyhow::anyhow!("rejected")),
    };
    let Some(head) = read_head(&mut client).await else { return };
    let Ok(identity) = identity else { return reply(&mut client, UNAUTHORIZED.as_bytes()).await };
    if let Some(token) = join_request(&head) {
        let answer = shared.join_answer(&token).await;
        return reply(&mut client, &answer).await;
    }
    let Ok(mut server) = shared.connect(identity).await else { return };
    if server.write_all(&head).await.is_err() {
        return;
    }
    let _ = copy_bidirectional(&mut client, &mut server).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_node_join_is_answered_here() {
        for (head, want) in [
            (
                &b"GET /node/join?token=abcdef.0123456789abcdef HTTP/1.1\r\nHost: x\r\n\r\n"[..],
                Some("abcdef.0123456789abcdef"),
            ),
            (b"GET /node/join HTTP/1.1\r\n\r\n", Some("")),
            (b"GET /node/join?a=b&token=t1 HTTP/1.1\r\n\r\n", Some("t1")),
            (b"POST /node/join?token=t HTTP/1.1\r\n\r\n", None),
            (b"GET /node/joins?token=t HTTP/1.1\r\n\r\n", None),
            (b"GET /api/v1/nodes HTTP/1.1\r\n\r\n", None),
        ] {
            assert_eq!(join_request(head).as_deref(), want, "{}", String::from_utf8_lossy(head));
        }
    }
}
