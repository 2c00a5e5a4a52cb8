//! Which `failurePolicy` the console writes into a HelmChart: read from what
//! the host's helm-controller accepts (its HelmChart CRD's enum), never one
//! that uninstalls a control plane behind its owner's back.
//!
//! klipper-helm's `entry` on a failed release (docs/testing.md, "klipper-helm"):
//! `reinstall` (helm-controller's default) uninstalls and installs again — a
//! new CA, every kubeconfig broken, the virtual cluster's data gone; `abort`
//! leaves the release failed and every later Job exits 1 "waiting for
//! operator intervention" (the console is that operator: it drops a failed
//! record a newer spec supersedes, `stale_failure`); `retry` (helm-controller
//! v0.17.6 and klipper-helm v0.13.2 on) upgrades again with the chart's
//! current values.
//!
//! The k3s releases in support and what each embeds are [`K3S_RELEASES`]
//! (docs/runbooks/deploy.md has the same table).

use serde::{Deserialize, Serialize};

/// A failure policy the console may write: neither uninstalls anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailurePolicy {
    /// Upgrade again from the failed release (helm-controller ≥ v0.17.6).
    Retry,
    /// Leave the release failed; the console clears a failure a newer spec
    /// supersedes so that spec's Job upgrades (every helm-controller with the field).
    Abort,
}

impl FailurePolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retry => "retry",
            Self::Abort => "abort",
        }
    }
}

/// What the host's helm-controller was seen to accept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HelmSupport {
    /// Not read yet: no host, or it has not answered.
    #[default]
    Unknown,
    /// The HelmChart CRD is not served: no helm-controller on this host.
    NoHelmController,
    /// The policy the console writes.
    Writes { policy: FailurePolicy },
    /// The CRD offers neither `retry` nor `abort` (`offered`: what it does
    /// offer; empty when it has no `failurePolicy` at all, which the API
    /// server prunes, so helm-controller's `reinstall` default applies).
    Unsupported { offered: Vec<String> },
}

impl HelmSupport {
    /// The policy to write, when the console may write a HelmChart at all.
    pub fn policy(&self) -> Option<FailurePolicy> {
        match self {
            Self::Writes { policy } => Some(*policy),
            _ => None,
        }
    }

    /// Whether creates and edits are refused before anything is written.
    pub fn refuses_changes(&self) -> bool {
        matches!(self, Self::Unsupported { .. })
    }
}

/// The policy the console writes on a host whose HelmChart CRD is `crd`
/// (`apiextensions.k8s.io/v1` JSON): from the `v1` version's schema,
/// `spec.failurePolicy`'s enum. `retry` when offered; else `abort` (also
/// when the field is a free string: every klipper-helm `entry` since the
/// field exists treats a policy other than `reinstall` it does not know as
/// "wait for the operator" or "unknown policy", both exit 1 and keep the
/// release); else unsupported.
pub fn support_from_crd(crd: &serde_json::Value) -> HelmSupport {
    let versions = crd["spec"]["versions"].as_array().map(Vec::as_slice).unwrap_or_default();
    let Some(v1) = versions.iter().find(|v| v["name"] == "v1" && v["served"] != false) else {
        return HelmSupport::Unsupported { offered: Vec::new() };
    };
    let spec = &v1["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let field = &spec["properties"]["failurePolicy"];
    if field.is_null() {
        return HelmSupport::Unsupported { offered: Vec::new() };
    }
    let Some(offered) = field["enum"].as_array() else {
        return HelmSupport::Writes { policy: FailurePolicy::Abort };
    };
    let offered: Vec<String> = offered.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect();
    let has = |p: FailurePolicy| offered.iter().any(|o| o == p.as_str());
    if has(FailurePolicy::Retry) {
        HelmSupport::Writes { policy: FailurePolicy::Retry }
    } else if has(FailurePolicy::Abort) {
        HelmSupport::Writes { policy: FailurePolicy::Abort }
    } else {
        HelmSupport::Unsupported { offered }
    }
}

/// A k3s release in support (the oldest and newest patch release of each
/// minor, as found on 2026-12-07) and what it embeds: helm-controller from
/// the release notes' "Embedded Component Versions", the klipper-helm job
/// image where it is known (docs/runbooks/deploy.md gives the sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct K3sRelease {
    pub k3s: &'static str,
    pub helm_controller: &'static str,
    pub klipper_helm: Option<&'static str>,
}

impl K3sRelease {
    /// The policy the console writes there (helm-controller accepts `retry`
    /// from v0.17.6, and from v0.16.25 on its 0.16 branch).
    pub fn policy(&self) -> FailurePolicy {
        let v = parse_version(self.helm_controller).unwrap_or_default();
        if v >= (0, 17, 6) || (v.1 == 16 && v >= (0, 16, 25)) { FailurePolicy::Retry } else { FailurePolicy::Abort }
    }
}

