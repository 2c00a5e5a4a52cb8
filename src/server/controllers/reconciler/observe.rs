//! From what the host reports to a whole `ClusterStatus`, pure. Recomputed as a
//! whole from one observation, never merged with the old status, so nothing of an
//! old spec survives a change. "Ready" means the probe reached the API server
//! through the public endpoint with the kubeconfig a user would download (a
//! disabled cluster, which has no public endpoint, is ready once its install Job
//! for the current values completed, the chart's StatefulSet rolled out and
//! vCluster published `vc-<name>`).

use std::net::IpAddr;

use super::rollout::Rollout;
use crate::domain::endpoint::{self, ServiceObservation};
use crate::domain::gateway::{RouteFacts, RouteState, route_state};
use crate::domain::{ClusterSpec, ClusterStatus, ConnectionStatus, Host, Phase, PublicAccess, Reason, SystemSettings};

/// The install Job for the current values (helm-controller's config hash).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(crate) enum JobState {
    /// No Job for these values yet (helm-controller has not picked them up).
    #[default]
    NotStarted,
    /// Created, suspended, running or retrying.
    Running,
    Complete,
    /// Its backoff limit is exhausted (HelmChart `Failed=True`).
    Failed,
}

/// A Ready node's addresses (`vcluster connect`'s fallback for NodePort).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(crate) struct NodeAddresses {
    pub name: String,
    pub external: Option<IpAddr>,
    pub internal: Option<IpAddr>,
}

/// Everything the status is computed from.
#[derive(Clone, Debug, Default)]
pub(crate) struct Observation {
    pub job: JobState,
    /// helm's own last error line, from the Job pod's log.
    pub helm_error: Option<String>,
    pub service: Option<ServiceObservation>,
    /// The newest Warning Event on the Service (e.g. MetalLB's `AllocationFailed`).
    pub service_warning: Option<String>,
    /// `vc-<name>` exists.
    pub kubeconfig_secret: bool,
    pub ready_nodes: Vec<NodeAddresses>,
    /// The node the vCluster pod runs on: its InternalIP is the one vCluster
    /// puts in its certificate for NodePort (`pkg/server/cert/syncer.go`).
    pub pod_node: Option<String>,
    /// The last probe through the public endpoint, for this endpoint.
    pub probe: Option<ConnectionStatus>,
    /// The chart's StatefulSet: until it has rolled out, the pod that answers
    /// may still be the old one (it rolls after helm's upgrade), so a probe
    /// proves nothing yet.
    pub rollout: Rollout,
    /// Why it does not roll out, in the host's words ([`super::rollout::blocker`]).
    pub blocked: Option<String>,
    /// Gateway mode: the route and the Gateway as read.
    pub gateway: Option<GatewayFacts>,
}

/// What a gateway cluster's status is read from besides the Service.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct GatewayFacts {
    /// The admin names a Gateway.
    pub configured: bool,
    /// The host serves `TLSRoute`.
    pub api: bool,
    pub route: RouteFacts,
    /// The admin's Gateway exists.
    pub gateway_found: bool,
    /// Its first address (`status.addresses`): where DNS must point, and
    /// where the probe connects (with the cluster's host as SNI).
    pub address: Option<IpAddr>,
    /// `namespace/name`, for the words when it is not there.
    pub gateway_key: String,
    /// How long the route has been attached for its current generation
    /// (as this process saw it); `None` while it is not.
    pub attached_for: Option<std::time::Duration>,
    /// [`ROUTE_GRACE`] unless the operator's timing says otherwise.
    pub grace: std::time::Duration,
}

