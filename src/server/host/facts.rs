//! What the host is, as the console finds it: the LoadBalancer provider
//! (MetalLB's CRD served or not), the `TLSRoute` version served, whether k3s's
//! ServiceLB serves the console's Services, the admin's Gateway and its
//! address ([`Seen`], kept current by the reconciler's passes); and the
//! settings page's reads (Gateway API, StorageClasses, the platform key's
//! Secret), each bounded as a request's host calls are.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt};

use super::Host;
use super::error::{Error, Result, ignore_not_found, kube};
use super::objects::gateways_resource;
use super::probe::Resolver;
use crate::domain::gateway::{GatewayRef, RouteVersion};
use crate::domain::helm::HelmSupport;
use crate::domain::render::{self, AddressRequest};

/// What the host was last seen as.
#[derive(Debug)]
pub(crate) struct Seen {
    /// The LoadBalancer provider (at start and on every periodic pass): the
    /// admin's `auto` follows it.
    detected: Mutex<AddressRequest>,
    /// The `TLSRoute` version the host serves (none: not served), detected
    /// on every periodic pass before its work.
    route_version: Mutex<Option<RouteVersion>>,
    /// Whether k3s's ServiceLB was seen serving one of the console's
    /// LoadBalancer Services (its finalizer on the Service).
    servicelb: AtomicBool,
    /// The admin's Gateway (`namespace/name`) and the address it was last seen with.
    gateway: Mutex<Option<(String, String)>>,
    /// What the host's helm-controller accepts as `failurePolicy` (its
    /// HelmChart CRD), and the k3s release its nodes report when it accepts
    /// nothing the console may write (the settings page's advice).
    helm: Mutex<(HelmSupport, Option<String>)>,
}

impl Seen {
    pub(crate) fn new(detected: AddressRequest) -> Self {
        Self {
            detected: Mutex::new(detected),
            route_version: Mutex::new(None),
            servicelb: AtomicBool::new(false),
            gateway: Mutex::new(None),
            helm: Mutex::new((HelmSupport::Unknown, None)),
        }
    }

    /// The policy the console writes, as last seen (no clone of the rest:
    /// the observer asks once per cluster per pass).
    pub(crate) fn failure_policy(&self) -> Option<crate::domain::helm::FailurePolicy> {
        self.helm.lock().ok().and_then(|h| h.0.policy())
    }

    /// What the host's helm-controller was last seen to accept.
    pub(crate) fn helm(&self) -> HelmSupport {
        self.helm.lock().map(|h| h.0.clone()).unwrap_or_default()
    }

    /// The settings page's advice when the host's helm-controller accepts
    /// no policy the console may write.
    pub(crate) fn helm_problem(&self) -> Option<crate::domain::helm::HelmProblem> {
        let h = self.helm.lock().ok()?;
        match &h.0 {
            HelmSupport::Unsupported { offered } => Some(crate::domain::helm::HelmProblem {
                offered: offered.clone(),
                advice: crate::domain::helm::upgrade_advice(h.1.as_deref()),
            }),
            _ => None,
        }
    }

    /// Records what the helm-controller accepts now (logged when it changed).
    pub(crate) fn set_helm(&self, support: HelmSupport, k3s: Option<String>) {
        if let Ok(mut h) = self.helm.lock()
            && (h.0 != support || h.1 != k3s)
        {
            match &support {
                HelmSupport::Unsupported { offered } => tracing::warn!(
                    ?offered, k3s = ?k3s,
                    "the host's helm-controller accepts no failurePolicy that keeps a control plane: cluster changes are refused"
                ),
                s => tracing::info!(support = ?s, "helm-controller's HelmChart failurePolicy"),
            }
            *h = (support, k3s);
        }
    }

    /// The LoadBalancer provider as last detected on the host.
    pub(crate) fn detected(&self) -> AddressRequest {
        self.detected.lock().map(|d| *d).unwrap_or(AddressRequest::None)
    }

    /// Records the provider detected now (logged when it changed).
    pub(crate) fn set_detected(&self, detected: AddressRequest) {
        if let Ok(mut d) = self.detected.lock()
            && *d != detected
        {
            tracing::info!(?detected, "LoadBalancer provider detected");
            *d = detected;
        }
    }

