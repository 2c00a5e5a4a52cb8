//! Moving clusters to LoadBalancer or to gateway access, pure: where each cluster's new
//! `control_plane_host` comes from (typed, a `{name}` template or an IPv4
//! range handed out in order), what is wrong with a plan before anything
//! changes, and which step a switching cluster is at.

use std::collections::{BTreeMap, HashSet};
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::cluster::{Cluster, ClusterSpec, Phase};
use super::settings::AddressRequest;
use super::{AppError, ConnectionStatus, ErrorCode, Field, Host, PublicAccess, StopReason};

/// Clusters switched at once when a request names none (the form, the API, the CLI).
pub(crate) const DEFAULT_CONCURRENCY: i64 = 5;
pub(crate) const MAX_CONCURRENCY: i64 = 50;
/// How long old kubeconfigs keep working when a request names no grace period.
pub(crate) const DEFAULT_GRACE_DAYS: i64 = 7;
pub(crate) const DEFAULT_GRACE_SECS: i64 = DEFAULT_GRACE_DAYS * 86_400;

/// Addresses a range may span at most.
pub(crate) const MAX_RANGE: u32 = 65_536;

/// Where the new hosts come from, as the admin wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostSource {
    /// Cluster name → host, one by one.
    Typed(BTreeMap<String, String>),
    /// `{name}` replaced by each cluster's name, e.g. `{name}.k8s.example.com`.
    Template(String),
    /// `203.0.113.10-203.0.113.60`: handed out in order, skipping addresses in use.
    Range(String),
}

/// An inclusive IPv4 range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ipv4Range {
    pub first: Ipv4Addr,
    pub last: Ipv4Addr,
}

impl Ipv4Range {
    pub(crate) fn parse(raw: &str) -> Result<Self, AppError> {
        let bad = || AppError::at(ErrorCode::MoveHostsInvalid, Field::Hosts);
        let (a, b) = raw.trim().split_once('-').ok_or_else(bad)?;
        let (first, last): (Ipv4Addr, Ipv4Addr) =
            (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
        let (lo, hi) = (u32::from(first), u32::from(last));
        if lo > hi || hi - lo >= MAX_RANGE || Host::parse(&first.to_string()).is_err() {
            return Err(bad());
        }
        Ok(Self { first, last })
    }

    #[cfg(test)]
    fn len(self) -> u32 {
        u32::from(self.last) - u32::from(self.first) + 1
    }

    fn iter(self) -> impl Iterator<Item = Ipv4Addr> {
        (u32::from(self.first)..=u32::from(self.last)).map(Ipv4Addr::from)
    }
}

/// A grace period as written on the command line: `7d`, `12h`, `30m`, `90s`, `0`.
pub(crate) fn parse_duration(raw: &str) -> Option<i64> {
    let raw = raw.trim();
    if raw == "0" {
        return Some(0);
    }
    let (n, unit) = raw.split_at(raw.len().checked_sub(1)?);
    let n: i64 = n.parse().ok().filter(|n| *n >= 0)?;
    let secs = match unit {
        "d" => 86_400,
        "h" => 3_600,
        "m" => 60,
        "s" => 1,
        _ => return None,
    };
    n.checked_mul(secs)
}

/// Checks the source itself (before any cluster is looked at).
pub(crate) fn validate_source(source: &HostSource) -> Result<(), AppError> {
    let bad = || AppError::at(ErrorCode::MoveHostsInvalid, Field::Hosts);
    match source {
        HostSource::Typed(_) => Ok(()),
        HostSource::Template(t) if t.matches("{name}").count() == 1 => Ok(()),
        HostSource::Template(_) => Err(bad()),
        HostSource::Range(r) => Ipv4Range::parse(r).map(|_| ()),
    }
}

/// What a move switches clusters to: LoadBalancer (NodePort or disabled
/// clusters), or gateway access (NodePort, LoadBalancer or disabled ones).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum MoveTarget {
    #[default]
    LoadBalancer,
    Gateway,
}