/// How long after its route is attached a gateway cluster's name may still be
/// answered by another certificate (the Gateway's data plane takes the new
/// route: Traefik's provider throttles changes for 2 s): past it, an
/// untrusted certificate is another route's or the Gateway's default, and a
/// failure with those words, not "route waiting".
pub(crate) const ROUTE_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Why a gateway cluster cannot be probed yet; `None` when it can (through `address`).
pub(crate) fn gateway_reason(facts: &GatewayFacts) -> Option<Reason> {
    if !facts.configured {
        return Some(Reason::GatewayNotConfigured);
    }
    if !facts.api {
        return Some(Reason::GatewayApiMissing);
    }
    match route_state(&facts.route) {
        RouteState::Waiting => return Some(Reason::RouteWaiting),
        RouteState::NotAccepted(words) => return Some(Reason::RouteNotAccepted(words)),
        RouteState::RefsUnresolved(words) => return Some(Reason::RouteRefsUnresolved(words)),
        RouteState::Attached => {}
    }
    match (facts.gateway_found, facts.address) {
        (false, _) => Some(Reason::GatewayPending(Some(format!("{} not found", facts.gateway_key)))),
        (true, None) => Some(Reason::GatewayPending(None)),
        (true, Some(_)) => None,
    }
}

/// Some words, or none when there are none.
fn words(detail: Option<&str>) -> Option<String> {
    detail.filter(|d| !d.is_empty()).map(str::to_owned)
}

/// The endpoint (host first; for NodePort without any host, a Ready node's
/// ExternalIP, else InternalIP) and port, and whether a node address was used.
pub(crate) fn endpoint(
    spec: &ClusterSpec,
    settings: &SystemSettings,
    svc: &ServiceObservation,
    nodes: &[NodeAddresses],
    pod_node: Option<&str>,
) -> (endpoint::ObservedAccess, bool) {
    let mut seen = endpoint::observe(&spec.public_access, settings.nodeport_public_host.as_ref(), svc);
    let own = spec.public_access.host().or(settings.nodeport_public_host.as_ref());
    if let (PublicAccess::NodePort { .. }, None, Some(port)) = (&spec.public_access, own, svc.https_node_port) {
        // The pod's node first (its address is in the certificate), then any Ready one.
        let on_pod_node = nodes.iter().filter(|n| Some(n.name.as_str()) == pod_node);
        let node = on_pod_node.chain(nodes.iter()).find_map(|n| n.external.or(n.internal));
        if let Some(ip) = node {
            let host = match ip {
                IpAddr::V4(v4) => Host::Ipv4(v4),
                IpAddr::V6(v6) => Host::Ipv6(v6),
            };
            seen.api_endpoint = Some(endpoint::Endpoint::new(host, port).to_string());
            return (seen, true);
        }
    }
    (seen, false)
}

