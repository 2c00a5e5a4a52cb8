//! The node-removal driver: takes each running removal (`db::node_removals`)
//! one step further every pass, as `vcluster node delete` does in one long
//! command (vCluster v0.30.0 `cmd/vclusterctl/cmd/node/delete.go`): cordon,
//! evict the node's pods (each with a 30 s grace period; a disruption budget's
//! refusal is tried again next pass), wait until they are gone, delete the
//! Node ([`drain_step`] is the rule). No lease: every step is idempotent, and
//! a removal ends once (a conditional UPDATE), so replicas driving at once
//! are safe. A web request only starts a removal; the page shows its progress.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, EvictParams, ListParams, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use sqlx::AnyPool;

use crate::domain::nodes::{DrainNode, DrainPod, DrainStep, EVICTION_GRACE_SECS, RemovalReason, drain_step};
use crate::server::db;
use crate::server::db::node_removals::RemovalRow;
use crate::server::host::Host;
use crate::server::tenant::read;

/// One pass over every running removal. Safe to run in several places at once.
pub async fn advance(pool: &AnyPool, host: &Host) -> Result<(), db::DbError> {
    for row in db::node_removals::running(pool).await? {
        let Some(cluster) = db::clusters::get(pool, row.cluster_id).await? else { continue };
        let client = match host.virtual_client_without_retry(&cluster).await {
            Ok(Some(client)) => client,
            other => {
                if let Err(e) = other {
                    tracing::debug!(cluster = cluster.id, error = %e, "node removal: control plane not reachable");
                }
                let reason = Some(RemovalReason::ControlPlaneUnavailable);
                db::node_removals::progress(pool, row.id, None, reason, None).await?;
                continue;
            }
        };
        match step(&row, client).await {
            Ok(Some(end)) => {
                if db::node_removals::finish(pool, row.id, end).await? {
                    match end {
                        None => tracing::info!(cluster = row.cluster_id, node = %row.node, "node removed"),
                        Some(reason) => {
                            let reason: &str = reason.into();
                            tracing::warn!(cluster = row.cluster_id, node = %row.node, reason, "node removal failed");
                        }
                    }
                }
            }
            Ok(None) => {}
            Err(Waiting { left, reason, pod }) => {
                db::node_removals::progress(pool, row.id, left, reason, pod.as_deref()).await?;
            }
        }
    }
    Ok(())
}

/// Why a removal is not over yet.
struct Waiting {
    left: Option<i64>,
    reason: Option<RemovalReason>,
    pod: Option<String>,
}

fn unavailable(row: &RemovalRow, what: &str, e: &kube::Error) -> Waiting {
    tracing::debug!(cluster = row.cluster_id, node = %row.node, error = %e, "node removal: {what} failed");
    Waiting { left: None, reason: Some(RemovalReason::ControlPlaneUnavailable), pod: None }
}

/// A bounded read's failure: past a cap it waits as for an unreachable
/// control plane (the tenant's objects are theirs to shrink).
fn unreadable(row: &RemovalRow, what: &str, e: read::ReadError) -> Waiting {
    match e {
        read::ReadError::Kube(e) => unavailable(row, what, &e),
        read::ReadError::TooLarge(cap) => {
            tracing::warn!(cluster = row.cluster_id, node = %row.node, cap, "node removal: {what} over the console's cap");
            Waiting { left: None, reason: Some(RemovalReason::ControlPlaneUnavailable), pod: None }
        }
    }
}

