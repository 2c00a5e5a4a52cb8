//! A virtual cluster as requests reach it: its own API server with
//! `vc-<name>`'s credentials (through the memo), the kubeconfig a user
//! downloads and the probe run now. Each is bounded as a request's host calls
//! are; none of them runs the observer's reads.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;

use super::error::{Error, Result, ignore_not_found, kube};
use super::objects::helm_charts;
use super::secrets::{self, credentials, read_secret, text};
use super::{Calls, Host, kubeconfig, probe};
use crate::domain::cluster::Cluster;
use crate::domain::host_objects;

impl Host {
    /// `vc-<name>` read now with the cluster's HelmChart (two GETs); `None`
    /// unless the chart is this console's for this cluster.
    async fn read_ours(&self, cluster: &Cluster) -> Result<Option<Secret>> {
        let name = cluster.spec.name.as_str();
        let chart = ignore_not_found(helm_charts(&self.client, &host_objects::namespace(name)).get(name).await)
            .map_err(kube("read HelmChart"))?;
        if !self.installation.chart_is_ours(cluster.id, chart.as_ref()).await? {
            return Ok(None);
        }
        read_secret(&self.client, name).await
    }

    /// The kubeconfig of a cluster, read from the host now (never stored).
    pub(crate) async fn download(&self, cluster: &Cluster) -> Result<Option<String>> {
        let Some(endpoint) = cluster.status.api_endpoint.as_deref().filter(|_| cluster.kubeconfig_downloadable())
        else {
            return Ok(None);
        };
        let Some(secret) = self.for_request(self.read_ours(cluster)).await? else { return Ok(None) };
        let Some(config) = text(&secret, "config") else { return Ok(None) };
        Ok(kubeconfig::render(&config, cluster.spec.name.as_str(), endpoint).ok())
    }

    /// Probes a cluster's public endpoint now, with the kubeconfig a user would get.
    pub(crate) async fn probe_now(&self, cluster: &Cluster) -> Result<Option<probe::Report>> {
        let Some(endpoint) = cluster.status.api_endpoint.as_deref().filter(|_| cluster.spec.public_access.is_enabled())
        else {
            return Ok(None);
        };
        // Only the Secret's read takes one of the shared host-call slots: the
        // probe's own network I/O (up to its timeout against a black-holed
        // endpoint) holds none, so slow endpoints starve no one's downloads.
        let creds = self
            .for_request(async {
                let Some(secret) = self.read_ours(cluster).await? else { return Ok(None) };
                Ok(credentials(&secret))
            })
            .await?;
        let Some(creds) = creds else { return Ok(None) };
        let report = probe::probe(endpoint, &creds, &self.resolver).await;
        crate::server::metrics::global().record_probe(report.status.as_str());
        Ok(Some(report))
    }

