//! A cluster as two halves with one writer each: the spec (what the user asked,
//! written by the console's request handlers) and the status (what the host
//! cluster reports, written only by the reconciler).

use serde::{Deserialize, Serialize};

use super::{ClusterName, PublicAccess, Reason, Resources};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterSpec {
    pub name: ClusterName,
    pub resources: Resources,
    pub public_access: PublicAccess,
    /// vCluster private nodes: the user's own machines join the cluster
    /// (`domain::nodes`). Chosen at creation, fixed after.
    #[serde(default)]
    pub own_nodes: bool,
    /// Spread and storage class, the admin's when the cluster was created;
    /// fixed after (`domain::placement`).
    #[serde(default)]
    pub placement: crate::domain::placement::Placement,
    /// vCluster's usage telemetry, chosen at creation, fixed after.
    #[serde(default)]
    pub telemetry: Telemetry,
}

/// vCluster's usage telemetry (chart v0.30 `values.yaml` `telemetry.enabled`,
/// on by default: each control plane reports usage to the vendor). Clusters
/// the console creates turn it off — a self-hosted platform does not report
/// its tenants, and an air-gapped host has no route for it; clusters created
/// before keep the chart's default, so their values and running control planes
/// stay as they are (a values change restarts a control plane).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::Display, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum Telemetry {
    /// Not in the values: the chart's default (on).
    #[default]
    ChartDefault,
    /// `telemetry.enabled: false`.
    Off,
}

impl Telemetry {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub(crate) fn parse(raw: &str) -> Self {
        raw.parse().unwrap_or_default()
    }
}

/// Where a cluster is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
#[derive(strum::IntoStaticStr, strum::Display, strum::EnumString, strum::VariantArray)]
#[strum(serialize_all = "lowercase")]
pub enum Phase {
    /// Stored; the host cluster has not acted on it yet.
    #[default]
    Pending,
    Provisioning,
    Ready,
    Updating,
    Deleting,
    Failed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub(crate) fn parse(raw: &str) -> Self {
        raw.parse().unwrap_or_default()
    }
}

/// The outcome of the last connection probe (filled by the host-cluster side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::Display, strum::EnumString, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum ConnectionStatus {
    #[default]
    Unknown,
    Ok,
    DnsFailure,
    Refused,
    Timeout,
    CertificateHostMismatch,
    CertificateUntrusted,
    Unauthorized,
    HttpError,
    /// The endpoint resolves only to addresses the console does not probe
    /// (link-local, the host cluster's Pod and Service ranges; loopback
    /// unless configured): never connected to.
    AddressNotAllowed,
}

impl ConnectionStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub(crate) fn parse(raw: &str) -> Self {
        raw.parse().ok().unwrap_or_default()
    }
}

/// Observed state, recomputed as a whole from what the host reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ClusterStatus {
    pub phase: Phase,
    /// Why it is in that phase (stored and sent as the text `message`).
    #[serde(rename = "message")]
    pub reason: Reason,
    /// The allocated https nodePort; only ever set in NodePort mode.
    pub public_access_port: Option<u16>,
    pub api_endpoint: Option<String>,
    pub kubeconfig_available: bool,
    pub connection_status: ConnectionStatus,
    pub observed_generation: i64,
}

