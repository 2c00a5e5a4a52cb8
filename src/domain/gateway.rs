//! Gateway access: one shared Gateway (Gateway API) passes TLS through by SNI
//! to each cluster's API server, so one address serves every cluster by name.
//! Pure: which Gateway and listener, which hosts a cluster may take, which
//! `TLSRoute` version the host serves, what a Gateway's listeners admit, and
//! what a route's conditions say. The semantics followed are the Gateway API
//! type docs (`sigs.k8s.io/gateway-api` v1.6.3, `apis/v1/gateway_types.go`,
//! `apis/v1/shared_types.go`, `apis/v1/tlsroute_types.go`).

use serde::{Deserialize, Serialize};

use super::host::{dns_label, dns_subdomain};
use super::{AppError, ErrorCode, Field, Host};

/// The Gateway API group.
pub(crate) const GROUP: &str = "gateway.networking.k8s.io";

/// The admin's Gateway: `namespace/name`, and the listener (`sectionName`)
/// routes attach to (none: every listener that admits them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayRef {
    pub namespace: String,
    pub name: String,
    #[serde(default)]
    pub listener: Option<String>,
}

impl GatewayRef {
    /// `namespace/name` and a listener name (empty: none). Empty `gateway`: `None`.
    pub(crate) fn parse(gateway: &str, listener: &str) -> Result<Option<Self>, AppError> {
        let (gateway, listener) = (gateway.trim(), listener.trim());
        if gateway.is_empty() {
            return if listener.is_empty() { Ok(None) } else { Err(invalid(Field::Gateway)) };
        }
        let (namespace, name) = gateway.split_once('/').ok_or(invalid(Field::Gateway))?;
        Self::new(namespace, name, Some(listener)).map(Some)
    }

    /// A Gateway by its parts: a namespace (DNS label), a name (DNS
    /// subdomain) and a listener's name (a `SectionName`, a DNS subdomain;
    /// empty or none: every listener).
    pub(crate) fn new(namespace: &str, name: &str, listener: Option<&str>) -> Result<Self, AppError> {
        let (namespace, name) = (namespace.trim(), name.trim());
        if !dns_label(namespace) || !dns_subdomain(name) {
            return Err(invalid(Field::Gateway));
        }
        let listener = match listener.map(str::trim).unwrap_or_default() {
            "" => None,
            l if dns_subdomain(l) => Some(l.to_owned()),
            _ => return Err(invalid(Field::GatewayListener)),
        };
        Ok(Self { namespace: namespace.to_owned(), name: name.to_owned(), listener })
    }

    /// A Gateway given as a value (the JSON API), under [`GatewayRef::new`]'s rules.
    pub(crate) fn checked(self) -> Result<Self, AppError> {
        Self::new(&self.namespace, &self.name, self.listener.as_deref())
    }

    /// `namespace/name`, as the settings form shows it.
    pub(crate) fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

fn invalid(field: Field) -> AppError {
    AppError::at(ErrorCode::GatewayInvalid, field)
}

/// What the forms know of gateway access: offered when the admin named a
/// Gateway; with a suffix, an empty host becomes `<name>.<suffix>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayOffer {
    pub gateway: GatewayRef,
    pub suffix: Option<Host>,
}

impl GatewayOffer {
    pub(crate) fn of(gateway: Option<&GatewayRef>, suffix: Option<&Host>) -> Option<Self> {
        gateway.map(|g| Self { gateway: g.clone(), suffix: suffix.cloned() })
    }

    /// The rules for a cluster called `cluster_name` (none offered: refused),
    /// as the form checks them before sending (the operator's [`HostPolicy`]
    /// is the server's to apply).
    pub(crate) fn rules<'a>(offer: Option<&'a Self>, cluster_name: &'a str) -> GatewayRules<'a> {
        GatewayRules {
            gateway: offer.map(|o| &o.gateway),
            suffix: offer.and_then(|o| o.suffix.as_ref()),
            policy: None,
            cluster_name,
        }
    }
}

