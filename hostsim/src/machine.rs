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
//!    with a kubelet version and an internal IP — not Ready until the CNI runs
//!    on it — and renews its Lease and heartbeat every few seconds while it
//!    can reach the endpoint; it runs the pods bound to it and stops those
//!    being deleted (`Kubelet`).
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
    let mut machine = Kubelet {
        client: kubelet,
        name: name.to_owned(),
        ip: ip.to_owned(),
        network: false,
        stopping: Default::default(),
    };
    machine.heartbeat().await.context("the first heartbeat")?;
    let task = tokio::spawn(async move { machine.run().await });
    Ok(Machine { name: name.to_owned(), task })
}

fn now() -> String {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

/// The pod annotation that makes its containers take this many seconds to
/// stop after SIGTERM (never longer than the pod's grace period); `0` otherwise.
pub const STOP_SECONDS: &str = "hostsim.kubebyon.io/stop-seconds";

/// What the joined machine's kubelet does, as far as the console can see it:
/// the Node's status and Lease, and the pods bound to it.
///
/// - **Network**: the container runtime reports `NetworkReady=false` until a
///   CNI is installed, and the kubelet then reports the Node not Ready with
///   the runtime's words (kubernetes v1.36 `pkg/kubelet/kubelet_node_status.go`
///   `setNodeReadyCondition`, `pkg/kubelet/nodestatus/setters.go`
///   `ReadyCondition`); here the CNI is installed once a pod of flannel's
///   DaemonSet ([`crate::node::cni`]) runs on the machine. Until then, pods
///   that are not on the host network wait (their sandbox needs the network).
/// - **Pods**: one bound here runs (Running, Ready, a pod IP); one being
///   deleted stops within its grace period and is then deleted by the kubelet
///   with grace 0 (`pkg/kubelet/status/status_manager.go`
///   `canBeDeleted` → `Delete(…, GracePeriodSeconds: 0, Preconditions: UID)`),
///   which is the moment a drain sees it gone.
struct Kubelet {
    client: kube::Client,
    name: String,
    ip: String,
    network: bool,
    /// Pods being stopped (by UID): when their containers will have exited.
    stopping: std::collections::HashMap<String, tokio::time::Instant>,
}

/// The runtime's words while no CNI is installed (containerd's CRI, as the
/// kubelet passes them on).
pub const NETWORK_NOT_READY: &str = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized";

impl Kubelet {
    async fn run(&mut self) {
        let mut beat = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let was = self.network;
            if let Err(e) = self.sync_pods().await {
                tracing::debug!(node = %self.name, error = %e, "pod sync failed");
            }
            if self.network != was || beat.elapsed() >= HEARTBEAT {
                beat = tokio::time::Instant::now();
                if let Err(e) = self.heartbeat().await {
                    tracing::debug!(node = %self.name, error = %e, "heartbeat failed");
                }
            }
        }
    }

    /// Runs what is bound here, stops what is being deleted.
    async fn sync_pods(&mut self) -> Result<()> {
        use k8s_openapi::api::core::v1::Pod;
        let all: Api<Pod> = Api::all(self.client.clone());
        let on_node = kube::api::ListParams::default().fields(&format!("spec.nodeName={}", self.name));
        let pods = all.list(&on_node).await?.items;
        let is_cni = |p: &Pod| {
            p.metadata.namespace.as_deref() == Some(crate::node::cni::NAMESPACE)
                && p.metadata.labels.as_ref().and_then(|l| l.get(crate::node::cni::APP_LABEL.0)).map(String::as_str)
                    == Some(crate::node::cni::APP_LABEL.1)
        };
        self.network = pods.iter().any(|p| {
            is_cni(p)
                && p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        });
        for pod in &pods {
            let (Some(ns), Some(name), Some(uid)) =
                (pod.metadata.namespace.as_deref(), pod.metadata.name.as_deref(), pod.metadata.uid.as_deref())
            else {
                continue;
            };
            let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
            if pod.metadata.deletion_timestamp.is_some() {
                let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(30).max(0) as u64;
                let stop = pod
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(STOP_SECONDS))
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
                    .min(grace);
                let at = *self
                    .stopping
                    .entry(uid.to_owned())
                    .or_insert_with(|| tokio::time::Instant::now() + Duration::from_secs(stop));
                if tokio::time::Instant::now() >= at {
                    let dp = kube::api::DeleteParams {
                        grace_period_seconds: Some(0),
                        preconditions: Some(kube::api::Preconditions {
                            uid: Some(uid.to_owned()),
                            resource_version: None,
                        }),
                        ..Default::default()
                    };
                    match api.delete(name, &dp).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                        Err(e) => return Err(e.into()),
                    }
                    self.stopping.remove(uid);
                }
                continue;
            }
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            let host_network = pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
            if phase == Some("Running") || !(host_network || self.network) {
                continue;
            }
            let at = now();
            let containers: Vec<serde_json::Value> = pod
                .spec
                .iter()
                .flat_map(|s| &s.containers)
                .map(|c| {
                    json!({"name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
                        "ready": true, "started": true, "restartCount": 0, "state": {"running": {"startedAt": at}}})
                })
                .collect();
            let pod_ip = if host_network { self.ip.clone() } else { pod_address(uid) };
            let condition = |t: &str| json!({"type": t, "status": "True", "lastTransitionTime": at});
            let status = json!({"status": {
                "phase": "Running", "hostIP": self.ip, "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "startTime": at,
                "conditions": [condition("PodReadyToStartContainers"), condition("Initialized"), condition("Ready"),
                    condition("ContainersReady"), condition("PodScheduled")],
                "containerStatuses": containers,
            }});
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(status)).await?;
        }
        self.stopping.retain(|uid, _| pods.iter().any(|p| p.metadata.uid.as_deref() == Some(uid)));
        Ok(())
    }

    /// The node's status (Ready once the network is, its kubelet, its
    /// address) and its Lease, renewed.
    async fn heartbeat(&self) -> Result<()> {
        let (name, ip) = (self.name.as_str(), self.ip.as_str());
        let at = now();
        let nodes: Api<Node> = Api::all(self.client.clone());
        let ready = if self.network {
            json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status", "lastHeartbeatTime": at})
        } else {
            json!({"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                "message": NETWORK_NOT_READY, "lastHeartbeatTime": at})
        };
        // The transition time moves only when the status does.
        let current = nodes.get(name).await?;
        let previous = current
            .status
            .and_then(|s| s.conditions)
            .and_then(|c| c.into_iter().find(|c| c.type_ == "Ready"))
            .filter(|c| c.status == ready["status"].as_str().unwrap_or_default());
        let mut ready = ready;
        ready["lastTransitionTime"] = match previous.and_then(|c| c.last_transition_time) {
            Some(t) => json!(t.0.to_string()),
            None => json!(at),
        };
        let status = json!({"status": {
            "conditions": [ready],
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
            "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"},
            "nodeInfo": {"machineID": name, "systemUUID": name, "bootID": name, "kernelVersion": "6.1.0",
                "osImage": "Debian GNU/Linux 12 (bookworm)", "containerRuntimeVersion": "containerd://2.1.0",
                "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
        }});
        nodes.patch_status(name, &PatchParams::default(), &Patch::Strategic(status)).await?;
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), "kube-node-lease");
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
}

/// A pod's address on the machine's pod network (flannel's default
/// `10.244.0.0/16`), from its UID.
fn pod_address(uid: &str) -> String {
    let h = uid.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    format!("10.244.{}.{}", (h >> 8) % 256, h % 254 + 1)
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