/// A cluster as unit tests build one: generation 1, no deletion asked for.
#[cfg(test)]
pub(crate) fn test_cluster(id: i64, name: &str, owner: &str, access: PublicAccess, status: ClusterStatus) -> Cluster {
    Cluster {
        id,
        owner_id: 1,
        owner: owner.into(),
        spec: ClusterSpec {
            name: ClusterName::parse(name).unwrap(),
            resources: Resources::default(),
            public_access: access,
            own_nodes: false,
            placement: Default::default(),
            telemetry: Default::default(),
        },
        status,
        generation: 1,
        revision: 0,
        deletion_requested: false,
        created_at: 0,
        updated_at: 0,
        unusable_host: None,
        old_endpoint: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Host;
    use strum::VariantArray;

    fn cluster(access: PublicAccess, status: ClusterStatus, generation: i64) -> Cluster {
        Cluster { generation, ..test_cluster(1, "c", "o", access, status) }
    }

    #[test]
    fn progress_steps() {
        let st = |phase, message: &str, observed| ClusterStatus {
            phase,
            reason: message.into(),
            observed_generation: observed,
            ..ClusterStatus::default()
        };
        let table = [
            (st(Phase::Pending, "", 0), (Step::Stored, false), true),
            (st(Phase::Ready, "", 1), (Step::Stored, false), true), // an edit waits (generation 2)
            (st(Phase::Provisioning, "installing", 2), (Step::Installing, false), true),
            (st(Phase::Failed, "helm_failed: Error: x", 2), (Step::Installing, true), false),
            (st(Phase::Provisioning, "lb_pending: no pool", 2), (Step::Starting, false), true),
            (st(Phase::Provisioning, "starting", 2), (Step::Starting, false), true),
            (st(Phase::Provisioning, "not_starting: 0/2 nodes are available", 2), (Step::Starting, false), true),
            (st(Phase::Failed, "probe_failed: refused", 2), (Step::Starting, true), false),
            (st(Phase::Ready, "", 2), (Step::Ready, false), false),
            (st(Phase::Ready, "node_address", 2), (Step::Ready, false), false),
        ];
        for (i, (status, want, busy)) in table.into_iter().enumerate() {
            let c = cluster(PublicAccess::Disabled, status, 2);
            assert_eq!((c.progress(), c.in_progress()), (want, busy), "row {i}");
        }
    }

    /// Defect 1: what an old spec's observation left is never shown as current.
    #[test]
    fn old_observations_are_withheld_until_the_host_catches_up() {
        let np = |host: Option<&str>| PublicAccess::NodePort { host: host.map(|h| Host::parse(h).unwrap()) };
        let lb = |host: &str| PublicAccess::LoadBalancer { host: Host::parse(host).unwrap() };
        let seen = |endpoint: &str, port: Option<u16>| ClusterStatus {
            phase: Phase::Ready,
            public_access_port: port,
            api_endpoint: Some(endpoint.into()),
            kubeconfig_available: true,
            connection_status: ConnectionStatus::Ok,
            observed_generation: 1,
            ..ClusterStatus::default()
        };
        // (spec now, what was observed for generation 1, generation now, endpoint shown, port shown)
        type Row<'a> = (PublicAccess, ClusterStatus, i64, Option<&'a str>, Option<u16>);
        let table: Vec<Row> = vec![
            // settled: everything shown
            (
                np(None),
                seen("https://203.0.113.9:31000", Some(31000)),
                1,
                Some("https://203.0.113.9:31000"),
                Some(31000),
            ),
            (lb("203.0.113.50"), seen("https://203.0.113.50:443", None), 1, Some("https://203.0.113.50:443"), None),
            (
                np(Some("2001:db8::1")),
                seen("https://[2001:db8::1]:31000", Some(31000)),
                1,
                Some("https://[2001:db8::1]:31000"),
                Some(31000),
            ),
            // NodePort → LoadBalancer waiting: old port and endpoint gone
            (lb("203.0.113.50"), seen("https://203.0.113.9:31000", Some(31000)), 2, None, None),
            // LoadBalancer → NodePort waiting: old :443 endpoint gone, no port yet
            (np(None), seen("https://203.0.113.50:443", None), 2, None, None),
            // LoadBalancer host change waiting
            (lb("203.0.113.51"), seen("https://203.0.113.50:443", None), 2, None, None),
            // NodePort own host change waiting: the old host's endpoint and its port withheld
            (np(Some("a.example.com")), seen("https://203.0.113.9:31000", Some(31000)), 2, None, None),
            // disabled waiting: nothing public
            (PublicAccess::Disabled, seen("https://203.0.113.9:31000", Some(31000)), 2, None, None),
            // a resources-only change waiting: the endpoint still fits and stays
            (
                np(None),
                seen("https://203.0.113.9:31000", Some(31000)),
                2,
                Some("https://203.0.113.9:31000"),
                Some(31000),
            ),
        ];
        for (i, (access, status, generation, endpoint, port)) in table.into_iter().enumerate() {
            let c = cluster(access, status, generation).shown();
            assert_eq!(c.status.api_endpoint.as_deref(), endpoint, "row {i}");
            assert_eq!(c.status.public_access_port, port, "row {i}");
            assert_eq!(c.status.kubeconfig_available, endpoint.is_some(), "row {i}");
            assert_eq!(c.status.connection_status == ConnectionStatus::Ok, endpoint.is_some(), "row {i}");
        }
    }

    #[test]
    fn enums_round_trip_and_unknown_reads_as_default() {
        for &p in Phase::VARIANTS {
            assert_eq!(Phase::parse(p.as_str()), p);
        }
        for &s in ConnectionStatus::VARIANTS {
            assert_eq!(ConnectionStatus::parse(s.as_str()), s);
        }
        assert_eq!(Phase::parse("??"), Phase::Pending);
        assert_eq!(ConnectionStatus::parse("??"), ConnectionStatus::Unknown);
    }
}

/// Where a cluster's latest request is, as the detail page's progress shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "lowercase")]
pub(crate) enum Step {
    /// Stored; the host has not reported on this request yet.
    Stored,
    /// helm-controller's install Job runs (or fails: then with `Failed`).
    Installing,
    /// Installed; the endpoint (address, certificate, vCluster) is coming up.
    Starting,
    Ready,
}

impl Step {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The cluster page's query key naming why a download from it (the
/// kubeconfig, break-glass) was refused: an `ErrorCode`'s text.
pub(crate) const DOWNLOAD_ERROR: &str = "download_error";

/// The outcome of a connection test run on request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ProbeOutcome {
    pub status: ConnectionStatus,
    /// Beyond the status: the server version, or the names a certificate covers.
    pub detail: Option<String>,
}

