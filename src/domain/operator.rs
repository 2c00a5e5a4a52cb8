//! What the operator decides of the settings, because each reaches the host
//! itself (environment, `deploy/configmap.yaml`): [`OperatorLimits`].

use super::settings::{DEFAULT_CHART_REPO, PodSecurity, SystemSettings};
use super::{AppError, ErrorCode, Field};

/// The namespace the platform key's Secret must be in unless the operator
/// names another (`KUBEBYON_PLATFORM_KEY_NAMESPACE`), as `deploy/` names it:
/// a namespace of its own, never the console's (whose Secrets — the
/// database URL, the OpenID client secret — no control plane's `get` grant
/// may ever reach).
pub(crate) const DEFAULT_PLATFORM_KEY_NAMESPACE: &str = "kubebyon-platform-key";

/// What the operator decides of the settings (environment,
/// `deploy/configmap.yaml`), because each reaches the host itself, which a
/// console admin is not trusted with: the chart repositories (a HelmChart's
/// Job runs as cluster-admin on k3s), whether tenants' pods may run
/// privileged (Pod Security off: hostPath, host namespaces — root on the
/// node), and the one namespace the platform key's Secret may be read from
/// (the chart grants each own-nodes control plane `get` on that Secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorLimits {
    /// `KUBEBYON_CHART_REPOS` (default: the vCluster repository).
    pub chart_repos: Vec<String>,
    /// `KUBEBYON_ALLOW_PRIVILEGED_PODS`: whether `pod_security: privileged` may be chosen.
    pub privileged_pods: bool,
    /// `KUBEBYON_PLATFORM_KEY_NAMESPACE`.
    pub platform_key_namespace: String,
}

impl Default for OperatorLimits {
    fn default() -> Self {
        Self {
            chart_repos: vec![DEFAULT_CHART_REPO.to_owned()],
            privileged_pods: false,
            platform_key_namespace: DEFAULT_PLATFORM_KEY_NAMESPACE.to_owned(),
        }
    }
}

impl OperatorLimits {
    /// Whether `settings`, as an admin saves them, stay within the limits.
    pub(crate) fn check(&self, settings: &SystemSettings) -> Result<(), AppError> {
        if !super::chart::chart_repo_allowed(&settings.chart_repo, &self.chart_repos) {
            return Err(AppError::at(ErrorCode::ChartRepoNotAllowed, Field::ChartRepo));
        }
        if settings.pod_security == PodSecurity::Privileged && !self.privileged_pods {
            return Err(AppError::at(ErrorCode::PodSecurityNotAllowed, Field::PodSecurity));
        }
        if settings.platform_api_key.as_ref().is_some_and(|k| k.namespace != self.platform_key_namespace) {
            return Err(AppError::at(ErrorCode::PlatformApiKeyNamespace, Field::PlatformApiKey));
        }
        Ok(())
    }

    /// `settings` as they take effect on the host: what the operator does not
    /// allow (stored before the limit, or by an older console) falls back —
    /// `privileged` to `baseline`, a platform key elsewhere to none.
    pub(crate) fn cap(&self, mut settings: SystemSettings) -> SystemSettings {
        if !self.privileged_pods {
            settings.pod_security = PodSecurity::Baseline;
        }
        if settings.platform_api_key.as_ref().is_some_and(|k| k.namespace != self.platform_key_namespace) {
            settings.platform_api_key = None;
        }
        settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::names::SecretRef;

    /// What the operator decides: checked when an admin saves, capped where
    /// the settings take effect.
    #[test]
    fn the_operator_limits_what_reaches_the_host() {
        let strict = OperatorLimits::default();
        let open = OperatorLimits { privileged_pods: true, ..OperatorLimits::default() };
        let key = |ns: &str| Some(SecretRef::parse(&format!("{ns}/vcluster-key")).unwrap());
        let with =
            |pod_security, platform_api_key| SystemSettings { pod_security, platform_api_key, ..Default::default() };
        let refused = |code, field| Err(AppError::at(code, field));
        for (why, limits, settings, want, capped) in [
            ("the defaults", &strict, with(PodSecurity::Baseline, None), Ok(()), (PodSecurity::Baseline, None)),
            (
                "privileged, not allowed",
                &strict,
                with(PodSecurity::Privileged, None),
                refused(ErrorCode::PodSecurityNotAllowed, Field::PodSecurity),
                (PodSecurity::Baseline, None),
            ),
            (
                "privileged, allowed",
                &open,
                with(PodSecurity::Privileged, None),
                Ok(()),
                (PodSecurity::Privileged, None),
            ),
            (
                "the key in the operator's namespace",
                &strict,
                with(PodSecurity::Baseline, key("kubebyon-platform-key")),
                Ok(()),
                (PodSecurity::Baseline, key("kubebyon-platform-key")),
            ),
            (
                "the key in the console's own namespace (its Secrets are no control plane's)",
                &strict,
                with(PodSecurity::Baseline, key("kubebyon")),
                refused(ErrorCode::PlatformApiKeyNamespace, Field::PlatformApiKey),
                (PodSecurity::Baseline, None),
            ),
            (
                "the key elsewhere (the console's own Secrets' namespace of another name)",
                &open,
                with(PodSecurity::Baseline, key("kube-system")),
                refused(ErrorCode::PlatformApiKeyNamespace, Field::PlatformApiKey),
                (PodSecurity::Baseline, None),
            ),
        ] {
            assert_eq!(limits.check(&settings), want, "{why}");
            let c = limits.cap(settings);
            assert_eq!((c.pod_security, c.platform_api_key), capped, "{why}");
        }
        let repo = SystemSettings { chart_repo: "https://charts.example".into(), ..Default::default() };
        assert_eq!(strict.check(&repo), refused(ErrorCode::ChartRepoNotAllowed, Field::ChartRepo));
    }
}
