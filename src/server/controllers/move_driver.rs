//! The move driver: takes the clusters of running moves (NodePort →
//! LoadBalancer, NodePort or LoadBalancer → gateway) from queued to switching to done or failed, at each
//! move's concurrency, and closes old endpoints whose grace period is
//! over. All its state is in the database (`migration_items`): every step is
//! a compare-and-set transition (`db::moves::transition`, the spec write
//! by generation), so it needs no lease — two replicas driving at once, or
//! `kubebyon move` beside the console, cannot apply a step twice. It only
//! writes specs; the reconciler brings the host to them.

use std::time::Duration;

use sqlx::AnyPool;

use crate::domain::change::{Change, Operation, describe_update};
use crate::domain::endpoint::url_host;
use crate::domain::moves::{self, ItemState, SwitchStep};
use crate::domain::user::CurrentUser;
use crate::domain::{AppError, Host, PublicAccessMode, StopReason};
use crate::server::db;
use crate::server::db::moves::ItemRow;

/// A switching cluster without its LoadBalancer address after this long fails.
pub(crate) const DEFAULT_ADDRESS_TIMEOUT_SECS: i64 = 300;

/// One pass of the driver: settles switching clusters that are done or
/// failed, starts queued ones up to each move's concurrency, and closes
/// old endpoints whose grace period is over. Safe to run in several places
/// at once. `timeout`: seconds a switching cluster may wait for its address.
pub async fn advance(pool: &AnyPool, timeout: i64) -> Result<(), AppError> {
    for m in db::moves::active(pool).await? {
        let Some(admin) = db::users::by_id(pool, m.created_by).await?.map(|u| u.current_user()) else {
            continue;
        };
        let items = db::moves::items(pool, m.id).await?;
        let mut switching = 0;
        for item in items.iter().filter(|i| i.state() == ItemState::Switching) {
            if settle(pool, &m, &admin, item, timeout).await? == ItemState::Switching {
                switching += 1;
            }
        }
        let free = usize::try_from(m.concurrency - switching).unwrap_or(0);
        for item in items.iter().filter(|i| i.state() == ItemState::Queued).take(free) {
            if db::moves::transition(pool, m.id, item.cluster_id, ItemState::Queued, ItemState::Switching, "").await? {
                switch(pool, &m, &admin, item).await?;
            }
        }
    }
    for (cluster_id, generation, host) in db::moves::old_endpoints_due(pool).await? {
        // Whoever started the latest move of this cluster asked for it.
        let by = db::moves::mover_of(pool, cluster_id).await?.unwrap_or_default();
        if db::moves::close_old_endpoint(pool, cluster_id, generation, &host, by).await? {
            tracing::info!(cluster = cluster_id, "old endpoint closed: grace period over");
        }
    }
    Ok(())
}

async fn fail(
    pool: &AnyPool,
    m: &db::moves::MoveRow,
    item: &ItemRow,
    reason: StopReason,
) -> Result<ItemState, AppError> {
    let reason = reason.to_string();
    db::moves::transition(pool, m.id, item.cluster_id, ItemState::Switching, ItemState::Failed, &reason).await?;
    tracing::warn!(move_id = m.id, cluster = item.cluster_id, reason, "move item failed");
    Ok(ItemState::Failed)
}

