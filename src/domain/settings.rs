//! Platform defaults an admin sets: the public access mode for new clusters, the
//! NodePort public host, and what LoadBalancer Services carry (annotations, class).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{AppError, ErrorCode, Field, Host, PublicAccessMode};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SystemSettings {
    /// `default_cluster_public_access_mode`.
    pub default_mode: PublicAccessMode,
    /// Where NodePort clusters are reached when they have no host of their own.
    pub nodeport_public_host: Option<Host>,
    pub load_balancer_annotations: BTreeMap<String, String>,
    pub load_balancer_class: Option<String>,
}

/// Submitted settings text, before validation.
#[derive(Debug, Clone, Default)]
pub struct SettingsInput<'a> {
    pub default_mode: &'a str,
    pub nodeport_public_host: &'a str,
    /// One `key: value` (or `key=value`) per line.
    pub load_balancer_annotations: &'a str,
    pub load_balancer_class: &'a str,
}

impl SystemSettings {
    pub fn parse(input: &SettingsInput<'_>) -> Result<Self, AppError> {
        let default_mode = PublicAccessMode::parse(input.default_mode)
            .ok_or(AppError::at(ErrorCode::ModeInvalid, Field::DefaultMode))?;
        let nodeport_public_host = Host::parse_optional(input.nodeport_public_host)
            .map_err(|_| AppError::at(ErrorCode::HostInvalid, Field::NodeportPublicHost))?;
        let load_balancer_annotations = parse_annotations(input.load_balancer_annotations)
            .ok_or(AppError::at(ErrorCode::AnnotationsInvalid, Field::LoadBalancerAnnotations))?;
        let class = input.load_balancer_class.trim();
        let load_balancer_class = if class.is_empty() {
            None
        } else if is_qualified_name(class) {
            Some(class.to_owned())
        } else {
            return Err(AppError::at(ErrorCode::LoadBalancerClassInvalid, Field::LoadBalancerClass));
        };
        Ok(Self { default_mode, nodeport_public_host, load_balancer_annotations, load_balancer_class })
    }

    /// The annotations as the settings form shows them, one per line.
    pub fn annotations_text(&self) -> String {
        self.load_balancer_annotations.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join("\n")
    }
}

const MAX_ANNOTATION_VALUE: usize = 4096;

/// `key: value` lines; blank lines are skipped; keys are Kubernetes qualified names.
pub fn parse_annotations(text: &str) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (key, value) = match (line.find(':'), line.find('=')) {
            (Some(c), Some(e)) => line.split_at(c.min(e)),
            (Some(i), None) | (None, Some(i)) => line.split_at(i),
            (None, None) => return None,
        };
        let (key, value) = (key.trim(), value[1..].trim());
        if !is_qualified_name(key) || value.len() > MAX_ANNOTATION_VALUE || out.contains_key(key) {
            return None;
        }
        out.insert(key.to_owned(), value.to_owned());
    }
    Some(out)
}

/// Kubernetes qualified name: optional DNS-subdomain prefix and `/`, then a
/// name of up to 63 characters `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`.
pub fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    let prefix_ok = prefix.is_none_or(|p| {
        p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && !l.starts_with('-')
                    && !l.ends_with('-')
                    && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            })
    });
    name_ok && prefix_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>(mode: &'a str, host: &'a str, ann: &'a str, class: &'a str) -> SettingsInput<'a> {
        SettingsInput {
            default_mode: mode,
            nodeport_public_host: host,
            load_balancer_annotations: ann,
            load_balancer_class: class,
        }
    }

    #[test]
    fn defaults_to_nodeport() {
        assert_eq!(SystemSettings::default().default_mode, PublicAccessMode::NodePort);
    }

    #[test]
    fn parse_table() {
        let ok = SystemSettings::parse(&input(
            "loadbalancer",
            " 203.0.113.10 ",
            "metallb.io/address-pool: public\n\nmetallb.io/allow-shared-ip=team-a\n",
            "metallb.io/metallb",
        ))
        .unwrap();
        assert_eq!(ok.default_mode, PublicAccessMode::LoadBalancer);
        assert_eq!(ok.nodeport_public_host, Some(Host::Ipv4([203, 0, 113, 10].into())));
        assert_eq!(ok.load_balancer_annotations.len(), 2);
        assert_eq!(ok.load_balancer_annotations["metallb.io/allow-shared-ip"], "team-a");
        assert_eq!(ok.load_balancer_class.as_deref(), Some("metallb.io/metallb"));
        assert_eq!(SystemSettings::parse(&input("nodeport", "", "", "")).unwrap(), SystemSettings::default());

        let err = |code, field| Err(AppError::at(code, field));
        let bad = [
            (input("", "", "", ""), err(ErrorCode::ModeInvalid, Field::DefaultMode)),
            (input("ingress", "", "", ""), err(ErrorCode::ModeInvalid, Field::DefaultMode)),
            (input("nodeport", "http://x", "", ""), err(ErrorCode::HostInvalid, Field::NodeportPublicHost)),
            (
                input("nodeport", "", "no separator", ""),
                err(ErrorCode::AnnotationsInvalid, Field::LoadBalancerAnnotations),
            ),
            (
                input("nodeport", "", "bad key!: x", ""),
                err(ErrorCode::AnnotationsInvalid, Field::LoadBalancerAnnotations),
            ),
            (
                input("nodeport", "", "a: 1\na: 2", ""),
                err(ErrorCode::AnnotationsInvalid, Field::LoadBalancerAnnotations),
            ),
            (
                input("nodeport", "", "", "not a class!"),
                err(ErrorCode::LoadBalancerClassInvalid, Field::LoadBalancerClass),
            ),
        ];
        for (inp, want) in bad {
            assert_eq!(SystemSettings::parse(&inp), want, "{inp:?}");
        }
    }

    #[test]
    fn annotations_text_round_trips() {
        let s = SystemSettings::parse(&input("nodeport", "", "b.io/x: 1\na.io/y: two words", "")).unwrap();
        assert_eq!(s.annotations_text(), "a.io/y: two words\nb.io/x: 1");
        assert_eq!(parse_annotations(&s.annotations_text()), Some(s.load_balancer_annotations));
    }

    #[test]
    fn qualified_names() {
        for ok in ["a", "metallb.io/address-pool", "kube-vip.io/kube-vip-class", "A_b.c-D"] {
            assert!(is_qualified_name(ok), "{ok}");
        }
        for bad in ["", "/x", "x/", "-a", "a-", "Upper.IO/x", "a b", &"a".repeat(64)] {
            assert!(!is_qualified_name(bad), "{bad}");
        }
    }
}