impl MoveTarget {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }

    /// Reads the stored form; anything unknown reads as LoadBalancer (every
    /// move before gateway access was one).
    pub(crate) fn parse(s: &str) -> Self {
        s.trim().parse().unwrap_or_default()
    }

    /// The public access a cluster gets on `host`.
    pub(crate) fn access(self, host: Host) -> PublicAccess {
        match self {
            Self::LoadBalancer => PublicAccess::LoadBalancer { host },
            Self::Gateway => PublicAccess::Gateway { host },
        }
    }

    pub(crate) fn mode(self) -> super::PublicAccessMode {
        match self {
            Self::LoadBalancer => super::PublicAccessMode::LoadBalancer,
            Self::Gateway => super::PublicAccessMode::Gateway,
        }
    }

    /// Whether a cluster with this spec can be moved here. Never one with its
    /// own nodes: they are on a LoadBalancer from the start, and gateway
    /// access cannot carry them (konnectivity's port 8132 has no route there;
    /// see [`crate::domain::nodes`]) — moving one would cut its nodes off.
    pub(crate) fn takes(self, spec: &ClusterSpec, include_disabled: bool) -> bool {
        if spec.own_nodes {
            return false;
        }
        match &spec.public_access {
            PublicAccess::NodePort { .. } => true,
            PublicAccess::Disabled => include_disabled,
            PublicAccess::LoadBalancer { .. } => self == Self::Gateway,
            PublicAccess::Gateway { .. } => false,
        }
    }
}

/// What is wrong with one cluster's part of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Problem {
    /// No host given (typed plans), or the template/typed text is not a host.
    HostInvalid,
    /// Another cluster (outside this batch) already has it.
    HostInUse,
    /// Two clusters of this batch would get it.
    HostTwiceInBatch,
    /// The range ran out before this cluster: the pool looks too small.
    RangeExhausted,
    /// An IP host while the admin chose no way to ask the LB provider for it.
    NoAddressRequest,
    /// A DNS host that does not resolve (yet). A warning: DNS may follow.
    DoesNotResolve,
    /// The cluster is in another move that has not finished with it
    /// (wire name from before the rename: API clients match on it).
    #[serde(rename = "already_migrating")]
    #[strum(serialize = "already_migrating")]
    AlreadyMoving,
    /// Gateway target: an IP address, or a name outside the admin's domain suffix.
    NotAGatewayHost,
}

impl Problem {
    /// Blocking problems keep the cluster out of a run; warnings do not.
    pub(crate) fn blocks(self) -> bool {
        !matches!(self, Self::NoAddressRequest | Self::DoesNotResolve)
    }

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A cluster the plan is for.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub id: i64,
    pub name: String,
}

/// One cluster's new host (when there is one) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostAssignment {
    pub id: i64,
    pub name: String,
    pub host: Option<Host>,
    pub problems: Vec<Problem>,
}

/// Gives each candidate its new host. `in_use`: hosts (as text) other clusters
/// outside the batch already have. A range skips them and hosts given earlier
/// in the batch; a template or typed host that collides is a problem.
pub(crate) fn assign(
    candidates: &[Candidate],
    source: &HostSource,
    in_use: &HashSet<String>,
    request: AddressRequest,
    target: MoveTarget,
    gateway_suffix: Option<&Host>,
) -> Vec<HostAssignment> {
    let mut taken: HashSet<String> = HashSet::new();
    let mut range = match source {
        HostSource::Range(r) => Ipv4Range::parse(r).ok().map(|r| r.iter()),
        _ => None,
    };
    let mut out = Vec::with_capacity(candidates.len());
    for c in candidates {
        let mut problems = Vec::new();
        let host = match source {
            HostSource::Typed(hosts) => hosts.get(&c.name).and_then(|h| Host::parse(h).ok()),
            HostSource::Template(t) => Host::parse(&t.replace("{name}", &c.name)).ok(),
            HostSource::Range(_) => {
                let next = range.as_mut().and_then(|it| {
                    it.find(|ip| {
                        let s = ip.to_string();
                        !in_use.contains(&s) && !taken.contains(&s)
                    })
                });
                if next.is_none() {
                    problems.push(Problem::RangeExhausted);
                }
                next.map(Host::Ipv4)
            }
        };
        match &host {
            None if problems.is_empty() => problems.push(Problem::HostInvalid),
            None => {}
            Some(h) => {
                let text = h.to_string();
                if in_use.contains(&text) {
                    problems.push(Problem::HostInUse);
                } else if !taken.insert(text) {
                    problems.push(Problem::HostTwiceInBatch);
                }
                let ip = matches!(h, Host::Ipv4(_) | Host::Ipv6(_));
                match target {
                    MoveTarget::LoadBalancer if ip && request == AddressRequest::None => {
                        problems.push(Problem::NoAddressRequest);
                    }
                    MoveTarget::Gateway => {
                        if super::gateway::host_within_suffix(h, gateway_suffix).is_err() {
                            problems.push(Problem::NotAGatewayHost);
                        }
                    }
                    MoveTarget::LoadBalancer => {}
                }
            }
        }
        out.push(HostAssignment { id: c.id, name: c.name.clone(), host, problems });
    }
    out
}

