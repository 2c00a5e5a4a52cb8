//! The vCluster chart the host installs: its repository and exact version.

use super::{AppError, ErrorCode, Field};

/// The vCluster chart installed unless the admin picks another.
pub(crate) const DEFAULT_CHART_REPO: &str = "https://charts.loft.sh";
pub(crate) const DEFAULT_CHART_VERSION: &str = "0.30.0";

/// A Helm chart repository: an `http(s)://` or `oci://` URL with a host and no
/// spaces, quotes or query.
pub(crate) fn is_chart_repo(s: &str) -> bool {
    // Only TLS or OCI, never credentials in the URL (`user:pass@host`).
    let rest = ["https://", "oci://"].iter().find_map(|p| s.strip_prefix(p));
    rest.is_some_and(|r| {
        let host = r.split('/').next().unwrap_or_default();
        s.len() <= 512
            && !host.is_empty()
            && !host.contains('@')
            && r.bytes().all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'?' | b'#' | b'\\' | b'`'))
    })
}

/// Whether the operator allows the console's admins to point the host at
/// `repo` (`KUBEBYON_CHART_REPOS`; a HelmChart's Job runs with cluster-admin
/// rights on k3s, so the chart is the operator's choice, not only the
/// admin's). Compared without a trailing slash.
pub(crate) fn chart_repo_allowed(repo: &str, allowed: &[String]) -> bool {
    let bare = |s: &str| s.trim().trim_end_matches('/').to_owned();
    allowed.iter().any(|a| bare(a) == bare(repo))
}

/// A chart version as Helm takes it exactly: SemVer 2 `MAJOR.MINOR.PATCH`, with
/// an optional pre-release and build (no ranges: a range would let helm upgrade
/// every cluster on its own).
pub(crate) fn is_chart_version(s: &str) -> bool {
    let (core, build) = s.split_once('+').map_or((s, None), |(c, b)| (c, Some(b)));
    let (core, pre) = core.split_once('-').map_or((core, None), |(c, p)| (c, Some(p)));
    let ident = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let nums: Vec<&str> = core.split('.').collect();
    s.len() <= 64
        && nums.len() == 3
        && nums
            .iter()
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && (n.len() == 1 || !n.starts_with('0')))
        && pre.is_none_or(|p| p.split('.').all(ident))
        && build.is_none_or(|b| b.split('.').all(ident))
}

/// A repository as stored: trimmed, and a chart repository.
pub(crate) fn repo(given: &str) -> Result<String, AppError> {
    let repo = given.trim();
    if is_chart_repo(repo) {
        Ok(repo.to_owned())
    } else {
        Err(AppError::at(ErrorCode::ChartRepoInvalid, Field::ChartRepo))
    }
}

/// A version as stored: trimmed, and an exact SemVer.
pub(crate) fn version(given: &str) -> Result<String, AppError> {
    let version = given.trim();
    if is_chart_version(version) {
        Ok(version.to_owned())
    } else {
        Err(AppError::at(ErrorCode::ChartVersionInvalid, Field::ChartVersion))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_repos_the_operator_allows() {
        let allowed = vec!["https://charts.loft.sh".to_owned(), "oci://registry.example/charts/".to_owned()];
        for (repo, ok) in [
            ("https://charts.loft.sh", true),
            ("https://charts.loft.sh/", true),
            ("oci://registry.example/charts", true),
            ("https://charts.example.com", false),
            ("https://charts.loft.sh.evil.example", false),
            ("oci://registry.example", false),
        ] {
            assert_eq!(chart_repo_allowed(repo, &allowed), ok, "{repo}");
        }
    }

    #[test]
    fn repo_and_version_table() {
        assert_eq!(repo(" oci://registry.example/charts "), Ok("oci://registry.example/charts".into()));
        assert_eq!(version("0.31.0-rc.1+b7"), Ok("0.31.0-rc.1+b7".into()));
        let bad_repo = Err(AppError::at(ErrorCode::ChartRepoInvalid, Field::ChartRepo));
        for r in [
            "",
            "charts.loft.sh",
            "https://",
            "https://a b",
            "https://x/?q=1",
            "http://charts.loft.sh",
            "https://user:secret@charts.example.com",
            "oci://token@registry.example/charts",
            "file:///etc/charts",
        ] {
            assert_eq!(repo(r), bad_repo, "{r}");
        }
        let bad_version = Err(AppError::at(ErrorCode::ChartVersionInvalid, Field::ChartVersion));
        for v in ["", "v0.30.0", "0.30", "^0.30.0", "0.030.0", "0.30.0-"] {
            assert_eq!(version(v), bad_version, "{v}");
        }
    }
}
