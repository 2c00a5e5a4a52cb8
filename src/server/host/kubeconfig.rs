//! The kubeconfig a user downloads, pure: vCluster's own (Secret `vc-<name>`,
//! key `config`, server `https://localhost:8443`) with the server set to the
//! public endpoint and the cluster, context and user named after the cluster.
//! Only the CA and the client certificate and key are taken from it: nothing
//! else a Secret's text may hold (an `exec` plugin, an `auth-provider`, a
//! token, `insecure-skip-tls-verify`, a `proxy-url`) reaches a user's
//! machine. Never stored, never logged: it is built on demand from the Secret.

use kube::config::{AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext};

/// Why no kubeconfig can be made from a Secret's text.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum KubeconfigError {
    #[error("vCluster's kubeconfig is not YAML")]
    NotYaml,
    #[error("vCluster's kubeconfig has no cluster, user or credentials")]
    Incomplete,
}

/// A kubeconfig presenting `creds` (the console's own client of a virtual
/// cluster; its server is set by the caller). Built from the three PEMs of
/// `vc-<name>`, which its `config` repeats, so nothing keeps that text.
pub(crate) fn presenting(creds: &super::probe::Credentials) -> Kubeconfig {
    // Kubeconfig's `*-data` fields are base64 (as a ByteString serializes).
    let b64 = |pem: &str| {
        serde_json::to_value(k8s_openapi::ByteString(pem.as_bytes().to_vec()))
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    let data = Data { ca: b64(&creds.ca_pem), cert: b64(&creds.cert_pem), key: b64(&creds.key_pem) };
    named("vcluster", "https://localhost:8443", data)
}

/// The three base64 fields a kubeconfig of ours carries.
struct Data {
    ca: String,
    cert: String,
    key: String,
}

/// One cluster, user and context, all called `name`: the server, the CA, the
/// client certificate and key, nothing else.
fn named(name: &str, server: &str, data: Data) -> Kubeconfig {
    let name = name.to_owned();
    Kubeconfig {
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        clusters: vec![NamedCluster {
            name: name.clone(),
            cluster: Some(Cluster {
                server: Some(server.into()),
                certificate_authority_data: Some(data.ca),
                ..Cluster::default()
            }),
            other: Default::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: name.clone(),
            auth_info: Some(AuthInfo {
                client_certificate_data: Some(data.cert),
                client_key_data: Some(data.key.into()),
                ..AuthInfo::default()
            }),
            other: Default::default(),
        }],
        contexts: vec![NamedContext {
            name: name.clone(),
            context: Some(Context { cluster: name.clone(), user: Some(name.clone()), ..Context::default() }),
            other: Default::default(),
        }],
        current_context: Some(name),
        ..Kubeconfig::default()
    }
}

/// A user's own kubeconfig: `endpoint`, the control plane's CA,
/// the certificate its controller-manager signed for them and the key made
/// for this one download, named after the cluster. Never stored or logged.
pub(crate) fn for_user(
    cluster_name: &str,
    endpoint: &str,
    ca_pem: &str,
    cert_pem: &str,
    key: &secrecy::SecretString,
) -> Result<String, KubeconfigError> {
    use base64::Engine as _;
    use secrecy::ExposeSecret;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let data = Data { ca: b64(ca_pem), cert: b64(cert_pem), key: b64(key.expose_secret()) };
    serde_yaml::to_string(&named(cluster_name, endpoint, data)).map_err(|_| KubeconfigError::NotYaml)
}

/// Rewrites vCluster's kubeconfig for `endpoint` (`https://host:port`),
/// read and written by kube's own `Kubeconfig` types.
pub(crate) fn render(vcluster_config: &str, cluster_name: &str, endpoint: &str) -> Result<String, KubeconfigError> {
    use secrecy::ExposeSecret;
    let from = Kubeconfig::from_yaml(vcluster_config).map_err(|_| KubeconfigError::NotYaml)?;
    let text = |s: Option<&str>| s.filter(|s| !s.is_empty()).map(str::to_owned);
    let cluster = from.clusters.first().and_then(|c| c.cluster.as_ref());
    let user = from.auth_infos.first().and_then(|u| u.auth_info.as_ref());
    let data = (|| {
        Some(Data {
            ca: text(cluster?.certificate_authority_data.as_deref())?,
            cert: text(user?.client_certificate_data.as_deref())?,
            key: text(user?.client_key_data.as_ref().map(|k| k.expose_secret()))?,
        })
    })()
    .ok_or(KubeconfigError::Incomplete)?;
    serde_yaml::to_string(&named(cluster_name, endpoint, data)).map_err(|_| KubeconfigError::NotYaml)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_yaml::Value;

    const VC: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: vcluster_demo\n  cluster:\n    server: https://localhost:8443\n    certificate-authority-data: Q0E=\ncontexts:\n- name: vcluster_demo\n  context: {cluster: vcluster_demo, user: vcluster_demo}\ncurrent-context: vcluster_demo\nusers:\n- name: vcluster_demo\n  user:\n    client-certificate-data: Q0VSVA==\n    client-key-data: S0VZ\n";

    #[test]
    fn server_and_names_follow_the_cluster() {
        let out = render(VC, "demo", "https://[2001:db8::7]:443").unwrap();
        let v: Value = serde_yaml::from_str(&out).unwrap();
        assert_eq!(v["clusters"][0]["cluster"]["server"], "https://[2001:db8::7]:443");
        assert_eq!(v["clusters"][0]["cluster"]["certificate-authority-data"], "Q0E=");
        assert_eq!(v["clusters"][0]["name"], "demo");
        assert_eq!(v["users"][0]["user"]["client-key-data"], "S0VZ");
        assert_eq!(v["current-context"], "demo");
        assert_eq!(v["contexts"][0]["context"]["cluster"], "demo");
    }

    #[test]
    fn a_users_kubeconfig_carries_their_certificate_and_key_only() {
        let key = secrecy::SecretString::from("-----BEGIN PRIVATE KEY-----\nK\n-----END PRIVATE KEY-----\n");
        let out = for_user("demo", "https://203.0.113.7:443", "CA PEM", "CERT PEM", &key).unwrap();
        let v: Value = serde_yaml::from_str(&out).unwrap();
        assert_eq!(v["clusters"][0]["cluster"]["server"], "https://203.0.113.7:443");
        assert_eq!(v["clusters"][0]["cluster"]["certificate-authority-data"], "Q0EgUEVN");
        assert_eq!(v["users"][0]["user"]["client-certificate-data"], "Q0VSVCBQRU0=");
        let decoded = base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            v["users"][0]["user"]["client-key-data"].as_str().unwrap(),
        )
        .unwrap();
        assert!(String::from_utf8(decoded).unwrap().starts_with("-----BEGIN PRIVATE KEY-----"));
        assert_eq!(v["current-context"], "demo");
    }

    #[test]
    fn broken_secrets_are_refused() {
        assert_eq!(render("a: [", "demo", "https://x:1"), Err(KubeconfigError::NotYaml));
        assert_eq!(render("clusters: []\n", "demo", "https://x:1"), Err(KubeconfigError::Incomplete));
        let no_key = VC.replace("    client-key-data: S0VZ\n", "");
        assert_eq!(render(&no_key, "demo", "https://x:1"), Err(KubeconfigError::Incomplete));
        // A token alone is not a client certificate: refused, never passed on.
        let token_only = no_key.replace("    client-certificate-data: Q0VSVA==\n", "    token: abc\n");
        assert_eq!(render(&token_only, "demo", "https://x:1"), Err(KubeconfigError::Incomplete));
    }

    /// Whatever else the Secret's kubeconfig holds stays out of the download:
    /// only the CA, the server, the client certificate and key.
    #[test]
    fn only_the_ca_and_the_client_certificate_and_key_are_handed_out() {
        let extra = VC
            .replace(
                "    certificate-authority-data: Q0E=\n",
                "    certificate-authority-data: Q0E=\n    insecure-skip-tls-verify: true\n    proxy-url: http://evil:3128\n",
            )
            .replace(
                "    client-key-data: S0VZ\n",
                "    client-key-data: S0VZ\n    token: secret-token\n    exec: {command: /bin/sh, args: [-c, id]}\n    auth-provider: {name: oidc}\n",
            );
        let out = render(&extra, "demo", "https://203.0.113.7:443").unwrap();
        let v: Value = serde_yaml::from_str(&out).unwrap();
        let keys = |v: &Value| -> Vec<String> {
            let mut keys: Vec<String> =
                v.as_mapping().unwrap().keys().map(|k| k.as_str().unwrap().to_owned()).collect();
            keys.sort();
            keys
        };
        assert_eq!(keys(&v["clusters"][0]["cluster"]), ["certificate-authority-data", "server"]);
        assert_eq!(keys(&v["users"][0]["user"]), ["client-certificate-data", "client-key-data"]);
        for leaked in ["exec", "auth-provider", "secret-token", "evil", "insecure"] {
            assert!(!out.contains(leaked), "{leaked} in {out}");
        }
    }
}