    /// The `TLSRoute` version the host was last seen serving.
    pub(crate) fn route_version(&self) -> Option<RouteVersion> {
        self.route_version.lock().ok().and_then(|v| *v)
    }

    /// Records the `TLSRoute` version served now (logged when it changed).
    pub(crate) fn set_route_version(&self, version: Option<RouteVersion>) {
        if let Ok(mut v) = self.route_version.lock()
            && *v != version
        {
            tracing::info!(?version, "TLSRoute version served by the host");
            *v = version;
        }
    }

    /// Whether k3s's ServiceLB serves the console's LoadBalancer Services
    /// (seen on one of them; the settings page warns when it runs beside
    /// MetalLB or kube-vip).
    pub(crate) fn servicelb(&self) -> bool {
        self.servicelb.load(Ordering::Relaxed)
    }

    /// k3s's ServiceLB was seen serving one of the console's Services.
    pub(crate) fn saw_servicelb(&self) {
        self.servicelb.store(true, Ordering::Relaxed);
    }

    /// The address the Gateway `key` (`namespace/name`) was last seen with.
    pub(crate) fn gateway_address(&self, key: &str) -> Option<String> {
        let seen = self.gateway.lock().ok().and_then(|g| g.clone());
        seen.filter(|(k, _)| k == key).map(|(_, address)| address)
    }

    /// Records the address the Gateway `key` was seen with.
    pub(crate) fn saw_gateway(&self, key: String, address: String) {
        if let Ok(mut seen) = self.gateway.lock() {
            *seen = Some((key, address));
        }
    }
}

/// Why nothing is written on a host whose helm-controller accepts no
/// `failurePolicy` the console may write (the status a queued change shows).
pub(crate) const HELM_UNSUPPORTED: &str = "the host's helm-controller accepts no failurePolicy that keeps a control plane \
     (abort or retry): upgrade k3s (docs/runbooks/deploy.md, Supported k3s releases)";

impl Host {
    /// Reads again what the host's helm-controller accepts (kept as it was
    /// when the host does not answer).
    pub async fn refresh_helm(&self) {
        if let Some((support, k3s)) = detect_helm_support(&self.client).await {
            self.seen.set_helm(support, k3s);
        }
    }

    /// The `failurePolicy` to write now: what the host's helm-controller
    /// was seen to accept (read now when it was not yet); `Err(NotYet)`
    /// while it accepts nothing the console may write, or runs nowhere.
    pub(crate) async fn failure_policy(&self) -> Result<crate::domain::helm::FailurePolicy> {
        if self.seen.helm() == HelmSupport::Unknown {
            self.refresh_helm().await;
        }
        match self.seen.helm() {
            HelmSupport::Writes { policy } => Ok(policy),
            HelmSupport::Unsupported { .. } => Err(Error::NotYet(HELM_UNSUPPORTED)),
            HelmSupport::NoHelmController => {
                Err(Error::NotYet("the host serves no HelmChart CRD (no helm-controller)"))
            }
            HelmSupport::Unknown => Err(Error::NotYet("what the host's helm-controller accepts is not known yet")),
        }
    }

    /// How LoadBalancer Services ask for an address under these settings.
    pub(crate) fn address_request(&self, settings: &crate::domain::SystemSettings) -> AddressRequest {
        settings.load_balancer_address_request.resolve(Some(self.seen.detected()))
    }