/// One step of `row` in its virtual cluster: `Ok(Some(end))` once it is over
/// (`None`: done, else failed with that reason); `Err` while it goes on.
async fn step(row: &RemovalRow, client: kube::Client) -> Result<Option<Option<RemovalReason>>, Waiting> {
    let nodes: Api<Node> = Api::all(client.clone());
    // Bounded reads (the tenant may make its objects huge); a pod's metadata
    // is all a drain decides on.
    let node = match Box::pin(read::get_opt::<Node>(&client, None, &row.node)).await {
        Ok(node) => node,
        Err(e) => return Err(unreadable(row, "node read", e)),
    };
    let pods = match &node {
        Some(_) => {
            let on_node = ListParams::default().fields(&format!("spec.nodeName={}", row.node));
            let keep = |pod: PartialObjectMeta<Pod>| drain_pod(&pod);
            match Box::pin(read::list_metadata(&client, None, &on_node, read::NAMES, keep)).await {
                Ok(pods) => pods,
                Err(e) => return Err(unreadable(row, "pod list", e)),
            }
        }
        None => Vec::new(),
    };
    let facts = node.as_ref().map(|n| drain_node(n, pods));
    let waited = db::now() - row.created_at;
    let cordon = |yes: bool| async move {
        if !yes {
            return Ok(());
        }
        let body = serde_json::json!({"spec": {"unschedulable": true}});
        nodes.patch(&row.node, &PatchParams::default(), &Patch::Merge(&body)).await.map(|_| ())
    };
    match drain_step(facts.as_ref(), row.drain != 0, waited) {
        DrainStep::Gone => Ok(Some(None)),
        DrainStep::Fail(reason) => Ok(Some(Some(reason))),
        DrainStep::Delete { cordon: c } => {
            cordon(c).await.map_err(|e| unavailable(row, "node cordon", &e))?;
            match Api::<Node>::all(client).delete(&row.node, &DeleteParams::default()).await {
                Ok(_) => Ok(Some(None)),
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(Some(None)),
                Err(e) => Err(unavailable(row, "node delete", &e)),
            }
        }
        DrainStep::Drain { cordon: c, evict, left } => {
            cordon(c).await.map_err(|e| unavailable(row, "node cordon", &e))?;
            let params = EvictParams {
                delete_options: Some(DeleteParams {
                    grace_period_seconds: Some(EVICTION_GRACE_SECS as u32),
                    ..Default::default()
                }),
                ..Default::default()
            };
            for key in evict {
                let Some((ns, name)) = key.split_once('/') else { continue };
                match Api::<Pod>::namespaced(client.clone(), ns).evict(name, &params).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    // A disruption budget: kubectl drain tries again (every 5 s).
                    Err(kube::Error::Api(e)) if e.code == 429 => {
                        let reason = Some(RemovalReason::DisruptionBudget);
                        return Err(Waiting { left: Some(left), reason, pod: Some(key) });
                    }
                    Err(e) => return Err(unavailable(row, "pod eviction", &e)),
                }
            }
            Err(Waiting { left: Some(left), reason: None, pod: None })
        }
    }
}

/// The facts [`drain_step`] decides on.
fn drain_node(node: &Node, pods: Vec<DrainPod>) -> DrainNode {
    let unreachable = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "Unknown" && c.message.as_deref() == Some("Kubelet stopped posting node status."));
    DrainNode { unschedulable: node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true), unreachable, pods }
}

/// A pod on the node, as [`drain_step`] sees it.
fn drain_pod(p: &PartialObjectMeta<Pod>) -> Option<DrainPod> {
    let key = format!("{}/{}", p.metadata.namespace.as_deref()?, p.metadata.name.as_deref()?);
    Some(DrainPod { key, terminating: p.metadata.deletion_timestamp.is_some(), stays: daemon_or_mirror(p) })
}

/// Pods a drain leaves: a DaemonSet's (it would put them back) and static ones.
fn daemon_or_mirror(pod: &PartialObjectMeta<Pod>) -> bool {
    let owned_by_daemonset =
        pod.metadata.owner_references.iter().flatten().any(|o| o.kind == "DaemonSet" && o.controller == Some(true));
    let mirror = pod.metadata.annotations.as_ref().is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    owned_by_daemonset || mirror
}

/// Runs the driver every `every` until the process ends (the console's
/// background task).
pub async fn drive(pool: AnyPool, host: std::sync::Arc<Host>, every: Duration) {
    loop {
        if let Err(e) = advance(&pool, &host).await {
            tracing::warn!(error = %e, "node removal pass failed");
        }
        tokio::time::sleep(every).await;
    }
}
