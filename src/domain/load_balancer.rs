//! What the console's LoadBalancer Services carry: how the provider is
//! asked for a cluster's IP host ([`AddressStyle`], [`AddressRequest`]), the
//! admin's annotations and the Service's class.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::names::is_qualified_name;
use super::{AppError, ErrorCode, Field};

/// How a LoadBalancer provider is asked for a specific address (the cluster's
/// IP `control_plane_host`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum AddressRequest {
    /// The `metallb.io/loadBalancerIPs` annotation.
    #[serde(rename = "metallb")]
    #[strum(serialize = "metallb")]
    MetalLb,
    /// The `kube-vip.io/loadbalancerIPs` annotation.
    KubeVip,
    /// Not asked: the provider picks (the host must then point at what it picks).
    None,
}

impl AddressRequest {
    /// The wire and form name (as serde writes it).
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The admin's choice: one of the [`AddressRequest`]s, or `auto` (what the
/// console detects on the host: MetalLB when its `IPAddressPool` CRD is served).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    Default,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum AddressStyle {
    #[default]
    Auto,
    #[serde(rename = "metallb")]
    #[strum(serialize = "metallb")]
    MetalLb,
    KubeVip,
    None,
}

impl AddressStyle {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }

    /// The request the admin fixed; `None` for `auto`.
    pub(crate) fn fixed(self) -> Option<AddressRequest> {
        match self {
            Self::Auto => None,
            Self::MetalLb => Some(AddressRequest::MetalLb),
            Self::KubeVip => Some(AddressRequest::KubeVip),
            Self::None => Some(AddressRequest::None),
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        s.trim().parse().ok()
    }

    /// The request made, given what was detected on the host (if a host is connected).
    pub(crate) fn resolve(self, detected: Option<AddressRequest>) -> AddressRequest {
        self.fixed().or(detected).unwrap_or(AddressRequest::None)
    }
}

/// The longest annotation value taken.
pub(crate) const MAX_ANNOTATION_VALUE: usize = 4096;

/// The admin's annotations: keys are Kubernetes qualified names, each once;
/// values are one line of at most [`MAX_ANNOTATION_VALUE`] bytes. Keys and
/// values are trimmed.
pub(crate) fn annotations(
    given: impl IntoIterator<Item = (String, String)>,
) -> Result<BTreeMap<String, String>, AppError> {
    let bad = || AppError::at(ErrorCode::AnnotationsInvalid, Field::LoadBalancerAnnotations);
    let mut out = BTreeMap::new();
    for (key, value) in given {
        let (key, value) = (key.trim(), value.trim());
        if !is_qualified_name(key) || value.len() > MAX_ANNOTATION_VALUE || value.contains('\n') {
            return Err(bad());
        }
        if out.insert(key.to_owned(), value.to_owned()).is_some() {
            return Err(bad());
        }
    }
    Ok(out)
}

/// The LoadBalancer class: a qualified name; empty is none.
pub(crate) fn class(given: &str) -> Result<Option<String>, AppError> {
    match given.trim() {
        "" => Ok(None),
        c if is_qualified_name(c) => Ok(Some(c.to_owned())),
        _ => Err(AppError::at(ErrorCode::LoadBalancerClassInvalid, Field::LoadBalancerClass)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_follows_what_was_detected() {
        let table = [
            (AddressStyle::Auto, Some(AddressRequest::MetalLb), AddressRequest::MetalLb),
            (AddressStyle::Auto, Some(AddressRequest::None), AddressRequest::None),
            (AddressStyle::Auto, None, AddressRequest::None),
            (AddressStyle::KubeVip, Some(AddressRequest::MetalLb), AddressRequest::KubeVip),
            (AddressStyle::None, Some(AddressRequest::MetalLb), AddressRequest::None),
            (AddressStyle::MetalLb, None, AddressRequest::MetalLb),
        ];
        for (style, detected, want) in table {
            assert_eq!(style.resolve(detected), want, "{style:?} {detected:?}");
        }
        for &s in <AddressStyle as strum::VariantArray>::VARIANTS {
            assert_eq!(AddressStyle::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{}\"", s.as_str()));
        }
    }

    #[test]
    fn annotations_and_class_table() {
        let map =
            |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect::<Vec<_>>();
        let ok = annotations(map(&[(" metallb.io/address-pool ", " public "), ("b.io/x", "")])).unwrap();
        assert_eq!(ok.get("metallb.io/address-pool").map(String::as_str), Some("public"));
        let refused = Err(AppError::at(ErrorCode::AnnotationsInvalid, Field::LoadBalancerAnnotations));
        for bad in [
            map(&[("bad key!", "x")]),
            map(&[("a.io/x", "one\ntwo")]),
            map(&[("a.io/x", "1"), (" a.io/x", "2")]),
            map(&[("a.io/x", &"v".repeat(MAX_ANNOTATION_VALUE + 1))]),
        ] {
            assert_eq!(annotations(bad.clone()), refused, "{bad:?}");
        }
        assert_eq!(class(" "), Ok(None));
        assert_eq!(class("metallb.io/metallb"), Ok(Some("metallb.io/metallb".into())));
        assert_eq!(
            class("not a class!"),
            Err(AppError::at(ErrorCode::LoadBalancerClassInvalid, Field::LoadBalancerClass))
        );
    }
}
