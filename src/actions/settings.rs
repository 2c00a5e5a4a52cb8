//! System settings server functions (admins only).

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::domain::egress::ExtraEgress;
use crate::domain::membership::CredentialLifetime;
use crate::domain::names::SecretRef;
use crate::domain::settings::{AddressStyle, PodSecurity, SettingsPatch, SettingsView, parse_switch};
use crate::domain::{AppError, ErrorCode, Field, Host, PublicAccessMode};

#[server(prefix = "/fn", endpoint = "settings/get")]
pub(crate) async fn load_settings() -> Result<SettingsView, AppError> {
    use crate::server::context::{require_admin, state};
    let st = state()?;
    let (policy, limits) = (st.config.host_policy(), st.config.operator_limits());
    crate::server::service::settings::view(&st.pool, st.host.as_ref(), &policy, &limits, &require_admin()?).await
}

/// The settings form as the browser posts it: every field as text, under
/// the names the form has always posted. The first seven every form sends;
/// the others an older page may lack (what is stored is kept). The one
/// place settings are read from text ([`SettingsForm::into_patch`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct SettingsForm {
    pub default_mode: String,
    pub nodeport_public_host: String,
    /// One `key: value` (or `key=value`) per line.
    pub load_balancer_annotations: String,
    pub load_balancer_class: String,
    pub load_balancer_address_request: String,
    pub chart_repo: String,
    pub chart_version: String,
    pub quota_clusters: Option<String>,
    pub quota_cpu: Option<String>,
    pub quota_memory_gib: Option<String>,
    pub quota_storage_gib: Option<String>,
    pub pod_security: Option<String>,
    /// `on` or `off`.
    pub network_policy: Option<String>,
    /// `on` or `off` (empty: off).
    pub private_nodes: Option<String>,
    /// `namespace/name`, or empty.
    pub platform_api_key: Option<String>,
    /// `namespace/name`, or empty (no gateway mode); with its listener.
    pub gateway: Option<String>,
    pub gateway_listener: Option<String>,
    pub gateway_domain_suffix: Option<String>,
    /// `off` / `preferred` / `required` (empty: off).
    pub spread: Option<String>,
    pub spread_topology_key: Option<String>,
    pub storage_class: Option<String>,
    /// `8h`, `30d` … (empty: 8 hours).
    pub kubeconfig_max_lifetime: Option<String>,
    /// One `PORT [NAMESPACE | KEY=VALUE]` per line.
    pub extra_egress: Option<String>,
}

