//! A cluster's name: a DNS-1123 label that also names the Helm release, the
//! vCluster Service and the `vc-<name>` Secret on the host cluster.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{AppError, ErrorCode, Field};

/// Longest name we accept. Kubernetes allows 63, but the host cluster derives
/// longer names from it (`helm-install-<name>` Jobs, `vc-<name>` Secrets).
pub(crate) const MAX_LEN: usize = 40;

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ClusterName(String);

impl ClusterName {
    /// Lowercase letters, digits and `-`; starts with a letter (Service names
    /// are DNS-1035 labels), ends with a letter or digit.
    pub fn parse(raw: &str) -> Result<Self, AppError> {
        let s = raw.trim();
        let bytes = s.as_bytes();
        let valid = !s.is_empty()
            && s.len() <= MAX_LEN
            && bytes[0].is_ascii_lowercase()
            && bytes[s.len() - 1] != b'-'
            && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-');
        if valid { Ok(Self(s.to_owned())) } else { Err(AppError::at(ErrorCode::NameInvalid, Field::Name)) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for ClusterName {
    type Error = AppError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<ClusterName> for String {
    fn from(value: ClusterName) -> Self {
        value.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let long_ok = format!("a{}", "b".repeat(MAX_LEN - 1));
        let too_long = format!("a{}", "b".repeat(MAX_LEN));
        let cases: &[(&str, Option<&str>)] = &[
            ("dev", Some("dev")),
            ("team-a-01", Some("team-a-01")),
            ("  padded  ", Some("padded")),
            (long_ok.as_str(), Some(long_ok.as_str())),
            ("", None),
            ("   ", None),
            (too_long.as_str(), None),
            ("Dev", None),
            ("1abc", None),
            ("-abc", None),
            ("abc-", None),
            ("a_b", None),
            ("a.b", None),
            ("a b", None),
            ("集群", None),
        ];
        for (raw, want) in cases {
            let got = ClusterName::parse(raw).ok();
            assert_eq!(got.as_ref().map(ClusterName::as_str), *want, "input {raw:?}");
        }
    }

    #[test]
    fn error_points_at_the_name_field() {
        assert_eq!(ClusterName::parse("Bad").unwrap_err(), AppError::at(ErrorCode::NameInvalid, Field::Name));
    }
}
