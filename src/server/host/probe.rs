//! The connection check: what `kubectl version` does with the kubeconfig a user
//! downloads — resolve the host, connect, verify the server certificate against
//! the kubeconfig's CA **for that exact host** (DNS name or IP), present the client
//! certificate, `GET /version` — with short timeouts, each failure told apart.
//! DNS resolution is injectable ([`Resolver`]) so tests can map a DNS
//! `control_plane_host` to an address.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{CertificateError, ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::domain::ConnectionStatus;
use crate::domain::endpoint::Endpoint;

/// Connect and read timeouts, each.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);

/// Names resolved by the probe: fixed entries first (tests, split-horizon DNS),
/// then the system resolver (within [`TIMEOUT`]); then only the addresses
/// [`Targets`] allows.
#[derive(Clone, Debug, Default)]
pub struct Resolver {
    fixed: Arc<RwLock<BTreeMap<String, IpAddr>>>,
    pub targets: Targets,
    /// A DNS lookup other than the system's (a test's stalling server);
    /// it gets the same [`TIMEOUT`].
    lookup: Arc<RwLock<Option<Lookup>>>,
}

/// What a [`Lookup`] calls: host and port to addresses.
pub(crate) type LookupFn =
    dyn Fn(String, u16) -> futures::future::BoxFuture<'static, std::io::Result<Vec<SocketAddr>>> + Send + Sync;

/// A name lookup: host and port to addresses.
#[derive(Clone)]
pub struct Lookup(pub Arc<LookupFn>);

impl std::fmt::Debug for Lookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Lookup(..)")
    }
}

/// Which addresses the probe may connect to. A user chooses the host (a DNS
/// name may resolve to anything), so the probe never reaches link-local
/// addresses (cloud metadata services), unspecified, multicast or broadcast
/// ones, the host cluster's Pod and Service ranges (`KUBEBYON_PROBE_DENY_CIDRS`,
/// default k3s's `10.42.0.0/16,10.43.0.0/16`), nor loopback unless allowed
/// (`KUBEBYON_PROBE_LOOPBACK=1`; the simulated host serves on 127.0.0.0/8).
#[derive(Clone, Debug)]
pub struct Targets {
    pub deny: Vec<crate::server::auth::client::Cidr>,
    pub allow_loopback: bool,
}

/// k3s's default cluster (Pod) and Service CIDRs.
pub(crate) const K3S_CIDRS: &str = "10.42.0.0/16,10.43.0.0/16";

impl Default for Targets {
    fn default() -> Self {
        let deny = crate::server::auth::client::Cidr::parse_list(K3S_CIDRS).unwrap_or_default();
        Self { deny, allow_loopback: false }
    }
}

impl Targets {
    pub(crate) fn allows(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        let special = match ip {
            IpAddr::V4(v4) => v4.is_link_local() || v4.is_unspecified() || v4.is_multicast() || v4.is_broadcast(),
            IpAddr::V6(v6) => v6.is_unicast_link_local() || v6.is_unspecified() || v6.is_multicast(),
        };
        !special && (self.allow_loopback || !ip.is_loopback()) && !self.deny.iter().any(|c| c.contains(ip))
    }
}

impl Resolver {
    /// Answers `name` with `ip` from now on.
    pub fn insert(&self, name: &str, ip: IpAddr) {
        if let Ok(mut m) = self.fixed.write() {
            m.insert(name.to_ascii_lowercase(), ip);
        }
    }

    /// Names not answered by [`Self::insert`] go to `lookup` instead of the
    /// system resolver from now on.
    pub fn set_lookup(&self, lookup: Lookup) {
        if let Ok(mut l) = self.lookup.write() {
            *l = Some(lookup);
        }
    }

    /// The allowed addresses of `host`; `Err(())` when it resolves only to
    /// addresses the probe may not reach.
    async fn resolve_allowed(&self, host: &str, port: u16) -> Option<Result<Vec<SocketAddr>, ()>> {
        let all = self.resolve(host, port).await?;
        let allowed: Vec<SocketAddr> = all.into_iter().filter(|a| self.targets.allows(a.ip())).collect();
        Some(if allowed.is_empty() { Err(()) } else { Ok(allowed) })
    }

