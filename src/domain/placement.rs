//! Where a control plane runs and what its volume is: spread across the host's
//! machines (pod anti-affinity between clusters) and the StorageClass of its
//! claim. The admin sets them for new clusters; each cluster keeps what it was
//! created with (a values change restarts a control plane, and a claim's
//! class can never change), so they are stored per cluster and rendered from there.

use serde::{Deserialize, Serialize};

use super::names::is_qualified_name;
use super::{AppError, ErrorCode, Field};

/// Whether control planes of different clusters avoid the same node (or
/// whatever [`Placement::topology_key`] names).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Spread {
    #[default]
    Off,
    /// The scheduler prefers another node, and uses a shared one when none is free.
    Preferred,
    /// A control plane with no free node stays Pending, in the scheduler's words.
    Required,
}

impl Spread {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        s.trim().parse().ok()
    }
}

/// The topology key unless the admin names another.
pub(crate) const DEFAULT_TOPOLOGY_KEY: &str = "kubernetes.io/hostname";

/// A cluster's placement: fixed when it is created.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Placement {
    pub spread: Spread,
    pub topology_key: String,
    /// The control plane claim's StorageClass; none: the host's default.
    pub storage_class: Option<String>,
}

impl Default for Placement {
    fn default() -> Self {
        Self { spread: Spread::Off, topology_key: DEFAULT_TOPOLOGY_KEY.to_owned(), storage_class: None }
    }
}

/// Spread as the form writes it; empty: off.
pub(crate) fn parse_spread(text: &str) -> Result<Spread, AppError> {
    match text.trim() {
        "" => Ok(Spread::Off),
        s => Spread::parse(s).ok_or(AppError::at(ErrorCode::SpreadInvalid, Field::Spread)),
    }
}

/// A topology key (a qualified name); empty: [`DEFAULT_TOPOLOGY_KEY`].
pub(crate) fn topology_key(text: &str) -> Result<String, AppError> {
    match text.trim() {
        "" => Ok(DEFAULT_TOPOLOGY_KEY.to_owned()),
        k if is_qualified_name(k) => Ok(k.to_owned()),
        _ => Err(AppError::at(ErrorCode::SpreadInvalid, Field::SpreadTopologyKey)),
    }
}

/// A StorageClass name; empty: none (the host's default).
pub(crate) fn storage_class(text: &str) -> Result<Option<String>, AppError> {
    match text.trim() {
        "" => Ok(None),
        c if is_storage_class(c) => Ok(Some(c.to_owned())),
        _ => Err(AppError::at(ErrorCode::StorageClassInvalid, Field::StorageClass)),
    }
}

/// A StorageClass name: a DNS subdomain.
fn is_storage_class(s: &str) -> bool {
    crate::domain::host::dns_subdomain(s)
}

impl Placement {
    /// The settings form's text; empty topology key: the default; empty class: the host's default.
    pub(crate) fn parse(spread: &str, topology_key: &str, storage_class: &str) -> Result<Self, AppError> {
        Ok(Self {
            spread: parse_spread(spread)?,
            topology_key: self::topology_key(topology_key)?,
            storage_class: self::storage_class(storage_class)?,
        })
    }

    /// A placement given as a value (the JSON API), under the rules the
    /// form's text meets: an empty topology key is the default, an empty
    /// class the host's default.
    pub(crate) fn checked(self) -> Result<Self, AppError> {
        Ok(Self {
            spread: self.spread,
            topology_key: topology_key(&self.topology_key)?,
            storage_class: storage_class(self.storage_class.as_deref().unwrap_or_default())?,
        })
    }

    /// Reads stored columns; anything unreadable reads as the default (off,
    /// the hostname key, the host's default class) — what clusters created
    /// before placement existed were rendered with.
    pub(crate) fn from_columns(spread: &str, topology_key: &str, storage_class: Option<&str>) -> Self {
        Self::parse(spread, topology_key, storage_class.unwrap_or_default()).unwrap_or_default()
    }

    /// `controlPlane.statefulSet.scheduling.affinity` (chart v0.30
    /// `values.yaml`, rendered as is by `templates/statefulset.yaml`): pod
    /// anti-affinity to every vCluster control plane (label `app=vcluster`)
    /// in the console's namespaces (`namespaceSelector` on its managed-by
    /// label). Topology spread constraints count the pods of the pod's own
    /// namespace only, and each cluster has its own namespace, so they
    /// cannot spread clusters. `None` when off.
    pub(crate) fn affinity(&self, managed_by: (&str, &str)) -> Option<serde_json::Value> {
        let term = serde_json::json!({
            "labelSelector": {"matchLabels": {"app": "vcluster"}},
            "namespaceSelector": {"matchLabels": {managed_by.0: managed_by.1}},
            "topologyKey": self.topology_key,
        });
        let anti = match self.spread {
            Spread::Off => return None,
            Spread::Preferred => serde_json::json!({
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}],
            }),
            Spread::Required => serde_json::json!({"requiredDuringSchedulingIgnoredDuringExecution": [term]}),
        };
        Some(serde_json::json!({"podAntiAffinity": anti}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_parses() {
        assert_eq!(Placement::parse("", "", ""), Ok(Placement::default()));
        let p = Placement::parse("required", "topology.kubernetes.io/zone", "fast-ssd").unwrap();
        assert_eq!(
            p,
            Placement {
                spread: Spread::Required,
                topology_key: "topology.kubernetes.io/zone".into(),
                storage_class: Some("fast-ssd".into())
            }
        );
        let err = |code, field| Err(AppError::at(code, field));
        assert_eq!(Placement::parse("always", "", ""), err(ErrorCode::SpreadInvalid, Field::Spread));
        assert_eq!(Placement::parse("off", "bad key!", ""), err(ErrorCode::SpreadInvalid, Field::SpreadTopologyKey));
        assert_eq!(Placement::parse("off", "", "Fast_SSD"), err(ErrorCode::StorageClassInvalid, Field::StorageClass));
        assert_eq!(Placement::from_columns("nonsense", "", Some("x")), Placement::default());
    }

    #[test]
    fn affinity_follows_the_spread() {
        let mb = ("app.kubernetes.io/managed-by", "kubebyon");
        assert_eq!(Placement::default().affinity(mb), None);
        let preferred = Placement { spread: Spread::Preferred, ..Placement::default() }.affinity(mb).unwrap();
        let term = &preferred["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0];
        assert_eq!(term["weight"], 100);
        assert_eq!(term["podAffinityTerm"]["topologyKey"], DEFAULT_TOPOLOGY_KEY);
        assert_eq!(term["podAffinityTerm"]["namespaceSelector"]["matchLabels"][mb.0], mb.1);
        let required = Placement { spread: Spread::Required, topology_key: "zone".into(), storage_class: None }
            .affinity(mb)
            .unwrap();
        let term = &required["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
        assert_eq!(
            (term["topologyKey"].as_str(), &term["labelSelector"]["matchLabels"]["app"]),
            (Some("zone"), &serde_json::json!("vcluster"))
        );
    }
}