/// Where one cluster of a move is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum ItemState {
    Queued,
    Switching,
    Done,
    Failed,
    RolledBack,
}

impl ItemState {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }

    /// Nothing more will happen to it without the admin.
    pub(crate) fn settled(self) -> bool {
        !matches!(self, Self::Queued | Self::Switching)
    }
}

/// The finer step of a switching cluster, read from its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SwitchStep {
    /// The host has not applied the new values yet.
    Switching,
    /// Applied; the LoadBalancer provider has not given the address yet.
    WaitingForAddress,
    /// The address is there; the endpoint is being proven.
    Probing,
    /// Ready on the new host.
    Done,
    /// Stopped: helm failed.
    Failed,
}

/// Reads a switching cluster's status against the access it is moving to.
pub(crate) fn switch_step(cluster: &Cluster, target: &PublicAccess, target_generation: i64) -> SwitchStep {
    let st = &cluster.status;
    let on_target = cluster.spec.public_access == *target;
    let Some(target) = target.claimed_host() else { return SwitchStep::Switching };
    if !on_target || st.observed_generation < target_generation {
        return SwitchStep::Switching;
    }
    if st.phase == Phase::Failed {
        return SwitchStep::Failed;
    }
    let endpoint = super::endpoint::Endpoint::load_balancer(target.clone()).to_string();
    if st.phase == Phase::Ready
        && st.connection_status == ConnectionStatus::Ok
        && st.api_endpoint.as_deref() == Some(&endpoint)
    {
        return SwitchStep::Done;
    }
    if matches!(st.reason, super::Reason::LbPending(_) | super::Reason::GatewayPending(_) | super::Reason::RouteWaiting)
        || st.api_endpoint.is_none()
    {
        SwitchStep::WaitingForAddress
    } else {
        SwitchStep::Probing
    }
}

/// What to move and where to (JSON API, page and CLI).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoveRequest {
    /// Cluster names; empty with `all` for every NodePort cluster.
    #[serde(default)]
    pub clusters: Vec<String>,
    #[serde(default)]
    pub all: bool,
    /// Also move clusters whose public access is off (they come out as LoadBalancer).
    #[serde(default)]
    pub include_disabled: bool,
    pub hosts: HostSource,
    /// What the clusters become (default LoadBalancer).
    #[serde(default)]
    pub target: MoveTarget,
    #[serde(default)]
    pub concurrency: Option<i64>,
    /// Seconds the old endpoint keeps answering; 0 cuts over at once.
    #[serde(default)]
    pub grace_secs: Option<i64>,
}

/// One cluster of a dry run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlanItem {
    pub cluster_id: i64,
    pub name: String,
    pub owner: String,
    pub current_endpoint: Option<String>,
    pub new_host: Option<String>,
    pub new_endpoint: Option<String>,
    /// The certificate names the new values ask for (`extraSANs`; the old
    /// host stays during the grace period).
    pub planned_sans: Vec<String>,
    /// Values that change: path, old, new.
    pub changes: Vec<ValueChange>,
    pub problems: Vec<Problem>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ValueChange {
    pub path: String,
    pub old: Option<String>,
    pub new: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Plan {
    pub items: Vec<PlanItem>,
    /// Items with a problem that keeps them out of a run.
    pub blocked: usize,
    pub grace_secs: i64,
    pub concurrency: i64,
}

/// One cluster of a move, as the progress view shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct ItemView {
    pub cluster_id: i64,
    pub name: String,
    pub old_endpoint: Option<String>,
    pub new_host: String,
    pub state: ItemState,
    /// The finer step while switching.
    pub step: Option<SwitchStep>,
    /// Why it stopped (failed items).
    pub reason: StopReason,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    /// Until when the old endpoint answers (done items with a grace period).
    pub old_endpoint_until: Option<i64>,
    pub old_endpoint_closed: bool,
}

