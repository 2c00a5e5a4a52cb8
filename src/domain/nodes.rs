//! Bring your own nodes: vCluster's private nodes (`privateNodes.enabled`,
//! chart v0.30). The admin offers it (with the Secret holding the vCluster
//! Platform key the Pro image needs); a cluster chooses it when it is created
//! and keeps it (vCluster cannot turn it on or off later).
//!
//! Joined nodes reach the control plane at `controlPlane.endpoint` on 443 and
//! its konnectivity server on 8132: the chart puts both on the cluster's one
//! Service (`templates/service.yaml`, port `konnectivity` when private nodes
//! are on). A LoadBalancer address serves both ports as they are; a NodePort
//! would put 8132 on a random node port that `controlPlane.endpoint` (one
//! `host:port`) cannot name, and public access off leaves nodes nothing to
//! reach. So own nodes need a LoadBalancer endpoint.

use serde::{Deserialize, Serialize};

use crate::domain::{AppError, ErrorCode, Field, PublicAccess, SystemSettings};

/// A Secret in the host cluster, `namespace/name` (both DNS-1123 labels, the
/// name may be a subdomain), e.g. the vCluster Platform key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct SecretRef {
    pub namespace: String,
    pub name: String,
}

impl SecretRef {
    pub fn parse(raw: &str) -> Result<Self, AppError> {
        let bad = || AppError::at(ErrorCode::PlatformApiKeyInvalid, Field::PlatformApiKey);
        let (namespace, name) = raw.trim().split_once('/').ok_or_else(bad)?;
        use crate::domain::host::{dns_label, dns_subdomain};
        if !dns_label(namespace) || !dns_subdomain(name) {
            return Err(bad());
        }
        Ok(Self { namespace: namespace.to_owned(), name: name.to_owned() })
    }
}

impl From<SecretRef> for String {
    fn from(r: SecretRef) -> Self {
        r.to_string()
    }
}

impl TryFrom<String> for SecretRef {
    type Error = String;

    fn try_from(raw: String) -> Result<Self, String> {
        Self::parse(&raw).map_err(|_| format!("not a namespace/name: {raw:?}"))
    }
}

impl std::fmt::Display for SecretRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Whether a new cluster may have own nodes with this public access.
pub(crate) fn check_create(own_nodes: bool, access: &PublicAccess, settings: &SystemSettings) -> Result<(), AppError> {
    if !own_nodes {
        return Ok(());
    }
    if !settings.private_nodes {
        return Err(AppError::at(ErrorCode::OwnNodesNotOffered, Field::OwnNodes));
    }
    check_access(true, access)
}

/// Whether a cluster with (or without) own nodes may have this public access.
pub(crate) fn check_access(own_nodes: bool, access: &PublicAccess) -> Result<(), AppError> {
    match access {
        PublicAccess::LoadBalancer { .. } => Ok(()),
        _ if own_nodes => Err(AppError::at(ErrorCode::OwnNodesNeedLoadBalancer, Field::PublicAccessMode)),
        _ => Ok(()),
    }
}

/// A join token as the join page lists it (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TokenView {
    pub id: String,
    /// Unix seconds (the Secret's creation).
    pub created_at: Option<i64>,
    /// Unix seconds; `None`: never expires.
    pub expires_at: Option<i64>,
    /// The nodes that joined with it, while the virtual cluster keeps their
    /// bootstrap CSRs (`spec.username` `system:bootstrap:<id>`).
    #[serde(default)]
    pub nodes: Vec<String>,
}

/// A token just made: the only time its secret part is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CreatedToken {
    /// `<id>.<secret>`.
    pub token: String,
    #[serde(flatten)]
    pub view: TokenView,
}

/// A node of the virtual cluster, as the join page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NodeView {
    pub name: String,
    pub ready: bool,
    pub kubelet_version: Option<String>,
    pub internal_ip: Option<String>,
    /// Unix seconds: when it registered.
    pub since: Option<i64>,
}

/// What stands between a machine and joining, in the order the page shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub(crate) enum JoinWarning {
    /// The cluster was made without own nodes: nothing can join it.
    OwnNodesOff,
    /// No public endpoint: nodes would have nothing to reach (no command offered).
    PublicAccessOff,
    /// Not Ready: a join now would fail.
    NotReady,
    /// The console's own probe of the public endpoint failed.
    EndpointUnreachable,
    /// The console cannot read the virtual cluster now.
    ControlPlaneUnavailable,
}