    /// How to reach the virtual cluster's own API server, with `vc-<name>`'s
    /// credentials, at [`internal_name`] (resolved by the context's resolver:
    /// cluster DNS in production, fixed addresses in tests), its certificate
    /// checked for that name. `None` until the reconciler has seen the cluster's
    /// chart as this console's and vCluster wrote `vc-<name>` (read through the
    /// reconciler's memo of that Secret: one read at most).
    async fn virtual_config(&self, cluster: &Cluster, pool: Calls) -> Result<Option<kube::Config>> {
        if !cluster.status.kubeconfig_available {
            return Ok(None);
        }
        let name = cluster.spec.name.as_str();
        let secret = self.for_request_in(pool, self.secrets.get(&self.client, cluster.id, name, true)).await?;
        let Some(creds) = secret.as_ref().and_then(secrets::credentials) else { return Ok(None) };
        let kc = kubeconfig::presenting(&creds);
        let mut cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|_| Error::NotYet("the virtual cluster's credentials are not readable yet"))?;
        let internal = internal_name(cluster);
        let resolved = self.resolver.resolve(&internal, 443).await.and_then(|a| a.into_iter().next());
        // A console outside the host cluster has no cluster DNS: the
        // Service's LoadBalancer address leads to the same control plane
        // (still verified as `<name>.<namespace>`); without one (NodePort),
        // the public endpoint does, verified as its own name (the
        // certificate carries it: `extraSANs`).
        let addr = match resolved {
            Some(addr) => Some(addr),
            None => self.load_balancer_address(cluster).await,
        };
        match (addr, cluster.status.api_endpoint.as_deref()) {
            (Some(addr), _) => {
                cfg.cluster_url = format!("https://{addr}")
                    .parse()
                    .map_err(|_| Error::NotYet("the cluster's Service address is not a URL"))?;
                cfg.tls_server_name = Some(internal);
            }
            (None, Some(endpoint)) => {
                cfg.cluster_url = endpoint.parse().map_err(|_| Error::NotYet("the cluster's endpoint is not a URL"))?;
                cfg.tls_server_name = None;
            }
            (None, None) => return Err(Error::NotYet("the cluster's Service name does not resolve")),
        }
        cfg.connect_timeout = Some(Duration::from_secs(5));
        cfg.read_timeout = Some(Duration::from_secs(10));
        Ok(Some(cfg))
    }

    /// The first LoadBalancer address of the cluster's Service, port 443.
    async fn load_balancer_address(&self, cluster: &Cluster) -> Option<std::net::SocketAddr> {
        let name = cluster.spec.name.as_str();
        let services: Api<k8s_openapi::api::core::v1::Service> =
            Api::namespaced(self.client.clone(), &host_objects::namespace(name));
        let svc = tokio::time::timeout(Duration::from_secs(5), services.get_opt(name)).await.ok()?.ok().flatten()?;
        let ingress = svc.status?.load_balancer?.ingress?;
        let ip = ingress.iter().find_map(|i| i.ip.as_deref()?.parse().ok())?;
        Some(std::net::SocketAddr::new(ip, 443))
    }

    /// A client for the virtual cluster's own API server ([`virtual_config`]).
    pub(crate) async fn virtual_client(&self, cluster: &Cluster) -> Result<Option<Client>> {
        // Boxed: the reads and the client's setup are a deep future (a debug
        // build's request thread overflowed its stack with it inline).
        let Some(cfg) = Box::pin(self.virtual_config(cluster, Calls::Users)).await? else { return Ok(None) };
        Client::try_from(cfg).map(Some).map_err(|_| Error::NotYet("no client for the virtual cluster"))
    }

    /// [`virtual_client`] without kube's default retry of 429, 503 and 504: a
    /// drain must see an eviction's 429 (a disruption budget) at once, where
    /// kube-client 5 would retry it up to 15 times, each after the server's
    /// `Retry-After` (10 s for an eviction) — minutes of one pass.
    pub(crate) async fn virtual_client_without_retry(&self, cluster: &Cluster) -> Result<Option<Client>> {
        let Some(mut cfg) = Box::pin(self.virtual_config(cluster, Calls::Users)).await? else { return Ok(None) };
        cfg.default_retry = false;
        Client::try_from(cfg).map(Some).map_err(|_| Error::NotYet("no client for the virtual cluster"))
    }

    /// The CA of the cluster's control plane (from `vc-<name>`, through the
    /// memo), as a downloaded kubeconfig trusts it.
    pub(crate) async fn cluster_ca(&self, cluster: &Cluster) -> Result<Option<String>> {
        let name = cluster.spec.name.as_str();
        let secret = self.for_request(self.secrets.get(&self.client, cluster.id, name, true)).await?;
        Ok(secret.as_ref().and_then(secrets::credentials).map(|c| c.ca_pem))
    }

    /// Refuses a client of `cluster` whose API server is in fact the host's
    /// (the same `kube-system` UID: a relaying endpoint, as the test host's
    /// `relay` mode serves one): per-user certificates and RBAC written
    /// there would land on the host (`Error::Relayed`). A tenant cannot forge
    /// a UID. One GET of the virtual cluster's namespace; the host's is read
    /// once per process.
    pub(crate) async fn refuse_relay(&self, virt: &Client) -> Result<()> {
        use k8s_openapi::api::core::v1::Namespace;
        async fn uid(client: &Client) -> Result<String> {
            let meta = Api::<Namespace>::all(client.clone())
                .get_metadata("kube-system")
                .await
                .map_err(kube("read namespace kube-system"))?;
            meta.metadata.uid.ok_or(Error::NotYet("kube-system has no UID"))
        }
        let host = self.kube_system.get_or_try_init(|| self.for_request(uid(&self.client))).await?;
        let own = tokio::time::timeout(Duration::from_secs(10), uid(virt))
            .await
            .map_err(|_| Error::TimedOut("the virtual cluster's kube-system"))??;
        if &own == host { Err(Error::Relayed) } else { Ok(()) }
    }

    /// A client for the virtual cluster's API server and, from the same read of
    /// `vc-<name>`, its control plane as the join script is fetched from it.
    pub(crate) async fn virtual_client_and_target(
        &self,
        cluster: &Cluster,
    ) -> Result<Option<(Client, InternalTarget)>> {
        let Some(cfg) = Box::pin(self.virtual_config(cluster, Calls::Join)).await? else { return Ok(None) };
        let addr = cfg.cluster_url.authority().and_then(|a| a.as_str().parse().ok());
        let (Some(addr), Some(server_name), Some(roots)) = (addr, cfg.tls_server_name.clone(), cfg.root_cert.clone())
        else {
            return Ok(None);
        };
        let client = Client::try_from(cfg).map_err(|_| Error::NotYet("no client for the virtual cluster"))?;
        let host = cluster.status.api_endpoint.as_deref().and_then(endpoint_authority);
        Ok(Some((client, InternalTarget { addr, server_name, roots, host })))
    }
}

/// The name the console reaches a cluster's control plane by inside the host:
/// its Service, `<name>.<namespace>` (cluster DNS; the name vCluster's
/// certificate carries — it has no `.svc` forms), port 443.
pub(crate) fn internal_name(cluster: &Cluster) -> String {
    let name = cluster.spec.name.as_str();
    format!("{name}.{}", host_objects::namespace(name))
}

/// The cluster's control plane at its internal address, as the join script
/// is fetched from it: the address, the name its certificate carries, and
/// only the CA of `vc-<name>` (no credentials are presented).
#[derive(Debug, Clone)]
pub(crate) struct InternalTarget {
    pub addr: std::net::SocketAddr,
    /// The name TLS verifies (the Service's, in vCluster's certificate).
    pub server_name: String,
    /// DER certificates.
    pub roots: Vec<Vec<u8>>,
    /// The `Host` the request carries: the cluster's public endpoint
    /// (`host:port`), which vCluster writes into the script it serves (as
    /// `vcluster token create` prints a curl against the control plane
    /// endpoint); without one, the internal name (machines cannot resolve it).
    pub host: Option<String>,
}

/// `host:port` of an endpoint URL (`https://<host>:<port>`).
pub(crate) fn endpoint_authority(endpoint: &str) -> Option<String> {
    let uri: http::Uri = endpoint.parse().ok()?;
    let authority = uri.authority()?;
    Some(format!("{}:{}", authority.host(), authority.port_u16().unwrap_or(443)))
}
