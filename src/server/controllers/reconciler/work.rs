//! The queue's work: each claimed operation applies its cluster's current
//! spec ([`super::apply`]) or uninstalls it; a transient failure is retried
//! later with back-off, a permanent one fails the cluster with the host's words.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::Api;

use super::{Context, apply, events, gather};
use crate::domain::cluster::Cluster;
use crate::domain::host_objects;
use crate::domain::{ClusterStatus, Phase, Reason};
use crate::server::db::{self, clusters, operations};
use crate::server::host::error::{Error, Result};

/// The longest wait between checks while the host finishes an uninstall.
const NOT_YET_POLL: Duration = Duration::from_secs(5);

pub(super) async fn work(ctx: &Context) -> Result<()> {
    // The claims made in this pass: an operation retried later is not re-run now.
    let mut seen = BTreeSet::new();
    while let Some(op) =
        operations::claim_next(&ctx.pool, &ctx.worker, ctx.timing.lease.as_secs().max(1) as i64).await?
    {
        if !seen.insert(op.id) {
            break;
        }
        let started = std::time::Instant::now();
        let outcome = handle(ctx, op.cluster_id).await;
        let metrics = crate::server::metrics::global();
        metrics.record_reconcile(
            match &outcome {
                Ok(_) => "done",
                Err(e) if e.is_permanent() => "failed",
                Err(_) => "retried",
            },
            started.elapsed(),
        );
        if let Err(e) = &outcome
            && matches!(e, Error::Kube(..))
        {
            metrics.record_host_error(e.kind());
        }
        match outcome {
            Ok(applied) => {
                operations::finish(&ctx.pool, op.id, &ctx.worker, None).await?;
                if let Some(generation) = applied {
                    operations::supersede(&ctx.pool, op.cluster_id, generation).await?;
                }
            }
            Err(e) if e.is_permanent() => {
                tracing::warn!(cluster = op.cluster_id, error = %e, "operation failed");
                let reason = e.reason();
                operations::finish(&ctx.pool, op.id, &ctx.worker, Some(&reason)).await?;
                fail_status(ctx, op.cluster_id, e.status_reason()).await?;
            }
            Err(e) => {
                // Waiting for the host to finish something (an uninstall, a
                // namespace deletion) is polled at most every few seconds;
                // failures back off exponentially.
                let delay = match e {
                    Error::NotYet(_) => retry_wait(ctx.timing.retry_base, op.attempts).min(NOT_YET_POLL),
                    _ => retry_wait(ctx.timing.retry_base, op.attempts),
                };
                tracing::info!(cluster = op.cluster_id, error = %e, ?delay, "operation retried later");
                operations::retry_later(&ctx.pool, op.id, &ctx.worker, delay.as_secs().max(1) as i64, &e.reason())
                    .await?;
            }
        }
    }
    Ok(())
}

/// The wait before an operation's next try, with jitter: base·2^(attempts−1)
/// (attempts counted up to 12), at most 5 min, ±25 %.
pub(crate) fn retry_wait(base: Duration, attempts: i64) -> Duration {
    let attempts = u32::try_from(attempts.clamp(1, 12)).unwrap_or(1);
    let capped = crate::server::controllers::backoff::backoff(base, attempts, Duration::from_secs(300));
    let jitter = 0.75 + rand::random::<f64>() * 0.5;
    capped.mul_f64(jitter)
}

/// Applies (or uninstalls) the cluster's current spec; the generation applied.
async fn handle(ctx: &Context, cluster_id: i64) -> Result<Option<i64>> {
    let Some(cluster) = clusters::get(&ctx.pool, cluster_id).await? else {
        return Ok(None); // already gone
    };
    if cluster.deletion_requested {
        let owner = ctx.host.installation.owner(cluster.id).await?;
        apply::uninstall(&ctx.host.client, &cluster, &owner, Some(&ctx.operator.platform_key_namespace)).await?;
        clusters::delete_row(&ctx.pool, cluster.id).await?;
        ctx.forget(cluster.id);
        tracing::info!(cluster = %cluster.spec.name.as_str(), "uninstalled and removed");
        return Ok(None);
    }
    if let Some(raw) = &cluster.unusable_host {
        // Rendering it would drop its public access: wait for an edit.
        tracing::warn!(cluster = %cluster.spec.name.as_str(), host = %raw, "stored host is not a valid host; left alone until edited");
        return Ok(None);
    }
    let settings = ctx.operator.cap(db::settings::load(&ctx.pool).await?);
    apply_tracked(ctx, &cluster, &settings).await?;
    Ok(Some(cluster.generation))
}

