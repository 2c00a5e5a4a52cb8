//! The join script, served to machines without a session
//! (`GET /api/join/clusters/{id}/script?token=…`). The token is checked
//! against the cluster's live bootstrap tokens by the API server's own rules
//! (`domain::join::authenticates`); an unknown cluster, an unknown token, an
//! expired one and a control plane that cannot be read all get the same 404
//! after the same time ([`REFUSAL_TIME`]), and every answer but a 200 counts
//! against the client ([`db::shared::begin_join_attempt`], shared by
//! replicas); a 200 draws on its token's own budget instead. The
//! script itself comes from the cluster's control plane at its internal
//! address (`https://<name>.<namespace>:443/node/join?token=…`, the CA of
//! `vc-<name>`, no credentials presented) within a timeout and a size cap,
//! and is passed on byte for byte. Only that path on that cluster's own
//! Service is ever asked for: the console is no proxy.
//!
//! The token is never logged: the access log names the route, not the URL,
//! and this fetch goes through hyper directly (kube-rs' client would put the
//! URL in its debug spans).

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use k8s_openapi::api::core::v1::Secret;
use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, ServerName};
use sqlx::AnyPool;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::HostHandle;
use crate::domain::join::{self, JoinToken};
use crate::domain::{AppError, ErrorCode};
use crate::server::db;
use crate::server::host::{InternalTarget, https};
use crate::server::tenant::read;

/// How long the control plane may take and how much it may send.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub timeout: Duration,
    pub max_bytes: usize,
}

/// vCluster's script is a few KiB; 256 KiB leaves room and bounds memory.
pub(crate) const LIMITS: Limits = Limits { timeout: Duration::from_secs(10), max_bytes: 256 * 1024 };

/// Why the control plane gave no script (logged; the client sees one answer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Failure {
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("HTTP: {0}")]
    Http(String),
    #[error("answered HTTP {0}")]
    Status(u16),
    #[error("the script is larger than {0} bytes")]
    TooLarge(usize),
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
}

/// Every refusal before a token is known good takes at least this long, and
/// the token's lookup in the cluster may take no longer (past it: refused).
/// An unknown cluster, an own-nodes cluster with a wrong token and one whose
/// control plane cannot be read then answer alike, in time as in content.
pub(crate) const REFUSAL_TIME: Duration = Duration::from_secs(1);

/// The script for `raw_token` on cluster `raw_id`, for a request from `client`.
///
/// Every answer but a `200` counts against the client
/// ([`db::shared::begin_join_attempt`], shared by replicas): a refusal (one
/// `404` whatever the reason, after [`REFUSAL_TIME`]), a valid token's script
/// the control plane would not give (`502`), the throttle itself (`429`). A
/// `200` costs nothing (its count is given back) but draws on its token's own
/// budget ([`db::shared::take_token_fetch`]): a fleet joining through one NAT
/// address gets through, a leaked token does not fetch without limit.
pub(crate) async fn script(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    raw_id: &str,
    raw_token: &str,
    client: &str,
) -> Result<Bytes, AppError> {
    let refuse_at = tokio::time::Instant::now() + REFUSAL_TIME;
    if !db::shared::begin_join_attempt(pool, client, db::now()).await? {
        tracing::warn!("join script: client throttled after too many wrong requests");
        return Err(AppError::new(ErrorCode::JoinRateLimited));
    }
    let answer = Box::pin(checked(pool, host, raw_id, raw_token, refuse_at)).await;
    match &answer {
        Ok(_) => db::shared::join_attempt_succeeded(pool, client).await?,
        Err(e) if e.code == ErrorCode::NotFound => tokio::time::sleep_until(refuse_at).await,
        Err(_) => {}
    }
    answer
}