impl ItemView {
    /// The endpoint the cluster moves to (its stored host was validated when
    /// the move was planned; shown as stored if it no longer parses).
    pub(crate) fn new_endpoint(&self) -> String {
        Host::parse(&self.new_host)
            .map(|h| super::endpoint::Endpoint::load_balancer(h).to_string())
            .unwrap_or_else(|_| self.new_host.clone())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct MoveView {
    pub id: i64,
    /// What the clusters become.
    #[serde(default)]
    pub target: MoveTarget,
    pub created_by: Option<String>,
    pub created_at: i64,
    pub concurrency: i64,
    pub grace_secs: i64,
    pub items: Vec<ItemView>,
    /// Items per state.
    pub counts: BTreeMap<ItemState, usize>,
    pub finished: bool,
    /// Seconds from start to the last settled item (or to now).
    pub elapsed_secs: i64,
}

/// The move page's form, as text (a GET query for the dry run, the same
/// fields posted to start it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct MoveForm {
    /// Chosen cluster names, comma-separated; empty: every NodePort cluster.
    pub clusters: String,
    pub include_disabled: bool,
    /// `template`, `range` or `typed`.
    pub source: String,
    pub hosts: String,
    /// Typed hosts, `name=host` pairs separated by commas (source `typed`).
    #[serde(default)]
    pub typed: String,
    pub concurrency: String,
    pub grace_days: String,
    /// `loadbalancer` (empty too) or `gateway`.
    #[serde(default)]
    pub target: String,
}

impl MoveForm {
    /// The request the form describes; a bad field is a translated error.
    pub(crate) fn request(&self) -> Result<MoveRequest, AppError> {
        let hosts = match self.source.as_str() {
            "range" => HostSource::Range(self.hosts.trim().to_owned()),
            "typed" => HostSource::Typed(
                self.typed
                    .split(',')
                    .filter_map(|pair| pair.split_once('='))
                    .map(|(n, h)| (n.trim().to_owned(), h.trim().to_owned()))
                    .filter(|(_, h)| !h.is_empty())
                    .collect(),
            ),
            // The form's default (and a form posted without the choice).
            "template" | "" => HostSource::Template(self.hosts.trim().to_owned()),
            _ => return Err(AppError::at(ErrorCode::MoveHostsInvalid, Field::Hosts)),
        };
        validate_source(&hosts)?;
        let number = |s: &str, default: i64| {
            let s = s.trim();
            if s.is_empty() { Ok(default) } else { s.parse::<i64>().map_err(|_| AppError::new(ErrorCode::BadRequest)) }
        };
        let clusters: Vec<String> =
            self.clusters.split([',', ' ']).map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
        Ok(MoveRequest {
            all: clusters.is_empty(),
            clusters,
            include_disabled: self.include_disabled,
            hosts,
            target: match self.target.trim() {
                "" => MoveTarget::LoadBalancer,
                t => t.parse().map_err(|_| AppError::at(ErrorCode::ModeInvalid, Field::PublicAccessMode))?,
            },
            concurrency: Some(number(&self.concurrency, DEFAULT_CONCURRENCY)?),
            grace_secs: Some(number(&self.grace_days, DEFAULT_GRACE_DAYS)?.saturating_mul(86_400)),
        })
    }
}

/// A cluster the move page offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Movable {
    pub name: String,
    pub owner: String,
    pub enabled: bool,
    pub endpoint: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cands(names: &[&str]) -> Vec<Candidate> {
        names.iter().enumerate().map(|(i, n)| Candidate { id: i as i64 + 1, name: (*n).into() }).collect()
    }

