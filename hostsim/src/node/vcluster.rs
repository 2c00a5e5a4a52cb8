//! What a running vCluster does on the host: keeps its PKI in Secret
//! `<release>-certs`, publishes Secret `vc-<release>` (kubeconfig for
//! `https://localhost:8443`), and serves its API endpoint with a certificate whose
//! SANs follow vCluster's rules (`pkg/server/cert/cert.go`, `syncer.go`):
//! regenerated 2–4.5 s after a wanted name goes missing; names no longer wanted
//! stay until then. The pod serves some seconds after it starts (its readiness
//! probe fails meanwhile, so kube-proxy has no endpoint and refuses); a values
//! change rolls the StatefulSet, i.e. a new pod, which computes its names afresh.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use crate::apiproxy::{ApiListener, Upstream};
use crate::kubeconfig;
use crate::node::apiserver::{self, VClusterApi, VirtualApiServer};
use crate::node::joinfront::{self, JoinFront};
use crate::node::kubeadm;
use crate::pki::{Ca, CertPair, KeyKind};
use crate::tls;

/// The port the vCluster container serves its API on.
pub const API_PORT: i32 = 8443;

/// How a started vCluster pod answers on its address.
enum Serving {
    /// A TLS listener relaying to the host's API server (`--vcluster-api relay`).
    Relay(ApiListener),
    /// Its own kube-apiserver (`--vcluster-api real`); `ready` once `/readyz`
    /// answered with `admin`'s credentials.
    /// With private nodes, `front` serves the pod's port (the stand-in
    /// `/node/join`, [`JoinFront`]) and the API server listens behind it.
    Real { server: VirtualApiServer, admin: CertPair, ready: bool, front: Option<JoinFront> },
}

/// One vCluster pod's control plane: starts after a delay, endpoint refusing
/// meanwhile; refreshes its certificate a little after a wanted name goes missing
/// from it, as vCluster's cert syncer does.
pub struct VCluster {
    pub namespace: String,
    pub release: String,
    pub extra_sans: Vec<String>,
    /// `controlPlane.endpoint` of a private-nodes vCluster.
    pub join_endpoint: Option<String>,
    ready_at: Instant,
    ca: Option<Ca>,
    /// The names in the certificate being served.
    sans: Vec<String>,
    /// When the certificate will be regenerated for names it lacks.
    refresh_at: Option<Instant>,
    /// Relay or its own API server: see [`VClusterApi`].
    api: VClusterApi,
    serving: Option<Serving>,
    /// Where the container listens: the pod's IP, port 8443.
    bind: std::net::SocketAddr,
}

