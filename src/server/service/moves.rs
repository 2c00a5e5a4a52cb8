//! Moving NodePort clusters to LoadBalancer (admins): the dry run, starting a
//! move, the driver that switches its clusters through the ordinary
//! update path with bounded concurrency, retry and roll back, and the
//! progress view. All state is in the database, so a restarted console (or
//! `kubebyon move`) picks up where it stopped; every item step is a
//! conditional update, so no cluster is switched twice.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use futures::StreamExt;
use sqlx::AnyPool;

use super::HostLink;
use crate::domain::audit::AuditAction;
use crate::domain::change::{Change, Operation, describe_update};
use crate::domain::cluster::{Cluster, OldEndpoint};
use crate::domain::endpoint::Endpoint;
use crate::domain::moves::{
    self, Candidate, ItemState, ItemView, MoveRequest, MoveView, Plan, PlanItem, Problem, ValueChange,
};
use crate::domain::render;
use crate::domain::user::CurrentUser;
use crate::domain::{AppError, ErrorCode, Field, Host, PublicAccess, PublicAccessMode, StopReason};
use crate::server::db;
use crate::server::db::moves::{ItemRow, NewItem};

pub(crate) use crate::domain::moves::{DEFAULT_CONCURRENCY, DEFAULT_GRACE_SECS, MAX_CONCURRENCY};

fn limits(req: &MoveRequest) -> Result<(i64, i64), AppError> {
    let concurrency = req.concurrency.unwrap_or(DEFAULT_CONCURRENCY);
    let grace = req.grace_secs.unwrap_or(DEFAULT_GRACE_SECS);
    if !(1..=MAX_CONCURRENCY).contains(&concurrency) || !(0..=365 * 24 * 3600).contains(&grace) {
        return Err(AppError::new(ErrorCode::BadRequest));
    }
    Ok((concurrency, grace))
}

/// Flattens JSON into `a.b.c` → scalar text.
fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                let p = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&p, v, out);
            }
        }
        serde_json::Value::Array(a) if !a.is_empty() => {
            for (i, v) in a.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), v, out);
            }
        }
        serde_json::Value::String(s) => {
            out.insert(prefix.to_owned(), s.clone());
        }
        other => {
            out.insert(prefix.to_owned(), other.to_string());
        }
    }
}

/// The values paths that differ between two renderings.
fn value_changes(old: &render::Values, new: &render::Values) -> Vec<ValueChange> {
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    flatten("", &serde_json::to_value(old).unwrap_or_default(), &mut a);
    flatten("", &serde_json::to_value(new).unwrap_or_default(), &mut b);
    let paths: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    paths
        .into_iter()
        .filter(|p| a.get(*p) != b.get(*p))
        .map(|p| ValueChange { path: p.clone(), old: a.get(p).cloned(), new: b.get(p).cloned() })
        .collect()
}

/// Whether a DNS name resolves now (2 s at most).
async fn resolves(name: &str) -> bool {
    let lookup = tokio::net::lookup_host((name.to_owned(), 443));
    match tokio::time::timeout(Duration::from_secs(2), lookup).await {
        Ok(Ok(mut addrs)) => addrs.next().is_some(),
        _ => false,
    }
}

/// The clusters a request picks, in name order.
async fn candidates(pool: &AnyPool, req: &MoveRequest) -> Result<Vec<Cluster>, AppError> {
    let movable = |c: &Cluster| {
        !c.deletion_requested && c.unusable_host.is_none() && req.target.takes(&c.spec, req.include_disabled)
    };
    let all = db::clusters::list(pool, None).await?;
    if req.all {
        return Ok(all.into_iter().filter(movable).collect());
    }
    let wanted: HashSet<&str> = req.clusters.iter().map(|s| s.trim()).collect();
    let picked: Vec<Cluster> = all.into_iter().filter(|c| wanted.contains(c.spec.name.as_str())).collect();
    // Named, but with its own nodes: said apart (moving it would cut them off).
    if picked.iter().any(|c| c.spec.own_nodes) {
        return Err(AppError::at(ErrorCode::OwnNodesNotMovable, Field::Clusters));
    }
    // A name that is not a movable cluster is refused rather than skipped.
    if picked.len() != wanted.len() || !picked.iter().all(movable) {
        return Err(AppError::at(ErrorCode::MoveEmpty, Field::Clusters));
    }
    Ok(picked)
}

