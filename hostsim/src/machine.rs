//! A simulated machine that follows a join script far enough to register as a
//! node, the way `kubeadm join` and kubelet's TLS bootstrap do:
//!
//! 1. **Discovery**: reads `kube-public/cluster-info` anonymously (without
//!    trusting the server yet), checks the `jws-kubeconfig-<token id>`
//!    signature that kube-controller-manager's `bootstrapsigner` wrote with
//!    the token (HS256, detached payload), and checks the CA it names against
//!    the script's `sha256:` CA hash; from then on trusts only that CA.
//! 2. **TLS bootstrap**: with the bootstrap token, creates a
//!    CertificateSigningRequest for `system:node:<name>` (group
//!    `system:nodes`, signer `kubernetes.io/kube-apiserver-client-kubelet`),
//!    which the vCluster's own kube-controller-manager approves and signs.
//! 3. **Registration**: with that certificate, creates its Node, reports it
//!    Ready with a kubelet version and an internal IP, and renews its Lease and
//!    Ready heartbeat every few seconds while it can reach the endpoint.
//!
//! It reads only what our stand-in script (`node::joinfront::script`) says:
//! `ENDPOINT`, `TOKEN` and `CA_CERT_HASH`. Nothing runs on a machine.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::task::JoinHandle;

/// The kubelet version a simulated machine reports.
pub const KUBELET_VERSION: &str = "v1.36.3";
const HEARTBEAT: Duration = Duration::from_secs(5);

/// What the script names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// `host:port`.
    pub endpoint: String,
    pub token: String,
    pub ca_hash: String,
}

impl Script {
    /// The `NAME='value'` lines of our stand-in script.
    pub fn parse(text: &str) -> Option<Self> {
        let value = |name: &str| {
            text.lines().find_map(|l| l.strip_prefix(&format!("{name}='"))?.strip_suffix('\'').map(str::to_owned))
        };
        Some(Self { endpoint: value("ENDPOINT")?, token: value("TOKEN")?, ca_hash: value("CA_CERT_HASH")? })
    }
}

/// A joined machine; it stops (no more heartbeats) when dropped.
pub struct Machine {
    pub name: String,
    task: JoinHandle<()>,
}

