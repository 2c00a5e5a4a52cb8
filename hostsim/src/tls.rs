//! rustls configurations built from PEM, all on the ring provider (no aws-lc build).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, ring};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{ClientConfig, DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use crate::controlplane::Admin;
use crate::pki::CertPair;

/// Only HTTP/1.1 is offered, so a byte-level proxy can pass requests through unchanged.
const ALPN_HTTP1: &[u8] = b"http/1.1";

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

fn certs(pem: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .context("invalid certificate PEM")?;
    if certs.is_empty() {
        bail!("no certificate in PEM");
    }
    Ok(certs)
}

fn key(pem: &str) -> Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_slice(pem.as_bytes()).context("invalid private key PEM")
}

fn roots(ca_pem: &str) -> Result<Arc<RootCertStore>> {
    let mut store = RootCertStore::empty();
    for cert in certs(ca_pem)? {
        store.add(cert)?;
    }
    Ok(Arc::new(store))
}

/// A client trusting `ca_pem`, presenting `identity` when given.
pub fn client_config(ca_pem: &str, identity: Option<&CertPair>) -> Result<Arc<ClientConfig>> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots(ca_pem)?);
    let mut cfg = match identity {
        Some(id) => builder.with_client_auth_cert(certs(&id.cert_pem)?, key(&id.key_pem)?)?,
        None => builder.with_no_client_auth(),
    };
    cfg.alpn_protocols = vec![ALPN_HTTP1.to_vec()];
    Ok(Arc::new(cfg))
}

/// A server presenting `serving` that asks for (does not require) a client
/// certificate and, like kube-apiserver (Go's `tls.RequestClientCert`), completes
/// the handshake whatever certificate comes: the chain is checked afterwards with
/// [`ServerTls::client_verified`], and a bad one gets HTTP 401, not a TLS alert.
pub fn server_config(serving: &CertPair, client_ca_pem: &str) -> Result<ServerTls> {
    let strict = WebPkiClientVerifier::builder_with_provider(roots(client_ca_pem)?, provider())
        .allow_unauthenticated()
        .build()?;
    let verifier = Arc::new(RequestClientCert { strict: strict.clone() });
    let mut cfg = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs(&serving.cert_pem)?, key(&serving.key_pem)?)?;
    cfg.alpn_protocols = vec![ALPN_HTTP1.to_vec()];
    Ok(ServerTls { config: Arc::new(cfg), strict })
}

/// A server configuration and the check of the client certificate it accepted.
#[derive(Clone)]
pub struct ServerTls {
    pub config: Arc<ServerConfig>,
    strict: Arc<dyn ClientCertVerifier>,
}

/// How a client identified itself at the TLS layer.
#[derive(Debug, PartialEq, Eq)]
pub enum ClientIdentity {
    /// No certificate: the request is anonymous.
    None,
    /// A certificate chaining to the client CA, valid now.
    Verified,
    /// A certificate from another CA, expired, or otherwise invalid: kube-apiserver
    /// answers 401 (its union authenticator fails on error, it does not fall back to
    /// anonymous).
    Rejected,
}

impl ServerTls {
    pub fn client_verified(&self, peer: Option<&[CertificateDer<'_>]>) -> ClientIdentity {
        let Some((end, intermediates)) = peer.and_then(|c| c.split_first()) else {
            return ClientIdentity::None;
        };
        match self.strict.verify_client_cert(end, intermediates, UnixTime::now()) {
            Ok(_) => ClientIdentity::Verified,
            Err(_) => ClientIdentity::Rejected,
        }
    }
}

/// Accepts any client certificate chain at the handshake (the proof of key
/// possession is still checked); [`ServerTls::client_verified`] judges it.
#[derive(Debug)]
struct RequestClientCert {
    strict: Arc<dyn ClientCertVerifier>,
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.strict.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.strict.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.strict.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.strict.supported_verify_schemes()
    }
}

/// Returns a probe doing a blocking `GET path` as admin; `Ok(body)` on HTTP 200.
/// Used before any async runtime exists (control plane start-up).
pub fn blocking_get(admin: &Admin, path: &str) -> Result<impl Fn() -> Result<String>> {
    let cfg = client_config(&admin.ca_pem, Some(&admin.client))?;
    let addr = admin.server.strip_prefix("https://").context("server is not https")?.to_owned();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    Ok(move || {
        let name = ServerName::try_from("127.0.0.1")?.to_owned();
        let conn = rustls::ClientConnection::new(cfg.clone(), name)?;
        let sock = TcpStream::connect(&addr)?;
        sock.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut tls = rustls::StreamOwned::new(conn, sock);
        tls.write_all(request.as_bytes())?;
        let mut response = Vec::new();
        // The server closes after answering; an unclean close still leaves the body.
        let _ = tls.read_to_end(&mut response);
        let text = String::from_utf8_lossy(&response);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        if !head.starts_with("HTTP/1.1 200") {
            bail!("{}", head.lines().next().unwrap_or("no response"));
        }
        Ok(body.to_owned())
    })
}