/// The clusters the move page offers: NodePort, LoadBalancer (to gateway
/// access only) and disabled ones.
pub(crate) async fn movable(pool: &AnyPool, user: &CurrentUser) -> Result<Vec<moves::Movable>, AppError> {
    user.require_admin()?;
    Ok(db::clusters::list(pool, None)
        .await?
        .into_iter()
        .filter(|c| !c.deletion_requested && moves::MoveTarget::Gateway.takes(&c.spec, true))
        .map(|c| moves::Movable {
            name: c.spec.name.to_string(),
            owner: c.owner.clone(),
            enabled: c.spec.public_access.is_enabled(),
            endpoint: c.clone().shown().status.api_endpoint,
        })
        .collect())
}

/// The audit log's target for move `id`: `migration:<id>`, its stored name
/// from before the rename (old entries and new ones read alike).
fn audit_target(id: i64) -> String {
    format!("migration:{id}")
}

/// Plans a move without changing anything.
pub async fn dry_run(
    pool: &AnyPool,
    user: &CurrentUser,
    host: HostLink<'_>,
    req: &MoveRequest,
) -> Result<Plan, AppError> {
    user.require_admin()?;
    let (concurrency, grace) = limits(req)?;
    moves::validate_source(&req.hosts)?;
    let chosen = candidates(pool, req).await?;
    if chosen.is_empty() {
        return Err(AppError::at(ErrorCode::MoveEmpty, Field::Clusters));
    }
    let settings = db::settings::load(pool).await?;
    if req.target == moves::MoveTarget::Gateway && settings.gateway.is_none() {
        return Err(AppError::at(ErrorCode::GatewayNotConfigured, Field::PublicAccessMode));
    }
    let request = settings.load_balancer_address_request.resolve(host.detected);
    let batch: HashSet<i64> = chosen.iter().map(|c| c.id).collect();
    // Hosts claimed by LoadBalancer and gateway clusters outside the batch.
    let in_use: HashSet<String> = db::clusters::list(pool, None)
        .await?
        .into_iter()
        .filter(|c| !batch.contains(&c.id))
        .filter_map(|c| c.spec.public_access.claimed_host().map(ToString::to_string))
        .collect();
    let cands: Vec<Candidate> = chosen.iter().map(|c| Candidate { id: c.id, name: c.spec.name.to_string() }).collect();
    let suffix = settings.gateway_domain_suffix.as_ref();
    let mut assigned = moves::assign(&cands, &req.hosts, &in_use, request, req.target, suffix);
    // DNS names that do not resolve yet: a warning (records may follow).
    let names: Vec<(usize, String)> = assigned
        .iter()
        .enumerate()
        .filter_map(|(i, a)| match &a.host {
            Some(Host::Dns(n)) => Some((i, n.clone())),
            _ => None,
        })
        .collect();
    let unresolved: Vec<usize> = futures::stream::iter(names)
        .map(|(i, n)| async move { (!resolves(&n).await).then_some(i) })
        .buffer_unordered(16)
        .filter_map(|x| async move { x })
        .collect()
        .await;
    for i in unresolved {
        assigned[i].problems.push(Problem::DoesNotResolve);
    }
    let busy: HashSet<i64> = db::moves::busy_clusters(pool).await?.into_iter().collect();
    let items: Vec<PlanItem> = chosen
        .iter()
        .zip(assigned)
        .map(|(c, mut a)| {
            if busy.contains(&c.id) {
                a.problems.push(Problem::AlreadyMoving);
            }
            // The host handed-out kubeconfigs name (stays in the certificate during the grace period).
            let old_host = c.status.api_endpoint.as_deref().and_then(crate::domain::endpoint::url_host);
            let (new_endpoint, planned_sans, changes) = match &a.host {
                Some(host) => {
                    let mut spec = c.spec.clone();
                    spec.public_access = req.target.access(host.clone());
                    let old = old_host.clone().map(|h| OldEndpoint {
                        host: h,
                        until: 0,
                        closed: grace == 0,
                        dismissed: false,
                        mode: c.spec.public_access.mode().unwrap_or(PublicAccessMode::NodePort),
                    });
                    let before = render::values(&c.spec, None, &settings, request);
                    let after = render::values(&spec, old.as_ref(), &settings, request);
                    let sans = after.control_plane.proxy.extra_sans.clone();
                    (Some(Endpoint::load_balancer(host.clone()).to_string()), sans, value_changes(&before, &after))
                }
                None => (None, vec![], vec![]),
            };
            PlanItem {
                cluster_id: c.id,
                name: c.spec.name.to_string(),
                owner: c.owner.clone(),
                current_endpoint: c.status.api_endpoint.clone(),
                new_host: a.host.map(|h| h.to_string()),
                new_endpoint,
                planned_sans,
                changes,
                problems: a.problems,
            }
        })
        .collect();
    let blocked = items.iter().filter(|i| i.problems.iter().any(|p| p.blocks())).count();
    Ok(Plan { items, blocked, grace_secs: grace, concurrency })
}