async fn checked(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    raw_id: &str,
    raw_token: &str,
    refuse_at: tokio::time::Instant,
) -> Result<Bytes, AppError> {
    let refused = || AppError::new(ErrorCode::NotFound);
    let (Some(id), Some(token)) = (raw_id.parse::<i64>().ok().filter(|id| *id > 0), JoinToken::parse(raw_token)) else {
        return Err(refused());
    };
    let lookup = async {
        let cluster = db::clusters::get(pool, id).await?.filter(|c| c.spec.own_nodes && !c.deletion_requested);
        let (Some(cluster), Some(host)) = (cluster, host) else { return Ok::<_, db::DbError>(None) };
        let (client, target) = match host.virtual_client_and_target(&cluster).await {
            Ok(Some(both)) => both,
            Ok(None) => return Ok(None),
            Err(e) => {
                tracing::warn!(cluster = id, error = %e, "join script: the virtual cluster is not reachable");
                return Ok(None);
            }
        };
        let secret_name = token.secret_name();
        let secret = read::get_opt::<Secret>(&client, Some(join::NAMESPACE), &secret_name);
        match Box::pin(secret).await {
            Ok(secret) => Ok(secret.filter(|s| join::authenticates(raw_token, s, db::now())).map(|_| target)),
            Err(e) => {
                tracing::warn!(cluster = id, error = %e, "join script: reading the token in the virtual cluster failed");
                Ok(None)
            }
        }
    };
    let target = match tokio::time::timeout_at(refuse_at, Box::pin(lookup)).await {
        Ok(Ok(Some(target))) => target,
        Ok(Ok(None)) => return Err(refused()),
        Ok(Err(e)) => return Err(super::internal(e)),
        Err(_) => {
            tracing::warn!(cluster = id, "join script: the token's lookup took longer than a refusal");
            return Err(refused());
        }
    };
    if !db::shared::take_token_fetch(pool, id, token.id(), db::now()).await? {
        tracing::warn!(cluster = id, token_id = token.id(), "join script: the token's fetches are used up");
        return Err(AppError::new(ErrorCode::JoinRateLimited));
    }
    fetch(&target, &token, LIMITS).await.map_err(|e| {
        tracing::warn!(cluster = id, token_id = token.id(), error = %e, "join script: the control plane gave none");
        AppError::new(ErrorCode::JoinScriptUnavailable)
    })
}

/// `GET /node/join?token=<token>` at `target`, within `limits`.
pub(crate) async fn fetch(target: &InternalTarget, token: &JoinToken, limits: Limits) -> Result<Bytes, Failure> {
    tokio::time::timeout(limits.timeout, exchange(target, token, limits.max_bytes))
        .await
        .unwrap_or(Err(Failure::TimedOut(limits.timeout)))
}

async fn exchange(target: &InternalTarget, token: &JoinToken, max_bytes: usize) -> Result<Bytes, Failure> {
    let mut roots = RootCertStore::empty();
    for der in &target.roots {
        roots.add(CertificateDer::from(der.clone())).map_err(|e| Failure::Tls(e.to_string()))?;
    }
    let config = https::client_config(roots, None).map_err(|e| Failure::Tls(e.to_string()))?;
    let name = ServerName::try_from(target.server_name.clone()).map_err(|e| Failure::Tls(e.to_string()))?;
    let tcp = TcpStream::connect(target.addr).await.map_err(|e| Failure::Connect(e.kind().to_string()))?;
    let tls = TlsConnector::from(Arc::new(config)).connect(name, tcp).await.map_err(|e| Failure::Tls(e.to_string()))?;
    let request = http::Request::get(format!("/node/join?token={token}"))
        .header(
            http::header::HOST,
            target.host.clone().unwrap_or_else(|| format!("{}:{}", target.server_name, target.addr.port())),
        )
        .header(http::header::ACCEPT, "*/*")
        .body(Empty::<Bytes>::new())
        .map_err(|e| Failure::Http(e.to_string()))?;
    https::send(tls, request, async |response| {
        let status = response.status().as_u16();
        if status != 200 {
            return Err(Failure::Status(status));
        }
        let announced = response.headers().get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok());
        if announced.and_then(|v| v.parse::<usize>().ok()).is_some_and(|n| n > max_bytes) {
            return Err(Failure::TooLarge(max_bytes));
        }
        match Limited::new(response.into_body(), max_bytes).collect().await {
            Ok(body) => Ok(body.to_bytes()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(Failure::TooLarge(max_bytes)),
            Err(e) => Err(Failure::Http(e.to_string())),
        }
    })
    .await
}