/// Applies, remembering the install Job that predates a values change.
pub(super) async fn apply_tracked(
    ctx: &Context,
    cluster: &Cluster,
    settings: &crate::domain::SystemSettings,
) -> Result<()> {
    let stale = current_job_uid(ctx, cluster).await;
    let cached = ctx.caches().map(|c| c.raw(cluster.spec.name.as_str()).chart);
    let owner = ctx.host.installation.owner(cluster.id).await?;
    let request = ctx.host.address_request(settings);
    let egress = ctx.helm_egress();
    let policy = ctx.host.failure_policy().await?;
    let host = apply::HostFacts { request, route_version: ctx.host.seen.route_version(), helm_egress: &egress, policy };
    let applied = match apply::apply(&ctx.host.client, cluster, settings, cached, &owner, &host).await {
        // The host's helm-controller changed under us (k3s replaced by an
        // older release): the API server refused the policy; read the CRD
        // again and try later, never a permanent failure.
        Err(Error::Kube(_, kube::Error::Api(s))) if s.code == 422 && s.message.contains("failurePolicy") => {
            ctx.host.refresh_helm().await;
            return Err(Error::NotYet("the host's helm-controller refused the failurePolicy; read again"));
        }
        applied => applied?,
    };
    if let Some(uid) = &applied.namespace_uid
        && owner.record.namespace_uid.as_ref() != Some(uid)
    {
        clusters::record_namespace(&ctx.pool, cluster.id, uid).await?;
    }
    if owner.record.adopt_legacy {
        clusters::end_adoption(&ctx.pool, cluster.id).await?;
        tracing::info!(cluster = %cluster.spec.name.as_str(), "applied before labels of ownership: taken over once");
    }
    if let Ok(mut m) = ctx.memory.applied.lock() {
        m.insert(cluster.id, gather::digest(&applied.spec));
    }
    if applied.policy_applied
        && let Ok(mut m) = ctx.egress.applied.lock()
    {
        m.insert(cluster.id, egress);
    }
    if applied.changed
        && let (Some(uid), Ok(mut map)) = (stale, ctx.memory.stale_jobs.lock())
    {
        map.entry(cluster.id).or_default().insert(uid);
    }
    if applied.changed {
        ctx.memory.helm_runs.forget(&crate::domain::host_objects::namespace(cluster.spec.name.as_str()));
        let note = format!(
            "The console applied generation {} of cluster {} (id {}, owner {}): helm-controller installs or upgrades it",
            cluster.generation,
            cluster.spec.name.as_str(),
            cluster.id,
            cluster.owner
        );
        ctx.events.on_helm_chart(cluster.spec.name.as_str(), applied.chart_uid.clone(), events::APPLIED, note).await;
    }
    Ok(())
}

/// The cluster's NetworkPolicy applied again, alone, when helm's Jobs leave
/// by a port it was not applied with (a proxy learnt since, or this process
/// has not applied it yet while ports are known). Nothing while none is known.
pub(super) async fn ensure_policy_egress(
    ctx: &Context,
    cluster: &Cluster,
    settings: &crate::domain::SystemSettings,
) -> Result<()> {
    // Compared under the locks: a pass over settled clusters copies nothing.
    let egress = {
        let (Ok(known), Ok(done)) = (ctx.egress.helm.lock(), ctx.egress.applied.lock()) else { return Ok(()) };
        if known.is_empty() || done.get(&cluster.id) == Some(&*known) {
            return Ok(());
        }
        known.clone()
    };
    let owner = ctx.host.installation.owner(cluster.id).await?;
    let ns = crate::domain::host_objects::namespace(cluster.spec.name.as_str());
    apply::ensure_network_policy(&ctx.host.client, &ns, &owner, settings, cluster.spec.own_nodes, &egress).await?;
    tracing::info!(cluster = %cluster.spec.name.as_str(), ports = ?egress, "NetworkPolicy applied again: helm's Jobs leave by these ports too");
    if let Ok(mut m) = ctx.egress.applied.lock() {
        m.insert(cluster.id, egress);
    }
    Ok(())
}

async fn current_job_uid(ctx: &Context, cluster: &Cluster) -> Option<String> {
    let name = cluster.spec.name.as_str();
    if let Some(c) = ctx.caches() {
        return c.raw(name).job.and_then(|j| j.uid());
    }
    let jobs: Api<Job> = Api::namespaced(ctx.host.client.clone(), &host_objects::namespace(name));
    jobs.get_opt(&host_objects::helm_job(name)).await.ok().flatten().and_then(|j| j.uid())
}

/// Fails the cluster's current generation for `reason`.
pub(super) async fn fail_status(ctx: &Context, cluster_id: i64, reason: Reason) -> Result<()> {
    if let Some(c) = clusters::get(&ctx.pool, cluster_id).await? {
        let status = ClusterStatus {
            phase: Phase::Failed,
            reason,
            observed_generation: c.generation,
            ..ClusterStatus::default()
        };
        clusters::write_status(&ctx.pool, c.id, &status).await?;
    }
    Ok(())
}