/// The k3s releases in support whose helm-controller is known: the oldest
/// and newest patch of each minor, and those between named in the release
/// notes read (the table is ordered; the first of a minor is its oldest).
pub const K3S_RELEASES: &[K3sRelease] = &[
    K3sRelease {
        k3s: "v1.34.1+k3s1",
        helm_controller: "v0.16.13",
        klipper_helm: Some("rancher/klipper-helm:v0.9.8-build20250709"),
    },
    K3sRelease { k3s: "v1.34.9+k3s1", helm_controller: "v0.17.1", klipper_helm: None },
    K3sRelease { k3s: "v1.35.0+k3s1", helm_controller: "v0.16.17", klipper_helm: None },
    K3sRelease { k3s: "v1.35.6+k3s1", helm_controller: "v0.17.1", klipper_helm: None },
    K3sRelease { k3s: "v1.35.8+k3s1", helm_controller: "v0.17.7", klipper_helm: None },
    K3sRelease { k3s: "v1.36.0+k3s1", helm_controller: "v0.17.1", klipper_helm: None },
    K3sRelease { k3s: "v1.36.1+k3s1", helm_controller: "v0.17.1", klipper_helm: None },
    K3sRelease { k3s: "v1.36.2+k3s1", helm_controller: "v0.17.1", klipper_helm: None },
    K3sRelease {
        k3s: "v1.36.3+k3s1",
        helm_controller: "v0.17.7",
        klipper_helm: Some("rancher/klipper-helm:v0.13.3-build20260727"),
    },
    K3sRelease { k3s: "v1.36.5+k3s1", helm_controller: "v0.17.9", klipper_helm: None },
    K3sRelease { k3s: "v1.37.0+k3s1", helm_controller: "v0.17.7", klipper_helm: None },
    K3sRelease { k3s: "v1.37.1+k3s1", helm_controller: "v0.17.9", klipper_helm: None },
];

/// `v1.34.9+k3s1` → (1, 34, 9).
fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    let mut parts = v.trim().strip_prefix('v')?.splitn(3, '.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch: String = parts.next()?.chars().take_while(char::is_ascii_digit).collect();
    Some((major, minor, patch.parse().ok()?))
}

/// What the settings page says of a host whose helm-controller refuses
/// every policy the console may write: the k3s release the host's nodes
/// report (`kubeletVersion`, `+k3s` when it is k3s), the helm-controller it
/// embeds when the table knows that line, and the oldest k3s release of the
/// same minor (else the oldest in support) whose helm-controller accepts one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelmUpgradeAdvice {
    pub k3s: Option<String>,
    pub helm_controller: Option<String>,
    pub minimum_k3s: String,
}

/// The settings page's host problem: what the CRD offers and the advice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelmProblem {
    pub offered: Vec<String>,
    pub advice: HelmUpgradeAdvice,
}

pub fn upgrade_advice(kubelet_version: Option<&str>) -> HelmUpgradeAdvice {
    let k3s = kubelet_version.filter(|v| v.contains("+k3s")).map(str::to_owned);
    let minor = k3s.as_deref().and_then(parse_version).map(|(_, m, _)| m);
    let same_minor = |r: &&K3sRelease| parse_version(r.k3s).map(|(_, m, _)| m) == minor;
    let line: Vec<&K3sRelease> = K3S_RELEASES.iter().filter(same_minor).collect();
    let known = k3s.as_deref().and_then(|k| K3S_RELEASES.iter().find(|r| r.k3s == k));
    let minimum = line.first().copied().or(K3S_RELEASES.first()).map_or("v1.34.1+k3s1", |r| r.k3s);
    HelmUpgradeAdvice {
        helm_controller: known.map(|r| r.helm_controller.to_owned()),
        k3s,
        minimum_k3s: minimum.to_owned(),
    }
}