impl Drop for Machine {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn b64(bytes: impl AsRef<[u8]>) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A client for the endpoint, connected at `addr`, with `auth`.
fn client(
    script: &Script,
    addr: SocketAddr,
    ca_pem: Option<&str>,
    auth: kube::config::AuthInfo,
) -> Result<kube::Client> {
    let host = script.endpoint.rsplit_once(':').map_or(script.endpoint.as_str(), |(h, _)| h);
    let mut cfg = kube::Config::new(format!("https://{addr}").parse()?);
    cfg.tls_server_name = Some(host.to_owned());
    match ca_pem {
        Some(pem) => {
            use rustls_pki_types::pem::PemObject;
            let der = rustls_pki_types::CertificateDer::from_pem_slice(pem.as_bytes())?;
            cfg.root_cert = Some(vec![der.to_vec()]);
        }
        None => cfg.accept_invalid_certs = true,
    }
    cfg.auth_info = auth;
    cfg.connect_timeout = Some(Duration::from_secs(5));
    cfg.read_timeout = Some(Duration::from_secs(10));
    Ok(kube::Client::try_from(cfg)?)
}

async fn retry<T, F, Fut>(what: &str, within: Duration, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let until = tokio::time::Instant::now() + within;
    let mut last = None;
    loop {
        match f().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last = Some(e),
        }
        if tokio::time::Instant::now() >= until {
            return Err(last.unwrap_or_else(|| anyhow!("timed out")).context(format!("{what} within {within:?}")));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Checks a detached JWS (`header..signature`, HS256) over `payload` with
/// `key`: the token's secret part, as `k8s.io/cluster-bootstrap/token/jws`
/// signs (`ComputeDetachedSignature`: the key is the secret, `kid` the id).
pub fn jws_valid(jws: &str, payload: &str, key: &str) -> bool {
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let Some((header, signature)) = jws.split_once("..") else { return false };
    let Ok(signature) = url.decode(signature) else { return false };
    let input = format!("{header}.{}", url.encode(payload));
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key.as_bytes());
    ring::hmac::verify(&key, input.as_bytes(), &signature).is_ok()
}

/// Discovery: the CA and the API server's address (`host:port`), once the
/// signed cluster-info and the hash agree. kubeadm's token discovery then
/// bootstraps against the server cluster-info names, not the address it was
/// given (kubernetes `cmd/kubeadm/app/discovery/token/token.go`).
async fn discover(script: &Script, addr: SocketAddr) -> Result<(String, String)> {
    let anonymous = client(script, addr, None, Default::default())?;
    let maps: Api<ConfigMap> = Api::namespaced(anonymous, "kube-public");
    let id = script.token.split('.').next().unwrap_or_default();
    let (kubeconfig, jws) = retry("a signed cluster-info", Duration::from_secs(60), || async {
        let cm = maps.get("cluster-info").await?;
        let data = cm.data.unwrap_or_default();
        Ok(data.get("kubeconfig").cloned().zip(data.get(&format!("jws-kubeconfig-{id}")).cloned()))
    })
    .await?;
    let secret = script.token.split_once('.').map_or("", |(_, s)| s);
    if !jws_valid(&jws, &kubeconfig, secret) {
        bail!("cluster-info's signature does not verify with the token");
    }
    let kc: kube::config::Kubeconfig = serde_yaml::from_str(&kubeconfig)?;
    let cluster = kc.clusters.first().and_then(|c| c.cluster.as_ref()).context("cluster-info names no cluster")?;
    let server = cluster.server.as_deref().context("cluster-info names no server")?;
    let server = server_authority(server).with_context(|| format!("cluster-info's server {server:?}"))?;
    let data = cluster.certificate_authority_data.clone().context("cluster-info names no CA")?;
    let ca_pem = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(data)?)?;
    let hash = crate::pki::ca_cert_hash(&ca_pem)?;
    if hash != script.ca_hash {
        bail!("the CA's hash {hash} is not the script's {}", script.ca_hash);
    }
    Ok((ca_pem, server))
}

/// `host:port` of a kubeconfig server URL (`https://host[:port]`).
pub fn server_authority(server: &str) -> Option<String> {
    let rest = server.strip_prefix("https://")?.trim_end_matches('/');
    let authority = rest.split('/').next()?;
    let has_port =
        authority.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok() && !p.contains(']'));
    Some(if has_port { authority.to_owned() } else { format!("{authority}:443") })
}

/// Joins as node `name` (internal IP `ip`) through the endpoint, reached at `addr`.
pub async fn join(script_text: &str, name: &str, ip: &str, addr: SocketAddr) -> Result<Machine> {
    let script = Script::parse(script_text).context("not a join script")?;
    let (ca_pem, server) = discover(&script, addr).await?;
    // From here on the machine talks to cluster-info's server; it reaches
    // only the endpoint it was given (no other name resolves on the test
    // host), so another server fails the join as it would a machine that
    // cannot reach it.
    if server != script.endpoint {
        bail!(
            "cluster-info names the API server {server}, not the endpoint the join script gave ({}): kubeadm would bootstrap against {server}, which this machine does not reach",
            script.endpoint
        );
    }
    // TLS bootstrap with the token.
    let bootstrap = kube::config::AuthInfo { token: Some(script.token.clone().into()), ..Default::default() };
    let csrs: Api<CertificateSigningRequest> = Api::all(client(&script, addr, Some(&ca_pem), bootstrap)?);
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::OrganizationName, "system:nodes");
    params.distinguished_name.push(rcgen::DnType::CommonName, format!("system:node:{name}"));
    let request = params.serialize_request(&key)?.pem()?;
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": {"generateName": "node-csr-"},
        "spec": {"request": b64(&request), "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                 "usages": ["digital signature", "client auth"]},
    }))?;
    let made = csrs.create(&PostParams::default(), &csr).await.context("creating the CSR")?;
    let csr_name = made.metadata.name.context("the CSR has no name")?;
    let cert = retry("a signed certificate", Duration::from_secs(60), || async {
        let csr = csrs.get(&csr_name).await?;
        Ok(csr.status.and_then(|s| s.certificate).map(|c| c.0))
    })
    .await?;
    let identity = kube::config::AuthInfo {
        client_certificate_data: Some(b64(&cert)),
        client_key_data: Some(b64(key.serialize_pem()).into()),
        ..Default::default()
    };
    let kubelet = client(&script, addr, Some(&ca_pem), identity)?;
    // Registration.
    let nodes: Api<Node> = Api::all(kubelet.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
    }))?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e).context("registering the Node"),
    }
    heartbeat(&kubelet, name, ip).await.context("the first heartbeat")?;
    let (kubelet, node_name, ip) = (kubelet.clone(), name.to_owned(), ip.to_owned());
    let task = tokio::spawn(async move {
        loop {
            tokio::time::sleep(HEARTBEAT).await;
            if let Err(e) = heartbeat(&kubelet, &node_name, &ip).await {
                tracing::debug!(node = %node_name, error = %e, "heartbeat failed");
            }
        }
    });
    Ok(Machine { name: name.to_owned(), task })
}

