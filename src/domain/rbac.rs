//! The editors' role inside a virtual cluster. Upstream's `edit`
//! lets its holder act as any ServiceAccount (`impersonate` on
//! `serviceaccounts`) and mint its tokens (`create serviceaccounts/token`,
//! a year long): access that outlives a removal from the cluster, and in
//! `kube-system` a ServiceAccount's rights. Editors get the console's own
//! role instead: the cluster's `edit` as its aggregation made it, less those
//! two, bound namespace by namespace outside [`KEPT_OUT`], and a read of the
//! namespaces themselves cluster-wide (`kubectl get namespaces`).

use k8s_openapi::api::rbac::v1::PolicyRule;

/// The console's editor role (a ClusterRole, bound by RoleBindings of the
/// same name). What editors read cluster-wide, namespaces, is
/// `MemberRole::Edit.cluster_role()` (bound by the ClusterRoleBinding `kubebyon:edit`).
pub const EDITOR_ROLE: &str = "kubebyon:edit";
/// Namespaces no editor is bound in: the control plane's own.
pub const KEPT_OUT: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// The verb and the resource an editor never holds.
const IMPERSONATE: &str = "impersonate";
const TOKEN: &str = "serviceaccounts/token";

/// Pure rule: `edit`'s rules without impersonation or token minting. A rule
/// with a wildcard verb or resource is dropped whole (what it grants cannot
/// be narrowed here; upstream's `edit` has none); `impersonate` leaves every
/// rule's verbs, `serviceaccounts/token` every rule's resources, and a rule
/// left with no verb or no resource goes. Non-resource rules stay.
pub fn editor_rules(edit: &[PolicyRule]) -> Vec<PolicyRule> {
    edit.iter()
        .filter_map(|rule| {
            let resources = rule.resources.as_deref().unwrap_or_default();
            if rule.verbs.iter().any(|v| v == "*") || resources.iter().any(|r| r == "*" || r == "*/*") {
                return None;
            }
            let verbs: Vec<String> = rule.verbs.iter().filter(|v| *v != IMPERSONATE).cloned().collect();
            let kept: Vec<String> = resources.iter().filter(|r| *r != TOKEN).cloned().collect();
            let resource_rule = rule.resources.is_some();
            if verbs.is_empty() || (resource_rule && kept.is_empty()) {
                return None;
            }
            Some(PolicyRule { verbs, resources: resource_rule.then_some(kept), ..rule.clone() })
        })
        .collect()
}

/// The namespaces editors are bound in: every one but [`KEPT_OUT`], sorted.
pub fn editor_namespaces(all: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = all.into_iter().filter(|n| !KEPT_OUT.contains(&n.as_str())).collect();
    out.sort();
    out.dedup();
    out
}

/// The rules of the editors' cluster-wide role (`MemberRole::Edit.cluster_role()`).
pub fn namespaces_rules() -> Vec<PolicyRule> {
    vec![PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["namespaces".into()]),
        verbs: vec!["get".into(), "list".into(), "watch".into()],
        ..Default::default()
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
        let strings = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        PolicyRule {
            api_groups: Some(strings(groups)),
            resources: Some(strings(resources)),
            verbs: strings(verbs),
            ..Default::default()
        }
    }

    #[test]
    fn editors_keep_edit_less_impersonation_and_token_minting() {
        // Upstream's system:aggregate-to-edit (plugin/pkg/auth/authorizer/rbac/
        // bootstrappolicy/policy.go, v1.34) in its shapes, and the wildcards.
        let cases = [
            ("impersonate on serviceaccounts", rule(&[""], &["serviceaccounts"], &["impersonate"]), None),
            ("minting tokens", rule(&[""], &["serviceaccounts/token"], &["create"]), None),
            (
                "pods and their subresources",
                rule(&[""], &["pods", "pods/attach", "pods/exec"], &["create", "delete", "patch"]),
                Some(rule(&[""], &["pods", "pods/attach", "pods/exec"], &["create", "delete", "patch"])),
            ),
            (
                "serviceaccounts written, tokens not",
                rule(&[""], &["serviceaccounts", "serviceaccounts/token"], &["create", "update"]),
                Some(rule(&[""], &["serviceaccounts"], &["create", "update"])),
            ),
            (
                "impersonate beside other verbs",
                rule(&[""], &["serviceaccounts"], &["get", "impersonate"]),
                Some(rule(&[""], &["serviceaccounts"], &["get"])),
            ),
            ("a wildcard verb", rule(&["apps"], &["deployments"], &["*"]), None),
            ("a wildcard resource", rule(&["apps"], &["*"], &["get"]), None),
        ];
        for (what, input, want) in cases {
            assert_eq!(editor_rules(std::slice::from_ref(&input)), want.into_iter().collect::<Vec<_>>(), "{what}");
        }
        let non_resource = PolicyRule {
            non_resource_urls: Some(vec!["/healthz".into()]),
            verbs: vec!["get".into()],
            ..Default::default()
        };
        assert_eq!(editor_rules(std::slice::from_ref(&non_resource)), vec![non_resource], "non-resource rules stay");
    }

    #[test]
    fn editors_are_bound_everywhere_but_the_control_planes_namespaces() {
        let all = ["kube-system", "default", "team-a", "kube-public", "kube-node-lease", "default"];
        assert_eq!(editor_namespaces(all.map(String::from)), ["default", "team-a"]);
    }
}