impl JoinWarning {
    /// Whether a join command is offered despite it.
    pub(crate) fn allows_command(self) -> bool {
        !matches!(self, Self::OwnNodesOff | Self::PublicAccessOff)
    }
}

/// The warnings for `cluster`, given whether its control plane answered.
pub(crate) fn join_warnings(cluster: &crate::domain::cluster::Cluster, control_plane_read: bool) -> Vec<JoinWarning> {
    use crate::domain::{ConnectionStatus, Phase};
    if !cluster.spec.own_nodes {
        return vec![JoinWarning::OwnNodesOff];
    }
    let mut out = Vec::new();
    // An endpoint not allocated yet is "not Ready": the command works once it is.
    if !cluster.spec.public_access.is_enabled() {
        out.push(JoinWarning::PublicAccessOff);
    }
    if cluster.status.phase != Phase::Ready {
        out.push(JoinWarning::NotReady);
    }
    if !matches!(cluster.status.connection_status, ConnectionStatus::Ok | ConnectionStatus::Unknown)
        && cluster.status.api_endpoint.is_some()
    {
        out.push(JoinWarning::EndpointUnreachable);
    }
    if !control_plane_read {
        out.push(JoinWarning::ControlPlaneUnavailable);
    }
    out
}

/// What undoes a join on the machine itself once its node is removed: the
/// join script's own clean-up (`--reset-only`, vCluster's documented way; it
/// also removes what the script installed, which `kubeadm reset` leaves),
/// fetched with a new token (`<token>`: the page shows no live one).
pub(crate) fn reset_command(console_url: &str, cluster_id: i64) -> String {
    join_command(console_url, cluster_id, "<token>").replace("| sh -", "| sh -s -- --reset-only")
}

/// `name` when it can be a Node's name (a DNS subdomain: lowercase letters,
/// digits, `-` and `.`, at most 253, alphanumeric at both ends).
pub(crate) fn node_name(name: &str) -> Option<&str> {
    let ok = (1..=253).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric());
    ok.then_some(name)
}

/// The one line a machine runs: fetch the script through the console, run it.
pub(crate) fn join_command(console_url: &str, cluster_id: i64, token: &str) -> String {
    format!(
        "curl -fsSL \"{}/api/join/clusters/{cluster_id}/script?token={token}\" | sh -",
        console_url.trim_end_matches('/')
    )
}

