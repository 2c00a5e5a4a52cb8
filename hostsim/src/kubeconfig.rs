//! Kubeconfig files with embedded client-certificate credentials, as kubeadm and
//! vCluster write them, plus reading back what the simulator needs from one.

use std::path::Path;

use anyhow::{Context, Result, bail};
use kube::config::Kubeconfig;
use secrecy::ExposeSecret;
use serde_json::json;

use crate::pki::CertPair;

/// A kubeconfig with one cluster, user and context, all named `name`.
pub fn render(name: &str, server: &str, ca_pem: &str, user: &CertPair) -> String {
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {
            "server": server,
            "certificate-authority-data": b64(ca_pem),
        }}],
        "users": [{"name": name, "user": {
            "client-certificate-data": b64(&user.cert_pem),
            "client-key-data": b64(&user.key_pem),
        }}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
        "preferences": {},
    });
    // A json! value always serialises to YAML.
    serde_yaml::to_string(&doc).unwrap_or_default()
}

/// The API server URL, CA and client certificate of a kubeconfig's current context.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub server: String,
    pub ca_pem: String,
    pub client: CertPair,
}

impl Credentials {
    /// Reads them from a kubeconfig that embeds its certificates (`*-data` fields),
    /// as the ones this crate writes do.
    pub fn from_file(path: &Path) -> Result<Self> {
        let kc = Kubeconfig::read_from(path).with_context(|| format!("reading kubeconfig {}", path.display()))?;
        let ctx_name = kc.current_context.clone().context("kubeconfig has no current-context")?;
        let ctx = kc
            .contexts
            .iter()
            .find(|c| c.name == ctx_name)
            .and_then(|c| c.context.clone())
            .context("current context not found")?;
        let cluster = kc
            .clusters
            .iter()
            .find(|c| c.name == ctx.cluster)
            .and_then(|c| c.cluster.clone())
            .context("cluster of the current context not found")?;
        let user = kc
            .auth_infos
            .iter()
            .find(|u| Some(&u.name) == ctx.user.as_ref())
            .and_then(|u| u.auth_info.clone())
            .context("user of the current context not found")?;
        let (Some(ca), Some(cert), Some(key)) =
            (cluster.certificate_authority_data, user.client_certificate_data, user.client_key_data)
        else {
            bail!("kubeconfig must embed certificate-authority-data and a client certificate");
        };
        Ok(Self {
            server: cluster.server.context("cluster has no server")?,
            ca_pem: unb64(&ca)?,
            client: CertPair { cert_pem: unb64(&cert)?, key_pem: unb64(key.expose_secret())? },
        })
    }
}

pub fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn unb64(s: &str) -> Result<String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD.decode(s.trim()).context("invalid base64 in kubeconfig")?;
    String::from_utf8(bytes).context("kubeconfig certificate is not text")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::Ca;

    #[test]
    fn rendered_kubeconfig_reads_back() {
        let ca = Ca::generate("ca").unwrap();
        let user = ca.issue_client("admin", &["system:masters"]).unwrap();
        let text = render("vc", "https://localhost:8443", &ca.pair.cert_pem, &user);
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &text).unwrap();
        let creds = Credentials::from_file(file.path()).unwrap();
        assert_eq!(creds.server, "https://localhost:8443");
        assert_eq!(creds.ca_pem, ca.pair.cert_pem);
        assert_eq!(creds.client, user);
    }

    #[test]
    fn kubeconfig_without_embedded_certificates_is_refused() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let text = "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\nclusters: [{name: k, cluster: {server: 'https://x'}}]\nusers: [{name: u, user: {token: t}}]\n";
        std::fs::write(file.path(), text).unwrap();
        assert!(Credentials::from_file(file.path()).is_err());
    }
}