    fn hosts(a: &[HostAssignment]) -> Vec<Option<String>> {
        a.iter().map(|x| x.host.as_ref().map(ToString::to_string)).collect()
    }

    #[test]
    fn a_range_is_handed_out_in_order_skipping_addresses_in_use() {
        let in_use: HashSet<String> = ["10.0.0.2".to_string()].into();
        let a = assign(
            &cands(&["a", "b", "c", "d"]),
            &HostSource::Range("10.0.0.1-10.0.0.4".into()),
            &in_use,
            AddressRequest::MetalLb,
            MoveTarget::LoadBalancer,
            None,
        );
        assert_eq!(hosts(&a), [Some("10.0.0.1".into()), Some("10.0.0.3".into()), Some("10.0.0.4".into()), None]);
        assert_eq!(a[3].problems, [Problem::RangeExhausted], "the pool looks too small");
        assert!(a[..3].iter().all(|x| x.problems.is_empty()));
    }

    #[test]
    fn templates_and_typed_hosts_report_their_problems() {
        let in_use: HashSet<String> = ["b.k8s.example.com".to_string()].into();
        let t = assign(
            &cands(&["a", "b"]),
            &HostSource::Template("{name}.k8s.example.com".into()),
            &in_use,
            AddressRequest::MetalLb,
            MoveTarget::LoadBalancer,
            None,
        );
        assert_eq!(hosts(&t), [Some("a.k8s.example.com".into()), Some("b.k8s.example.com".into())]);
        assert_eq!((t[0].problems.clone(), t[1].problems.clone()), (vec![], vec![Problem::HostInUse]));

        let typed = HostSource::Typed(
            [("a", "203.0.113.9"), ("b", "203.0.113.9"), ("c", "http://x")].map(|(k, v)| (k.into(), v.into())).into(),
        );
        let t = assign(
            &cands(&["a", "b", "c", "d"]),
            &typed,
            &HashSet::new(),
            AddressRequest::None,
            MoveTarget::LoadBalancer,
            None,
        );
        assert_eq!(t[0].problems, [Problem::NoAddressRequest]);
        assert_eq!(t[1].problems, [Problem::HostTwiceInBatch, Problem::NoAddressRequest]);
        assert_eq!(t[2].problems, [Problem::HostInvalid]);
        assert_eq!(t[3].problems, [Problem::HostInvalid], "no host typed");
        assert!(!Problem::NoAddressRequest.blocks() && Problem::HostTwiceInBatch.blocks());
    }

    /// To gateway access: DNS names within the admin's suffix only; no
    /// address request is needed (the Gateway has the address).
    #[test]
    fn gateway_moves_take_names_within_the_suffix() {
        let suffix = Host::parse("k.test").unwrap();
        let typed = HostSource::Typed(
            [("a", "a.k.test"), ("b", "203.0.113.9"), ("c", "c.example.com")].map(|(k, v)| (k.into(), v.into())).into(),
        );
        let t = assign(
            &cands(&["a", "b", "c"]),
            &typed,
            &HashSet::new(),
            AddressRequest::None,
            MoveTarget::Gateway,
            Some(&suffix),
        );
        assert_eq!(t[0].problems, []);
        assert_eq!(t[1].problems, [Problem::NotAGatewayHost]);
        assert_eq!(t[2].problems, [Problem::NotAGatewayHost]);
        assert!(Problem::NotAGatewayHost.blocks());
        let range = HostSource::Range("10.0.0.1-10.0.0.2".into());
        let r = assign(&cands(&["a"]), &range, &HashSet::new(), AddressRequest::MetalLb, MoveTarget::Gateway, None);
        assert_eq!(r[0].problems, [Problem::NotAGatewayHost], "a range hands out addresses, not names");
        let np = PublicAccess::NodePort { host: None };
        let lb = PublicAccess::LoadBalancer { host: Host::parse("a.example.com").unwrap() };
        let gw = PublicAccess::Gateway { host: Host::parse("a.k.test").unwrap() };
        let spec = |access: &PublicAccess, own_nodes: bool| ClusterSpec {
            name: crate::domain::ClusterName::parse("a").unwrap(),
            resources: Default::default(),
            public_access: access.clone(),
            own_nodes,
            placement: Default::default(),
            telemetry: Default::default(),
        };
        for (target, access, own_nodes, disabled_too, takes) in [
            (MoveTarget::LoadBalancer, &np, false, false, true),
            (MoveTarget::LoadBalancer, &lb, false, false, false),
            (MoveTarget::Gateway, &lb, false, false, true),
            (MoveTarget::Gateway, &lb, true, false, false),
            (MoveTarget::Gateway, &gw, false, false, false),
            (MoveTarget::Gateway, &PublicAccess::Disabled, false, false, false),
            (MoveTarget::Gateway, &PublicAccess::Disabled, false, true, true),
        ] {
            assert_eq!(
                target.takes(&spec(access, own_nodes), disabled_too),
                takes,
                "{target:?} {access:?} {own_nodes}"
            );
        }
        assert_eq!(MoveTarget::parse("gateway"), MoveTarget::Gateway);
        assert_eq!(MoveTarget::parse("whatever"), MoveTarget::LoadBalancer);
    }