impl VCluster {
    /// A pod listening on `bind` that will be up after `start_delay`.
    pub fn new(
        namespace: &str,
        release: &str,
        extra_sans: Vec<String>,
        join_endpoint: Option<String>,
        start_delay: Duration,
        bind: std::net::SocketAddr,
        api: VClusterApi,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            release: release.into(),
            extra_sans,
            join_endpoint,
            ready_at: Instant::now() + start_delay,
            ca: None,
            sans: Vec::new(),
            refresh_at: None,
            api,
            serving: None,
            bind,
        }
    }

    /// Its API endpoint answers (the relay listens, or its own API server is ready).
    pub fn up(&self) -> bool {
        matches!(self.serving, Some(Serving::Relay(_) | Serving::Real { ready: true, .. }))
    }

    /// Advances the pod: starts it when due, refreshes its certificate when due.
    /// Returns when it next needs a look.
    pub async fn tick(
        &mut self,
        client: &Client,
        upstream: &Arc<Upstream>,
        service: Option<&Service>,
        node_ip: &str,
        cert_refresh: Duration,
    ) -> Result<Option<Instant>> {
        let now = Instant::now();
        let wanted = self.wanted_sans(service, node_ip);
        let backend = self.backend();
        let Some(serving) = &mut self.serving else {
            if now < self.ready_at {
                return Ok(Some(self.ready_at));
            }
            let secrets: Api<Secret> = Api::namespaced(client.clone(), &self.namespace);
            let ca = match &self.ca {
                Some(ca) => ca.clone(),
                None => load_or_create_ca(&secrets, &self.release).await?,
            };
            ensure_kubeconfig_secret(&secrets, &self.release, &ca).await?;
            // A new pod computes its names from the current config (the old
            // serving certificate is not kept).
            let sans = wanted.clone();
            let serving = ca.issue_server("kube-apiserver", &sans)?;
            // With `syncer`, an own-nodes cluster gets the stand-in (the Pro
            // image is closed); a shared-node one here was past the syncer's
            // cap or not chosen, and relays.
            let real = match &self.api {
                VClusterApi::Real(real) => Some(real),
                VClusterApi::Syncer(real) if self.join_endpoint.is_some() => Some(real),
                VClusterApi::Relay | VClusterApi::Syncer(_) => None,
            };
            let slot = match real {
                Some(real) if !real.serves(&self.release) => None,
                Some(real) => match real.slot() {
                    Some(slot) => Some((real.clone(), slot)),
                    None => {
                        tracing::warn!(release = %self.release, cap = real.cap, "vcluster api: cap of real API servers reached; relaying");
                        None
                    }
                },
                None => None,
            };
            let started = match slot {
                Some((real, slot)) => {
                    let server =
                        VirtualApiServer::start(&real, slot, &self.namespace, &self.release, backend, &ca, &serving)?;
                    tracing::info!(namespace = %self.namespace, release = %self.release, addr = %backend, "vcluster api server starting");
                    let front = match &self.join_endpoint {
                        Some(endpoint) => {
                            let tls = tls::server_config(&serving, &ca.pair.cert_pem)?;
                            Some(JoinFront::start(self.bind, tls, backend, &ca, endpoint).await?)
                        }
                        None => None,
                    };
                    let admin = ca.issue_client("kube-admin", &["system:masters"])?;
                    Serving::Real { server, admin, ready: false, front }
                }
                None => {
                    let tls = tls::server_config(&serving, &ca.pair.cert_pem)?;
                    let listener = ApiListener::start_on(self.bind, tls, upstream.clone()).await?;
                    tracing::info!(namespace = %self.namespace, release = %self.release, addr = %listener.addr, "vcluster api endpoint up");
                    Serving::Relay(listener)
                }
            };
            let again = matches!(started, Serving::Real { .. }).then(|| now + Duration::from_millis(300));
            self.serving = Some(started);
            self.ca = Some(ca);
            self.sans = sans;
            return Ok(again);
        };
        if let Serving::Real { server, admin, ready: ready @ false, .. } = serving {
            anyhow::ensure!(server.alive(), "the vCluster's API server exited (see its kube-apiserver.log)");
            let Some(ca) = &self.ca else { return Ok(None) };
            if !VirtualApiServer::ready(backend, ca, admin).await {
                return Ok(Some(now + Duration::from_millis(300)));
            }
            if let (Some(endpoint), VClusterApi::Real(real) | VClusterApi::Syncer(real)) =
                (&self.join_endpoint, &self.api)
            {
                // Private nodes: what kubeadm init sets up, and the controllers a join needs.
                let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
                let ns = namespaces.get_opt(&self.namespace).await.ok().flatten();
                let follow = ns.is_some_and(|n| {
                    n.metadata.annotations.unwrap_or_default().get(kubeadm::CLUSTER_INFO).map(String::as_str)
                        == Some("follow")
                });
                let client = VirtualApiServer::client(backend, ca, admin).await.context("a client for the vCluster")?;
                kubeadm::bootstrap(&client, endpoint, &ca.pair.cert_pem, follow).await?;
                crate::node::cni::deploy(&client).await?;
                server.start_controllers(real, backend, admin, ca)?;
            } else if let VClusterApi::Real(real) = &self.api {
                // A shared-node cluster's controller-manager, as vCluster runs it.
                server.start_controller_manager(real, backend, admin, ca, apiserver::SHARED_CONTROLLERS)?;
            }
            tracing::info!(release = %self.release, addr = %self.bind, "vcluster api server ready");
            *ready = true;
        }
        // vCluster's syncer regenerates only when a wanted name is missing.
        let missing = wanted.iter().any(|n| !self.sans.contains(n));
        if !missing {
            self.refresh_at = None;
            return Ok(None);
        }
        let due = *self.refresh_at.get_or_insert(now + cert_refresh);
        if now < due {
            return Ok(Some(due));
        }
        if let Some(ca) = &self.ca {
            let serving = ca.issue_server("kube-apiserver", &wanted)?;
            match &self.serving {
                Some(Serving::Relay(listener)) => listener.set_tls(tls::server_config(&serving, &ca.pair.cert_pem)?),
                Some(Serving::Real { server, front, .. }) => {
                    server.set_serving(&serving)?;
                    if let Some(front) = front {
                        front.set_tls(tls::server_config(&serving, &ca.pair.cert_pem)?);
                    }
                }
                None => {}
            }
            tracing::info!(release = %self.release, sans = ?wanted, "serving certificate regenerated");
            self.sans = wanted;
        }
        self.refresh_at = None;
        Ok(None)
    }

    /// Where its own API server listens: the pod's port, or behind the front
    /// of a private-nodes vCluster.
    fn backend(&self) -> std::net::SocketAddr {
        match self.join_endpoint {
            Some(_) => std::net::SocketAddr::new(self.bind.ip(), joinfront::BACKEND_PORT),
            None => self.bind,
        }
    }

    /// The names vCluster wants in its certificate for this Service.
    pub fn wanted_sans(&self, service: Option<&Service>, node_ip: &str) -> Vec<String> {
        let mut sans = base_sans(&self.namespace, &self.release);
        if let Some(svc) = service {
            let spec = svc.spec.as_ref();
            if let Some(ip) = spec.and_then(|s| s.cluster_ip.clone()).filter(|ip| ip != "None") {
                sans.push(ip);
            }
            if spec.and_then(|s| s.type_.as_deref()) == Some("NodePort") {
                sans.push(node_ip.to_owned());
            }
            let ingress = svc
                .status
                .as_ref()
                .and_then(|s| s.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.clone())
                .unwrap_or_default();
            for i in ingress {
                sans.extend(i.ip);
                sans.extend(i.hostname);
            }
        }
        sans.extend(self.extra_sans.iter().cloned());
        sans.sort();
        sans.dedup();
        sans
    }
}

