//! Certificates for the test host and the simulated vClusters, generated with rcgen
//! (ECDSA P-256) and, where upstream uses RSA-2048 (vCluster's CA and client
//! key, made by kubeadm's `pkiutil`), the `rsa` crate, written as kubeadm writes
//! them (PKCS#1 `RSA PRIVATE KEY`), so nothing depends on an openssl CLI.
//!
//! A [`Ca`] is kept as PEM so it can be stored (in a data folder or a Secret) and
//! loaded again: kubeconfigs issued before a restart stay valid after it.

use std::net::IpAddr;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use time::{Duration, OffsetDateTime};

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("certificate generation failed: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("invalid subject alternative name {0:?}")]
    San(String),
    #[error("RSA key: {0}")]
    Rsa(String),
    #[error("unreadable certificate: {0}")]
    Parse(String),
}

/// The kind of a new private key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    EcdsaP256,
    /// kubeadm's default (`pkiutil.NewPrivateKey`), which vCluster uses for its
    /// CA and the client certificate of `vc-<name>`.
    Rsa2048,
}

/// A new key, and its PEM as stored: PKCS#8 for ECDSA (rcgen's), PKCS#1 for
/// RSA (kubeadm's `keyutil.MarshalPrivateKeyToPEM`).
fn new_key(kind: KeyKind) -> Result<(KeyPair, String), PkiError> {
    match kind {
        KeyKind::EcdsaP256 => {
            let key = KeyPair::generate()?;
            let pem = key.serialize_pem();
            Ok((key, pem))
        }
        KeyKind::Rsa2048 => {
            use rsa::pkcs1::{EncodeRsaPrivateKey, LineEnding};
            let key = rsa::RsaPrivateKey::new(&mut rand_core::OsRng, 2048).map_err(|e| PkiError::Rsa(e.to_string()))?;
            let pem = key.to_pkcs1_pem(LineEnding::LF).map_err(|e| PkiError::Rsa(e.to_string()))?.to_string();
            Ok((key_pair(&pem)?, pem))
        }
    }
}

/// A stored key (PKCS#8, or PKCS#1 RSA) as rcgen signs with it.
fn key_pair(pem: &str) -> Result<KeyPair, PkiError> {
    if pem.contains("BEGIN RSA PRIVATE KEY") {
        use rsa::pkcs1::DecodeRsaPrivateKey;
        use rsa::pkcs8::EncodePrivateKey;
        let key = rsa::RsaPrivateKey::from_pkcs1_pem(pem).map_err(|e| PkiError::Rsa(e.to_string()))?;
        let der = key.to_pkcs8_der().map_err(|e| PkiError::Rsa(e.to_string()))?;
        let der = rustls_pki_types::PrivatePkcs8KeyDer::from(der.as_bytes());
        return Ok(KeyPair::try_from(&der)?);
    }
    Ok(KeyPair::from_pem(pem)?)
}

/// A PEM certificate with its PEM (PKCS#8) private key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertPair {
    pub cert_pem: String,
    pub key_pem: String,
}

/// A certificate authority that can issue serving and client certificates.
#[derive(Clone, Debug)]
pub struct Ca {
    pub pair: CertPair,
}

impl Ca {
    /// A new self-signed CA valid for ten years, like kubeadm's and vCluster's
    /// (ECDSA P-256).
    pub fn generate(common_name: &str) -> Result<Self, PkiError> {
        Self::generate_with(common_name, KeyKind::EcdsaP256)
    }

    /// A new self-signed CA with a key of `kind`.
    pub fn generate_with(common_name: &str, kind: KeyKind) -> Result<Self, PkiError> {
        let (key, key_pem) = new_key(kind)?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = name(common_name, &[]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        validity(&mut params, 3650);
        let cert = params.self_signed(&key)?;
        Ok(Self { pair: CertPair { cert_pem: cert.pem(), key_pem } })
    }

    /// Loads a CA stored by [`Ca::generate`].
    pub fn from_pem(pair: CertPair) -> Result<Self, PkiError> {
        // Parse now so a damaged store fails here rather than at the first issue.
        let key = key_pair(&pair.key_pem)?;
        Issuer::from_ca_cert_pem(&pair.cert_pem, key)?;
        Ok(Self { pair })
    }

    /// A serving certificate for the given DNS names and IP addresses.
    pub fn issue_server(&self, common_name: &str, sans: &[String]) -> Result<CertPair, PkiError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.subject_alt_names = sans.iter().map(|s| san(s)).collect::<Result<_, _>>()?;
        params.distinguished_name = name(common_name, &[]);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params, KeyKind::EcdsaP256)
    }

    /// A client certificate: Kubernetes takes the user from CN and groups from O.
    pub fn issue_client(&self, user: &str, groups: &[&str]) -> Result<CertPair, PkiError> {
        self.issue_client_with(user, groups, KeyKind::EcdsaP256)
    }

    /// A client certificate with a key of `kind`.
    pub fn issue_client_with(&self, user: &str, groups: &[&str], kind: KeyKind) -> Result<CertPair, PkiError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = name(user, groups);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(params, kind)
    }

    /// A client certificate that expired yesterday (for tests of what a server
    /// answers to stale credentials).
    pub fn issue_expired_client(&self, user: &str, groups: &[&str]) -> Result<CertPair, PkiError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = name(user, groups);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let now = OffsetDateTime::now_utc();
        params.not_before = now - Duration::days(2);
        params.not_after = now - Duration::days(1);
        self.sign(params, KeyKind::EcdsaP256)
    }

    fn issue(&self, mut params: CertificateParams, kind: KeyKind) -> Result<CertPair, PkiError> {
        validity(&mut params, 365);
        self.sign(params, kind)
    }

    fn sign(&self, mut params: CertificateParams, kind: KeyKind) -> Result<CertPair, PkiError> {
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        let ca_key = key_pair(&self.pair.key_pem)?;
        let issuer = Issuer::from_ca_cert_pem(&self.pair.cert_pem, ca_key)?;
        let (key, key_pem) = new_key(kind)?;
        let cert = params.signed_by(&key, &issuer)?;
        Ok(CertPair { cert_pem: cert.pem(), key_pem })
    }
}