    /// Gateway API on the host as the settings page shows it: the group's
    /// served versions, the `TLSRoute` version written, the Gateways (every
    /// namespace) with their listeners and addresses.
    pub(crate) async fn gateway_api_view(&self) -> Result<crate::domain::gateway::GatewayApiView> {
        use crate::domain::gateway::{self, GatewayApiView};
        let calls = async {
            let groups = self.client.list_api_groups().await.map_err(kube("list API groups"))?;
            let served: Vec<String> = groups
                .groups
                .iter()
                .find(|g| g.name == gateway::GROUP)
                .map(|g| g.versions.iter().map(|v| v.version.clone()).collect())
                .unwrap_or_default();
            if served.is_empty() {
                return Ok(GatewayApiView::default());
            }
            let route_version = detect_route_version(&self.client).await.flatten();
            let installation = self.installation.id().await?.to_owned();
            let labels =
                [(render::MANAGED_BY.0, render::MANAGED_BY.1), (render::INSTALLATION_LABEL, installation.as_str())];
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &gateways_resource());
            let list = api.list(&ListParams::default()).await.map_err(kube("list Gateways"))?;
            let gateways = list
                .items
                .iter()
                .filter_map(|g| serde_json::to_value(g).ok())
                .map(|g| gateway::gateway_view(&g, &labels))
                .collect();
            Ok(GatewayApiView { served, route_version, gateways })
        };
        self.for_request(calls).await
    }

    /// Where DNS must point for gateway clusters: the address of `gateway`
    /// (an IP, or a name for a CNAME), as the observer last saw it, else read
    /// now (bounded); `None` while it has none.
    pub(crate) async fn gateway_address(&self, gateway: &GatewayRef) -> Option<String> {
        if let Some(address) = self.seen.gateway_address(&gateway.key()) {
            return Some(address);
        }
        let read = async { Ok(read_gateway(&self.client, gateway).await?.as_ref().and_then(gateway_address_of)) };
        self.for_request(read).await.ok().flatten()
    }

    /// The host's StorageClasses, the default marked.
    pub(crate) async fn storage_classes(&self) -> Result<Vec<crate::domain::settings::StorageClassView>> {
        use k8s_openapi::api::storage::v1::StorageClass;
        let calls = async {
            let api: Api<StorageClass> = Api::all(self.client.clone());
            let list = api.list(&ListParams::default()).await.map_err(kube("list StorageClasses"))?;
            Ok(list
                .items
                .iter()
                .map(|c| crate::domain::settings::StorageClassView {
                    name: c.name_any(),
                    provisioner: c.provisioner.clone(),
                    default: c.annotations().get("storageclass.kubernetes.io/is-default-class").map(String::as_str)
                        == Some("true"),
                })
                .collect())
        };
        self.for_request(calls).await
    }

    /// Whether the Secret `key` names exists on the host: its metadata only,
    /// the key itself is never read.
    pub(crate) async fn secret_exists(&self, key: &crate::domain::names::SecretRef) -> Result<bool> {
        use k8s_openapi::api::core::v1::Secret;
        let calls = async {
            let api: Api<Secret> = Api::namespaced(self.client.clone(), &key.namespace);
            let found = api.get_metadata_opt(&key.name).await.map_err(kube("read the platform key's Secret"))?;
            Ok(found.is_some())
        };
        self.for_request(calls).await
    }
}

/// The admin's Gateway, read now (`None`: not found).
pub(crate) async fn read_gateway(client: &Client, gw: &GatewayRef) -> Result<Option<DynamicObject>> {
    let gateways: Api<DynamicObject> = Api::namespaced_with(client.clone(), &gw.namespace, &gateways_resource());
    ignore_not_found(gateways.get(&gw.name).await).map_err(kube("read Gateway"))
}

/// How the LoadBalancer provider is asked for an address: MetalLB when its
/// `IPAddressPool` CRD is served, else none (the provider picks).
pub async fn detect_address_request(client: &Client) -> AddressRequest {
    try_detect_address_request(client).await.unwrap_or(AddressRequest::None)
}

/// As [`detect_address_request`]; `None` when the host did not answer.
pub(crate) async fn try_detect_address_request(client: &Client) -> Option<AddressRequest> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    match crds.get_opt("ipaddresspools.metallb.io").await.ok()? {
        Some(_) => Some(AddressRequest::MetalLb),
        None => Some(AddressRequest::None),
    }
}