/// The whole status for `generation` of `spec`.
pub(crate) fn status(
    spec: &ClusterSpec,
    generation: i64,
    settings: &SystemSettings,
    obs: &Observation,
) -> ClusterStatus {
    let svc = obs.service.clone().unwrap_or_default();
    let (access, from_node) = endpoint(spec, settings, &svc, &obs.ready_nodes, obs.pod_node.as_deref());
    let enabled = spec.public_access.is_enabled();
    let kubeconfig_available = enabled && obs.kubeconfig_secret && access.api_endpoint.is_some();
    let probe = if kubeconfig_available { obs.probe.unwrap_or_default() } else { ConnectionStatus::Unknown };
    let mut status = ClusterStatus {
        phase: Phase::Provisioning,
        reason: Reason::None,
        public_access_port: access.public_access_port,
        api_endpoint: access.api_endpoint.clone(),
        kubeconfig_available,
        connection_status: probe,
        observed_generation: generation,
    };
    match &obs.job {
        JobState::Failed => {
            status.phase = Phase::Failed;
            status.reason = Reason::HelmFailed(words(obs.helm_error.as_deref()));
            return status;
        }
        JobState::NotStarted | JobState::Running => {
            status.phase = if obs.kubeconfig_secret { Phase::Updating } else { Phase::Provisioning };
            // helm already failed once and retries: say why.
            status.reason = match &obs.helm_error {
                Some(e) => Reason::HelmFailed(words(Some(e))),
                None => Reason::Installing,
            };
            return status;
        }
        JobState::Complete => {}
    }
    // The address comes (or not) whatever the pod does: say so first.
    if access.load_balancer_pending {
        status.reason = Reason::LbPending(words(obs.service_warning.as_deref()));
        return status;
    }
    if obs.rollout != Rollout::Done {
        status.reason = match words(obs.blocked.as_deref()) {
            Some(words) => Reason::NotStarting(words),
            None => Reason::Starting,
        };
        return status;
    }
    if !obs.kubeconfig_secret {
        status.reason = Reason::Starting;
        return status;
    }
    if !enabled {
        status.phase = Phase::Ready;
        return status;
    }
    if let Some(reason) = obs.gateway.as_ref().and_then(gateway_reason) {
        status.reason = reason;
        return status;
    }
    if access.api_endpoint.is_none() {
        // NodePort with no host and no Ready node: nothing to hand out.
        status.phase = Phase::Failed;
        status.reason = Reason::NoNodeAddress;
        return status;
    }
    match probe {
        ConnectionStatus::Ok => {
            status.phase = Phase::Ready;
            status.reason = if from_node { Reason::NodeAddress } else { Reason::None };
        }
        ConnectionStatus::Unknown => status.reason = Reason::Starting,
        // Through a Gateway, a certificate the kubeconfig does not trust is the
        // Gateway's own default one (k3s's Traefik answers an SNI it has no
        // route for with it) or another route's for the same name: while the
        // route is new for its generation, its data plane may not serve it
        // yet; past the grace, something else answers for the name.
        ConnectionStatus::CertificateUntrusted if let Some(g) = &obs.gateway => {
            status.reason = match g.attached_for {
                Some(d) if d >= g.grace => Reason::RouteShadowed,
                _ => Reason::RouteWaiting,
            };
        }
        other => status.reason = Reason::ProbeFailed(other),
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::endpoint::Ingress;
    use crate::domain::{ClusterName, Resources};

    fn spec(access: PublicAccess) -> ClusterSpec {
        ClusterSpec {
            name: ClusterName::parse("demo").unwrap(),
            resources: Resources::default(),
            public_access: access,
            own_nodes: false,
            placement: Default::default(),
            telemetry: Default::default(),
        }
    }

    /// A gateway cluster installed and rolled out: what the route and the
    /// Gateway say decides, then the probe through the Gateway's address.
    #[test]
    fn gateway_clusters_wait_for_their_route_and_gateway() {
        use crate::domain::gateway::Condition;
        let s = SystemSettings::default();
        let gw = PublicAccess::Gateway { host: Host::parse("a.k.test").unwrap() };
        let cond = |t: &str, ok: bool, reason: &str| Condition {
            type_: t.into(),
            status: ok,
            reason: reason.into(),
            message: String::new(),
            observed_generation: Some(1),
        };
        let attached = RouteFacts {
            exists: true,
            generation: Some(1),
            parent: Some(vec![cond("Accepted", true, "Accepted"), cond("ResolvedRefs", true, "ResolvedRefs")]),
        };
        let facts = |f: &dyn Fn(&mut GatewayFacts)| {
            let mut g = GatewayFacts {
                configured: true,
                api: true,
                route: attached.clone(),
                gateway_found: true,
                address: Some([127, 0, 0, 230].into()),
                gateway_key: "gw/shared".into(),
                attached_for: None,
                grace: ROUTE_GRACE,
            };
            f(&mut g);
            g
        };
        let cases: Vec<(GatewayFacts, Option<ConnectionStatus>, Phase, &str)> = vec![
            (facts(&|g| g.configured = false), None, Phase::Provisioning, "gateway_not_configured"),
            (facts(&|g| g.api = false), None, Phase::Provisioning, "gateway_api_missing"),
            (facts(&|g| g.route = RouteFacts::default()), None, Phase::Provisioning, "route_waiting"),
            (
                facts(&|g| g.route.parent = Some(vec![cond("Accepted", false, "NotAllowedByListeners")])),
                None,
                Phase::Provisioning,
                "route_not_accepted: NotAllowedByListeners",
            ),
            (facts(&|g| g.gateway_found = false), None, Phase::Provisioning, "gateway_pending: gw/shared not found"),
            (facts(&|g| g.address = None), None, Phase::Provisioning, "gateway_pending"),
            (facts(&|_| {}), None, Phase::Provisioning, "starting"),
            (facts(&|_| {}), Some(ConnectionStatus::Ok), Phase::Ready, ""),
            (
                facts(&|_| {}),
                Some(ConnectionStatus::CertificateHostMismatch),
                Phase::Provisioning,
                "probe_failed: certificate_host_mismatch",
            ),
            // Attached, but the Gateway answers with its default certificate:
            // waiting while the route is new for its generation, then a failure in words.
            (facts(&|_| {}), Some(ConnectionStatus::CertificateUntrusted), Phase::Provisioning, "route_waiting"),
            (
                facts(&|g| g.attached_for = Some(ROUTE_GRACE - std::time::Duration::from_secs(1))),
                Some(ConnectionStatus::CertificateUntrusted),
                Phase::Provisioning,
                "route_waiting",
            ),
            (
                facts(&|g| g.attached_for = Some(ROUTE_GRACE)),
                Some(ConnectionStatus::CertificateUntrusted),
                Phase::Provisioning,
                "route_shadowed",
            ),
        ];
        let clusterip = ServiceObservation { https_node_port: None, ingress: vec![] };
        for (i, (g, probe, phase, reason)) in cases.into_iter().enumerate() {
            let obs = Observation { gateway: Some(g), ..installed(clusterip.clone(), probe) };
            let st = status(&spec(gw.clone()), 1, &s, &obs);
            assert_eq!((st.phase, st.reason.to_string().as_str()), (phase, reason), "case {i}");
            assert_eq!(st.api_endpoint.as_deref(), Some("https://a.k.test:443"), "case {i}");
        }
    }

    fn lb() -> PublicAccess {
        PublicAccess::LoadBalancer { host: Host::parse("198.51.100.7").unwrap() }
    }

    fn installed(service: ServiceObservation, probe: Option<ConnectionStatus>) -> Observation {
        Observation {
            job: JobState::Complete,
            rollout: Rollout::Done,
            service: Some(service),
            kubeconfig_secret: true,
            probe,
            ..Observation::default()
        }
    }

    fn lb_svc() -> ServiceObservation {
        ServiceObservation { https_node_port: Some(31000), ingress: vec![Ingress::Ip([10, 0, 0, 9].into())] }
    }

    #[test]
    fn phases_follow_the_job_the_service_and_the_probe() {
        let s = SystemSettings::default();
        let cases: Vec<(PublicAccess, Observation, Phase, &str)> = vec![
            (lb(), Observation::default(), Phase::Provisioning, "installing"),
            (
                lb(),
                Observation {
                    job: JobState::Running,
                    helm_error: Some("Error: UPGRADE FAILED: boom".into()),
                    ..Observation::default()
                },
                Phase::Provisioning,
                "helm_failed: Error: UPGRADE FAILED: boom",
            ),
            (
                lb(),
                Observation { job: JobState::Failed, helm_error: Some("Error: x".into()), ..Observation::default() },
                Phase::Failed,
                "helm_failed: Error: x",
            ),
            (
                lb(),
                Observation {
                    service_warning: Some("no available IPs".into()),
                    ..installed(ServiceObservation::default(), None)
                },
                Phase::Provisioning,
                "lb_pending: no available IPs",
            ),
            (lb(), installed(lb_svc(), None), Phase::Provisioning, "starting"),
            (lb(), installed(lb_svc(), Some(ConnectionStatus::Refused)), Phase::Provisioning, "probe_failed: refused"),
            (lb(), installed(lb_svc(), Some(ConnectionStatus::Ok)), Phase::Ready, ""),
            (
                lb(),
                Observation { rollout: Rollout::InProgress, ..installed(lb_svc(), Some(ConnectionStatus::Ok)) },
                Phase::Provisioning,
                "starting",
            ),
            (
                PublicAccess::Disabled,
                Observation { rollout: Rollout::Missing, ..installed(lb_svc(), None) },
                Phase::Provisioning,
                "starting",
            ),
            (
                lb(),
                Observation {
                    rollout: Rollout::InProgress,
                    blocked: Some("0/2 nodes are available: 2 Insufficient cpu.".into()),
                    ..installed(lb_svc(), Some(ConnectionStatus::Ok))
                },
                Phase::Provisioning,
                "not_starting: 0/2 nodes are available: 2 Insufficient cpu.",
            ),
            // A pending address is said while the pod still rolls.
            (
                lb(),
                Observation {
                    rollout: Rollout::InProgress,
                    service_warning: Some("no available IPs".into()),
                    ..installed(ServiceObservation::default(), None)
                },
                Phase::Provisioning,
                "lb_pending: no available IPs",
            ),
            // Words from an earlier rollout are not shown once it is done.
            (
                lb(),
                Observation { blocked: Some("old".into()), ..installed(lb_svc(), Some(ConnectionStatus::Ok)) },
                Phase::Ready,
                "",
            ),
            (PublicAccess::Disabled, installed(ServiceObservation::default(), None), Phase::Ready, ""),
            (
                PublicAccess::NodePort { host: None },
                installed(ServiceObservation { https_node_port: Some(31000), ingress: vec![] }, None),
                Phase::Failed,
                "no_node_address",
            ),
        ];
        for (access, obs, phase, message) in cases {
            let st = status(&spec(access.clone()), 3, &s, &obs);
            assert_eq!((st.phase, st.reason.to_string().as_str()), (phase, message), "{access:?} {obs:?}");
            assert_eq!(st.observed_generation, 3);
        }
    }

    #[test]
    fn fields_are_recomputed_as_a_whole() {
        let s = SystemSettings::default();
        // A disabled cluster shows no endpoint, port or kubeconfig, whatever the Service still says.
        let st = status(&spec(PublicAccess::Disabled), 1, &s, &installed(lb_svc(), Some(ConnectionStatus::Ok)));
        assert_eq!((st.api_endpoint, st.public_access_port, st.kubeconfig_available), (None, None, false));
        assert_eq!(st.connection_status, ConnectionStatus::Unknown);
        // LoadBalancer: the host, port 443, never the node port.
        let st = status(&spec(lb()), 1, &s, &installed(lb_svc(), Some(ConnectionStatus::Ok)));
        assert_eq!(st.api_endpoint.as_deref(), Some("https://198.51.100.7:443"));
        assert_eq!(st.public_access_port, None);
        assert!(st.kubeconfig_available);
    }

    #[test]
    fn nodeport_falls_back_to_a_ready_nodes_address() {
        let s = SystemSettings::default();
        let svc = ServiceObservation { https_node_port: Some(31000), ingress: vec![] };
        let nodes = vec![
            NodeAddresses { name: "a".into(), external: None, internal: Some("2001:db8::5".parse().unwrap()) },
            NodeAddresses {
                name: "b".into(),
                external: Some([203, 0, 113, 4].into()),
                internal: Some([10, 0, 0, 4].into()),
            },
            NodeAddresses { name: "c".into(), external: None, internal: Some([10, 0, 0, 5].into()) },
        ];
        let obs = Observation { ready_nodes: nodes, ..installed(svc, Some(ConnectionStatus::Ok)) };
        let st = status(&spec(PublicAccess::NodePort { host: None }), 1, &s, &obs);
        assert_eq!(st.api_endpoint.as_deref(), Some("https://[2001:db8::5]:31000"));
        assert_eq!(
            (st.phase, st.reason.to_string().as_str(), st.public_access_port),
            (Phase::Ready, "node_address", Some(31000))
        );
        // The vCluster pod's node, when known: its address is in the certificate.
        for (pod_node, want) in [
            (Some("c"), "https://10.0.0.5:31000"),
            (Some("b"), "https://203.0.113.4:31000"),
            (Some("gone"), "https://[2001:db8::5]:31000"),
            (None, "https://[2001:db8::5]:31000"),
        ] {
            let obs = Observation { pod_node: pod_node.map(String::from), ..obs.clone() };
            let st = status(&spec(PublicAccess::NodePort { host: None }), 1, &s, &obs);
            assert_eq!(st.api_endpoint.as_deref(), Some(want), "{pod_node:?}");
        }
    }
}