/// What the operator decides about gateway hosts: whether a Gateway without
/// a domain suffix lets users claim any name (`KUBEBYON_GATEWAY_ANY_HOST`;
/// off: gateway mode needs the admin's suffix), and the names no cluster may
/// claim besides the built-in ones ([`reserved`]): the console's own host.
/// And what the host allows at all: whether its helm-controller accepts a
/// `failurePolicy` the console may write (`domain::helm`; when it does not,
/// every create and edit is refused before anything is written).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostPolicy {
    pub any_host: bool,
    pub reserved: Vec<Host>,
    pub helm_unsupported: bool,
}

/// Whether `host` is not for a cluster: one of `extra` (the console's own
/// host), `localhost` and names under it, or a name of the host cluster's
/// own DNS (`*.svc`, `*.cluster.local`): a Gateway serving a route for such
/// a name would take traffic meant for something else.
pub(crate) fn reserved(host: &Host, extra: &[Host]) -> bool {
    if extra.contains(host) {
        return true;
    }
    let Host::Dns(name) = host else { return false };
    let under = |zone: &str| name == zone || name.ends_with(&format!(".{zone}"));
    under("localhost") || under("svc") || under("cluster.local")
}

/// The domain suffix under which gateway hosts are handed out (`k.example.com`).
pub(crate) fn parse_suffix(raw: &str) -> Result<Option<Host>, AppError> {
    match Host::parse_optional(raw) {
        Ok(None) => Ok(None),
        Ok(Some(h @ Host::Dns(_))) => Ok(Some(h)),
        _ => Err(AppError::at(ErrorCode::GatewaySuffixInvalid, Field::GatewayDomainSuffix)),
    }
}

/// What decides a gateway cluster's host: the admin's Gateway (none: the
/// mode is not offered) and suffix, and the cluster's name.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct GatewayRules<'a> {
    pub gateway: Option<&'a GatewayRef>,
    pub suffix: Option<&'a Host>,
    /// The operator's policy (the server's checks; `None` in the form).
    pub policy: Option<&'a HostPolicy>,
    pub cluster_name: &'a str,
}

/// The host of a gateway cluster: the one given, else `<name>.<suffix>`.
/// It must be a DNS name (TLS passthrough routes by SNI, which carries no IP
/// address: RFC 6066 §3), with a suffix end in it, and not be [`reserved`].
/// Without a suffix any name is first come, first served — the console's
/// own, one another Ingress serves on the same entry point (where SNI
/// routers win over HTTP ones) — so gateway mode then needs the operator's
/// explicit `any_host`.
pub(crate) fn host(given: Option<Host>, rules: &GatewayRules<'_>) -> Result<Host, AppError> {
    let err = |code| AppError::at(code, Field::ControlPlaneHost);
    if rules.gateway.is_none() {
        return Err(AppError::at(ErrorCode::GatewayNotConfigured, Field::PublicAccessMode));
    }
    if rules.suffix.is_none() && rules.policy.is_some_and(|p| !p.any_host) {
        return Err(AppError::at(ErrorCode::GatewaySuffixRequired, Field::PublicAccessMode));
    }
    let host = match (given, rules.suffix) {
        (Some(h), _) => h,
        (None, Some(suffix)) if !rules.cluster_name.trim().is_empty() => {
            Host::parse(&format!("{}.{suffix}", rules.cluster_name.trim()))
                .map_err(|_| err(ErrorCode::HostRequiredForGateway))?
        }
        (None, _) => return Err(err(ErrorCode::HostRequiredForGateway)),
    };
    host_within_suffix(&host, rules.suffix)?;
    if reserved(&host, rules.policy.map_or(&[], |p| p.reserved.as_slice())) {
        return Err(err(ErrorCode::GatewayHostReserved));
    }
    Ok(host)
}

