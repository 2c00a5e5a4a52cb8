//! What a request changes, as stored in the cluster's operation log and shown
//! in its event history.

use serde::{Deserialize, Serialize};

use super::{ClusterSpec, PublicAccess, Resources};

/// One durable request for the reconciler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Operation {
    Create { spec: ClusterSpec },
    Update { changes: Vec<Change> },
    Delete,
}

impl Operation {
    /// The stored `kind` (serde's tag, the same names).
    pub(crate) fn kind(&self) -> &'static str {
        self.into()
    }
}

/// Requests per page of a cluster's history (pages and `/events`).
pub(crate) const HISTORY_PAGE: i64 = 50;

/// One entry of a cluster's event history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ClusterEvent {
    pub id: i64,
    pub operation: Operation,
    pub generation: i64,
    pub state: OperationState,
    pub attempts: i64,
    pub requested_by: Option<String>,
    pub created_at: i64,
    pub finished_at: Option<i64>,
}

/// Where a queued operation is (the column `cluster_operations.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::Display, strum::EnumString, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub(crate) enum OperationState {
    /// Waiting for a replica to claim it (a state this build does not know
    /// reads as this one).
    #[default]
    Pending,
    Running,
    Done,
    Failed,
}

impl OperationState {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }

    pub(crate) fn parse(raw: &str) -> Self {
        raw.parse().unwrap_or_default()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "field", rename_all = "snake_case")]
pub enum Change {
    PublicAccess {
        from: PublicAccess,
        to: PublicAccess,
    },
    Resources {
        from: Resources,
        to: Resources,
    },
    /// Part of move `id` (NodePort → LoadBalancer, or rolled back). Stored
    /// as `migration`, its name before the rename (old events stay readable).
    #[serde(rename = "migration")]
    Move {
        id: i64,
        rollback: bool,
    },
    /// A moved cluster's old endpoint stopped answering (grace period over).
    OldEndpointClosed {
        host: String,
    },
}

/// The differences between two specs; empty when nothing changed.
pub(crate) fn describe_update(old: &ClusterSpec, new: &ClusterSpec) -> Vec<Change> {
    let mut changes = Vec::new();
    if old.public_access != new.public_access {
        changes.push(Change::PublicAccess { from: old.public_access.clone(), to: new.public_access.clone() });
    }
    if old.resources != new.resources {
        changes.push(Change::Resources { from: old.resources, to: new.resources });
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ClusterName, Host};

    fn spec(access: PublicAccess) -> ClusterSpec {
        ClusterSpec {
            name: ClusterName::parse("dev").unwrap(),
            resources: Resources::default(),
            public_access: access,
            own_nodes: false,
            placement: Default::default(),
            telemetry: Default::default(),
        }
    }

    #[test]
    fn mode_changes_are_described() {
        let lb = PublicAccess::LoadBalancer { host: Host::Dns("api.example.com".into()) };
        let np = PublicAccess::NodePort { host: None };
        let cases = [
            (np.clone(), lb.clone()),
            (lb.clone(), np.clone()),
            (PublicAccess::Disabled, np.clone()),
            (lb.clone(), PublicAccess::Disabled),
        ];
        for (from, to) in cases {
            assert_eq!(
                describe_update(&spec(from.clone()), &spec(to.clone())),
                vec![Change::PublicAccess { from, to }]
            );
        }
        assert!(describe_update(&spec(lb.clone()), &spec(lb)).is_empty());
    }

    #[test]
    fn resources_and_both() {
        let old = spec(PublicAccess::Disabled);
        let mut new = old.clone();
        new.resources.cpu_millis = 4000;
        new.public_access = PublicAccess::NodePort { host: None };
        let changes = describe_update(&old, &new);
        assert_eq!(changes.len(), 2);
        assert!(matches!(changes[1], Change::Resources { .. }));
    }

    #[test]
    fn operation_json_is_stable() {
        let op = Operation::Update {
            changes: vec![Change::PublicAccess {
                from: PublicAccess::NodePort { host: None },
                to: PublicAccess::LoadBalancer { host: Host::Dns("a.example".into()) },
            }],
        };
        let json = serde_json::to_string(&op).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"update","changes":[{"field":"public_access","from":{"mode":"nodeport","host":null},"to":{"mode":"loadbalancer","host":"a.example"}}]}"#
        );
        assert_eq!(serde_json::from_str::<Operation>(&json).unwrap(), op);
    }
}
