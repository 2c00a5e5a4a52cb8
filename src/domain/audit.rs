//! The audit log: who changed settings, accounts and moves; sign-ins
//! and failed sign-ins; admins' kubeconfig downloads and their edits and
//! deletions of other users' clusters.

use serde::{Deserialize, Serialize};

/// Entries per page of the audit log.
pub(crate) const PAGE: i64 = 50;

/// What an entry records. Stored as its `as_str` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub(crate) enum AuditAction {
    SettingsChanged,
    UserCreated,
    RoleChanged,
    PasswordReset,
    QuotaChanged,
    // Stored under their names from before the rename ("migration" now
    // means only schema migrations): old entries stay readable.
    #[serde(rename = "migration_started")]
    #[strum(serialize = "migration_started")]
    MoveStarted,
    #[serde(rename = "migration_item_retried")]
    #[strum(serialize = "migration_item_retried")]
    MoveItemRetried,
    #[serde(rename = "migration_item_rolled_back")]
    #[strum(serialize = "migration_item_rolled_back")]
    MoveItemRolledBack,
    SignedIn,
    SignInFailed,
    KubeconfigDownloaded,
    ClusterChangedByAdmin,
    ClusterDeletedByAdmin,
    /// A join token made for an own-nodes cluster (its id only).
    JoinTokenCreated,
    JoinTokenRevoked,
    /// A joined node drained and deleted from its virtual cluster.
    NodeRemoved,
    /// Sharing: a member added to a cluster, its role changed, removed.
    MemberAdded,
    MemberRoleChanged,
    MemberRemoved,
    TeamCreated,
    TeamDeleted,
    TeamMemberAdded,
    TeamMemberRemoved,
    /// An admin took a cluster's own admin credential (`vc-<name>`), with a reason.
    BreakGlass,
    /// An admin disabled an account (its sessions ended, its bindings gone) or enabled it again.
    UserDisabled,
    UserEnabled,
    /// An admin moved a cluster to another owner.
    OwnerChanged,
    /// The console could not bring a cluster's access bindings in step with
    /// its members (the host's words); and, later, could again.
    AccessOutOfStep,
    AccessInStep,
}

impl AuditAction {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }
}

/// One entry as pages and the API show it. `target` names what changed
/// (`settings`, `user:alice`, `migration:3`, `migration:3/cluster:7`);
/// `detail` says how (`default_mode: nodeport → loadbalancer`). Neither ever
/// holds a password or token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AuditEntry {
    pub id: i64,
    pub at: i64,
    pub actor: String,
    pub action: AuditAction,
    pub target: String,
    pub detail: String,
}

/// What differs between two JSON objects, key by key, in key order:
/// `key: before → after` joined by `; ` (strings bare, other values as JSON).
pub(crate) fn diff(before: &serde_json::Value, after: &serde_json::Value) -> String {
    let show = |v: Option<&serde_json::Value>| match v {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "null".into(),
    };
    let (Some(a), Some(b)) = (before.as_object(), after.as_object()) else { return String::new() };
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| format!("{k}: {} → {}", show(a.get(k)), show(b.get(k))))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use strum::VariantArray;

    #[test]
    fn diff_table() {
        for (before, after, want) in [
            (json!({"a": "x", "b": 1}), json!({"a": "x", "b": 1}), ""),
            (json!({"a": "x"}), json!({"a": "y"}), "a: x → y"),
            (json!({"b": null, "a": 1}), json!({"a": 2, "b": "h"}), "a: 1 → 2; b: null → h"),
            (json!({"m": {}}), json!({"m": {"k": "v"}}), "m: {} → {\"k\":\"v\"}"),
            (json!("not an object"), json!({}), ""),
        ] {
            assert_eq!(diff(&before, &after), want);
        }
    }

    /// docs/http-api.md's audit table names every action, and only actions
    /// that exist (its first cell may name several).
    #[test]
    fn the_http_api_table_is_the_enum() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/http-api.md")).unwrap();
        let table = doc.split("| action | written when | target | detail |").nth(1).expect("the audit table");
        let documented: std::collections::BTreeSet<&str> = table
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .flat_map(|l| l.split('|').nth(1).unwrap_or_default().split(','))
            .map(|name| name.trim().trim_matches('`'))
            .collect();
        let actions: std::collections::BTreeSet<&str> = AuditAction::VARIANTS.iter().map(|a| a.as_str()).collect();
        assert_eq!(documented, actions, "docs/http-api.md's audit table against AuditAction");
    }

    #[test]
    fn names_round_trip_and_match_serde() {
        for &a in AuditAction::VARIANTS {
            assert_eq!(AuditAction::parse(a.as_str()), Some(a));
            assert_eq!(serde_json::to_value(a).unwrap(), a.as_str());
        }
        assert_eq!(AuditAction::parse("nope"), None);
    }
}