fn now() -> String {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

/// The node's status (Ready, its kubelet, its address) and its Lease, renewed.
async fn heartbeat(kubelet: &kube::Client, name: &str, ip: &str) -> Result<()> {
    let at = now();
    let nodes: Api<Node> = Api::all(kubelet.clone());
    let status = json!({"status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "kubelet is posting ready status", "lastHeartbeatTime": at, "lastTransitionTime": at}],
        "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
        "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
        "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"},
        "nodeInfo": {"machineID": name, "systemUUID": name, "bootID": name, "kernelVersion": "6.1.0",
            "osImage": "Debian GNU/Linux 12 (bookworm)", "containerRuntimeVersion": "containerd://2.1.0",
            "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
    }});
    nodes.patch_status(name, &PatchParams::default(), &Patch::Strategic(status)).await?;
    let leases: Api<Lease> = Api::namespaced(kubelet.clone(), "kube-node-lease");
    let renew = time::OffsetDateTime::now_utc()
        .format(&time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z"
        ))
        .unwrap_or_default();
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": renew}});
    leases.patch(name, &PatchParams::apply("kubelet").force(), &Patch::Apply(lease)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stand_in_script_is_read_back() {
        let text = crate::node::joinfront::script("join.example.com:443", "abcdef.0123456789abcdef", "sha256:00ff");
        assert_eq!(
            Script::parse(&text),
            Some(Script {
                endpoint: "join.example.com:443".into(),
                token: "abcdef.0123456789abcdef".into(),
                ca_hash: "sha256:00ff".into()
            })
        );
        assert_eq!(Script::parse("#!/bin/sh\necho hi\n"), None);
    }

    #[test]
    fn cluster_infos_server_is_read_as_host_and_port() {
        for (server, want) in [
            ("https://join.example.com:443", Some("join.example.com:443")),
            ("https://join.example.com", Some("join.example.com:443")),
            ("https://10.0.0.7:6443/", Some("10.0.0.7:6443")),
            ("https://[2001:db8::1]:443", Some("[2001:db8::1]:443")),
            ("http://join.example.com", None),
        ] {
            assert_eq!(server_authority(server).as_deref(), want, "{server}");
        }
    }

    #[test]
    fn detached_signatures_are_checked_with_the_token() {
        // Made as bootstrapsigner makes them (k8s.io/cluster-bootstrap/token/jws).
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let header = url.encode(r#"{"alg":"HS256","kid":"abcdef"}"#);
        let payload = "apiVersion: v1\nkind: Config\n";
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"0123456789abcdef");
        let sig = ring::hmac::sign(&key, format!("{header}.{}", url.encode(payload)).as_bytes());
        let jws = format!("{header}..{}", url.encode(sig.as_ref()));
        assert!(jws_valid(&jws, payload, "0123456789abcdef"));
        assert!(!jws_valid(&jws, payload, "0123456789abcdeg"), "another token");
        assert!(!jws_valid(&jws, "apiVersion: v2\n", "0123456789abcdef"), "another payload");
        assert!(!jws_valid("garbage", payload, "0123456789abcdef"));
    }
}
