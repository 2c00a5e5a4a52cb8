//! Extra egress for control planes: an admin setting that adds rules to the
//! console's NetworkPolicy in every cluster namespace (`render::network_policy_object`),
//! for what a control plane must reach inside the host beyond the host API
//! server and the chart repository (docs/runbooks/deploy.md, "Network policies").
//!
//! A policy is judged after kube-proxy's DNAT, so a rule names the **pod's
//! port** behind a Service, not the Service's: an in-cluster vCluster
//! Platform's pods listen on 10443 behind its Service's 443, as Envoy
//! Gateway's proxies do; Dex serves on 5556, Keycloak on 8080.
//!
//! Text, one rule per line (the settings form; the JSON API takes the same
//! lines as a list):
//!
//! ```text
//! 10443 vcluster-platform            # a namespace, by name
//! 5556 app.kubernetes.io/part-of=dex # namespaces by a label
//! 8080                               # anywhere
//! ```

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// At most this many rules (each becomes an egress rule in every cluster's policy).
pub(crate) const MAX_RULES: usize = 32;

/// Where an extra egress rule lets control planes go.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EgressPeer {
    /// Any destination on that port.
    Anywhere,
    /// Pods of one namespace (`kubernetes.io/metadata.name`).
    Namespace(String),
    /// Pods of the namespaces carrying this label.
    NamespaceLabel { key: String, value: String },
}

/// One extra egress rule: TCP to `port` at `to`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressRule {
    pub port: u16,
    pub to: EgressPeer,
}

/// The admin's extra egress rules, in the order given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ExtraEgress(pub Vec<EgressRule>);

impl EgressRule {
    /// `PORT [NAMESPACE | KEY=VALUE]`; `None` when it is not one.
    pub fn parse(line: &str) -> Option<Self> {
        let mut words = line.split_whitespace();
        let port: u16 = words.next()?.parse().ok().filter(|p| *p > 0)?;
        let to = match words.next() {
            None => EgressPeer::Anywhere,
            Some(w) => match w.split_once('=') {
                Some((key, value)) if super::names::is_qualified_name(key) && is_label_value(value) => {
                    EgressPeer::NamespaceLabel { key: key.to_owned(), value: value.to_owned() }
                }
                Some(_) => return None,
                None if is_dns_label(w) => EgressPeer::Namespace(w.to_owned()),
                None => return None,
            },
        };
        words.next().is_none().then_some(Self { port, to })
    }

    /// Whether this rule is one the text could write: a port above 0, a
    /// namespace's name or a label's key and value as Kubernetes takes them.
    pub(crate) fn is_valid(&self) -> bool {
        self.port > 0
            && match &self.to {
                EgressPeer::Anywhere => true,
                EgressPeer::Namespace(ns) => is_dns_label(ns),
                EgressPeer::NamespaceLabel { key, value } => {
                    super::names::is_qualified_name(key) && is_label_value(value)
                }
            }
    }

    /// The NetworkPolicy egress rule.
    pub(crate) fn policy_rule(&self) -> serde_json::Value {
        let ports = serde_json::json!([{"protocol": "TCP", "port": self.port}]);
        let selector =
            |labels: BTreeMap<&str, &str>| serde_json::json!([{"namespaceSelector": {"matchLabels": labels}}]);
        match &self.to {
            EgressPeer::Anywhere => serde_json::json!({"ports": ports}),
            EgressPeer::Namespace(ns) => {
                serde_json::json!({"to": selector(BTreeMap::from([("kubernetes.io/metadata.name", ns.as_str())])), "ports": ports})
            }
            EgressPeer::NamespaceLabel { key, value } => {
                serde_json::json!({"to": selector(BTreeMap::from([(key.as_str(), value.as_str())])), "ports": ports})
            }
        }
    }
}

impl fmt::Display for EgressRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.to {
            EgressPeer::Anywhere => write!(f, "{}", self.port),
            EgressPeer::Namespace(ns) => write!(f, "{} {ns}", self.port),
            EgressPeer::NamespaceLabel { key, value } => write!(f, "{} {key}={value}", self.port),
        }
    }
}

/// A namespace name (RFC 1123 label): lowercase alphanumerics and `-`, at
/// most 63, beginning and ending alphanumeric.
fn is_dns_label(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty() && s.len() <= 63 && s.starts_with(ok) && s.ends_with(ok) && s.chars().all(|c| ok(c) || c == '-')
}

/// A label value: at most 63 characters of alphanumerics, `-`, `_`, `.`,
/// beginning and ending alphanumeric (empty allowed).
fn is_label_value(v: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric();
    v.is_empty()
        || (v.len() <= 63
            && v.starts_with(ok)
            && v.ends_with(ok)
            && v.chars().all(|c| ok(c) || matches!(c, '-' | '_' | '.')))
}

impl ExtraEgress {
    /// One rule per line; blank lines and `#` comments skipped. `None`:
    /// a line is not a rule, or there are more than [`MAX_RULES`].
    pub fn parse(text: &str) -> Option<Self> {
        let lines = text.lines().map(|l| l.split('#').next().unwrap_or_default().trim()).filter(|l| !l.is_empty());
        let rules: Option<Vec<EgressRule>> = lines.map(EgressRule::parse).collect();
        Self(rules?).checked()
    }

