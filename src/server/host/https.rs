//! The console's one HTTPS client for what kube-rs does not ask: the
//! endpoint probe's `GET /version` with a kubeconfig's credentials
//! ([`super::probe`]) and the join script's `GET /node/join` at a control
//! plane ([`crate::server::service::join_script`]). rustls with ring, trusting
//! only the roots given (a cluster's CA), HTTP/1.1 by hyper on one connection
//! that is driven beside the request and dropped after it.

use std::sync::Arc;

use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// A client certificate chain and its key.
pub(crate) type ClientAuth = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// A TLS client trusting `roots` only, presenting `client` when given,
/// speaking HTTP/1.1.
pub(crate) fn client_config(roots: RootCertStore, client: Option<ClientAuth>) -> Result<ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let mut config = match client {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key)?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Sends `request` on `tls` and lets `read` take the response; the
/// connection is driven beside them and ends with this call.
pub(crate) async fn send<T, E: From<hyper::Error>>(
    tls: TlsStream<TcpStream>,
    request: http::Request<Empty<Bytes>>,
    read: impl AsyncFnOnce(http::Response<Incoming>) -> Result<T, E>,
) -> Result<T, E> {
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    let answer = async {
        let response = sender.send_request(request).await?;
        read(response).await
    };
    tokio::select! {
        answer = answer => answer,
        Err(e) = connection => Err(e.into()),
    }
}
