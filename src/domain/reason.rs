//! Why a cluster is where it is, and why a move stopped: typed reasons with
//! the upstream component's own words where there are any (helm's error, the
//! LoadBalancer provider's Event, the scheduler's message, the probe outcome).
//!
//! Stored and sent as one text (`code` or `code: detail`, the column
//! `clusters.message`, the JSON field `status.message`); parsed once, here,
//! into the enum every reader matches on. A text this build does not know
//! (written by a newer replica, or by hand) is kept whole as `Unknown`: it is
//! shown as it is, written back unchanged, and the database layer logs it.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::ConnectionStatus;
use super::gateway::RouteReason;

/// The reason part of a cluster's status. Ready with nothing to add is `None`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
#[derive(strum::EnumDiscriminants)]
#[strum_discriminants(name(ReasonCode), derive(strum::IntoStaticStr, strum::EnumString, strum::VariantArray))]
#[strum_discriminants(strum(serialize_all = "snake_case"))]
pub enum Reason {
    /// Nothing to say (Ready, or not yet looked at).
    #[default]
    None,
    /// helm is installing or upgrading the chart.
    Installing,
    /// helm failed, in its own words when it gave any.
    HelmFailed(Option<String>),
    /// The name's namespace or HelmChart on the host is not the console's
    /// (left untouched); names the object.
    NamespaceTaken(String),
    /// The host's API server refused a request of the console's for good (a
    /// 4xx that retrying cannot mend: a validation, a webhook, a quota):
    /// the step and the API server's words. (Stored as `helm_failed` before
    /// 2026-12-06: such texts still read as [`Reason::HelmFailed`].)
    HostRefused(String),
    /// The LoadBalancer has no address yet, with the provider's words.
    LbPending(Option<String>),
    /// The pod is on its way.
    Starting,
    /// The pod cannot start, in the host's words (scheduler, volume binder,
    /// StatefulSet controller).
    NotStarting(String),
    /// The API server answered the probe badly, or not at all.
    ProbeFailed(ConnectionStatus),
    /// Ready, reached through a node's address (NodePort without a host).
    NodeAddress,
    /// NodePort without a host and no Ready node to hand out.
    NoNodeAddress,
    /// Gateway mode, but the admin has not named a Gateway (any more).
    GatewayNotConfigured,
    /// The host serves no `TLSRoute` (Gateway API not installed, or without TLSRoute).
    GatewayApiMissing,
    /// The route is there; the Gateway's controller has not written its status yet.
    RouteWaiting,
    /// The route was accepted for its generation longer ago than the
    /// Gateway takes to serve it, yet the name is answered with a
    /// certificate the kubeconfig does not trust: another route for the
    /// same hostname (Traefik picks one of several arbitrarily) or the
    /// Gateway's default certificate answers for it.
    RouteShadowed,
    /// The Gateway's controller did not accept the route: its reason and message
    /// (`NotAllowedByListeners`, `NoMatchingListenerHostname`, …).
    RouteNotAccepted(RouteReason),
    /// The route's backend could not be resolved: reason and message.
    RouteRefsUnresolved(RouteReason),
    /// The Gateway has no address yet (or is not there), with what is known.
    GatewayPending(Option<String>),
    /// A stored text this build does not know, kept whole.
    Unknown(String),
}