/// Starts a move (refused while any chosen cluster has a blocking problem)
/// and wakes the reconciler.
pub async fn start(pool: &AnyPool, user: &CurrentUser, host: HostLink<'_>, req: &MoveRequest) -> Result<i64, AppError> {
    let plan = dry_run(pool, user, host, req).await?;
    if plan.blocked > 0 {
        return Err(AppError::new(ErrorCode::MoveHasProblems));
    }
    let mut items = Vec::with_capacity(plan.items.len());
    for p in &plan.items {
        let Some(c) = db::clusters::get(pool, p.cluster_id).await? else { continue };
        items.push(NewItem {
            cluster_id: c.id,
            was_enabled: c.spec.public_access.is_enabled(),
            old_host: c.spec.public_access.host().map(ToString::to_string),
            // The endpoint kubeconfigs were handed out for (none if it never came up).
            old_endpoint: c.status.api_endpoint.clone().filter(|_| c.spec.public_access.is_enabled()),
            old_mode: c.spec.public_access.mode().unwrap_or(PublicAccessMode::NodePort),
            new_host: p.new_host.clone().unwrap_or_default(),
        });
    }
    let source = serde_json::to_string(&req.hosts).unwrap_or_default();
    let id = db::moves::create(pool, user.id, &source, plan.concurrency, plan.grace_secs, req.target, &items).await?;
    tracing::info!(move_id = id, clusters = items.len(), admin = %user.username, "move started");
    let detail = format!(
        "clusters: {}; to: {}; concurrency: {}; grace: {} s",
        items.len(),
        req.target.as_str(),
        plan.concurrency,
        plan.grace_secs
    );
    super::audit::record(pool, user, AuditAction::MoveStarted, &audit_target(id), &detail).await;
    super::wake(host.host);
    Ok(id)
}

pub(crate) async fn view(pool: &AnyPool, user: &CurrentUser, id: i64) -> Result<MoveView, AppError> {
    user.require_admin()?;
    let m = db::moves::get(pool, id).await?.ok_or(AppError::new(ErrorCode::NotFound))?;
    let rows = db::moves::items(pool, id).await?;
    let mut items = Vec::with_capacity(rows.len());
    let mut counts = BTreeMap::new();
    for r in rows {
        let cluster = db::clusters::get(pool, r.cluster_id).await?;
        let state = r.state();
        let step = match (&cluster, state, Host::parse(&r.new_host)) {
            (Some(c), ItemState::Switching, Ok(host)) => {
                let target = moves::MoveTarget::parse(&m.target).access(host);
                Some(moves::switch_step(c, &target, r.target_generation.unwrap_or(i64::MAX)))
            }
            _ => None,
        };
        let old = cluster.as_ref().and_then(|c| c.old_endpoint.clone());
        *counts.entry(state).or_insert(0) += 1;
        items.push(ItemView {
            cluster_id: r.cluster_id,
            name: r.cluster_name.clone().unwrap_or_default(),
            old_endpoint: r.old_endpoint.clone(),
            new_host: r.new_host.clone(),
            state,
            step,
            reason: stored_reason(&r),
            started_at: r.started_at,
            finished_at: r.finished_at,
            old_endpoint_until: old.as_ref().filter(|_| state == ItemState::Done).map(|o| o.until),
            old_endpoint_closed: old.is_some_and(|o| o.closed),
        });
    }
    let finished = items.iter().all(|i| i.state.settled());
    let last = items.iter().filter_map(|i| i.finished_at).max();
    let end = if finished { last.unwrap_or(m.created_at) } else { db::now() };
    Ok(MoveView {
        id: m.id,
        target: moves::MoveTarget::parse(&m.target),
        created_by: m.created_by_name,
        created_at: m.created_at,
        concurrency: m.concurrency,
        grace_secs: m.grace_secs,
        items,
        counts,
        finished,
        elapsed_secs: end - m.created_at,
    })
}

/// An item's stored reason; one this build does not know is shown as it is, and logged once per value.
fn stored_reason(r: &ItemRow) -> StopReason {
    let reason = StopReason::parse(&r.reason);
    if let Some(raw) = reason.unknown() {
        db::unknown_value("migration_items.reason", r.cluster_id, raw);
    }
    reason
}