    #[test]
    fn sources_are_validated() {
        let ok = ["10.0.0.1-10.0.0.1", "203.0.113.10 - 203.0.113.60"];
        for r in ok {
            assert!(validate_source(&HostSource::Range(r.into())).is_ok(), "{r}");
        }
        let bad = ["10.0.0.5-10.0.0.1", "10.0.0.1", "10.0.0.1-x", "10.0.0.0-10.1.0.0", "0.0.0.0-0.0.0.5"];
        for r in bad {
            assert!(validate_source(&HostSource::Range(r.into())).is_err(), "{r}");
        }
        assert!(validate_source(&HostSource::Template("{name}.example.com".into())).is_ok());
        assert!(validate_source(&HostSource::Template("api.example.com".into())).is_err());
        assert!(validate_source(&HostSource::Template("{name}.{name}.example.com".into())).is_err());
        assert_eq!(Ipv4Range::parse("10.0.0.1-10.0.0.4").unwrap().len(), 4);
    }

    #[test]
    fn the_page_form_reads_as_a_request() {
        let form = |source: &str, hosts: &str, typed: &str, clusters: &str| MoveForm {
            clusters: clusters.into(),
            include_disabled: false,
            source: source.into(),
            hosts: hosts.into(),
            typed: typed.into(),
            concurrency: String::new(),
            grace_days: "2".into(),
            target: String::new(),
        };
        let r = form("typed", "", "a=10.0.0.1, b = b.example.com,c=", "a,b").request().unwrap();
        let want: BTreeMap<String, String> =
            [("a", "10.0.0.1"), ("b", "b.example.com")].map(|(k, v)| (k.to_owned(), v.to_owned())).into();
        assert_eq!(r.hosts, HostSource::Typed(want));
        assert_eq!((r.clusters.len(), r.all, r.concurrency, r.grace_secs), (2, false, Some(5), Some(172_800)));
        let r = form("range", "10.0.0.1-10.0.0.9", "", "").request().unwrap();
        assert!(r.all && r.hosts == HostSource::Range("10.0.0.1-10.0.0.9".into()));
        assert!(form("template", "api.example.com", "", "").request().is_err(), "no {{name}}");
        assert!(form("template", "{name}.example.com", "", "").request().is_ok());
        assert!(form("", "{name}.example.com", "", "").request().is_ok(), "the form's default");
        // A source the form does not offer is refused, not read as a template.
        let e = form("dns", "{name}.example.com", "", "").request().unwrap_err();
        assert_eq!((e.code, e.field), (ErrorCode::MoveHostsInvalid, Some(Field::Hosts)));
        let mut bad = form("range", "10.0.0.1-10.0.0.9", "", "");
        bad.concurrency = "many".into();
        assert_eq!(bad.request().unwrap_err().code, ErrorCode::BadRequest);
    }

    #[test]
    fn durations() {
        for (raw, secs) in
            [("0", Some(0)), ("7d", Some(604_800)), ("12h", Some(43_200)), ("30m", Some(1_800)), ("90s", Some(90))]
        {
            assert_eq!(parse_duration(raw), secs, "{raw}");
        }
        for bad in ["", "d", "-1d", "7w", "1.5h", "7 d"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
