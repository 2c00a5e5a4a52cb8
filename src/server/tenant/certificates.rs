//! A user's own certificate, signed inside their cluster: a key made for
//! one download (never stored or logged), a certificate request
//! (`kubernetes.io/kube-apiserver-client`, CN `kubebyon:u:<id>`,
//! `expirationSeconds`) the console approves, and the certificate the
//! virtual cluster's kube-controller-manager signs with the CA its API
//! server trusts. Who may have one, and the audit, are
//! `service::credentials`'.

use std::time::Duration;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use secrecy::SecretString;
use serde_json::json;

use super::access::{MANAGED_BY, SyncError, own_client, sync};
use super::read;
use crate::domain::cluster::Cluster;
use crate::domain::membership::{self, Bindings, CredentialLifetime};
use crate::server::host::HostHandle;

/// How long the console waits for the controller-manager to sign.
const SIGNING: Duration = Duration::from_secs(15);

/// A key (ECDSA P-256) and its certificate request naming `user` by id
/// alone: no role rides in the credential (a tenant's binding to such a group
/// would outlive a demotion); what it may do is the bindings the console
/// keeps in step.
fn request(user: i64) -> Result<(SecretString, String), rcgen::Error> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::CommonName, membership::kube_user(user));
    let csr = params.serialize_request(&key)?.pem()?;
    Ok((SecretString::from(key.serialize_pem()), csr))
}

/// Why no credential was made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MintError {
    #[error(transparent)]
    Sync(#[from] SyncError),
    #[error("the key or request: {0}")]
    Key(#[from] rcgen::Error),
    #[error("the certificate request: {0}")]
    Kube(#[from] kube::Error),
    #[error("the certificate request was not signed in time")]
    NotSigned,
    #[error("the signed certificate is not the one asked for")]
    Mismatch,
    #[error("the cluster's control plane cannot be reached yet")]
    Unavailable,
}

/// The signed certificate of a request `user` made, and its end (unix secs).
async fn sign(
    virt: &kube::Client,
    user: i64,
    csr_pem: &str,
    lifetime: CredentialLifetime,
) -> Result<(String, i64), MintError> {
    let api: Api<CertificateSigningRequest> = Api::all(virt.clone());
    let object: CertificateSigningRequest = serde_json::from_value(json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"generateName": format!("kubebyon-u{user}-"), "labels": {MANAGED_BY: "kubebyon"}},
        "spec": {
            "request": k8s_openapi::ByteString(csr_pem.as_bytes().to_vec()),
            "signerName": "kubernetes.io/kube-apiserver-client",
            "expirationSeconds": lifetime.secs(),
            "usages": ["digital signature", "client auth"],
        },
    }))
    .map_err(|_| MintError::Mismatch)?;
    let made = api.create(&PostParams::default(), &object).await?;
    let name = made.metadata.name.clone().unwrap_or_default();
    let approval = json!({"status": {"conditions": [{
        "type": "Approved", "status": "True", "reason": "KubebyonConsole",
        "message": "approved by the KubeBYON console for its user",
    }]}});
    let signed = async {
        api.patch_approval(&name, &PatchParams::default(), &Patch::Merge(&approval)).await?;
        let deadline = tokio::time::Instant::now() + SIGNING;
        loop {
            let now = read::get_opt::<CertificateSigningRequest>(virt, None, &name)
                .await
                .map_err(|e| MintError::Sync(e.into()))?;
            let status = now.and_then(|c| c.status);
            if let Some(cert) = status.as_ref().and_then(|s| s.certificate.as_ref()) {
                return Ok(String::from_utf8_lossy(&cert.0).into_owned());
            }
            let failed = status.iter().flat_map(|s| s.conditions.iter().flatten()).any(|c| c.type_ == "Failed");
            if failed || tokio::time::Instant::now() >= deadline {
                return Err(MintError::NotSigned);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    .await;
    // The request is not kept (it holds no secret; the cleaner would take it in an hour).
    let _ = api.delete(&name, &DeleteParams::default()).await;
    let cert = signed?;
    let not_after = check(&cert, user).ok_or(MintError::Mismatch)?;
    Ok((cert, not_after))
}

/// The certificate's end (unix seconds) if its subject is `user`'s.
fn check(cert_pem: &str, user: i64) -> Option<i64> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).ok()?;
    let cert = pem.parse_x509().ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?;
    (cn == membership::kube_user(user)).then(|| cert.validity().not_after.timestamp())
}

/// A credential just made: the CA to trust, the signed certificate, its
/// end, and the key (never stored, never logged).
pub(crate) struct Minted {
    pub ca_pem: String,
    pub cert_pem: String,
    pub not_after: i64,
    pub key: SecretString,
}

/// The bindings in step, then a key, a request, the console's approval and
/// the signed certificate.
pub(crate) async fn mint(
    host: &HostHandle,
    cluster: &Cluster,
    user: i64,
    lifetime: CredentialLifetime,
    want: &Bindings,
) -> Result<Minted, MintError> {
    let virt = own_client(host, cluster).await.map_err(SyncError::from)?.ok_or(MintError::Unavailable)?;
    sync(&virt, want).await?;
    let ca_pem = host.cluster_ca(cluster).await.map_err(SyncError::from)?.ok_or(MintError::Unavailable)?;
    let (key, csr) = request(user)?;
    let (cert_pem, not_after) = sign(&virt, user, &csr, lifetime).await?;
    Ok(Minted { ca_pem, cert_pem, not_after, key })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_names_the_user_by_id_and_never_a_privileged_group() {
        let (key, csr) = request(42).unwrap();
        assert!(secrecy::ExposeSecret::expose_secret(&key).starts_with("-----BEGIN PRIVATE KEY-----"));
        let (_, pem) = x509_parser::pem::parse_x509_pem(csr.as_bytes()).unwrap();
        let (_, req) = <x509_parser::certification_request::X509CertificationRequest as x509_parser::prelude::FromDer<_>>::from_der(&pem.contents).unwrap();
        let subject = req.certification_request_info.subject.to_string();
        assert!(subject.contains("CN=kubebyon:u:42"), "{subject}");
        assert!(!subject.contains("O="), "no role or group rides in the credential: {subject}");
        assert!(!subject.contains("system:"), "{subject}");
    }
}