/// Whether `host` can be a gateway host: a DNS name (an IP cannot carry SNI),
/// within the admin's domain suffix when there is one.
pub(crate) fn host_within_suffix(host: &Host, suffix: Option<&Host>) -> Result<(), AppError> {
    let err = |code| AppError::at(code, Field::ControlPlaneHost);
    let Host::Dns(name) = host else { return Err(err(ErrorCode::GatewayHostNotDns)) };
    if let Some(suffix) = suffix
        && !name.strip_suffix(&suffix.to_string()).is_some_and(|head| head.len() > 1 && head.ends_with('.'))
    {
        return Err(err(ErrorCode::GatewayHostOutsideSuffix));
    }
    Ok(())
}

/// The `TLSRoute` versions a console can write, newest first: `v1` (Gateway
/// API 1.5+ standard channel), `v1alpha3` and `v1alpha2` (older and
/// experimental bundles). Their `spec` is the same for what the console sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr, strum::VariantArray)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum RouteVersion {
    V1,
    V1alpha3,
    V1alpha2,
}

impl RouteVersion {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }

    /// `gateway.networking.k8s.io/<version>`.
    pub(crate) fn api_version(self) -> String {
        format!("{GROUP}/{}", self.as_str())
    }

    /// The newest version the host serves `tlsroutes` in, from the versions
    /// of the group that list the resource.
    pub(crate) fn pick<'a>(serving_tlsroutes: impl IntoIterator<Item = &'a str>) -> Option<Self> {
        use strum::VariantArray;
        let served: Vec<&str> = serving_tlsroutes.into_iter().collect();
        Self::VARIANTS.iter().copied().find(|v| served.contains(&v.as_str()))
    }
}

/// One condition as Gateway API writes it (`metav1.Condition`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Condition {
    pub type_: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
    /// The object generation it was written for.
    pub observed_generation: Option<i64>,
}

impl Condition {
    /// The conditions in a `status.conditions` JSON list.
    pub(crate) fn list(conditions: Option<&serde_json::Value>) -> Vec<Self> {
        let items = conditions.and_then(serde_json::Value::as_array).map(Vec::as_slice).unwrap_or_default();
        items
            .iter()
            .map(|c| {
                let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
                Self {
                    type_: s("type"),
                    status: c["status"] == "True",
                    reason: s("reason"),
                    message: s("message"),
                    observed_generation: c["observedGeneration"].as_i64(),
                }
            })
            .collect()
    }

    fn find<'a>(list: &'a [Self], type_: &str) -> Option<&'a Self> {
        list.iter().find(|c| c.type_ == type_)
    }

    /// Its reason and message, typed.
    fn route_reason(&self) -> RouteReason {
        RouteReason { code: RouteCode::of(&self.reason), message: self.message.clone() }
    }
}

/// A route condition's reason: those the Gateway API defines for `Accepted`
/// and `ResolvedRefs` (`apis/v1/shared_types.go`), which the pages put in
/// words, or an implementation's own, kept as it came.
#[derive(Debug, Clone, PartialEq, Eq, strum::EnumString, strum::IntoStaticStr)]
pub enum RouteCode {
    NotAllowedByListeners,
    NoMatchingListenerHostname,
    NoMatchingParent,
    UnsupportedValue,
    Pending,
    BackendNotFound,
    RefNotPermitted,
    InvalidKind,
    UnsupportedProtocol,
    /// Not parsed from text: [`RouteCode::of`] makes it of any other reason.
    #[strum(disabled)]
    Other(String),
}

impl RouteCode {
    pub(crate) fn of(reason: &str) -> Self {
        reason.parse().unwrap_or_else(|_| Self::Other(reason.to_owned()))
    }

    /// The condition's reason as the controller wrote it.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Self::Other(reason) => reason,
            known => known.into(),
        }
    }
}

/// Why the Gateway's controller does not take a route: the condition's
/// reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteReason {
    pub code: RouteCode,
    pub message: String,
}