    pub(crate) async fn resolve(&self, host: &str, port: u16) -> Option<Vec<SocketAddr>> {
        if let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            return Some(vec![SocketAddr::new(ip, port)]);
        }
        let fixed = self.fixed.read().ok().and_then(|m| m.get(&host.to_ascii_lowercase()).copied());
        if let Some(ip) = fixed {
            return Some(vec![SocketAddr::new(ip, port)]);
        }
        // The system resolver gets the connect's timeout: a stalled DNS
        // server must not hold the loop.
        let lookup = self.lookup.read().ok().and_then(|l| l.clone());
        let found: Vec<SocketAddr> = match lookup {
            Some(Lookup(lookup)) => tokio::time::timeout(TIMEOUT, lookup(host.to_owned(), port)).await.ok()?.ok()?,
            None => tokio::time::timeout(TIMEOUT, tokio::net::lookup_host((host, port))).await.ok()?.ok()?.collect(),
        };
        (!found.is_empty()).then_some(found)
    }
}

/// What the probe found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub status: ConnectionStatus,
    /// The server's version when ok; the names the certificate covers on a host
    /// mismatch; the HTTP status otherwise.
    pub detail: Option<String>,
}

impl Report {
    fn of(status: ConnectionStatus, detail: Option<String>) -> Self {
        Self { status, detail }
    }
}

/// The credentials of a kubeconfig, as PEM.
#[derive(Clone)]
pub struct Credentials {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// Checks `endpoint` (`https://host:port`) with `creds`.
pub async fn probe(endpoint: &str, creds: &Credentials, resolver: &Resolver) -> Report {
    probe_via(endpoint, None, creds, resolver).await
}

/// As [`probe`], connecting to `via` instead of what the host resolves to
/// (a gateway cluster: the shared Gateway's address, with the host as SNI
/// and the certificate checked for the host, as kubectl will once DNS points there).
pub async fn probe_via(endpoint: &str, via: Option<IpAddr>, creds: &Credentials, resolver: &Resolver) -> Report {
    let Some(Endpoint { host, port }) = Endpoint::parse(endpoint) else {
        return Report::of(ConnectionStatus::HttpError, Some("bad endpoint".into()));
    };
    let bare = host.to_string();
    let Ok(name) = ServerName::try_from(bare.clone()) else {
        return Report::of(ConnectionStatus::HttpError, Some("bad host".into()));
    };
    let resolved = match via {
        Some(ip) => Some(if resolver.targets.allows(ip) { Ok(vec![SocketAddr::new(ip, port)]) } else { Err(()) }),
        None => resolver.resolve_allowed(&bare, port).await,
    };
    let addrs = match resolved {
        None => return Report::of(ConnectionStatus::DnsFailure, None),
        Some(Err(())) => return Report::of(ConnectionStatus::AddressNotAllowed, None),
        Some(Ok(addrs)) => addrs,
    };
    let config = match client_config(creds) {
        Ok(c) => c,
        Err(_) => {
            return Report::of(ConnectionStatus::CertificateUntrusted, Some("unusable kubeconfig credentials".into()));
        }
    };
    let tcp = match tokio::time::timeout(TIMEOUT, TcpStream::connect(&addrs[..])).await {
        Err(_) => return Report::of(ConnectionStatus::Timeout, None),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            return Report::of(ConnectionStatus::Refused, None);
        }
        Ok(Err(e)) => return Report::of(ConnectionStatus::Refused, Some(e.kind().to_string())),
        Ok(Ok(s)) => s,
    };
    let connector = TlsConnector::from(Arc::new(config));
    let tls = match tokio::time::timeout(TIMEOUT, connector.connect(name, tcp)).await {
        Err(_) => return Report::of(ConnectionStatus::Timeout, None),
        Ok(Err(e)) => return tls_io_failure(&e),
        Ok(Ok(s)) => s,
    };
    // `GET /version` over HTTP/1.1 (hyper's client connection on the TLS
    // stream); the connection is driven beside the request and dropped after.
    let request = http::Request::get("/version")
        .header(http::header::HOST, format!("{}:{port}", host.url_host()))
        .header(http::header::ACCEPT, "application/json")
        .body(Empty::<Bytes>::new());
    let Ok(request) = request else {
        return Report::of(ConnectionStatus::HttpError, Some("bad host".into()));
    };
    let exchange = super::https::send(tls, request, async |response| {
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        Ok::<_, hyper::Error>((status, body))
    });
    let (code, body) = match tokio::time::timeout(TIMEOUT, exchange).await {
        Err(_) => return Report::of(ConnectionStatus::Timeout, None),
        Ok(Err(e)) => return http_failure(&e),
        Ok(Ok(answer)) => answer,
    };
    match code {
        200 => {
            let version = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["gitVersion"].as_str().map(str::to_owned));
            Report::of(ConnectionStatus::Ok, version)
        }
        401 => Report::of(ConnectionStatus::Unauthorized, None),
        other => Report::of(ConnectionStatus::HttpError, Some(other.to_string())),
    }
}