impl SettingsForm {
    /// Each field read with its type's own constructor, in the form's order
    /// (the first bad field is the one reported).
    pub(crate) fn into_patch(self) -> Result<SettingsPatch, AppError> {
        use crate::domain::{chart, gateway, load_balancer, placement, quota};
        Ok(SettingsPatch {
            default_mode: Some(
                PublicAccessMode::parse(&self.default_mode)
                    .ok_or(AppError::at(ErrorCode::ModeInvalid, Field::DefaultMode))?,
            ),
            nodeport_public_host: Some(
                Host::parse_optional(&self.nodeport_public_host)
                    .map_err(|_| AppError::at(ErrorCode::HostInvalid, Field::NodeportPublicHost))?,
            ),
            load_balancer_annotations: Some(load_balancer::annotations(annotation_lines(
                &self.load_balancer_annotations,
            )?)?),
            load_balancer_class: Some(load_balancer::class(&self.load_balancer_class)?),
            load_balancer_address_request: Some(
                AddressStyle::parse(&self.load_balancer_address_request)
                    .ok_or(AppError::at(ErrorCode::AddressRequestInvalid, Field::LoadBalancerAddressRequest))?,
            ),
            chart_repo: Some(chart::repo(&self.chart_repo)?),
            chart_version: Some(chart::version(&self.chart_version)?),
            quota_clusters: each(self.quota_clusters, quota::parse_clusters)?,
            quota_cpu_millis: each(self.quota_cpu, quota::parse_cpu)?,
            quota_memory_gib: each(self.quota_memory_gib, |t| quota::parse_gib(t, quota::Dimension::Memory))?,
            quota_storage_gib: each(self.quota_storage_gib, |t| quota::parse_gib(t, quota::Dimension::Storage))?,
            pod_security: each(self.pod_security, |t| {
                PodSecurity::parse(t).ok_or(AppError::at(ErrorCode::BadRequest, Field::PodSecurity))
            })?,
            network_policy: each(self.network_policy, |t| {
                parse_switch(t).ok_or(AppError::at(ErrorCode::BadRequest, Field::NetworkPolicy))
            })?,
            private_nodes: each(self.private_nodes, |t| match t.trim() {
                "" => Ok(false),
                s => parse_switch(s).ok_or(AppError::at(ErrorCode::BadRequest, Field::PrivateNodes)),
            })?,
            platform_api_key: each(self.platform_api_key, |t| match t.trim() {
                "" => Ok(None),
                s => SecretRef::parse(s).map(Some),
            })?,
            // An older page has neither field; a listener alone changes nothing.
            gateway: self
                .gateway
                .map(|g| gateway::GatewayRef::parse(&g, self.gateway_listener.as_deref().unwrap_or_default()))
                .transpose()?,
            gateway_domain_suffix: each(self.gateway_domain_suffix, gateway::parse_suffix)?,
            spread: each(self.spread, placement::parse_spread)?,
            spread_topology_key: each(self.spread_topology_key, placement::topology_key)?,
            storage_class: each(self.storage_class, placement::storage_class)?,
            kubeconfig_max_lifetime: each(self.kubeconfig_max_lifetime, |t| {
                CredentialLifetime::parse(t)
                    .map_err(|_| AppError::at(ErrorCode::CredentialLifetimeInvalid, Field::KubeconfigMaxLifetime))
            })?,
            extra_egress: each(self.extra_egress, |t| {
                ExtraEgress::parse(t).ok_or(AppError::at(ErrorCode::EgressInvalid, Field::ExtraEgress))
            })?,
        })
    }
}

/// A field an older page may lack, read when given.
fn each<T>(text: Option<String>, read: impl Fn(&str) -> Result<T, AppError>) -> Result<Option<T>, AppError> {
    text.map(|t| read(&t)).transpose()
}

/// `key: value` (or `key=value`) lines, blank ones skipped; the pairs'
/// own rules are [`crate::domain::load_balancer::annotations`]'.
fn annotation_lines(text: &str) -> Result<Vec<(String, String)>, AppError> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| {
            let at = match (line.find(':'), line.find('=')) {
                (Some(c), Some(e)) => c.min(e),
                (Some(i), None) | (None, Some(i)) => i,
                (None, None) => {
                    return Err(AppError::at(ErrorCode::AnnotationsInvalid, Field::LoadBalancerAnnotations));
                }
            };
            Ok((line[..at].to_owned(), line[at + 1..].to_owned()))
        })
        .collect()
}