impl RouteReason {
    /// Reads what [`fmt::Display`] wrote (the stored status text's detail,
    /// `domain::reason`): `Reason` or `Reason: message`. A condition's
    /// reason never holds a space (`metav1.Condition`'s pattern), so the
    /// first `": "` ends it.
    pub(crate) fn parse(text: &str) -> Self {
        let (code, message) = text.split_once(": ").unwrap_or((text, ""));
        Self { code: RouteCode::of(code), message: message.to_owned() }
    }
}

/// `Reason`, or `Reason: message` when there is a message.
impl std::fmt::Display for RouteReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.message.as_str() {
            "" => f.write_str(self.code.as_str()),
            message => write!(f, "{}: {message}", self.code.as_str()),
        }
    }
}

/// What the console reads of its route: whether it exists, and the
/// conditions of the parent status for the admin's Gateway.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct RouteFacts {
    pub exists: bool,
    pub generation: Option<i64>,
    /// `status.parents[]` entry whose `parentRef` names the Gateway.
    pub parent: Option<Vec<Condition>>,
}

/// Where a route stands with its Gateway, from the conditions the
/// implementation wrote (`RouteConditionType` in `apis/v1/shared_types.go`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RouteState {
    /// Not created yet, or no status from the Gateway's controller yet.
    Waiting,
    /// `Accepted=False`: the reason (`NotAllowedByListeners`,
    /// `NoMatchingListenerHostname`, `NoMatchingParent`,
    /// `UnsupportedValue`, …) and the controller's message.
    NotAccepted(RouteReason),
    /// `ResolvedRefs=False`: `BackendNotFound`, `RefNotPermitted`, …
    RefsUnresolved(RouteReason),
    Attached,
}

/// The state of a route from its facts. Conditions written for an older
/// generation of the route do not count (the controller has not seen it yet).
pub(crate) fn route_state(facts: &RouteFacts) -> RouteState {
    let Some(conditions) = facts.parent.as_ref().filter(|_| facts.exists) else { return RouteState::Waiting };
    let current = |c: &&Condition| c.observed_generation.is_none() || c.observed_generation == facts.generation;
    match (
        Condition::find(conditions, "Accepted").filter(current),
        Condition::find(conditions, "ResolvedRefs").filter(current),
    ) {
        (Some(a), _) if !a.status => RouteState::NotAccepted(a.route_reason()),
        (_, Some(r)) if !r.status => RouteState::RefsUnresolved(r.route_reason()),
        (Some(_), Some(_)) => RouteState::Attached,
        _ => RouteState::Waiting,
    }
}

/// Whom a listener's `allowedRoutes.namespaces` admits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Admits {
    /// `from: All`, or a selector the cluster namespaces' labels match.
    ClusterNamespaces,
    /// `from: Same` (the Gateway's namespace only) or a selector that does
    /// not match them: routes get `NotAllowedByListeners`.
    Not,
}

/// One listener of a Gateway, as the settings page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListenerView {
    pub name: String,
    pub protocol: String,
    pub port: i64,
    pub hostname: Option<String>,
    /// `tls.mode` (`Passthrough` is what the console needs; `Terminate` is the default).
    pub tls_mode: String,
    pub admits: Admits,
    /// `TLSRoute` is among the kinds it allows (none listed: the protocol's default, which for TLS includes it).
    pub allows_tls_routes: bool,
}

impl ListenerView {
    /// A TLS passthrough listener that admits the console's routes.
    pub(crate) fn usable(&self) -> bool {
        self.protocol == "TLS"
            && self.tls_mode == "Passthrough"
            && self.admits == Admits::ClusterNamespaces
            && self.allows_tls_routes
    }
}

/// A Gateway as the settings page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayView {
    pub namespace: String,
    pub name: String,
    pub class: String,
    /// `status.addresses[].value`: where DNS must point.
    pub addresses: Vec<String>,
    /// `Programmed=True`.
    pub programmed: bool,
    pub listeners: Vec<ListenerView>,
}