/// A stored cluster: who owns it, what they asked, what the host reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cluster {
    pub id: i64,
    pub owner_id: i64,
    pub owner: String,
    pub spec: ClusterSpec,
    pub status: ClusterStatus,
    /// Bumped by every spec change; the reconciler reports `observed_generation`.
    pub generation: i64,
    /// The row's place in the database's order of changes (`change_counter`,
    /// migration 12): any write to the cluster or its operations raises it.
    /// What pages compare to know whether to fetch again.
    #[serde(default)]
    pub revision: i64,
    pub deletion_requested: bool,
    pub created_at: i64,
    pub updated_at: i64,
    /// A stored `control_plane_host` that is not a valid host (data from before
    /// validation): the cluster needs an edit. Until then the spec shows what
    /// could be read (a LoadBalancer without a usable host reads as off) and the
    /// reconciler leaves the host cluster alone.
    #[serde(default)]
    pub unusable_host: Option<String>,
    /// After a move to LoadBalancer: the endpoint old kubeconfigs name, kept
    /// answering for a grace period.
    #[serde(default)]
    pub old_endpoint: Option<OldEndpoint>,
}

/// A moved cluster's old NodePort endpoint (`domain::moves`). While
/// open, its host stays in the certificate and the Service keeps the node
/// port it had; once closed, the host leaves `extraSANs` and (with MetalLB or
/// kube-vip) the Service allocates no node ports, so the old endpoint refuses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OldEndpoint {
    /// The host old kubeconfigs name (the cluster's, else the admin's NodePort host).
    pub host: String,
    /// When the grace period ends (Unix seconds).
    pub until: i64,
    pub closed: bool,
    /// The owner has read the detail page's notice about it.
    #[serde(default)]
    pub dismissed: bool,
    /// How the old endpoint is served: NodePort (every move from NodePort),
    /// or LoadBalancer (a LoadBalancer cluster moved to gateway access).
    #[serde(default)]
    pub mode: crate::domain::PublicAccessMode,
}

impl Cluster {
    /// The host cluster has not yet caught up with the latest request.
    pub fn waiting_for_host(&self) -> bool {
        self.deletion_requested || self.status.observed_generation < self.generation
    }

    /// The step the latest request is at; `failed` when it stopped there.
    pub(crate) fn progress(&self) -> (Step, bool) {
        let reason = &self.status.reason;
        let failed = self.status.phase == Phase::Failed;
        let step = if self.status.observed_generation < self.generation {
            Step::Stored
        } else if self.status.phase == Phase::Ready {
            Step::Ready
        } else if matches!(
            reason,
            Reason::Installing | Reason::HelmFailed(_) | Reason::HostRefused(_) | Reason::NamespaceTaken(_)
        ) || (failed && reason.is_none())
        {
            Step::Installing
        } else if reason.is_none() && self.status.phase == Phase::Pending {
            Step::Stored
        } else {
            Step::Starting
        };
        (step, failed && step != Step::Stored)
    }

    /// The host refused the latest deletion request for good (the reconciler
    /// wrote `failed` for that generation): nothing is under way until the
    /// deletion is asked for again.
    pub fn deletion_failed(&self) -> bool {
        self.deletion_requested
            && self.status.phase == Phase::Failed
            && self.status.observed_generation == self.generation
    }

    /// A deletion is asked for and not refused: the cluster shows as
    /// deleting. The SQL of the list's phase filter says the same
    /// (`db::clusters::REFUSED`).
    pub(crate) fn deleting(&self) -> bool {
        self.deletion_requested && !self.deletion_failed()
    }

    /// Work is under way: the page keeps watching (stops when settled).
    pub fn in_progress(&self) -> bool {
        if self.deletion_requested {
            return self.deleting();
        }
        !matches!(self.progress(), (Step::Ready, _) | (_, true))
    }

    /// The status as users see it (pages, JSON API, downloads): while a spec
    /// change waits for the host (`observed_generation < generation`), what
    /// belonged to the old spec is withheld — the port outside NodePort, an
    /// endpoint the new mode or host would not give, and with it the
    /// kubeconfig and the connection outcome. Settled clusters show it all.
    pub fn shown(mut self) -> Self {
        let access = &self.spec.public_access;
        let st = &mut self.status;
        if access.mode() != Some(super::PublicAccessMode::NodePort) {
            st.public_access_port = None;
        }
        let fits = st.api_endpoint.as_deref().is_some_and(|e| super::endpoint::fits(access, e, st.public_access_port));
        if !fits {
            st.api_endpoint = None;
            st.kubeconfig_available = false;
            st.connection_status = ConnectionStatus::Unknown;
            if access.mode() != Some(super::PublicAccessMode::NodePort) || st.observed_generation < self.generation {
                st.public_access_port = None;
            }
        }
        if self.deletion_requested {
            st.kubeconfig_available = false;
        }
        self
    }

    /// The kubeconfig can be downloaded only when the host says it exists and
    /// public access is on (it points at the public endpoint).
    pub(crate) fn kubeconfig_downloadable(&self) -> bool {
        self.status.kubeconfig_available && self.spec.public_access.is_enabled() && !self.deletion_requested
    }
}