impl Reason {
    /// The code part (`helm_failed`), the key the pages translate.
    pub(crate) fn code(&self) -> &'static str {
        ReasonCode::from(self).into()
    }

    /// The upstream component's words, when they are text (a route's
    /// reason is typed: [`RouteReason`]).
    pub(crate) fn detail(&self) -> Option<&str> {
        match self {
            Self::HelmFailed(d) | Self::LbPending(d) | Self::GatewayPending(d) => d.as_deref(),
            Self::NamespaceTaken(d) | Self::HostRefused(d) | Self::NotStarting(d) => Some(d),
            Self::ProbeFailed(s) => Some(s.as_str()),
            _ => None,
        }
    }

    pub(crate) fn is_none(&self) -> bool {
        *self == Self::None
    }

    /// Reads a stored text; never fails (see [`Reason::Unknown`]).
    pub(crate) fn parse(raw: &str) -> Self {
        if raw.is_empty() {
            return Self::None;
        }
        let (code, detail) = match raw.split_once(": ") {
            Some((c, d)) => (c, Some(d.to_owned())),
            None => (raw, None),
        };
        match (code.parse::<ReasonCode>(), detail) {
            (Ok(ReasonCode::Installing), None) => Self::Installing,
            (Ok(ReasonCode::Starting), None) => Self::Starting,
            (Ok(ReasonCode::NodeAddress), None) => Self::NodeAddress,
            (Ok(ReasonCode::NoNodeAddress), None) => Self::NoNodeAddress,
            (Ok(ReasonCode::GatewayNotConfigured), None) => Self::GatewayNotConfigured,
            (Ok(ReasonCode::GatewayApiMissing), None) => Self::GatewayApiMissing,
            (Ok(ReasonCode::RouteWaiting), None) => Self::RouteWaiting,
            (Ok(ReasonCode::RouteShadowed), None) => Self::RouteShadowed,
            (Ok(ReasonCode::RouteNotAccepted), Some(d)) => Self::RouteNotAccepted(RouteReason::parse(&d)),
            (Ok(ReasonCode::RouteRefsUnresolved), Some(d)) => Self::RouteRefsUnresolved(RouteReason::parse(&d)),
            (Ok(ReasonCode::GatewayPending), d) => Self::GatewayPending(d),
            (Ok(ReasonCode::HelmFailed), d) => Self::HelmFailed(d),
            (Ok(ReasonCode::LbPending), d) => Self::LbPending(d),
            (Ok(ReasonCode::NamespaceTaken), Some(d)) => Self::NamespaceTaken(d),
            (Ok(ReasonCode::HostRefused), Some(d)) => Self::HostRefused(d),
            (Ok(ReasonCode::NotStarting), Some(d)) => Self::NotStarting(d),
            (Ok(ReasonCode::ProbeFailed), Some(d)) => match d.parse() {
                Ok(status) => Self::ProbeFailed(status),
                Err(_) => Self::Unknown(raw.to_owned()),
            },
            _ => Self::Unknown(raw.to_owned()),
        }
    }
}

/// `code`, or `code: detail`; empty for `None`; an unknown text as it came.
impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self, self.detail()) {
            (Self::None, _) => Ok(()),
            (Self::RouteNotAccepted(r) | Self::RouteRefsUnresolved(r), _) => write!(f, "{}: {r}", self.code()),
            (Self::Unknown(raw), _) => f.write_str(raw),
            (_, Some(d)) if !d.is_empty() => write!(f, "{}: {d}", self.code()),
            _ => f.write_str(self.code()),
        }
    }
}

impl From<Reason> for String {
    fn from(r: Reason) -> Self {
        r.to_string()
    }
}

impl From<String> for Reason {
    fn from(raw: String) -> Self {
        Self::parse(&raw)
    }
}

impl From<&str> for Reason {
    fn from(raw: &str) -> Self {
        Self::parse(raw)
    }
}

/// Why the move stopped one cluster: the move's own reason (stored by its
/// snake_case name, `strum`), or the cluster's status reason at that moment
/// (helm failed, no address came).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
#[derive(strum::EnumString, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub(crate) enum StopReason {
    /// Not stopped (queued, switching, done, rolled back).
    #[default]
    #[strum(disabled)]
    None,
    /// The cluster is gone.
    ClusterDeleted,
    /// Its planned host no longer parses.
    HostInvalid,
    /// Someone changed its public access after the plan.
    ChangedMeanwhile,
    /// Another cluster took its planned host first.
    HostInUse,
    /// It did not settle in time, and said nothing.
    TimedOut,
    /// Its status when it stopped.
    #[strum(disabled)]
    Cluster(Reason),
}

impl StopReason {
    /// The move's own code, if it is one.
    fn own(&self) -> Option<&'static str> {
        match self {
            Self::None | Self::Cluster(_) => None,
            own => Some(own.into()),
        }
    }

    /// A cluster that stopped for `reason` (nothing said: it timed out).
    pub(crate) fn from_cluster(reason: &Reason) -> Self {
        if reason.is_none() { Self::TimedOut } else { Self::Cluster(reason.clone()) }
    }

    pub(crate) fn parse(raw: &str) -> Self {
        match raw.parse::<Self>() {
            Ok(own) => own,
            Err(_) if raw.is_empty() => Self::None,
            Err(_) => Self::Cluster(Reason::parse(raw)),
        }
    }

    /// A stored text this build does not know.
    pub(crate) fn unknown(&self) -> Option<&str> {
        match self {
            Self::Cluster(Reason::Unknown(raw)) => Some(raw),
            _ => None,
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self, self.own()) {
            (_, Some(code)) => f.write_str(code),
            (Self::Cluster(r), None) => r.fmt(f),
            _ => Ok(()),
        }
    }
}

impl From<StopReason> for String {
    fn from(r: StopReason) -> Self {
        r.to_string()
    }
}