#[server(prefix = "/fn", endpoint = "settings/save")]
pub(crate) async fn save_settings(#[server(flatten)] form: SettingsForm) -> Result<(), AppError> {
    use crate::server::context::{require_admin, state};
    let (st, admin) = (state()?, require_admin()?);
    let (_, rerendered) = crate::server::service::settings::update(
        &st.pool,
        st.host.as_ref(),
        &admin,
        form.into_patch()?,
        &st.config.operator_limits(),
    )
    .await?;
    leptos_axum::redirect(&format!("/admin/settings?saved=1&rerendered={rerendered}"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::SystemSettings;
    use crate::domain::settings::{AddressStyle, DEFAULT_CHART_REPO, DEFAULT_CHART_VERSION};

    fn form(mode: &str, host: &str, ann: &str, class: &str) -> SettingsForm {
        SettingsForm {
            default_mode: mode.into(),
            nodeport_public_host: host.into(),
            load_balancer_annotations: ann.into(),
            load_balancer_class: class.into(),
            load_balancer_address_request: "auto".into(),
            chart_repo: DEFAULT_CHART_REPO.into(),
            chart_version: DEFAULT_CHART_VERSION.into(),
            quota_clusters: Some("5".into()),
            quota_cpu: Some("16".into()),
            quota_memory_gib: Some("64".into()),
            quota_storage_gib: Some("500".into()),
            pod_security: Some("baseline".into()),
            network_policy: Some("on".into()),
            private_nodes: Some(String::new()),
            ..SettingsForm::default()
        }
    }

    /// What saving the form over the defaults gives (the cross-field rules too).
    fn saved(f: SettingsForm) -> Result<SystemSettings, AppError> {
        let s = f.into_patch()?.apply(SystemSettings::default());
        s.validate()?;
        Ok(s)
    }

    #[test]
    fn the_form_reads_each_field_and_names_the_bad_one() {
        let ok = saved(form(
            "loadbalancer",
            " 203.0.113.10 ",
            "metallb.io/address-pool: public\n\nmetallb.io/allow-shared-ip=team-a\n",
            "metallb.io/metallb",
        ))
        .unwrap();
        assert_eq!(ok.default_mode, PublicAccessMode::LoadBalancer);
        assert_eq!(ok.nodeport_public_host, Some(Host::Ipv4([203, 0, 113, 10].into())));
        assert_eq!(ok.load_balancer_annotations["metallb.io/allow-shared-ip"], "team-a");
        assert_eq!(ok.load_balancer_annotations.len(), 2);
        assert_eq!(ok.load_balancer_class.as_deref(), Some("metallb.io/metallb"));
        assert_eq!(saved(form("nodeport", "", "", "")), Ok(SystemSettings::default()));
        let err = |code, field| Err(AppError::at(code, field));
        let with = |f: fn(&mut SettingsForm)| {
            let mut x = form("nodeport", "", "", "");
            f(&mut x);
            x
        };
        for (bad, want) in [
            (form("", "", "", ""), err(ErrorCode::ModeInvalid, Field::DefaultMode)),
            (form("ingress", "", "", ""), err(ErrorCode::ModeInvalid, Field::DefaultMode)),
            (form("gateway", "", "", ""), err(ErrorCode::GatewayNotConfigured, Field::DefaultMode)),
            (form("nodeport", "http://x", "", ""), err(ErrorCode::HostInvalid, Field::NodeportPublicHost)),
            (
                form("nodeport", "", "no separator", ""),
                err(ErrorCode::AnnotationsInvalid, Field::LoadBalancerAnnotations),
            ),
            (
                form("nodeport", "", "bad key!: x", ""),
                err(ErrorCode::AnnotationsInvalid, Field::LoadBalancerAnnotations),
            ),
            (
                form("nodeport", "", "a: 1\na: 2", ""),
                err(ErrorCode::AnnotationsInvalid, Field::LoadBalancerAnnotations),
            ),
            (
                form("nodeport", "", "", "not a class!"),
                err(ErrorCode::LoadBalancerClassInvalid, Field::LoadBalancerClass),
            ),
            (
                with(|f| f.load_balancer_address_request = "cilium".into()),
                err(ErrorCode::AddressRequestInvalid, Field::LoadBalancerAddressRequest),
            ),
            (
                with(|f| f.chart_repo = "http://charts.loft.sh".into()),
                err(ErrorCode::ChartRepoInvalid, Field::ChartRepo),
            ),
            (with(|f| f.chart_version = "^0.30.0".into()), err(ErrorCode::ChartVersionInvalid, Field::ChartVersion)),
            (with(|f| f.quota_cpu = Some("0.0001".into())), err(ErrorCode::QuotaInvalid, Field::QuotaCpu)),
            (with(|f| f.pod_security = Some("restricted".into())), err(ErrorCode::BadRequest, Field::PodSecurity)),
            (with(|f| f.network_policy = Some(String::new())), err(ErrorCode::BadRequest, Field::NetworkPolicy)),
            (with(|f| f.private_nodes = Some("maybe".into())), err(ErrorCode::BadRequest, Field::PrivateNodes)),
            (
                with(|f| f.platform_api_key = Some("nope".into())),
                err(ErrorCode::PlatformApiKeyInvalid, Field::PlatformApiKey),
            ),
            (with(|f| f.gateway = Some("shared".into())), err(ErrorCode::GatewayInvalid, Field::Gateway)),
            (
                with(|f| f.gateway_domain_suffix = Some("10.0.0.1".into())),
                err(ErrorCode::GatewaySuffixInvalid, Field::GatewayDomainSuffix),
            ),
            (with(|f| f.spread = Some("sometimes".into())), err(ErrorCode::SpreadInvalid, Field::Spread)),
            (
                with(|f| f.storage_class = Some("Bad Class".into())),
                err(ErrorCode::StorageClassInvalid, Field::StorageClass),
            ),
            (
                with(|f| f.kubeconfig_max_lifetime = Some("2y".into())),
                err(ErrorCode::CredentialLifetimeInvalid, Field::KubeconfigMaxLifetime),
            ),
            (
                with(|f| f.extra_egress = Some("10443 Not A Namespace".into())),
                err(ErrorCode::EgressInvalid, Field::ExtraEgress),
            ),
        ] {
            assert_eq!(saved(bad.clone()), want, "{bad:?}");
        }
    }

    /// Gateway, placement, address style, chart and egress fields as the form writes them.
    #[test]
    fn gateway_placement_and_the_rest() {
        let mut f = form("gateway", "", "", "");
        f.gateway = Some("kube-system/shared".into());
        f.gateway_listener = Some("tls".into());
        f.gateway_domain_suffix = Some("K.Test".into());
        f.spread = Some("preferred".into());
        f.storage_class = Some("fast".into());
        f.load_balancer_address_request = "kube-vip".into();
        f.chart_repo = " oci://registry.example/charts ".into();
        f.chart_version = "0.31.0-rc.1+b7".into();
        f.extra_egress = Some("10443 vcluster-platform\n5556".into());
        let ok = saved(f).unwrap();
        assert_eq!(
            ok.gateway.as_ref().map(|g| (g.key(), g.listener.clone())),
            Some(("kube-system/shared".into(), Some("tls".into())))
        );
        assert_eq!(ok.gateway_domain_suffix, Some(Host::Dns("k.test".into())));
        assert_eq!((ok.placement.spread.as_str(), ok.placement.storage_class.as_deref()), ("preferred", Some("fast")));
        assert_eq!(ok.load_balancer_address_request, AddressStyle::KubeVip);
        assert_eq!(
            (ok.chart_repo.as_str(), ok.chart_version.as_str()),
            ("oci://registry.example/charts", "0.31.0-rc.1+b7")
        );
        assert_eq!(ok.extra_egress.text(), "10443 vcluster-platform\n5556");
    }

    /// A page without the later fields keeps what is stored; an empty text
    /// clears an optional field.
    #[test]
    fn fields_an_older_page_lacks_are_kept() {
        let mut stored = SystemSettings::default();
        stored.quota.cpu_millis = Some(2_500);
        stored.network_policy = false;
        let older = SettingsForm {
            quota_clusters: None,
            quota_cpu: None,
            network_policy: None,
            ..form("nodeport", "", "", "")
        };
        let s = older.into_patch().unwrap().apply(stored.clone());
        assert_eq!((s.quota.cpu_millis, s.network_policy), (Some(2_500), false));
        let cleared = SettingsForm { quota_cpu: Some(String::new()), ..form("nodeport", "", "", "") };
        assert_eq!(cleared.into_patch().unwrap().apply(stored).quota.cpu_millis, None);
    }
}