/// A bare key pair in PEM, for the service-account token signer.
pub fn generate_key_pem() -> Result<String, PkiError> {
    Ok(KeyPair::generate()?.serialize_pem())
}

/// The public half of a PEM private key, as kube-apiserver's
/// `--service-account-key-file` expects it.
/// kubeadm's `--discovery-token-ca-cert-hash` of a CA certificate: `sha256:`
/// and the hex SHA-256 of its SubjectPublicKeyInfo (kubeadm `pubkeypin.Hash`).
pub fn ca_cert_hash(cert_pem: &str) -> Result<String, PkiError> {
    let der = pem_der(cert_pem)?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).map_err(|e| PkiError::Parse(e.to_string()))?;
    let digest = ring::digest::digest(&ring::digest::SHA256, cert.tbs_certificate.subject_pki.raw);
    Ok(format!("sha256:{}", digest.as_ref().iter().map(|b| format!("{b:02x}")).collect::<String>()))
}

fn pem_der(cert_pem: &str) -> Result<Vec<u8>, PkiError> {
    use rustls_pki_types::pem::PemObject;
    rustls_pki_types::CertificateDer::from_pem_slice(cert_pem.as_bytes())
        .map(|c| c.to_vec())
        .map_err(|e| PkiError::Parse(e.to_string()))
}

/// The Kubernetes user (CN) and groups (O) of a certificate (DER).
pub fn subject(der: &[u8]) -> Result<(String, Vec<String>), PkiError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| PkiError::Parse(e.to_string()))?;
    let subject = cert.subject();
    let text = |a: &x509_parser::x509::AttributeTypeAndValue<'_>| a.as_str().ok().map(str::to_owned);
    let user = subject.iter_common_name().next().and_then(text).unwrap_or_default();
    let groups = subject.iter_organization().filter_map(text).collect();
    Ok((user, groups))
}

pub fn public_key_pem(key_pem: &str) -> Result<String, PkiError> {
    Ok(KeyPair::from_pem(key_pem)?.public_key_pem())
}

fn name(common_name: &str, organizations: &[&str]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    for org in organizations {
        dn.push(DnType::OrganizationName, *org);
    }
    dn
}

fn validity(params: &mut CertificateParams, days: i64) {
    // Backdate a little: a freshly issued certificate must already be valid for a
    // peer whose clock is a few seconds behind.
    let now = OffsetDateTime::now_utc();
    params.not_before = now - Duration::hours(1);
    params.not_after = now + Duration::days(days);
}

fn san(value: &str) -> Result<SanType, PkiError> {
    if let Ok(ip) = value.parse::<IpAddr>() {
        return Ok(SanType::IpAddress(ip));
    }
    value.to_owned().try_into().map(SanType::DnsName).map_err(|_| PkiError::San(value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_round_trips_through_pem_and_issues() {
        let ca = Ca::generate("test-ca").unwrap();
        let again = Ca::from_pem(ca.pair.clone()).unwrap();
        let server = again.issue_server("srv", &["localhost".into(), "127.0.0.1".into()]).unwrap();
        assert!(server.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        let client = again.issue_client("admin", &["system:masters"]).unwrap();
        assert_ne!(client.key_pem, server.key_pem);
    }

    #[test]
    fn rsa_ca_and_client_keys_as_kubeadm_writes_them() {
        let ca = Ca::generate_with("vcluster-ca", KeyKind::Rsa2048).unwrap();
        assert!(ca.pair.key_pem.starts_with("-----BEGIN RSA PRIVATE KEY-----"), "PKCS#1, as kubeadm writes it");
        let again = Ca::from_pem(ca.pair.clone()).unwrap();
        let client = again.issue_client_with("kube-admin", &["system:masters"], KeyKind::Rsa2048).unwrap();
        assert!(client.key_pem.starts_with("-----BEGIN RSA PRIVATE KEY-----"));
        use rsa::pkcs1::DecodeRsaPrivateKey;
        use rsa::traits::PublicKeyParts;
        let key = rsa::RsaPrivateKey::from_pkcs1_pem(&client.key_pem).unwrap();
        assert_eq!(key.size() * 8, 2048);
        // The serving key stays ECDSA (vCluster's cert syncer).
        let serving = again.issue_server("kube-apiserver", &["localhost".into()]).unwrap();
        assert!(serving.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        let (_, parsed) = x509_parser::pem::parse_x509_pem(client.cert_pem.as_bytes()).unwrap();
        let cert = parsed.parse_x509().unwrap();
        assert_eq!(cert.public_key().algorithm.algorithm.to_id_string(), "1.2.840.113549.1.1.1", "rsaEncryption");
    }

    #[test]
    fn rejects_unusable_san() {
        let ca = Ca::generate("test-ca").unwrap();
        assert!(matches!(ca.issue_server("srv", &["bäd.example".into()]), Err(PkiError::San(_))));
    }
}