/// The newest moves (ids), for the page's and API's list.
pub(crate) async fn recent(pool: &AnyPool, user: &CurrentUser) -> Result<Vec<MoveView>, AppError> {
    user.require_admin()?;
    let mut out = Vec::new();
    for m in db::moves::list(pool, 20).await? {
        out.push(view(pool, user, m.id).await?);
    }
    Ok(out)
}

/// What an admin does to one failed cluster of a move
/// (`…/clusters/{cluster}/{retry|rollback}`, the progress page's forms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub(crate) enum ItemAction {
    Retry,
    Rollback,
}

/// Retries or rolls back one failed cluster and wakes the reconciler: the one
/// dispatch the JSON API and the progress page share.
pub(crate) async fn item_action(
    pool: &AnyPool,
    host: Option<&super::HostHandle>,
    user: &CurrentUser,
    id: i64,
    cluster_id: i64,
    action: &str,
) -> Result<(), AppError> {
    user.require_admin()?;
    // Anything but `retry` or `rollback` names no action: not found.
    match action.parse().map_err(|_| AppError::new(ErrorCode::NotFound))? {
        ItemAction::Retry => retry(pool, user, id, cluster_id).await?,
        ItemAction::Rollback => rollback(pool, user, id, cluster_id).await?,
    }
    super::wake(host);
    Ok(())
}

/// A failed cluster goes back into the queue (the admin checked by [`item_action`]).
async fn retry(pool: &AnyPool, user: &CurrentUser, id: i64, cluster_id: i64) -> Result<(), AppError> {
    if !db::moves::transition(pool, id, cluster_id, ItemState::Failed, ItemState::Queued, "").await? {
        // No such cluster in no such move is not found; a cluster in
        // another state cannot be retried.
        let exists = db::moves::items(pool, id).await?.iter().any(|i| i.cluster_id == cluster_id);
        return Err(AppError::new(if exists { ErrorCode::MoveItemState } else { ErrorCode::NotFound }));
    }
    tracing::info!(move_id = id, cluster = cluster_id, admin = %user.username, "move item retried");
    let target = format!("{}/cluster:{cluster_id}", audit_target(id));
    super::audit::record(pool, user, AuditAction::MoveItemRetried, &target, "").await;
    Ok(())
}

/// A failed cluster goes back to what it was: NodePort on its own host (the
/// API server gives back its old port when it still holds it), LoadBalancer
/// on its old host (a move to gateway access), or off.
async fn rollback(pool: &AnyPool, user: &CurrentUser, id: i64, cluster_id: i64) -> Result<(), AppError> {
    let item = db::moves::items(pool, id)
        .await?
        .into_iter()
        .find(|i| i.cluster_id == cluster_id)
        .ok_or(AppError::new(ErrorCode::NotFound))?;
    if item.state() != ItemState::Failed {
        return Err(AppError::new(ErrorCode::MoveItemState));
    }
    let cluster = db::clusters::get(pool, cluster_id).await?.ok_or(AppError::new(ErrorCode::NotFound))?;
    let mut spec = cluster.spec.clone();
    let old_host = item.old_host.as_deref().and_then(|h| Host::parse(h).ok());
    let old_mode = item.old_mode.as_deref().and_then(PublicAccessMode::parse).unwrap_or_default();
    spec.public_access = match (item.was_enabled != 0, old_mode, old_host) {
        (false, _, _) => PublicAccess::Disabled,
        (true, PublicAccessMode::LoadBalancer, Some(host)) => PublicAccess::LoadBalancer { host },
        (true, _, host) => PublicAccess::NodePort { host },
    };
    let remembered = spec.public_access.mode().unwrap_or(PublicAccessMode::NodePort);
    let mut changes = describe_update(&cluster.spec, &spec);
    changes.push(Change::Move { id, rollback: true });
    let op = Operation::Update { changes };
    db::clusters::update_spec(pool, cluster_id, cluster.generation, &spec, remembered, &op, user.id, None)
        .await?
        .ok_or(AppError::new(ErrorCode::ChangedConcurrently))?;
    db::moves::set_old_endpoint(pool, cluster_id, None).await?;
    db::moves::transition(pool, id, cluster_id, ItemState::Failed, ItemState::RolledBack, "").await?;
    tracing::info!(move_id = id, cluster = cluster_id, admin = %user.username, "move item rolled back");
    let target = format!("{}/cluster:{cluster_id}", audit_target(id));
    super::audit::record(pool, user, AuditAction::MoveItemRolledBack, &target, "").await;
    Ok(())
}
