//! Reading and changing the platform defaults (admins only for changes).

use sqlx::AnyPool;

use crate::domain::cluster::Cluster;
use crate::domain::render;
use crate::domain::settings::{AddressRequest, SettingsPatch};
use crate::domain::user::CurrentUser;
use crate::domain::{AppError, SystemSettings};
use crate::server::db;

/// The whole settings, for the admin's page and API.
pub(crate) async fn get(pool: &AnyPool, user: &CurrentUser) -> Result<SystemSettings, AppError> {
    user.require_admin()?;
    Ok(db::settings::load(pool).await?)
}

/// The settings page: the whole settings and what the host shows of itself
/// (its LoadBalancer provider, ServiceLB, Gateway API, StorageClasses, the
/// platform key's Secret; `None`
/// where there is no host or it did not answer).
pub(crate) async fn view(
    pool: &AnyPool,
    host: Option<&super::HostHandle>,
    policy: &crate::domain::gateway::HostPolicy,
    limits: &crate::domain::operator::OperatorLimits,
    user: &CurrentUser,
) -> Result<crate::domain::settings::SettingsView, AppError> {
    let settings = get(pool, user).await?;
    // The host's facts, within the admin's call budget (`host::call_budget`).
    let _call = host.map(|h| h.user_calls().take(user.id)).transpose()?;
    let (gateway_api, storage_classes) = match host {
        Some(h) => (h.gateway_api_view().await.ok(), h.storage_classes().await.ok()),
        None => (None, None),
    };
    // Own nodes' clusters read the key: a missing Secret fails their install.
    // Only a key the operator's limits let take effect is looked for.
    let platform_key_found = match (host, &limits.cap(settings.clone()).platform_api_key) {
        (Some(h), Some(key)) if settings.private_nodes => h.secret_exists(key).await.ok(),
        _ => None,
    };
    let (detected, servicelb) = detected(host);
    Ok(crate::domain::settings::SettingsView {
        settings,
        detected,
        servicelb: servicelb.unwrap_or(false),
        gateway_api,
        storage_classes,
        platform_key_found,
        gateway_any_host: policy.any_host,
        helm_problem: host.and_then(|h| h.seen.helm_problem()),
    })
}

/// How the host's LoadBalancer provider is asked for an address, and whether
/// k3s's ServiceLB was seen serving the console's Services (`None` without a
/// host).
pub(crate) fn detected(host: Option<&super::HostHandle>) -> (Option<AddressRequest>, Option<bool>) {
    (host.map(|h| h.seen.detected()), host.map(|h| h.seen.servicelb()))
}

/// What any signed-in user's forms and pages show of the settings: the default
/// public access mode and the NodePort public host.
pub(crate) async fn public_defaults(pool: &AnyPool) -> Result<PublicDefaults, AppError> {
    let s = db::settings::load(pool).await?;
    Ok(PublicDefaults {
        default_mode: s.default_mode,
        nodeport_public_host: s.nodeport_public_host,
        own_nodes_offered: s.private_nodes,
        gateway: crate::domain::gateway::GatewayOffer::of(s.gateway.as_ref(), s.gateway_domain_suffix.as_ref()),
        kubeconfig_max_lifetime: s.kubeconfig_max_lifetime,
    })
}

/// See [`public_defaults`].
pub(crate) struct PublicDefaults {
    pub default_mode: crate::domain::PublicAccessMode,
    pub nodeport_public_host: Option<crate::domain::Host>,
    /// Whether the create form offers own nodes.
    pub own_nodes_offered: bool,
    /// Gateway access, when the admin offers it.
    pub gateway: Option<crate::domain::gateway::GatewayOffer>,
    /// The longest a user's own kubeconfig may last.
    pub kubeconfig_max_lifetime: crate::domain::membership::CredentialLifetime,
}

/// Applies `patch` to the stored settings (a field it leaves out keeps its
/// stored value), checks the rules across fields and the operator's limits,
/// and stores the result; returns it and how many
/// clusters' HelmCharts render differently under it; this process's
/// reconciler, when it runs one, re-renders them now (`host`, which also
/// tells how the host's LoadBalancer provider is asked).
pub(crate) async fn update(
    pool: &AnyPool,
    host: Option<&super::HostHandle>,
    user: &CurrentUser,
    patch: SettingsPatch,
    limits: &crate::domain::operator::OperatorLimits,
) -> Result<(SystemSettings, usize), AppError> {
    user.require_admin()?;
    let detected = super::HostLink::of(host).detected;
    let before = db::settings::load(pool).await?;
    let settings = patch.apply(before.clone());
    settings.validate()?;
    limits.check(&settings)?;
    db::settings::save(pool, &settings).await?;
    let clusters = db::clusters::list(pool, None).await?;
    let rerendered = rerendered(&clusters, &before, &settings, detected);
    tracing::info!(admin = %user.username, default_mode = %settings.default_mode, rerendered, "system settings changed");
    let json = |s: &SystemSettings| serde_json::to_value(s).unwrap_or_default();
    let changed = crate::domain::audit::diff(&json(&before), &json(&settings));
    super::audit::record(pool, user, crate::domain::audit::AuditAction::SettingsChanged, "settings", &changed).await;
    if let Some(host) = host {
        host.resync_all();
    }
    Ok((settings, rerendered))
}

/// The clusters (not being deleted) whose HelmChart differs between two settings.
pub(crate) fn rerendered(
    clusters: &[Cluster],
    before: &SystemSettings,
    after: &SystemSettings,
    detected: Option<AddressRequest>,
) -> usize {
    // The host's failure policy is the same on both sides of the comparison.
    let chart = |c: &Cluster, s: &SystemSettings| {
        render::desired(c, s, s.load_balancer_address_request.resolve(detected), render::FailurePolicy::Retry)
    };
    clusters.iter().filter(|c| !c.deletion_requested && chart(c, before) != chart(c, after)).count()
}
