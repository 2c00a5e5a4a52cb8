//! The kubeconfig a user downloads, pure: vCluster's own (Secret `vc-<name>`,
//! key `config`, server `https://localhost:8443`) with the server set to the
//! public endpoint and the cluster, context and user named after the cluster.
//! Only the CA and the client certificate and key are taken from it: nothing
//! else a Secret's text may hold (an `exec` plugin, an `auth-provider`, a
//! token, `insecure-skip-tls-verify`, a `proxy-url`) reaches a user's
//! machine. Never stored, never logged: it is built on demand from the Secret.

use serde_yaml::{Mapping, Value};

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
pub(crate) fn presenting(creds: &super::probe::Credentials) -> kube::config::Kubeconfig {
    use kube::config::{AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext};
    // Kubeconfig's `*-data` fields are base64 (as a ByteString serializes).
    let b64 = |pem: &str| {
        serde_json::to_value(k8s_openapi::ByteString(pem.as_bytes().to_vec()))
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
    };
    let name = "vcluster".to_owned();
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: name.clone(),
            cluster: Some(Cluster {
                server: Some("https://localhost:8443".into()),
                certificate_authority_data: b64(&creds.ca_pem),
                ..Cluster::default()
            }),
            other: Default::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: name.clone(),
            auth_info: Some(AuthInfo {
                client_certificate_data: b64(&creds.cert_pem),
                client_key_data: b64(&creds.key_pem).map(Into::into),
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

/// Rewrites vCluster's kubeconfig for `endpoint` (`https://host:port`).
pub(crate) fn render(vcluster_config: &str, cluster_name: &str, endpoint: &str) -> Result<String, KubeconfigError> {
    let doc: Value = serde_yaml::from_str(vcluster_config).map_err(|_| KubeconfigError::NotYaml)?;
    let first = |key: &str, inner: &str| -> Option<Value> { doc.get(key)?.as_sequence()?.first()?.get(inner).cloned() };
    let from = first("clusters", "cluster").ok_or(KubeconfigError::Incomplete)?;
    let from_user = first("users", "user").ok_or(KubeconfigError::Incomplete)?;
    // Only these keys, each a non-empty string.
    let only = |v: &Value, keys: &[&str]| -> Option<Mapping> {
        let mut m = Mapping::new();
        for k in keys {
            let text = v.get(*k)?.as_str().filter(|s| !s.is_empty())?;
            m.insert((*k).into(), text.into());
        }
        Some(m)
    };
    let mut cluster = only(&from, &["certificate-authority-data"]).ok_or(KubeconfigError::Incomplete)?;
    cluster.insert("server".into(), endpoint.into());
    let cluster = Value::Mapping(cluster);
    let user = Value::Mapping(
        only(&from_user, &["client-certificate-data", "client-key-data"]).ok_or(KubeconfigError::Incomplete)?,
    );
    let named = |name: &str, key: &str, body: Value| -> Value {
        let mut m = Mapping::new();
        m.insert("name".into(), name.into());
        m.insert(key.into(), body);
        Value::Mapping(m)
    };
    let mut context = Mapping::new();
    context.insert("cluster".into(), cluster_name.into());
    context.insert("user".into(), cluster_name.into());
    let mut out = Mapping::new();
    out.insert("apiVersion".into(), "v1".into());
    out.insert("kind".into(), "Config".into());
    out.insert("clusters".into(), Value::Sequence(vec![named(cluster_name, "cluster", cluster)]));
    out.insert("contexts".into(), Value::Sequence(vec![named(cluster_name, "context", Value::Mapping(context))]));
    out.insert("current-context".into(), cluster_name.into());
    out.insert("users".into(), Value::Sequence(vec![named(cluster_name, "user", user)]));
    out.insert("preferences".into(), Value::Mapping(Mapping::new()));
    serde_yaml::to_string(&Value::Mapping(out)).map_err(|_| KubeconfigError::NotYaml)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            v.as_mapping().unwrap().keys().map(|k| k.as_str().unwrap().to_owned()).collect()
        };
        assert_eq!(keys(&v["clusters"][0]["cluster"]), ["certificate-authority-data", "server"]);
        assert_eq!(keys(&v["users"][0]["user"]), ["client-certificate-data", "client-key-data"]);
        for leaked in ["exec", "auth-provider", "secret-token", "evil", "insecure"] {
            assert!(!out.contains(leaked), "{leaked} in {out}");
        }
    }
}