fn base_sans(namespace: &str, release: &str) -> Vec<String> {
    let mut sans: Vec<String> = [
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        "localhost",
        "127.0.0.1",
    ]
    .map(String::from)
    .into();
    sans.push(release.into());
    // `<name>` and `<name>.<ns>` only: cert.go adds no `.svc` forms of them.
    sans.push(format!("{release}.{namespace}"));
    sans.sort();
    sans
}

fn text(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

fn secret_body(name: &str, release: &str, data: &[(&str, &str)]) -> Result<Secret> {
    let data: BTreeMap<String, ByteString> =
        data.iter().map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec()))).collect();
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "vcluster", "release": release}},
        "type": "Opaque",
        "data": data,
    }))?)
}

async fn load_or_create_ca(secrets: &Api<Secret>, release: &str) -> Result<Ca> {
    let name = format!("{release}-certs");
    if let Some(s) = secrets.get_opt(&name).await?
        && let (Some(cert_pem), Some(key_pem)) = (text(&s, "ca.crt"), text(&s, "ca.key"))
    {
        return Ca::from_pem(CertPair { cert_pem, key_pem }).context("stored vCluster CA is unusable");
    }
    // kubeadm's pkiutil, which vCluster uses: RSA-2048.
    let ca = Ca::generate_with(&format!("vcluster-{release}-ca"), KeyKind::Rsa2048)?;
    let body = secret_body(&name, release, &[("ca.crt", &ca.pair.cert_pem), ("ca.key", &ca.pair.key_pem)])?;
    // Replace a damaged one.
    let _ = secrets.delete(&name, &DeleteParams::default()).await;
    secrets.create(&PostParams::default(), &body).await?;
    Ok(ca)
}

async fn ensure_kubeconfig_secret(secrets: &Api<Secret>, release: &str, ca: &Ca) -> Result<()> {
    let name = format!("vc-{release}");
    if let Some(s) = secrets.get_opt(&name).await? {
        if text(&s, "certificate-authority").as_deref() == Some(ca.pair.cert_pem.as_str())
            && text(&s, "config").is_some()
        {
            return Ok(());
        }
        secrets.delete(&name, &DeleteParams::default()).await?;
    }
    let client = ca.issue_client_with("kube-admin", &["system:masters"], KeyKind::Rsa2048)?;
    let config =
        kubeconfig::render(&format!("vcluster_{release}"), "https://localhost:8443", &ca.pair.cert_pem, &client);
    let body = secret_body(
        &name,
        release,
        &[
            ("config", &config),
            ("certificate-authority", &ca.pair.cert_pem),
            ("client-certificate", &client.cert_pem),
            ("client-key", &client.key_pem),
        ],
    )?;
    secrets.create(&PostParams::default(), &body).await?;
    Ok(())
}
