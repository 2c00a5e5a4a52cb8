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

pub use super::names::SecretRef;

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
    /// The virtual cluster's tokens or nodes are more than the console reads
    /// (`server::tenant::read`'s caps): the tenant's own objects.
    AnswerTooLarge,
}

/// Why the join page shows no tokens and nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unread {
    Unavailable,
    TooLarge,
}

impl JoinWarning {
    /// Whether a join command is offered despite it.
    pub(crate) fn allows_command(self) -> bool {
        !matches!(self, Self::OwnNodesOff | Self::PublicAccessOff)
    }
}

/// The warnings for `cluster`, given why its control plane was not read, if it was not.
pub(crate) fn join_warnings(cluster: &crate::domain::cluster::Cluster, unread: Option<Unread>) -> Vec<JoinWarning> {
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
    match unread {
        None => {}
        Some(Unread::Unavailable) => out.push(JoinWarning::ControlPlaneUnavailable),
        Some(Unread::TooLarge) => out.push(JoinWarning::AnswerTooLarge),
    }
    out
}

/// How long after a token is made, or a node registers, the join page keeps
/// itself current: the time a machine takes to run the command and join.
pub(crate) const JOINING_WINDOW_SECS: i64 = 15 * 60;

/// Whether the join page keeps itself current (polls every 2 s): while the
/// cluster itself changes, a node removal runs, a token made within
/// [`JOINING_WINDOW_SECS`] is still valid (a machine is likely joining with
/// it), or a node registered within it is not Ready yet. Otherwise nothing
/// is in progress and the page is still (each refresh reads the virtual
/// cluster on the server): a reload shows what changed.
pub(crate) fn join_in_progress(
    cluster_in_progress: bool,
    tokens: &[TokenView],
    nodes: &[NodeView],
    removals: &[RemovalView],
    now: i64,
) -> bool {
    let recent = |at: Option<i64>| at.is_some_and(|at| now - at < JOINING_WINDOW_SECS);
    cluster_in_progress
        || removals.iter().any(|r| r.state == RemovalState::Draining)
        || tokens.iter().any(|t| recent(t.created_at) && t.expires_at.is_none_or(|at| at > now))
        || nodes.iter().any(|n| !n.ready && recent(n.since))
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

/// Where a node removal is (the column `node_removals.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum RemovalState {
    /// Cordoned; its pods are being evicted and waited for.
    Draining,
    /// The Node is deleted.
    Done,
    /// Given up; the node stays, cordoned.
    Failed,
}

/// Why a removal waits (while draining) or failed (the column `node_removals.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum RemovalReason {
    /// A PodDisruptionBudget refuses an eviction (429); tried again every pass,
    /// as `kubectl drain` does.
    DisruptionBudget,
    /// The virtual cluster's API server cannot be read right now.
    ControlPlaneUnavailable,
    /// The node stopped reporting (`Kubelet stopped posting node status.`):
    /// its pods would never be confirmed gone. Remove it without draining.
    NodeUnreachable,
    /// Pods were still on the node after [`DRAIN_TIMEOUT_SECS`].
    DrainTimeout,
}

/// How long a drain waits for the node's pods, and the grace period each
/// eviction gives (vCluster v0.30.0 `cmd/vclusterctl/cmd/node/delete.go`:
/// `drain.Helper{Timeout: 30 * time.Minute, GracePeriodSeconds: 30}`).
pub(crate) const DRAIN_TIMEOUT_SECS: i64 = 30 * 60;
pub(crate) const EVICTION_GRACE_SECS: i64 = 30;

/// A node removal as pages and the API show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemovalView {
    pub id: i64,
    pub node: String,
    /// `false`: deleted without draining (a machine that is gone).
    pub drain: bool,
    pub state: RemovalState,
    /// Pods still on the node at the last look (`None`: not looked yet).
    pub pods_left: Option<i64>,
    pub reason: Option<RemovalReason>,
    /// The pod a disruption budget keeps (`namespace/name`).
    pub pod: Option<String>,
    pub requested_by: Option<String>,
    pub created_at: i64,
    pub finished_at: Option<i64>,
}

/// A pod on the node being removed, as a drain sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DrainPod {
    /// `namespace/name`.
    pub key: String,
    /// Being deleted already (evicted, waiting for its kubelet).
    pub terminating: bool,
    /// A DaemonSet's or a static pod: a drain leaves it (`IgnoreAllDaemonSets`).
    pub stays: bool,
}

/// What the node being removed looks like now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DrainNode {
    pub unschedulable: bool,
    /// Its Ready condition is `Unknown` because its kubelet stopped posting
    /// (node lifecycle controller's message).
    pub unreachable: bool,
    pub pods: Vec<DrainPod>,
}

/// One pass of a removal: what to do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DrainStep {
    /// The Node is gone: done.
    Gone,
    /// Give up with this reason (the node stays cordoned).
    Fail(RemovalReason),
    /// Cordon first when `cordon`, evict these, and wait: `left` pods remain.
    Drain { cordon: bool, evict: Vec<String>, left: i64 },
    /// Nothing left to wait for: delete the Node.
    Delete { cordon: bool },
}