impl From<String> for StopReason {
    fn from(raw: String) -> Self {
        Self::parse(&raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_and_write_the_same_text() {
        use super::super::gateway::RouteCode;
        use ConnectionStatus as C;
        let table = [
            ("", Reason::None),
            ("installing", Reason::Installing),
            ("starting", Reason::Starting),
            ("node_address", Reason::NodeAddress),
            ("no_node_address", Reason::NoNodeAddress),
            ("helm_failed", Reason::HelmFailed(None)),
            (
                "helm_failed: Error: UPGRADE FAILED: boom",
                Reason::HelmFailed(Some("Error: UPGRADE FAILED: boom".into())),
            ),
            ("lb_pending", Reason::LbPending(None)),
            ("lb_pending: no available IPs", Reason::LbPending(Some("no available IPs".into()))),
            ("namespace_taken: namespace kubebyon-db", Reason::NamespaceTaken("namespace kubebyon-db".into())),
            (
                "host_refused: apply HelmChart: spec.valuesContent: Invalid value",
                Reason::HostRefused("apply HelmChart: spec.valuesContent: Invalid value".into()),
            ),
            // What an API server's refusal was stored as before it had its own code.
            (
                "helm_failed: apply HelmChart: admission webhook denied the request",
                Reason::HelmFailed(Some("apply HelmChart: admission webhook denied the request".into())),
            ),
            ("not_starting: 0/2 nodes are available", Reason::NotStarting("0/2 nodes are available".into())),
            ("probe_failed: refused", Reason::ProbeFailed(C::Refused)),
            ("probe_failed: certificate_untrusted", Reason::ProbeFailed(C::CertificateUntrusted)),
            ("gateway_not_configured", Reason::GatewayNotConfigured),
            ("gateway_api_missing", Reason::GatewayApiMissing),
            ("route_waiting", Reason::RouteWaiting),
            ("route_shadowed", Reason::RouteShadowed),
            (
                "route_not_accepted: NotAllowedByListeners: no listener admits it",
                Reason::RouteNotAccepted(RouteReason {
                    code: RouteCode::NotAllowedByListeners,
                    message: "no listener admits it".into(),
                }),
            ),
            (
                "route_refs_unresolved: BackendNotFound",
                Reason::RouteRefsUnresolved(RouteReason { code: RouteCode::BackendNotFound, message: String::new() }),
            ),
            ("gateway_pending", Reason::GatewayPending(None)),
            ("gateway_pending: gw/shared not found", Reason::GatewayPending(Some("gw/shared not found".into()))),
            ("route_not_accepted", Reason::Unknown("route_not_accepted".into())),
            // Unknown texts, kept whole: a newer code, a detail where none
            // belongs, a missing detail, a probe outcome this build lacks.
            ("quota_waiting: 3", Reason::Unknown("quota_waiting: 3".into())),
            ("installing: now", Reason::Unknown("installing: now".into())),
            ("not_starting", Reason::Unknown("not_starting".into())),
            ("host_refused", Reason::Unknown("host_refused".into())),
            ("probe_failed: teapot", Reason::Unknown("probe_failed: teapot".into())),
            ("helm said \"no\" — ünïcode", Reason::Unknown("helm said \"no\" — ünïcode".into())),
        ];
        for (raw, want) in table {
            let got = Reason::parse(raw);
            assert_eq!(got, want, "{raw:?}");
            assert_eq!(got.to_string(), raw, "written back as read");
            let json = serde_json::to_string(&got).unwrap();
            assert_eq!(json, serde_json::to_string(raw).unwrap(), "the wire carries the text");
            assert_eq!(serde_json::from_str::<Reason>(&json).unwrap(), want);
        }
    }

    #[test]
    fn every_code_has_a_name_and_only_the_own_codes_stop_a_move_by_themselves() {
        for code in <ReasonCode as strum::VariantArray>::VARIANTS {
            let name: &str = code.into();
            assert!(!name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{name}");
        }
        let table = [
            ("", StopReason::None),
            ("timed_out", StopReason::TimedOut),
            ("changed_meanwhile", StopReason::ChangedMeanwhile),
            ("cluster_deleted", StopReason::ClusterDeleted),
            ("host_in_use", StopReason::HostInUse),
            ("host_invalid", StopReason::HostInvalid),
            ("lb_pending: x", StopReason::Cluster(Reason::LbPending(Some("x".into())))),
            ("helm_failed: y", StopReason::Cluster(Reason::HelmFailed(Some("y".into())))),
            ("what", StopReason::Cluster(Reason::Unknown("what".into()))),
        ];
        for (raw, want) in table {
            let got = StopReason::parse(raw);
            assert_eq!(got, want, "{raw:?}");
            assert_eq!(got.to_string(), raw);
        }
        assert_eq!(StopReason::from_cluster(&Reason::None), StopReason::TimedOut);
        assert_eq!(StopReason::from_cluster(&Reason::Starting), StopReason::Cluster(Reason::Starting));
        assert_eq!(StopReason::parse("what").unknown(), Some("what"));
    }
}