/// What the host's helm-controller accepts as a HelmChart's `failurePolicy`
/// (its CRD's schema) and, when that is nothing the console may write, the
/// k3s release a node reports (`kubeletVersion`); `None` when the host did
/// not answer.
pub(crate) async fn detect_helm_support(client: &Client) -> Option<(HelmSupport, Option<String>)> {
    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let support = match crds.get_opt("helmcharts.helm.cattle.io").await.ok()? {
        None => HelmSupport::NoHelmController,
        Some(crd) => crate::domain::helm::support_from_crd(&serde_json::to_value(&crd).ok()?),
    };
    let k3s = match support.refuses_changes() {
        true => {
            let nodes: Api<Node> = Api::all(client.clone());
            let list = nodes.list(&ListParams::default().limit(1)).await.ok();
            list.and_then(|l| l.items.into_iter().next()).and_then(|n| n.status?.node_info.map(|i| i.kubelet_version))
        }
        false => None,
    };
    Some((support, k3s))
}

/// A Gateway's first usable address (`status.addresses`): an `IPAddress`
/// (the default type), or a `Hostname` as some implementations publish (a
/// cloud load balancer's name; gateway-api v1.6 `gateway_types.go`
/// `AddressType`). Other types are skipped.
pub(crate) fn gateway_address_of(g: &DynamicObject) -> Option<String> {
    let addresses = g.data["status"]["addresses"].as_array()?;
    addresses.iter().find_map(|a| {
        let value = a["value"].as_str()?.trim();
        match a["type"].as_str().unwrap_or("IPAddress") {
            "IPAddress" => value.parse::<std::net::IpAddr>().ok().map(|ip| ip.to_string()),
            "Hostname" => match crate::domain::Host::parse(value).ok()? {
                crate::domain::Host::Dns(name) => Some(name),
                _ => None,
            },
            _ => None,
        }
    })
}

/// Where the probe connects for a Gateway address: the IP, or what its name
/// resolves to now (through the probe's resolver, bounded like the probe).
pub(crate) async fn gateway_ip(resolver: &Resolver, address: &str) -> Option<std::net::IpAddr> {
    if let Ok(ip) = address.parse() {
        return Some(ip);
    }
    resolver.resolve(address, 443).await?.first().map(std::net::SocketAddr::ip)
}

/// The newest version the host serves `tlsroutes` in; `None` when the host
/// did not answer (`Some(None)`: not served).
pub(crate) async fn detect_route_version(client: &Client) -> Option<Option<RouteVersion>> {
    use strum::VariantArray;
    let mut serving = Vec::new();
    for v in RouteVersion::VARIANTS {
        match client.list_api_group_resources(&v.api_version()).await {
            Ok(list) if list.resources.iter().any(|r| r.name == "tlsroutes") => serving.push(v.as_str()),
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(_) => return None,
        }
    }
    Some(RouteVersion::pick(serving))
}

#[cfg(test)]
mod gateway_address_tests {
    use super::{DynamicObject, gateway_address_of};

    /// `status.addresses` as implementations publish them: the first usable
    /// one, an IP or a name (for a CNAME; the probe resolves it).
    #[test]
    fn a_gateways_address_is_an_ip_or_a_name() {
        let gw = |addresses: serde_json::Value| DynamicObject {
            types: None,
            metadata: Default::default(),
            data: serde_json::json!({"status": {"addresses": addresses}}),
        };
        for (addresses, want) in [
            (serde_json::json!([{"type": "IPAddress", "value": "203.0.113.7"}]), Some("203.0.113.7")),
            (serde_json::json!([{"value": "2001:db8::7"}]), Some("2001:db8::7")),
            (serde_json::json!([{"type": "Hostname", "value": "LB-1.Elb.Example.com"}]), Some("lb-1.elb.example.com")),
            (
                serde_json::json!([{"type": "example.com/custom", "value": "x"}, {"type": "Hostname", "value": "gw.example"}]),
                Some("gw.example"),
            ),
            (serde_json::json!([{"type": "Hostname", "value": "not a name!"}]), None),
            (serde_json::json!([{"type": "IPAddress", "value": "gw.example"}]), None),
            (serde_json::json!([]), None),
        ] {
            assert_eq!(gateway_address_of(&gw(addresses.clone())).as_deref(), want, "{addresses}");
        }
    }
}