/// What is left of a token's life at `now`: whole (hours, minutes, seconds),
/// or `None` once expired.
pub(crate) fn remaining(expires_at: i64, now: i64) -> Option<(i64, i64, i64)> {
    let left = expires_at - now;
    (left > 0).then_some((left / 3_600, left % 3_600 / 60, left % 60))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Host;

    #[test]
    fn join_commands_and_countdowns() {
        assert_eq!(
            join_command("https://console.example.com/", 7, "abcdef.0123456789abcdef"),
            "curl -fsSL \"https://console.example.com/api/join/clusters/7/script?token=abcdef.0123456789abcdef\" | sh -"
        );
        assert_eq!(
            reset_command("https://console.example.com", 7),
            "curl -fsSL \"https://console.example.com/api/join/clusters/7/script?token=<token>\" | sh -s -- --reset-only"
        );
        for (expires, now, want) in [
            (100, 100, None),
            (100, 101, None),
            (101, 100, Some((0, 0, 1))),
            (3_600 + 61, 0, Some((1, 1, 1))),
            (7 * 86_400, 0, Some((168, 0, 0))),
        ] {
            assert_eq!(remaining(expires, now), want, "{expires} {now}");
        }
    }

    #[test]
    fn node_names() {
        for (raw, ok) in [
            ("byo-1", true),
            ("node.example.com", true),
            ("a", true),
            ("", false),
            ("-a", false),
            ("a-", false),
            ("A", false),
            ("a/b", false),
            ("../x", false),
        ] {
            assert_eq!(node_name(raw).is_some(), ok, "{raw:?}");
        }
        assert!(node_name(&"a".repeat(254)).is_none());
    }

    #[test]
    fn join_warnings_follow_the_cluster() {
        use crate::domain::cluster::{ClusterStatus, test_cluster};
        use crate::domain::{ConnectionStatus, Phase};
        let lb = PublicAccess::LoadBalancer { host: Host::parse("join.example.com").unwrap() };
        let ready = ClusterStatus {
            phase: Phase::Ready,
            api_endpoint: Some("https://join.example.com:443".into()),
            connection_status: ConnectionStatus::Ok,
            ..ClusterStatus::default()
        };
        let own = |access: PublicAccess, status: ClusterStatus| {
            let mut c = test_cluster(1, "join", "alice", access, status);
            c.spec.own_nodes = true;
            c
        };
        use JoinWarning::*;
        for (cluster, read, want) in [
            (own(lb.clone(), ready.clone()), true, vec![]),
            (own(lb.clone(), ready.clone()), false, vec![ControlPlaneUnavailable]),
            (test_cluster(1, "join", "alice", lb.clone(), ready.clone()), true, vec![OwnNodesOff]),
            (
                own(PublicAccess::Disabled, ClusterStatus { api_endpoint: None, ..ready.clone() }),
                true,
                vec![PublicAccessOff],
            ),
            (
                own(
                    lb.clone(),
                    ClusterStatus {
                        phase: Phase::Provisioning,
                        connection_status: ConnectionStatus::Unknown,
                        ..ready.clone()
                    },
                ),
                true,
                vec![NotReady],
            ),
            (
                own(lb.clone(), ClusterStatus { connection_status: ConnectionStatus::Timeout, ..ready.clone() }),
                true,
                vec![EndpointUnreachable],
            ),
            // Not allocated yet: not Ready (the command works once it is), not "off".
            (
                own(
                    lb.clone(),
                    ClusterStatus { phase: Phase::Pending, api_endpoint: None, ..ClusterStatus::default() },
                ),
                false,
                vec![NotReady, ControlPlaneUnavailable],
            ),
        ] {
            assert_eq!(join_warnings(&cluster, read), want, "{:?}", cluster.status);
        }
        assert!(!OwnNodesOff.allows_command() && !PublicAccessOff.allows_command() && NotReady.allows_command());
    }

    #[test]
    fn secret_refs() {
        for (raw, ok) in [
            ("kubebyon-system/vcluster-platform-api-key", Some(("kubebyon-system", "vcluster-platform-api-key"))),
            (" licences/key.v1 ", Some(("licences", "key.v1"))),
            ("key", None),
            ("/key", None),
            ("ns/", None),
            ("Ns/key", None),
            ("ns/key/more", None),
            ("-ns/key", None),
            ("ns/key-", None),
            ("a.b/key", None),
        ] {
            let got = SecretRef::parse(raw).ok().map(|r| (r.namespace, r.name));
            assert_eq!(got, ok.map(|(n, k)| (n.to_owned(), k.to_owned())), "{raw:?}");
        }
        let r = SecretRef::parse("ns/key").unwrap();
        assert_eq!(r.to_string(), "ns/key");
        assert_eq!(
            SecretRef::parse("nope").unwrap_err(),
            AppError::at(ErrorCode::PlatformApiKeyInvalid, Field::PlatformApiKey)
        );
    }

    #[test]
    fn own_nodes_need_the_offer_and_a_load_balancer() {
        let offered = SystemSettings { private_nodes: true, ..SystemSettings::default() };
        let host = Host::parse("api.example.com").unwrap();
        let lb = PublicAccess::LoadBalancer { host: host.clone() };
        let np = PublicAccess::NodePort { host: None };
        let need_lb = Err(AppError::at(ErrorCode::OwnNodesNeedLoadBalancer, Field::PublicAccessMode));
        let not_offered = Err(AppError::at(ErrorCode::OwnNodesNotOffered, Field::OwnNodes));
        for (own, access, settings, want) in [
            (false, &np, &SystemSettings::default(), Ok(())),
            (false, &PublicAccess::Disabled, &offered, Ok(())),
            (true, &lb, &offered, Ok(())),
            (true, &lb, &SystemSettings::default(), not_offered),
            (true, &np, &offered, need_lb),
            (true, &PublicAccess::Disabled, &offered, need_lb),
        ] {
            assert_eq!(check_create(own, access, settings), want, "{own} {access:?} {}", settings.private_nodes);
        }
        // An edit: the offer may be withdrawn since; the endpoint must stay.
        assert_eq!(check_access(true, &lb), Ok(()));
        assert!(check_access(true, &np).is_err());
        assert_eq!(check_access(false, &np), Ok(()));
    }
}