/// A failed exchange: the TLS layer's error when that is what ended it (the
/// server refused the client certificate), else an HTTP error in hyper's words.
fn http_failure(e: &hyper::Error) -> Report {
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        if let Some(io) = inner.downcast_ref::<std::io::Error>() {
            return tls_io_failure(io);
        }
        source = inner.source();
    }
    Report::of(ConnectionStatus::HttpError, Some(e.to_string()))
}

fn client_config(creds: &Credentials) -> Result<ClientConfig, Box<dyn std::error::Error>> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(creds.ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(creds.cert_pem.as_bytes()).collect::<Result<_, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(creds.key_pem.as_bytes())?;
    Ok(super::https::client_config(roots, Some((chain, key)))?)
}

fn tls_io_failure(e: &std::io::Error) -> Report {
    match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
        Some(tls) => tls_error(tls),
        None => Report::of(ConnectionStatus::Refused, Some(e.kind().to_string())),
    }
}

fn tls_error(e: &rustls::Error) -> Report {
    match e {
        rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext { presented, .. }) => {
            Report::of(ConnectionStatus::CertificateHostMismatch, Some(presented.join(", ")))
        }
        rustls::Error::InvalidCertificate(CertificateError::NotValidForName) => {
            Report::of(ConnectionStatus::CertificateHostMismatch, None)
        }
        rustls::Error::InvalidCertificate(_) => Report::of(ConnectionStatus::CertificateUntrusted, Some(e.to_string())),
        other => Report::of(ConnectionStatus::HttpError, Some(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_targets() {
        let default = Targets::default();
        let loopback = Targets { allow_loopback: true, ..Targets::default() };
        for (ip, by_default, with_loopback) in [
            ("203.0.113.7", true, true),
            ("10.0.0.5", true, true),
            ("192.168.1.10", true, true),
            ("2001:db8::7", true, true),
            ("127.0.0.1", false, true),
            ("127.3.99.214", false, true),
            ("::1", false, true),
            ("::ffff:127.0.0.1", false, true),
            ("169.254.169.254", false, false),
            ("fe80::1", false, false),
            ("::ffff:169.254.169.254", false, false),
            ("0.0.0.0", false, false),
            ("::", false, false),
            ("224.0.0.1", false, false),
            ("255.255.255.255", false, false),
            ("10.42.3.4", false, false),
            ("10.43.0.1", false, false),
            ("10.44.0.1", true, true),
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(default.allows(ip), by_default, "{ip} by default");
            assert_eq!(loopback.allows(ip), with_loopback, "{ip} with loopback");
        }
    }

    /// A name resolving to a refused address, or a refused address itself, is
    /// reported as such and never connected to (a listener on loopback sees
    /// no connection until loopback is allowed).
    #[tokio::test]
    async fn refused_targets_are_never_connected_to() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut r = Resolver::default();
        r.insert("metadata.example.test", [169, 254, 169, 254].into());
        r.insert("loop.example.test", [127, 0, 0, 1].into());
        let creds = Credentials { ca_pem: String::new(), cert_pem: String::new(), key_pem: String::new() };
        let loopback = format!("https://127.0.0.1:{port}");
        let named = format!("https://loop.example.test:{port}");
        for endpoint in ["https://metadata.example.test:443", "https://10.43.0.1:443", &loopback, &named] {
            assert_eq!(probe(endpoint, &creds, &r).await.status, ConnectionStatus::AddressNotAllowed, "{endpoint}");
        }
        let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
        assert!(accepted.is_err(), "nothing connected while loopback is refused");
        r.targets.allow_loopback = true;
        let report = probe(&loopback, &creds, &r).await;
        assert_eq!(report.status, ConnectionStatus::CertificateUntrusted, "allowed: it gets as far as the credentials");
    }

    #[tokio::test]
    async fn fixed_names_resolve_first_and_unknown_names_fail() {
        let r = Resolver::default();
        r.insert("api.example.test", [127, 0, 0, 9].into());
        assert_eq!(r.resolve("API.example.test", 443).await, Some(vec!["127.0.0.9:443".parse().unwrap()]));
        assert_eq!(r.resolve("[::1]", 443).await, Some(vec!["[::1]:443".parse().unwrap()]));
        assert_eq!(r.resolve("does-not-exist.invalid", 443).await, None);
        let unknown = probe(
            "https://does-not-exist.invalid:443",
            &Credentials { ca_pem: String::new(), cert_pem: String::new(), key_pem: String::new() },
            &r,
        )
        .await;
        assert_ne!(unknown.status, ConnectionStatus::Ok);
    }
}