    /// Rules given as values (the JSON API), under the text's rules: each
    /// valid, the same rule once, at most [`MAX_RULES`].
    pub fn checked(self) -> Option<Self> {
        let mut seen = std::collections::BTreeSet::new();
        let mut rules = Vec::with_capacity(self.0.len());
        for rule in self.0 {
            if !rule.is_valid() {
                return None;
            }
            if seen.insert(rule.to_string()) {
                rules.push(rule);
            }
        }
        (rules.len() <= MAX_RULES).then_some(Self(rules))
    }

    /// The text the settings form shows (parsed, it gives the rules back).
    pub fn text(&self) -> String {
        self.0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
    }

    /// A short digest of the rules, for the annotation that tells the
    /// reconciler the policy it applied (empty: none).
    pub(crate) fn digest(&self) -> String {
        if self.0.is_empty() {
            return String::new();
        }
        // FNV-1a (32 bits): a change detector, not a secret.
        let hash = self.text().bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
        format!("{hash:08x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(port: u16, name: &str) -> EgressRule {
        EgressRule { port, to: EgressPeer::Namespace(name.into()) }
    }

    #[test]
    fn rules_read_as_the_settings_form_writes_them() {
        let label = |port, k: &str, v: &str| EgressRule {
            port,
            to: EgressPeer::NamespaceLabel { key: k.into(), value: v.into() },
        };
        for (line, want) in [
            ("10443 vcluster-platform", Some(ns(10443, "vcluster-platform"))),
            ("  5556   dex  ", Some(ns(5556, "dex"))),
            ("8080 app.kubernetes.io/part-of=keycloak", Some(label(8080, "app.kubernetes.io/part-of", "keycloak"))),
            ("8080 team=", Some(label(8080, "team", ""))),
            ("9000", Some(EgressRule { port: 9000, to: EgressPeer::Anywhere })),
            ("0 dex", None),
            ("65536", None),
            ("http dex", None),
            ("5556 Dex", None),
            ("5556 dex extra", None),
            ("5556 =dex", None),
            ("5556 a=b=c", None),
            ("5556 -dex", None),
            ("", None),
        ] {
            assert_eq!(EgressRule::parse(line), want, "{line:?}");
            if let Some(rule) = want {
                assert_eq!(EgressRule::parse(&rule.to_string()), Some(rule.clone()), "round trip of {line:?}");
            }
        }
    }

    #[test]
    fn the_list_skips_blanks_and_comments_and_has_a_cap() {
        let text = "# the Platform\n10443 vcluster-platform\n\n5556 dex # Dex\n10443 vcluster-platform\n";
        let got = ExtraEgress::parse(text).unwrap();
        assert_eq!(got.0, vec![ns(10443, "vcluster-platform"), ns(5556, "dex")]);
        assert_eq!(ExtraEgress::parse(&got.text()), Some(got.clone()));
        assert_eq!(ExtraEgress::parse("10443 vcluster-platform\nnonsense"), None);
        let many: String = (1..=33).map(|p| format!("{p}\n")).collect();
        assert_eq!(ExtraEgress::parse(&many), None);
        assert_eq!(ExtraEgress::parse(""), Some(ExtraEgress::default()));
        assert_eq!(ExtraEgress::default().digest(), "");
        assert_eq!(got.digest().len(), 8);
        assert_ne!(got.digest(), ExtraEgress(vec![ns(5556, "dex")]).digest());
    }

    #[test]
    fn each_rule_becomes_a_policy_rule_on_the_pods_port() {
        use serde_json::json;
        assert_eq!(
            ns(10443, "vcluster-platform").policy_rule(),
            json!({"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "vcluster-platform"}}}],
                "ports": [{"protocol": "TCP", "port": 10443}]})
        );
        assert_eq!(
            EgressRule { port: 8080, to: EgressPeer::Anywhere }.policy_rule(),
            json!({"ports": [{"protocol": "TCP", "port": 8080}]})
        );
    }

    /// Rules given as values meet the text's rules.
    #[test]
    fn values_meet_the_texts_rules() {
        let rule = |port, to| EgressRule { port, to };
        let ok = ExtraEgress(vec![
            rule(10443, EgressPeer::Namespace("vcluster-platform".into())),
            rule(5556, EgressPeer::NamespaceLabel { key: "app.kubernetes.io/part-of".into(), value: "dex".into() }),
            rule(8080, EgressPeer::Anywhere),
            rule(8080, EgressPeer::Anywhere),
        ]);
        let checked = ok.clone().checked().unwrap();
        assert_eq!(checked.0.len(), 3, "the same rule once");
        assert_eq!(ExtraEgress::parse(&checked.text()), Some(checked));
        for bad in [
            rule(0, EgressPeer::Anywhere),
            rule(80, EgressPeer::Namespace("Not A Namespace".into())),
            rule(80, EgressPeer::NamespaceLabel { key: "bad key".into(), value: "x".into() }),
            rule(80, EgressPeer::NamespaceLabel { key: "team".into(), value: "-x".into() }),
        ] {
            assert_eq!(ExtraEgress(vec![bad.clone()]).checked(), None, "{bad:?}");
        }
        let many = ExtraEgress((1..=33).map(|p| rule(p, EgressPeer::Anywhere)).collect());
        assert_eq!(many.checked(), None, "more than MAX_RULES");
    }
}