impl From<hyper::Error> for Failure {
    fn from(e: hyper::Error) -> Self {
        Self::Http(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    //! The console's side of the fetch against a control plane of the test's
    //! own (a TLS server with a CA made here, answering as told), apart from
    //! the test host's stand-in script.

    use std::net::SocketAddr;
    use std::sync::Mutex;

    use hostsim::pki::Ca;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A control plane that answers every connection with `answer` (raw
    /// HTTP bytes) after `delay`, and records each request's head.
    async fn control_plane(ca: &Ca, answer: Vec<u8>, delay: Duration) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
        let serving = ca.issue_server("vc", &["demo.kubebyon-demo".into()]).unwrap();
        let tls = hostsim::tls::server_config(&serving, &ca.pair.cert_pem).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let (tls, answer, log) = (tls.config.clone(), answer.clone(), log.clone());
                tokio::spawn(async move {
                    let Ok(mut s) = tokio_rustls::TlsAcceptor::from(tls).accept(sock).await else { return };
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    log.lock().unwrap().push(String::from_utf8_lossy(&head).into_owned());
                    tokio::time::sleep(delay).await;
                    let _ = s.write_all(&answer).await;
                    let _ = s.shutdown().await;
                });
            }
        });
        (addr, seen)
    }

    fn target(ca: &Ca, addr: SocketAddr) -> InternalTarget {
        let der = rustls::pki_types::pem::PemObject::from_pem_slice(ca.pair.cert_pem.as_bytes())
            .map(|c: CertificateDer<'static>| c.to_vec())
            .unwrap();
        InternalTarget { addr, server_name: "demo.kubebyon-demo".into(), roots: vec![der], host: None }
    }

    fn ok(body: &[u8]) -> Vec<u8> {
        let mut a =
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len()).into_bytes();
        a.extend_from_slice(body);
        a
    }

    fn token() -> JoinToken {
        JoinToken::parse("abcdef.0123456789abcdef").unwrap()
    }

    const FAST: Limits = Limits { timeout: Duration::from_secs(5), max_bytes: 1024 };

    #[tokio::test]
    async fn the_script_passes_byte_for_byte_and_only_node_join_is_asked_for() {
        let ca = Ca::generate("vcluster-ca").unwrap();
        // Not UTF-8, a NUL, CRLF and no final newline: bytes, not text.
        let body: &[u8] = b"#!/bin/sh\r\nset -e\x00\xff\xfe echo 'joined'";
        let (addr, seen) = control_plane(&ca, ok(body), Duration::ZERO).await;
        let got = fetch(&target(&ca, addr), &token(), FAST).await.unwrap();
        assert_eq!(&got[..], body);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert!(seen[0].starts_with("GET /node/join?token=abcdef.0123456789abcdef HTTP/1.1\r\n"), "{}", seen[0]);
        assert!(!seen[0].to_ascii_lowercase().contains("authorization"), "no credentials are presented");
    }

    /// The script is asked for with the public endpoint as `Host` (vCluster
    /// builds the script's URLs from it), while TLS verifies the internal
    /// name the certificate carries.
    #[tokio::test]
    async fn the_script_is_asked_for_with_the_public_endpoint_as_host() {
        let ca = Ca::generate("vcluster-ca").unwrap();
        let (addr, seen) = control_plane(&ca, ok(b"#!/bin/sh"), Duration::ZERO).await;
        let mut t = target(&ca, addr);
        t.host = crate::server::host::virtual_cluster::endpoint_authority("https://203.0.113.9:31443");
        fetch(&t, &token(), FAST).await.unwrap();
        let head = seen.lock().unwrap()[0].to_ascii_lowercase();
        assert!(head.contains("\r\nhost: 203.0.113.9:31443\r\n"), "{head}");
        // no endpoint: the internal name, as before
        let (addr, seen) = control_plane(&ca, ok(b"#!/bin/sh"), Duration::ZERO).await;
        fetch(&target(&ca, addr), &token(), FAST).await.unwrap();
        let head = seen.lock().unwrap()[0].to_ascii_lowercase();
        assert!(head.contains(&format!("\r\nhost: demo.kubebyon-demo:{}\r\n", addr.port())), "{head}");
        for (endpoint, authority) in [
            ("https://cp.example.com", Some("cp.example.com:443")),
            ("https://[2001:db8::1]:6443", Some("[2001:db8::1]:6443")),
            ("not a url", None),
        ] {
            let got = crate::server::host::virtual_cluster::endpoint_authority(endpoint);
            assert_eq!(got.as_deref(), authority, "{endpoint}");
        }
    }

    #[tokio::test]
    async fn the_size_cap_and_the_timeout_hold() {
        let ca = Ca::generate("vcluster-ca").unwrap();
        let big = vec![b'#'; 1025];
        let (addr, _) = control_plane(&ca, ok(&big), Duration::ZERO).await;
        assert_eq!(fetch(&target(&ca, addr), &token(), FAST).await, Err(Failure::TooLarge(1024)));
        // Without a length: chunked and endless would be cut at the cap too.
        let mut chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for _ in 0..3 {
            chunked.extend_from_slice(b"200\r\n");
            chunked.extend_from_slice(&[b'#'; 512]);
            chunked.extend_from_slice(b"\r\n");
        }
        chunked.extend_from_slice(b"0\r\n\r\n");
        let (addr, _) = control_plane(&ca, chunked, Duration::ZERO).await;
        assert_eq!(fetch(&target(&ca, addr), &token(), FAST).await, Err(Failure::TooLarge(1024)));
        let (addr, _) = control_plane(&ca, ok(b"late"), Duration::from_secs(3)).await;
        let quick = Limits { timeout: Duration::from_millis(300), ..FAST };
        assert_eq!(fetch(&target(&ca, addr), &token(), quick).await, Err(Failure::TimedOut(quick.timeout)));
    }

    #[tokio::test]
    async fn control_plane_errors_and_strangers_are_failures() {
        let ca = Ca::generate("vcluster-ca").unwrap();
        for (answer, want) in [
            (&b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"[..], Failure::Status(404)),
            (b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops", Failure::Status(500)),
            // A redirect is not followed: only /node/join is ever asked for.
            (
                b"HTTP/1.1 302 Found\r\nLocation: https://example.com/\r\nContent-Length: 0\r\n\r\n",
                Failure::Status(302),
            ),
        ] {
            let (addr, seen) = control_plane(&ca, answer.to_vec(), Duration::ZERO).await;
            assert_eq!(fetch(&target(&ca, addr), &token(), FAST).await, Err(want));
            assert_eq!(seen.lock().unwrap().len(), 1);
        }
        // A server whose certificate another CA signed is not trusted.
        let other = Ca::generate("someone-else").unwrap();
        let (addr, seen) = control_plane(&other, ok(b"#!/bin/sh"), Duration::ZERO).await;
        assert!(matches!(fetch(&target(&ca, addr), &token(), FAST).await, Err(Failure::Tls(_))));
        assert!(seen.lock().unwrap().is_empty(), "no request reaches an untrusted server");
        // Nothing listening.
        let free = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
        assert!(matches!(fetch(&target(&ca, free), &token(), FAST).await, Err(Failure::Connect(_))));
    }
}