/// Whether a `failed` release record is stale on an `abort` host: helm ran
/// values (`record_values`, the record's `config`) or a chart version other
/// than the HelmChart's now, so the failure belongs to a spec that is no
/// longer wanted and the record must go for the current spec's Job to
/// upgrade (with `abort`, klipper-helm's `entry` otherwise exits 1 on every
/// Job, "waiting for operator intervention"). The same values: the failure
/// is the current spec's own, kept and shown.
pub fn stale_failure(
    record_values: &serde_json::Value,
    record_chart_version: &str,
    wanted_values: &serde_json::Value,
    wanted_chart_version: &str,
) -> bool {
    // helm stores no `config` (null) for an empty values file.
    let empty = |v: &serde_json::Value| v.is_null() || v.as_object().is_some_and(serde_json::Map::is_empty);
    let same_values = record_values == wanted_values || (empty(record_values) && empty(wanted_values));
    !same_values || record_chart_version != wanted_chart_version
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(failure_policy: serde_json::Value) -> serde_json::Value {
        let mut props = json!({"chart": {"type": "string"}});
        if !failure_policy.is_null() {
            props["failurePolicy"] = failure_policy;
        }
        json!({"spec": {"versions": [{"name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"properties": {"spec": {"properties": props}}}}}]}})
    }

    /// Each helm-controller generation's CRD (pkg/crds/yaml/generated/
    /// helm.cattle.io_helmcharts.yaml at the tag) and the policy written.
    #[test]
    fn the_policy_follows_what_the_crd_accepts() {
        use FailurePolicy::{Abort, Retry};
        let writes = |policy| HelmSupport::Writes { policy };
        for (case, field, want) in [
            (
                "v0.17.6+: abort, reinstall, retry",
                json!({"type": "string", "enum": ["abort", "reinstall", "retry"]}),
                writes(Retry),
            ),
            ("v0.17.1: abort, reinstall", json!({"type": "string", "enum": ["abort", "reinstall"]}), writes(Abort)),
            ("a free string", json!({"type": "string"}), writes(Abort)),
            (
                "reinstall only",
                json!({"type": "string", "enum": ["reinstall"]}),
                HelmSupport::Unsupported { offered: vec!["reinstall".into()] },
            ),
            ("no failurePolicy: pruned", serde_json::Value::Null, HelmSupport::Unsupported { offered: vec![] }),
        ] {
            assert_eq!(support_from_crd(&crd(field)), want, "{case}");
        }
        let v1beta1_only = json!({"spec": {"versions": [{"name": "v1beta1", "served": true}]}});
        assert_eq!(support_from_crd(&v1beta1_only), HelmSupport::Unsupported { offered: vec![] });
        let not_served = json!({"spec": {"versions": [{"name": "v1", "served": false}]}});
        assert_eq!(support_from_crd(&not_served), HelmSupport::Unsupported { offered: vec![] });
        assert!(HelmSupport::Unsupported { offered: vec![] }.refuses_changes());
        for s in [HelmSupport::Unknown, HelmSupport::NoHelmController, writes(Abort)] {
            assert!(!s.refuses_changes(), "{s:?}");
        }
    }

    #[test]
    fn every_release_in_support_gets_a_policy_that_keeps_the_control_plane() {
        let policies: Vec<(&str, FailurePolicy)> = K3S_RELEASES.iter().map(|r| (r.k3s, r.policy())).collect();
        use FailurePolicy::{Abort, Retry};
        for want in [
            ("v1.34.1+k3s1", Abort),
            ("v1.34.9+k3s1", Abort),
            ("v1.35.0+k3s1", Abort),
            ("v1.35.8+k3s1", Retry),
            ("v1.36.0+k3s1", Abort),
            ("v1.36.3+k3s1", Retry),
            ("v1.36.5+k3s1", Retry),
            ("v1.37.1+k3s1", Retry),
        ] {
            assert!(policies.contains(&want), "{want:?} in {policies:?}");
        }
    }

    #[test]
    fn the_advice_names_the_release_and_the_oldest_of_its_line() {
        for (kubelet, k3s, helm_controller, minimum) in [
            (Some("v1.36.0+k3s1"), Some("v1.36.0+k3s1"), Some("v0.17.1"), "v1.36.0+k3s1"),
            (Some("v1.35.2+k3s1"), Some("v1.35.2+k3s1"), None, "v1.35.0+k3s1"),
            (Some("v1.27.4+k3s1"), Some("v1.27.4+k3s1"), None, "v1.34.1+k3s1"),
            (Some("v1.34.0"), None, None, "v1.34.1+k3s1"),
            (None, None, None, "v1.34.1+k3s1"),
        ] {
            let a = upgrade_advice(kubelet);
            assert_eq!(
                (a.k3s.as_deref(), a.helm_controller.as_deref(), a.minimum_k3s.as_str()),
                (k3s, helm_controller, minimum),
                "{kubelet:?}"
            );
        }
        assert_eq!(parse_version("v1.36.3+k3s1"), Some((1, 36, 3)));
        assert_eq!(parse_version("1.36.3"), None);
    }

    #[test]
    fn a_failed_record_is_stale_when_the_spec_moved_on() {
        let a = json!({"controlPlane": {"statefulSet": {"resources": {"limits": {"memory": "2Gi"}}}}});
        let b = json!({"controlPlane": {"statefulSet": {"resources": {"limits": {"memory": "4Gi"}}}}});
        for (case, record, record_version, wanted, wanted_version, stale) in [
            ("the same values and chart: the current spec's own failure", &a, "0.30.0", &a, "0.30.0", false),
            ("other values", &a, "0.30.0", &b, "0.30.0", true),
            ("another chart version", &a, "0.30.0", &a, "0.30.5", true),
            ("null and empty are the same", &serde_json::Value::Null, "0.30.0", &json!({}), "0.30.0", false),
        ] {
            assert_eq!(stale_failure(record, record_version, wanted, wanted_version), stale, "{case}");
        }
    }
}
