//! Cluster use cases: list, view, create, update, delete, history. Users see
//! their own clusters and those shared with them, and do with a shared one
//! what their role allows (`domain::membership`); others' read as not
//! found. Admins: all.

use serde::{Deserialize, Serialize};
use sqlx::AnyPool;

use crate::domain::audit::AuditAction;
use crate::domain::change::{ClusterEvent, HISTORY_PAGE, Operation, describe_update};
use crate::domain::cluster::Cluster;
use crate::domain::gateway::HostPolicy;
use crate::domain::membership::{Access, Can};
use crate::domain::public_access::PublicAccessRequest;
use crate::domain::resources::ResourcesRequest;
use crate::domain::user::CurrentUser;
use crate::domain::{AppError, ClusterName, ClusterSpec, ErrorCode, Field, PublicAccess, PublicAccessMode};
use crate::server::db;
use crate::server::service::write_limit::SpecWriteLimiter;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterDraft {
    pub name: String,
    pub resources: ResourcesRequest,
    #[serde(default)]
    pub public_access: Option<PublicAccessRequest>,
    /// The user's own machines join it (vCluster private nodes); fixed after.
    #[serde(default)]
    pub own_nodes: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterPatch {
    #[serde(default)]
    pub resources: Option<ResourcesRequest>,
    #[serde(default)]
    pub public_access: Option<PublicAccessRequest>,
}

/// Users' reads go through here and [`get`]: each cluster as
/// [`Cluster::shown`] (nothing observed for an old spec is presented as current).
/// One page of what `user` may see (admins: everyone's, optionally one
/// owner's), matching the query's search and filters, by name.
pub(crate) async fn list_page(
    pool: &AnyPool,
    user: &CurrentUser,
    query: &crate::domain::listing::ListQuery,
    page_size: u32,
) -> Result<crate::domain::listing::Page<Cluster>, AppError> {
    let mut query = query.clone();
    if !user.is_admin() {
        query.owner = None; // users see only their own anyway
    }
    let owner = (!user.is_admin()).then_some(user.id);
    // Before the rows: a change meanwhile makes the page older than its
    // version says, and it is fetched again.
    let version = db::clusters::list_revision(pool, owner).await?;
    let (items, total) = db::clusters::list_page(pool, owner, &query, page_size).await?;
    Ok(crate::domain::listing::Page {
        version,
        items: items.into_iter().map(Cluster::shown).collect(),
        total,
        page: query.page,
        page_size,
    })
}

/// What `user`'s list follows (`server::push`): an admin's, every cluster.
pub(crate) fn list_topic(user: &CurrentUser) -> crate::server::push::Topic {
    use crate::server::push::Topic;
    if user.is_admin() { Topic::All } else { Topic::User(user.id) }
}

/// The cluster if `user` may see it; `NotFound` otherwise (no existence leak).
pub(crate) async fn get(pool: &AnyPool, user: &CurrentUser, id: i64) -> Result<Cluster, AppError> {
    get_for(pool, user, id, Can::See).await
}

/// The cluster if `user` may do `can` with it: `NotFound` when they may not
/// even see it, `Forbidden` when they see it but may not do this.
pub(crate) async fn get_for(pool: &AnyPool, user: &CurrentUser, id: i64, can: Can) -> Result<Cluster, AppError> {
    let (cluster, access) = super::access::with_access(pool, user, id).await?;
    if access.allows(can) { Ok(cluster) } else { Err(AppError::new(ErrorCode::Forbidden)) }
}

pub async fn create(
    pool: &AnyPool,
    writes: &SpecWriteLimiter,
    policy: &HostPolicy,
    user: &CurrentUser,
    draft: &ClusterDraft,
) -> Result<Cluster, AppError> {
    let name = ClusterName::parse(&draft.name)?;
    let resources = draft.resources.parse()?;
    let settings = db::settings::load(pool).await?;
    // No public access block at all: on, in the admin's default mode.
    let request = draft.public_access.clone().unwrap_or(PublicAccessRequest { enabled: true, ..Default::default() });
    let public_access = PublicAccess::from_input(
        &request.as_input(),
        settings.default_mode,
        &settings.gateway_rules(name.as_str(), policy),
    )?;
    crate::domain::nodes::check_create(draft.own_nodes, &public_access, &settings)?;
    // Placement is the admin's at this moment, kept by the cluster from now on.
    let placement = settings.placement.clone();
    // vCluster's telemetry off for every cluster created from now on (ClusterSpec::telemetry).
    let telemetry = crate::domain::Telemetry::Off;
    let spec = ClusterSpec { name, resources, public_access, own_nodes: draft.own_nodes, placement, telemetry };
    if policy.helm_unsupported {
        return Err(AppError::new(ErrorCode::HelmControllerUnsupported));
    }
    let limit = super::quota::limit_for(pool, user).await?;
    writes.take(user.id)?;
    let id = db::clusters::insert(pool, user.id, &spec, settings.default_mode, limit.as_ref()).await.map_err(|e| {
        if e.is_lb_host_taken() {
            AppError::at(ErrorCode::HostInUse, Field::ControlPlaneHost)
        } else if e.is_unique_violation() {
            AppError::at(ErrorCode::NameTaken, Field::Name)
        } else {
            e.into()
        }
    })?;
    tracing::info!(cluster = id, name = %spec.name, mode = ?spec.public_access.mode(), user = %user.username, "cluster create requested");
    get(pool, user, id).await
}

pub async fn update(
    pool: &AnyPool,
    writes: &SpecWriteLimiter,
    policy: &HostPolicy,
    user: &CurrentUser,
    id: i64,
    patch: &ClusterPatch,
) -> Result<Cluster, AppError> {
    let current = get_for(pool, user, id, Can::Edit).await?;
    if current.deletion_requested {
        return Err(AppError::new(ErrorCode::ClusterDeleting));
    }
    // A stored host that is not a host must be fixed by this edit; keeping the
    // spec as read would silently turn its public access off.
    if current.unusable_host.is_some() && patch.public_access.is_none() {
        return Err(AppError::at(ErrorCode::HostInvalid, Field::ControlPlaneHost));
    }
    let mut spec = current.spec.clone();
    if let Some(resources) = &patch.resources {
        spec.resources = current.spec.resources.edited(resources.parse()?)?;
    }
    // An update without a mode keeps the cluster's own (remembered) mode.
    let remembered = db::clusters::remembered_mode(pool, id).await?;
    if let Some(request) = &patch.public_access {
        // Turned on again as LoadBalancer or gateway (which need a host)
        // without naming one: the host it had before it was turned off. (A
        // NodePort cluster without a host uses the admin's NodePort host, so
        // none is filled in.)
        let mut request = request.clone();
        let mode = request.mode.as_deref().and_then(crate::domain::PublicAccessMode::parse).unwrap_or(remembered);
        if request.enabled
            && request.control_plane_host.is_none()
            && matches!(mode, PublicAccessMode::LoadBalancer | PublicAccessMode::Gateway)
            && !current.spec.public_access.is_enabled()
        {
            request.control_plane_host = db::clusters::remembered_host(pool, id).await?.map(|h| h.to_string());
        }
        let settings = db::settings::load(pool).await?;
        let rules = settings.gateway_rules(current.spec.name.as_str(), policy);
        spec.public_access = PublicAccess::from_input(&request.as_input(), remembered, &rules)?;
        crate::domain::nodes::check_access(spec.own_nodes, &spec.public_access)?;
    }
    let changes = describe_update(&current.spec, &spec);
    if changes.is_empty() {
        return Ok(current);
    }
    if policy.helm_unsupported {
        return Err(AppError::new(ErrorCode::HelmControllerUnsupported));
    }
    writes.take(user.id)?;
    let op = Operation::Update { changes };
    // The owner's quota, whoever of its members edits (admins are not held to it).
    let limit = super::quota::limit_for_owner(pool, user, current.owner_id).await?;
    let hold = limit.as_ref().map(|limit| db::clusters::QuotaHold {
        owner: current.owner_id,
        limit,
        from: current.spec.resources,
    });
    db::clusters::update_spec(pool, id, current.generation, &spec, remembered, &op, user.id, hold)
        .await
        .map_err(|e| {
            if e.is_lb_host_taken() { AppError::at(ErrorCode::HostInUse, Field::ControlPlaneHost) } else { e.into() }
        })?
        .ok_or(AppError::new(ErrorCode::ChangedConcurrently))?;
    tracing::info!(cluster = id, mode = ?spec.public_access.mode(), user = %user.username, "cluster update requested");
    if user.is_admin() && current.owner_id != user.id {
        let detail = format!("owner: {}; {}", current.owner, describe_for_audit(&op));
        let target = format!("cluster:{}", current.spec.name);
        super::audit::record(pool, user, AuditAction::ClusterChangedByAdmin, &target, &detail).await;
    }
    get(pool, user, id).await
}

/// An update's changes as the audit log shows them (the operation's JSON).
fn describe_for_audit(op: &Operation) -> String {
    match op {
        Operation::Update { changes } => serde_json::to_string(changes).unwrap_or_default(),
        _ => String::new(),
    }
}

/// `confirm` (the form's typed name) must match when given.
pub(crate) async fn delete(
    pool: &AnyPool,
    writes: &SpecWriteLimiter,
    user: &CurrentUser,
    id: i64,
    confirm: Option<&str>,
) -> Result<Cluster, AppError> {
    let current = get_for(pool, user, id, Can::Delete).await?;
    if confirm.is_some_and(|typed| typed.trim() != current.spec.name.as_str()) {
        return Err(AppError::at(ErrorCode::ConfirmationMismatch, Field::Confirm));
    }
    writes.take(user.id)?;
    if !db::clusters::request_deletion(pool, id, user.id).await? {
        return Err(AppError::new(ErrorCode::ClusterDeleting));
    }
    tracing::info!(cluster = id, user = %user.username, "cluster delete requested");
    if user.is_admin() && current.owner_id != user.id {
        let target = format!("cluster:{}", current.spec.name);
        let detail = format!("owner: {}", current.owner);
        super::audit::record(pool, user, AuditAction::ClusterDeletedByAdmin, &target, &detail).await;
    }
    get(pool, user, id).await
}

/// Moves a cluster to another owner (console admins only): the new owner
/// must be an enabled account whose quota holds the cluster (an admin's
/// holds anything, as for their own clusters); their membership, if any,
/// goes; the previous owner keeps no access unless they are a member (or a
/// console admin). Audited; the cluster's bindings follow at once.
pub(crate) async fn transfer(
    pool: &AnyPool,
    host: Option<&super::HostHandle>,
    admin: &CurrentUser,
    id: i64,
    new_owner: &str,
) -> Result<Cluster, AppError> {
    admin.require_admin()?;
    let current = get(pool, admin, id).await?;
    if current.deletion_requested {
        return Err(AppError::new(ErrorCode::ClusterDeleting));
    }
    let row = db::users::by_username(pool, new_owner.trim())
        .await?
        .ok_or(AppError::at(ErrorCode::MemberUnknown, Field::Owner))?;
    if row.disabled_at.is_some() {
        return Err(AppError::at(ErrorCode::OwnerDisabled, Field::Owner));
    }
    let owner = row.current_user();
    let limit = if owner.is_admin() {
        None
    } else {
        let platform = db::settings::load(pool).await?.quota;
        Some(crate::domain::quota::Quota::effective(&platform, &row.quota()))
    };
    let moved = db::clusters::transfer(pool, id, owner.id, limit.as_ref()).await.map_err(|e| match e {
        db::DbError::OverQuota(_) => AppError::at(ErrorCode::OwnerQuotaExceeded, Field::Owner),
        e => e.into(),
    })?;
    let Some(previous) = moved else { return Err(AppError::new(ErrorCode::NotFound)) };
    if previous != owner.id {
        tracing::info!(cluster = id, owner = %owner.username, "cluster moved to another owner");
        let target = format!("cluster:{}", current.spec.name);
        let detail = format!("owner: {} → {}", current.owner, owner.username);
        super::audit::record(pool, admin, AuditAction::OwnerChanged, &target, &detail).await;
        super::credentials::resync(pool, host, &[id]).await;
    }
    get(pool, admin, id).await
}

/// One page of a cluster's request history (newest first, [`HISTORY_PAGE`]
/// at most, older than the event `before`).
pub(crate) async fn events(
    pool: &AnyPool,
    user: &CurrentUser,
    id: i64,
    before: Option<i64>,
) -> Result<Vec<ClusterEvent>, AppError> {
    history(pool, &get(pool, user, id).await?, before).await
}

/// The address a gateway-mode cluster's DNS name must point to: the admin's
/// Gateway's, as the host reports it (`None` in another mode, without a host
/// or an offer, or before the Gateway has one).
pub(crate) async fn gateway_address(
    host: Option<&super::HostHandle>,
    cluster: &Cluster,
    offer: Option<&crate::domain::gateway::GatewayOffer>,
) -> Option<String> {
    match (&cluster.spec.public_access, host, offer) {
        (PublicAccess::Gateway { .. }, Some(h), Some(offer)) => h.gateway_address(&offer.gateway).await,
        _ => None,
    }
}

/// Everything a cluster's pages show ([`Detail`]).
pub(crate) async fn detail(
    pool: &AnyPool,
    user: &CurrentUser,
    id: i64,
    before: Option<i64>,
) -> Result<Detail, AppError> {
    let (cluster, access) = super::access::with_access(pool, user, id).await?;
    let events = history(pool, &cluster, before).await?;
    let remembered_mode = db::clusters::remembered_mode(pool, id).await?;
    let remembered_host = db::clusters::remembered_host(pool, id).await?;
    let members = db::members::list(pool, id).await?;
    Ok(Detail { cluster, access, events, remembered_mode, remembered_host, members })
}

/// The cluster, how the caller reaches it, its history, the mode and host a
/// disabled cluster returns to, and who it is shared with.
pub(crate) struct Detail {
    pub cluster: Cluster,
    pub access: Access,
    pub events: Vec<ClusterEvent>,
    pub remembered_mode: PublicAccessMode,
    pub remembered_host: Option<crate::domain::Host>,
    pub members: Vec<crate::domain::membership::Member>,
}

/// A page of the history of a cluster the caller already may see (from `get`).
pub(crate) async fn history(
    pool: &AnyPool,
    cluster: &Cluster,
    before: Option<i64>,
) -> Result<Vec<ClusterEvent>, AppError> {
    let rows = db::operations::history_page(pool, cluster.id, before, HISTORY_PAGE).await?;
    Ok(rows.into_iter().map(db::operations::OperationRow::into_event).collect::<Result<_, _>>()?)
}

/// Tests the cluster's public endpoint now, as `kubectl version` would with its
/// kubeconfig (owner or admin), and wakes the reconciler. No endpoint, no host
/// or nothing readable on the host: `kubeconfig_unavailable`.
pub(crate) async fn probe(
    pool: &AnyPool,
    host: Option<&super::HostHandle>,
    user: &CurrentUser,
    id: i64,
) -> Result<crate::domain::cluster::ProbeOutcome, AppError> {
    let cluster = get(pool, user, id).await?;
    let unavailable = || AppError::new(ErrorCode::KubeconfigUnavailable);
    let host = host.ok_or_else(unavailable)?;
    let _call = host.user_calls().take(user.id)?;
    super::wake(Some(host));
    match host.probe_now(&cluster).await {
        Ok(Some(r)) => Ok(crate::domain::cluster::ProbeOutcome { status: r.status, detail: r.detail }),
        Ok(None) => Err(unavailable()),
        Err(e) => {
            tracing::warn!(cluster = cluster.id, error = %e, "probe failed");
            Err(unavailable())
        }
    }
}

/// The owner (or an admin) has read the notice that the cluster's endpoint moved.
pub(crate) async fn dismiss_moved_notice(pool: &AnyPool, user: &CurrentUser, id: i64) -> Result<(), AppError> {
    get_for(pool, user, id, Can::Edit).await?;
    db::moves::dismiss_notice(pool, id).await?;
    Ok(())
}