/// What the settings page says about Gateway API on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct GatewayApiView {
    /// The group's served versions (empty: Gateway API not installed).
    pub served: Vec<String>,
    /// The `TLSRoute` version the console writes (none: not served).
    pub route_version: Option<RouteVersion>,
    pub gateways: Vec<GatewayView>,
}

/// Whether a label selector (`matchLabels`, `matchExpressions`) matches `labels`.
pub(crate) fn selector_matches(selector: &serde_json::Value, labels: &[(&str, &str)]) -> bool {
    let get = |k: &str| labels.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
    let match_labels = selector["matchLabels"].as_object();
    let labels_ok = match_labels.is_none_or(|m| m.iter().all(|(k, v)| get(k) == v.as_str()));
    let exprs = selector["matchExpressions"].as_array().map(Vec::as_slice).unwrap_or_default();
    let exprs_ok = exprs.iter().all(|e| {
        let key = e["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = e["values"].as_array().into_iter().flatten().filter_map(|v| v.as_str()).collect();
        match e["operator"].as_str().unwrap_or_default() {
            "In" => get(key).is_some_and(|v| values.contains(&v)),
            "NotIn" => get(key).is_none_or(|v| !values.contains(&v)),
            "Exists" => get(key).is_some(),
            "DoesNotExist" => get(key).is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

/// A Gateway object (JSON) as the settings page shows it. `cluster_labels`
/// are the labels every cluster namespace carries (the console's own).
pub(crate) fn gateway_view(obj: &serde_json::Value, cluster_labels: &[(&str, &str)]) -> GatewayView {
    let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    let listeners = obj["spec"]["listeners"].as_array().map(Vec::as_slice).unwrap_or_default();
    let listeners = listeners
        .iter()
        .map(|l| {
            let namespaces = &l["allowedRoutes"]["namespaces"];
            let admits = match namespaces["from"].as_str().unwrap_or("Same") {
                "All" => Admits::ClusterNamespaces,
                "Selector" if selector_matches(&namespaces["selector"], cluster_labels) => Admits::ClusterNamespaces,
                _ => Admits::Not,
            };
            let kinds = l["allowedRoutes"]["kinds"].as_array().map(Vec::as_slice).unwrap_or_default();
            let allows_tls_routes = kinds.is_empty()
                || kinds.iter().any(|k| k["kind"] == "TLSRoute" && k["group"].as_str().is_none_or(|g| g == GROUP));
            ListenerView {
                name: s(&l["name"]),
                protocol: s(&l["protocol"]),
                port: l["port"].as_i64().unwrap_or_default(),
                hostname: l["hostname"].as_str().map(str::to_owned),
                tls_mode: l["tls"]["mode"].as_str().unwrap_or("Terminate").to_owned(),
                admits,
                allows_tls_routes,
            }
        })
        .collect();
    let addresses = obj["status"]["addresses"].as_array().map(Vec::as_slice).unwrap_or_default();
    let conditions = Condition::list(obj["status"].get("conditions"));
    GatewayView {
        namespace: s(&obj["metadata"]["namespace"]),
        name: s(&obj["metadata"]["name"]),
        class: s(&obj["spec"]["gatewayClassName"]),
        addresses: addresses.iter().filter_map(|a| a["value"].as_str().map(str::to_owned)).collect(),
        programmed: Condition::find(&conditions, "Programmed").is_some_and(|c| c.status),
        listeners,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn gw() -> GatewayRef {
        GatewayRef { namespace: "gw".into(), name: "shared".into(), listener: Some("tls".into()) }
    }

    #[test]
    fn gateway_refs_parse() {
        assert_eq!(GatewayRef::parse("", ""), Ok(None));
        assert_eq!(GatewayRef::parse(" gw/shared ", "tls"), Ok(Some(gw())));
        assert_eq!(GatewayRef::parse("gw/shared", "").unwrap().unwrap().listener, None);
        for (g, l, field) in [
            ("", "tls", Field::Gateway),
            ("shared", "", Field::Gateway),
            ("GW/shared", "", Field::Gateway),
            ("gw/", "", Field::Gateway),
            ("gw/a/b", "", Field::Gateway),
            ("gw/shared", "Tls Listener", Field::GatewayListener),
        ] {
            assert_eq!(GatewayRef::parse(g, l), Err(AppError::at(ErrorCode::GatewayInvalid, field)), "{g} {l}");
        }
    }

    #[test]
    fn hosts_follow_the_suffix() {
        let gateway = gw();
        let suffix = Host::parse("k.test").unwrap();
        let rules = |suffix| GatewayRules { gateway: Some(&gateway), suffix, policy: None, cluster_name: "alpha" };
        let h = |s: &str| Some(Host::parse(s).unwrap());
        let err = |code, field| Err(AppError::at(code, field));
        let cases = [
            (None, rules(Some(&suffix)), Ok(Host::parse("alpha.k.test").unwrap())),
            (h("a.k.test"), rules(Some(&suffix)), Ok(Host::parse("a.k.test").unwrap())),
            (h("a.b.k.test"), rules(Some(&suffix)), Ok(Host::parse("a.b.k.test").unwrap())),
            (h("k.test"), rules(Some(&suffix)), err(ErrorCode::GatewayHostOutsideSuffix, Field::ControlPlaneHost)),
            (h("ak.test"), rules(Some(&suffix)), err(ErrorCode::GatewayHostOutsideSuffix, Field::ControlPlaneHost)),
            (
                h("a.example.com"),
                rules(Some(&suffix)),
                err(ErrorCode::GatewayHostOutsideSuffix, Field::ControlPlaneHost),
            ),
            (h("a.example.com"), rules(None), Ok(Host::parse("a.example.com").unwrap())),
            (None, rules(None), err(ErrorCode::HostRequiredForGateway, Field::ControlPlaneHost)),
            (h("198.51.100.4"), rules(None), err(ErrorCode::GatewayHostNotDns, Field::ControlPlaneHost)),
            (h("2001:db8::1"), rules(Some(&suffix)), err(ErrorCode::GatewayHostNotDns, Field::ControlPlaneHost)),
            (
                h("a.k.test"),
                GatewayRules { gateway: None, suffix: Some(&suffix), policy: None, cluster_name: "alpha" },
                err(ErrorCode::GatewayNotConfigured, Field::PublicAccessMode),
            ),
        ];
        for (i, (given, rules, want)) in cases.into_iter().enumerate() {
            assert_eq!(host(given, &rules), want, "case {i}");
        }
    }

    /// The operator's policy: no suffix needs `any_host`; reserved names
    /// are refused with or without a suffix.
    #[test]
    fn the_operators_policy_reserves_names_and_may_require_a_suffix() {
        let gateway = gw();
        let console = Host::parse("console.k.test").unwrap();
        let strict = HostPolicy { any_host: false, reserved: vec![console.clone()], ..HostPolicy::default() };
        let open = HostPolicy { any_host: true, reserved: vec![console.clone()], ..HostPolicy::default() };
        let suffix = Host::parse("k.test").unwrap();
        let rules = |suffix, policy| GatewayRules { gateway: Some(&gateway), suffix, policy, cluster_name: "alpha" };
        let h = |s: &str| Some(Host::parse(s).unwrap());
        let ok = |s: &str| Ok(Host::parse(s).unwrap());
        let err = |code, field| Err(AppError::at(code, field));
        let reserved = |_| err(ErrorCode::GatewayHostReserved, Field::ControlPlaneHost);
        let cases = [
            (
                h("a.example.com"),
                rules(None, Some(&strict)),
                err(ErrorCode::GatewaySuffixRequired, Field::PublicAccessMode),
            ),
            (None, rules(None, Some(&strict)), err(ErrorCode::GatewaySuffixRequired, Field::PublicAccessMode)),
            (h("a.example.com"), rules(None, Some(&open)), ok("a.example.com")),
            (h("a.k.test"), rules(Some(&suffix), Some(&strict)), ok("a.k.test")),
            (None, rules(Some(&suffix), Some(&strict)), ok("alpha.k.test")),
            (h("console.k.test"), rules(Some(&suffix), Some(&strict)), reserved(())),
            (h("CONSOLE.k.test"), rules(Some(&suffix), Some(&strict)), reserved(())),
            (h("console.k.test"), rules(None, Some(&open)), reserved(())),
            (h("localhost"), rules(None, Some(&open)), reserved(())),
            (h("a.localhost"), rules(None, Some(&open)), reserved(())),
            (h("kubernetes.default.svc"), rules(None, Some(&open)), reserved(())),
            (h("api.kube-system.svc.cluster.local"), rules(None, Some(&open)), reserved(())),
            (h("svc.example.com"), rules(None, Some(&open)), ok("svc.example.com")),
            (h("a.localhost.k.test"), rules(Some(&suffix), Some(&strict)), ok("a.localhost.k.test")),
            // The form knows no policy: the server's answer decides.
            (h("a.example.com"), rules(None, None), ok("a.example.com")),
        ];
        for (i, (given, rules, want)) in cases.into_iter().enumerate() {
            assert_eq!(host(given, &rules), want, "case {i}");
        }
    }

    #[test]
    fn the_newest_served_route_version_is_written() {
        assert_eq!(RouteVersion::pick(["v1alpha2", "v1", "v1alpha3"]), Some(RouteVersion::V1));
        assert_eq!(RouteVersion::pick(["v1alpha2", "v1alpha3"]), Some(RouteVersion::V1alpha3));
        assert_eq!(RouteVersion::pick(["v1alpha2"]), Some(RouteVersion::V1alpha2));
        assert_eq!(RouteVersion::pick(["v1beta1"]), None);
        assert_eq!(RouteVersion::V1alpha2.api_version(), "gateway.networking.k8s.io/v1alpha2");
    }

    fn cond(type_: &str, status: bool, reason: &str, generation: Option<i64>) -> Condition {
        Condition {
            type_: type_.into(),
            status,
            reason: reason.into(),
            message: String::new(),
            observed_generation: generation,
        }
    }

    #[test]
    fn route_states_from_conditions() {
        let facts = |parent: Option<Vec<Condition>>| RouteFacts { exists: true, generation: Some(2), parent };
        let accepted = cond("Accepted", true, "Accepted", Some(2));
        let resolved = cond("ResolvedRefs", true, "ResolvedRefs", Some(2));
        let cases = [
            (RouteFacts::default(), RouteState::Waiting),
            (facts(None), RouteState::Waiting),
            (facts(Some(vec![accepted.clone(), resolved.clone()])), RouteState::Attached),
            (
                facts(Some(vec![cond("Accepted", false, "NotAllowedByListeners", Some(2)), resolved.clone()])),
                RouteState::NotAccepted(RouteReason { code: RouteCode::NotAllowedByListeners, message: String::new() }),
            ),
            (
                facts(Some(vec![accepted.clone(), cond("ResolvedRefs", false, "BackendNotFound", Some(2))])),
                RouteState::RefsUnresolved(RouteReason { code: RouteCode::BackendNotFound, message: String::new() }),
            ),
            // written for the route's previous generation: not yet looked at
            (
                facts(Some(vec![cond("Accepted", false, "NoMatchingListenerHostname", Some(1)), resolved])),
                RouteState::Waiting,
            ),
            (facts(Some(vec![accepted])), RouteState::Waiting),
        ];
        for (i, (f, want)) in cases.into_iter().enumerate() {
            assert_eq!(route_state(&f), want, "case {i}");
        }
        let mut with_message = cond("Accepted", false, "NoMatchingListenerHostname", None);
        with_message.message = "no listener hostname matches".into();
        let f = facts(Some(vec![with_message, cond("ResolvedRefs", true, "ResolvedRefs", None)]));
        assert_eq!(
            route_state(&f),
            RouteState::NotAccepted(RouteReason {
                code: RouteCode::NoMatchingListenerHostname,
                message: "no listener hostname matches".into()
            })
        );
    }

    #[test]
    fn route_reasons_read_back_as_written() {
        let reason = |code, message: &str| RouteReason { code, message: message.into() };
        for (text, want) in [
            ("NotAllowedByListeners", reason(RouteCode::NotAllowedByListeners, "")),
            (
                "BackendNotFound: service \"vc\" not found",
                reason(RouteCode::BackendNotFound, "service \"vc\" not found"),
            ),
            ("Pending: waiting: for the controller", reason(RouteCode::Pending, "waiting: for the controller")),
            ("ListenerBusy", reason(RouteCode::Other("ListenerBusy".into()), "")),
            ("acme.io:Conflict: another route", reason(RouteCode::Other("acme.io:Conflict".into()), "another route")),
        ] {
            let read = RouteReason::parse(text);
            assert_eq!(read, want, "{text}");
            assert_eq!(read.to_string(), text);
        }
    }

    #[test]
    fn listeners_say_whether_they_admit_the_console() {
        let labels = [("app.kubernetes.io/managed-by", "kubebyon"), ("kubernetes.io/metadata.name", "kubebyon-a")];
        let obj = json!({
            "metadata": {"namespace": "gw", "name": "shared"},
            "spec": {"gatewayClassName": "traefik", "listeners": [
                {"name": "tls", "protocol": "TLS", "port": 443, "tls": {"mode": "Passthrough"},
                 "allowedRoutes": {"namespaces": {"from": "Selector", "selector": {"matchLabels": {"app.kubernetes.io/managed-by": "kubebyon"}}}}},
                {"name": "same", "protocol": "TLS", "port": 8443, "tls": {"mode": "Passthrough"}},
                {"name": "all", "protocol": "TLS", "port": 9443, "hostname": "*.k.test", "tls": {"mode": "Passthrough"},
                 "allowedRoutes": {"namespaces": {"from": "All"}, "kinds": [{"kind": "HTTPRoute"}]}},
                {"name": "term", "protocol": "HTTPS", "port": 443,
                 "allowedRoutes": {"namespaces": {"from": "Selector", "selector": {"matchExpressions": [{"key": "team", "operator": "Exists"}]}}}},
            ]},
            "status": {"addresses": [{"type": "IPAddress", "value": "127.0.0.230"}],
                       "conditions": [{"type": "Programmed", "status": "True", "reason": "Programmed"}]},
        });
        let v = gateway_view(&obj, &labels);
        assert_eq!(
            (v.class.as_str(), v.addresses.clone(), v.programmed),
            ("traefik", vec!["127.0.0.230".to_owned()], true)
        );
        let usable: Vec<(&str, bool, &Admits)> =
            v.listeners.iter().map(|l| (l.name.as_str(), l.usable(), &l.admits)).collect();
        assert_eq!(
            usable,
            [
                ("tls", true, &Admits::ClusterNamespaces),
                ("same", false, &Admits::Not),
                ("all", false, &Admits::ClusterNamespaces),
                ("term", false, &Admits::Not),
            ]
        );
        assert_eq!(v.listeners[2].hostname.as_deref(), Some("*.k.test"));
        assert_eq!(v.listeners[3].tls_mode, "Terminate");
        let not_in = json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kubebyon-a"]}]});
        assert!(!selector_matches(&not_in, &labels));
        assert!(selector_matches(&json!({}), &labels));
    }
}