/// The rule of `vcluster node delete` (v0.30.0 `cmd/vclusterctl/cmd/node/delete.go`,
/// with `k8s.io/kubectl/pkg/drain`): a missing node is done; cordon; with
/// `drain`, a node whose kubelet stopped posting fails (its pods would never
/// be confirmed gone: remove it without draining), otherwise evict every pod
/// but DaemonSets' and static ones and wait until none is left, for at most
/// [`DRAIN_TIMEOUT_SECS`] (`waited`); then delete the Node.
pub(crate) fn drain_step(node: Option<&DrainNode>, drain: bool, waited: i64) -> DrainStep {
    let Some(node) = node else { return DrainStep::Gone };
    let cordon = !node.unschedulable;
    if !drain {
        return DrainStep::Delete { cordon };
    }
    if node.unreachable {
        return DrainStep::Fail(RemovalReason::NodeUnreachable);
    }
    let going: Vec<&DrainPod> = node.pods.iter().filter(|p| !p.stays).collect();
    if going.is_empty() {
        return DrainStep::Delete { cordon };
    }
    if waited > DRAIN_TIMEOUT_SECS {
        return DrainStep::Fail(RemovalReason::DrainTimeout);
    }
    let evict = going.iter().filter(|p| !p.terminating).map(|p| p.key.clone()).collect();
    DrainStep::Drain { cordon, evict, left: going.len() as i64 }
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
    fn the_join_page_is_live_only_while_something_happens() {
        let now = 1_000_000;
        let token = |created: i64, expires: Option<i64>| TokenView {
            id: "abcdef".into(),
            created_at: Some(created),
            expires_at: expires,
            nodes: Vec::new(),
        };
        let node = |ready: bool, since: i64| NodeView {
            name: "byo-1".into(),
            ready,
            kubelet_version: None,
            internal_ip: None,
            since: Some(since),
        };
        let removal = |state: RemovalState| RemovalView {
            id: 1,
            node: "byo-1".into(),
            drain: true,
            state,
            pods_left: None,
            reason: None,
            pod: None,
            requested_by: None,
            created_at: now - 5_000,
            finished_at: None,
        };
        let window = JOINING_WINDOW_SECS;
        for (why, cluster, tokens, nodes, removals, want) in [
            ("nothing at all", false, vec![], vec![], vec![], false),
            ("the cluster changes", true, vec![], vec![], vec![], true),
            ("a token just made", false, vec![token(now - 10, Some(now + 3_600))], vec![], vec![], true),
            ("a token made long ago", false, vec![token(now - window, Some(now + 3_600))], vec![], vec![], false),
            ("a fresh token already expired", false, vec![token(now - 10, Some(now))], vec![], vec![], false),
            ("a fresh token that never expires", false, vec![token(now - 10, None)], vec![], vec![], true),
            ("a node joining", false, vec![], vec![node(false, now - 60)], vec![], true),
            ("a node Ready", false, vec![], vec![node(true, now - 60)], vec![], false),
            ("a node long not Ready (gone)", false, vec![], vec![node(false, now - window)], vec![], false),
            ("a removal draining", false, vec![], vec![], vec![removal(RemovalState::Draining)], true),
            ("a removal done", false, vec![], vec![], vec![removal(RemovalState::Done)], false),
            ("a removal failed", false, vec![], vec![], vec![removal(RemovalState::Failed)], false),
        ] {
            assert_eq!(join_in_progress(cluster, &tokens, &nodes, &removals, now), want, "{why}");
        }
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
            (own(lb.clone(), ready.clone()), None, vec![]),
            (own(lb.clone(), ready.clone()), Some(Unread::TooLarge), vec![AnswerTooLarge]),
            (own(lb.clone(), ready.clone()), Some(Unread::Unavailable), vec![ControlPlaneUnavailable]),
            (test_cluster(1, "join", "alice", lb.clone(), ready.clone()), Some(Unread::TooLarge), vec![OwnNodesOff]),
            (
                own(PublicAccess::Disabled, ClusterStatus { api_endpoint: None, ..ready.clone() }),
                None,
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
                None,
                vec![NotReady],
            ),
            (
                own(lb.clone(), ClusterStatus { connection_status: ConnectionStatus::Timeout, ..ready.clone() }),
                None,
                vec![EndpointUnreachable],
            ),
            // Not allocated yet: not Ready (the command works once it is), not "off".
            (
                own(
                    lb.clone(),
                    ClusterStatus { phase: Phase::Pending, api_endpoint: None, ..ClusterStatus::default() },
                ),
                Some(Unread::Unavailable),
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

    #[test]
    fn drain_steps_follow_vcluster_node_delete() {
        let pod = |key: &str, terminating: bool, stays: bool| DrainPod { key: key.into(), terminating, stays };
        let node = |unschedulable: bool, unreachable: bool, pods: Vec<DrainPod>| DrainNode {
            unschedulable,
            unreachable,
            pods,
        };
        let web = pod("default/web", false, false);
        let going = pod("default/old", true, false);
        let cni = pod("kube-flannel/flannel", false, true);
        use DrainStep::*;
        for (n, drain, waited, want) in [
            (None, true, 0, Gone),
            (None, false, 0, Gone),
            (Some(node(false, false, vec![])), true, 0, Delete { cordon: true }),
            (Some(node(true, false, vec![cni.clone()])), true, 0, Delete { cordon: false }),
            (
                Some(node(false, false, vec![web.clone(), going.clone(), cni.clone()])),
                true,
                0,
                Drain { cordon: true, evict: vec!["default/web".into()], left: 2 },
            ),
            (Some(node(true, false, vec![going.clone()])), true, 60, Drain { cordon: false, evict: vec![], left: 1 }),
            (
                Some(node(true, false, vec![going.clone()])),
                true,
                DRAIN_TIMEOUT_SECS + 1,
                Fail(RemovalReason::DrainTimeout),
            ),
            // Gone quiet: draining would wait forever; without draining it goes.
            (Some(node(true, true, vec![web.clone()])), true, 0, Fail(RemovalReason::NodeUnreachable)),
            (Some(node(false, true, vec![web.clone()])), false, 0, Delete { cordon: true }),
        ] {
            assert_eq!(drain_step(n.as_ref(), drain, waited), want, "{n:?} {drain} {waited}");
        }
    }
}