/// Applies the switch of a claimed item (again, after a crash: idempotent).
async fn switch(
    pool: &AnyPool,
    m: &db::moves::MoveRow,
    admin: &CurrentUser,
    item: &ItemRow,
) -> Result<ItemState, AppError> {
    let Some(cluster) = db::clusters::get(pool, item.cluster_id).await? else {
        return fail(pool, m, item, StopReason::ClusterDeleted).await;
    };
    let Ok(host) = Host::parse(&item.new_host) else {
        return fail(pool, m, item, StopReason::HostInvalid).await;
    };
    let to = moves::MoveTarget::parse(&m.target);
    let target = to.access(host.clone());
    if cluster.spec.public_access == target {
        // Switched before a restart: only the generation is left to record.
        if item.target_generation.is_none() {
            db::moves::set_target_generation(pool, m.id, item.cluster_id, cluster.generation).await?;
        }
        return Ok(ItemState::Switching);
    }
    // Changed since the plan into something this move does not take.
    if cluster.deletion_requested || !to.takes(&cluster.spec, true) {
        return fail(pool, m, item, StopReason::ChangedMeanwhile).await;
    }
    if db::clusters::load_balancer_host_taken(pool, &item.new_host, Some(cluster.id)).await? {
        return fail(pool, m, item, StopReason::HostInUse).await;
    }
    // The old endpoint record first: it only changes the target mode's
    // values, so the switch renders once, with it. Its mode is the
    // cluster's now (NodePort, or LoadBalancer on the way to a gateway).
    if let Some(old) = &item.old_endpoint
        && let Some(old_host) = url_host(old)
    {
        let until = db::now() + m.grace_secs;
        let mode = cluster.spec.public_access.mode().unwrap_or(PublicAccessMode::NodePort);
        db::moves::set_old_endpoint(pool, cluster.id, Some((&old_host, until, mode))).await?;
        if m.grace_secs == 0 {
            db::moves::mark_old_endpoint_closed(pool, cluster.id).await?;
        }
    }
    let mut spec = cluster.spec.clone();
    spec.public_access = target;
    let mut changes = describe_update(&cluster.spec, &spec);
    changes.push(Change::Move { id: m.id, rollback: false });
    let op = Operation::Update { changes };
    let remembered = to.mode();
    let switched =
        db::clusters::update_spec(pool, cluster.id, cluster.generation, &spec, remembered, &op, admin.id, None);
    // The host claimed meanwhile by another cluster (the database's unique claim).
    let switched = match switched.await {
        Err(e) if e.is_lb_host_taken() => return fail(pool, m, item, StopReason::HostInUse).await,
        other => other?,
    };
    match switched {
        Some(generation) => {
            db::moves::set_target_generation(pool, m.id, item.cluster_id, generation).await?;
            tracing::info!(move_id = m.id, cluster = cluster.id, host = %item.new_host, target = to.as_str(), "cluster switching");
            Ok(ItemState::Switching)
        }
        // Changed by someone at the same moment: the next pass looks again.
        None => Ok(ItemState::Switching),
    }
}

/// Looks at a switching item: done, failed, or still on its way.
async fn settle(
    pool: &AnyPool,
    m: &db::moves::MoveRow,
    admin: &CurrentUser,
    item: &ItemRow,
    timeout: i64,
) -> Result<ItemState, AppError> {
    let Some(target_generation) = item.target_generation else {
        // Claimed but not applied (a driver stopped in between): apply now.
        return switch(pool, m, admin, item).await;
    };
    let Some(cluster) = db::clusters::get(pool, item.cluster_id).await? else {
        return fail(pool, m, item, StopReason::ClusterDeleted).await;
    };
    let Ok(host) = Host::parse(&item.new_host) else {
        return fail(pool, m, item, StopReason::HostInvalid).await;
    };
    let waited = db::now() - item.started_at.unwrap_or_else(db::now);
    let to = moves::MoveTarget::parse(&m.target);
    match moves::switch_step(&cluster, &to.access(host), target_generation) {
        SwitchStep::Done => {
            db::moves::transition(pool, m.id, item.cluster_id, ItemState::Switching, ItemState::Done, "").await?;
            tracing::info!(move_id = m.id, cluster = item.cluster_id, target = to.as_str(), "cluster moved");
            Ok(ItemState::Done)
        }
        SwitchStep::Failed => fail(pool, m, item, StopReason::Cluster(cluster.status.reason)).await,
        SwitchStep::Switching if cluster.spec.public_access.mode() != Some(to.mode()) => {
            fail(pool, m, item, StopReason::ChangedMeanwhile).await
        }
        _ if waited > timeout => fail(pool, m, item, StopReason::from_cluster(&cluster.status.reason)).await,
        _ => Ok(ItemState::Switching),
    }
}

/// Runs the driver every `every` until the process ends (the console's
/// background task; `kubebyon move` drives it itself while it waits).
pub async fn drive(pool: AnyPool, every: Duration, timeout: i64) {
    loop {
        if let Err(e) = advance(&pool, timeout).await {
            tracing::warn!(error = %e, "move driver pass failed");
        }
        tokio::time::sleep(every).await;
    }
}
