//! Who may do what inside a tenant's cluster, kept in step with the
//! console: three ClusterRoleBindings the console owns (`kubebyon:admin|edit|view`,
//! naming Users; teams expanded) and, for editors, the console's own role
//! bound namespace by namespace outside `kube-system` (`domain::rbac`); the
//! join tokens of makers who may no longer manage the cluster's nodes go.
//! Repaired on every download and membership change (`service::credentials`),
//! by the access queue and by a slow loop (`controllers::access_sync`), never
//! in the observer's passes. A cluster whose endpoint is the host's own API
//! server (a relaying test host) is refused: nothing is written there.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use sqlx::AnyPool;

use super::read::{self, ReadError};
use crate::domain::audit::AuditAction;
use crate::domain::cluster::Cluster;
use crate::domain::membership::{self, Bindings, MemberRole};
use crate::domain::{AppError, join, rbac};
use crate::server::db;
use crate::server::host::HostHandle;
use crate::server::host::error::Error as HostError;

/// The label on what the console writes inside a virtual cluster.
pub(crate) const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
const FIELD_MANAGER: &str = "kubebyon";
/// A whole download's calls to the virtual cluster.
pub(crate) const DOWNLOAD: Duration = Duration::from_secs(25);

/// Who each role binds in `cluster`: its owner as admin, its members (teams
/// expanded) at their roles, and a console admin only while a grant lasts
/// (their own download, `service::credentials::kubeconfig`: no standing admin identity in every
/// tenant's cluster). A disabled account is bound to nothing,
/// whatever it owns or is a member of.
pub(crate) async fn desired(pool: &AnyPool, cluster: &Cluster) -> Result<Bindings, AppError> {
    let admins = db::users::granted_admins(pool, cluster.id, db::now()).await?;
    let members = db::members::users_of(pool, cluster.id).await?;
    let disabled = db::users::disabled_ids(pool).await?;
    let owner = std::iter::once(cluster.owner_id);
    let all = owner.chain(admins).map(|u| (u, MemberRole::Admin)).chain(members);
    Ok(Bindings::of(all.filter(|(u, _)| disabled.binary_search(u).is_err())))
}

/// A binding's subjects: the Kubernetes users `names`.
fn users(names: &[String]) -> Vec<serde_json::Value> {
    names.iter().map(|name| json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name})).collect()
}

/// The user names a binding holds, sorted, and whether it holds anything else.
fn held(subjects: Option<&Vec<k8s_openapi::api::rbac::v1::Subject>>) -> (Vec<String>, bool) {
    let mut names: Vec<String> =
        subjects.into_iter().flatten().filter(|s| s.kind == "User").map(|s| s.name.clone()).collect();
    names.sort();
    (names, subjects.into_iter().flatten().any(|s| s.kind != "User"))
}

/// The ClusterRoleBinding of `role` as the console applies it (server-side).
fn binding(role: MemberRole, want: &Bindings) -> serde_json::Value {
    let subjects = users(&want.subjects(role));
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": membership::binding_name(role), "labels": {MANAGED_BY: "kubebyon"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role.cluster_role()},
        "subjects": subjects,
    })
}

/// Whether `found` already is what [`binding`] would write.
fn in_step(found: &ClusterRoleBinding, role: MemberRole, want: &Bindings) -> bool {
    let (names, others) = held(found.subjects.as_ref());
    found.role_ref.name == role.cluster_role() && !others && names == want.subjects(role)
}

/// An editors' RoleBinding in `namespace` as the console applies it.
fn editors_binding(namespace: &str, editors: &[String]) -> serde_json::Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": membership::binding_name(MemberRole::Edit),
            "namespace": namespace,
            "labels": {MANAGED_BY: "kubebyon"},
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": rbac::EDITOR_ROLE},
        "subjects": users(editors),
    })
}

/// One of the console's editors' RoleBindings as found: its namespace,
/// whether it is what [`editors_binding`] would write, whether its `roleRef` is ours.
struct FoundEditors {
    namespace: String,
    in_step: bool,
    our_role: bool,
}

/// The console's ClusterRole `name` with `rules`: written when it differs
/// (one a tenant made aggregated is deleted first). Whether it was written.
async fn own_cluster_role(
    virt: &kube::Client,
    name: &str,
    rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule>,
) -> Result<bool, SyncError> {
    let found = read::get_opt::<ClusterRole>(virt, None, name).await?;
    let same =
        |r: &ClusterRole| r.aggregation_rule.is_none() && r.rules.as_deref().unwrap_or_default() == rules.as_slice();
    if found.as_ref().is_some_and(same) {
        return Ok(false);
    }
    let api: Api<ClusterRole> = Api::all(virt.clone());
    if found.as_ref().is_some_and(|r| r.aggregation_rule.is_some()) {
        api.delete(name, &DeleteParams::default()).await?;
    }
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {MANAGED_BY: "kubebyon"}},
        "rules": rules,
    });
    api.patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(role)).await?;
    Ok(true)
}

/// Editors' access in `virt` brought to `want`: the console's
/// roles (`edit` less impersonation and token minting; the namespaces'
/// read) and a RoleBinding in each namespace outside `kube-system` and its
/// kin; with no editors, the RoleBindings go. A namespace made since is
/// bound at the next resync (a download, a membership change, the slow
/// loop). The number written.
async fn sync_editors(virt: &kube::Client, want: &Bindings) -> Result<usize, SyncError> {
    let editors = want.subjects(MemberRole::Edit);
    let name = membership::binding_name(MemberRole::Edit);
    let ours = ListParams::default().labels(&format!("{MANAGED_BY}=kubebyon"));
    let found = read::list::<RoleBinding, _>(virt, None, &ours, read::NAMES, |b| {
        (b.metadata.name.as_deref() == Some(name.as_str())).then(|| {
            let our_role = b.role_ref.kind == "ClusterRole" && b.role_ref.name == rbac::EDITOR_ROLE;
            let (names, others) = held(b.subjects.as_ref());
            FoundEditors {
                namespace: b.metadata.namespace.clone().unwrap_or_default(),
                in_step: our_role && !others && names == editors,
                our_role,
            }
        })
    })
    .await?;
    let mut written = 0;
    let wanted = if editors.is_empty() {
        Vec::new()
    } else {
        // The cluster's own `edit`, as its aggregation made it (none yet:
        // the role is left as it is until the next resync).
        if let Some(edit) = read::get_opt::<ClusterRole>(virt, None, "edit").await? {
            let rules = rbac::editor_rules(edit.rules.as_deref().unwrap_or_default());
            written += usize::from(own_cluster_role(virt, rbac::EDITOR_ROLE, rules).await?);
        }
        let ns = MemberRole::Edit.cluster_role();
        written += usize::from(own_cluster_role(virt, ns, rbac::namespaces_rules()).await?);
        let all =
            read::list_metadata::<Namespace, _>(virt, None, &ListParams::default(), read::NAMES, |n| n.metadata.name)
                .await?;
        rbac::editor_namespaces(all)
    };
    for f in &found {
        if !wanted.contains(&f.namespace) {
            Api::<RoleBinding>::namespaced(virt.clone(), &f.namespace).delete(&name, &DeleteParams::default()).await?;
            written += 1;
        }
    }
    for ns in &wanted {
        let here = found.iter().find(|f| &f.namespace == ns);
        if here.is_some_and(|f| f.in_step) {
            continue;
        }
        let api: Api<RoleBinding> = Api::namespaced(virt.clone(), ns);
        if here.is_some_and(|f| !f.our_role) {
            api.delete(&name, &DeleteParams::default()).await?;
        }
        api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(editors_binding(ns, &editors)))
            .await?;
        written += 1;
    }
    Ok(written)
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
    #[error(transparent)]
    Host(#[from] HostError),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("writing a binding: {0}")]
    Write(#[from] kube::Error),
}

/// Brings the console's three bindings in `virt` to `want`, and the
/// editors' roles and RoleBindings ([`sync_editors`]): each read (bounded),
/// written only when it differs (a `roleRef` a tenant changed is deleted
/// first: it cannot be patched). The number written.
pub(crate) async fn sync(virt: &kube::Client, want: &Bindings) -> Result<usize, SyncError> {
    let api: Api<ClusterRoleBinding> = Api::all(virt.clone());
    let mut written = sync_editors(virt, want).await?;
    for role in [MemberRole::Admin, MemberRole::Edit, MemberRole::View] {
        let name = membership::binding_name(role);
        let found = read::get_opt::<ClusterRoleBinding>(virt, None, &name).await?;
        if found.as_ref().is_some_and(|f| in_step(f, role, want)) {
            continue;
        }
        if found.as_ref().is_some_and(|f| f.role_ref.name != role.cluster_role()) {
            api.delete(&name, &DeleteParams::default()).await?;
        }
        api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(binding(role, want))).await?;
        written += 1;
    }
    Ok(written)
}

/// A client of `cluster`'s own control plane, refusing a relay; `None`
/// while it has none yet.
pub(crate) async fn own_client(host: &HostHandle, cluster: &Cluster) -> Result<Option<kube::Client>, HostError> {
    let Some(virt) = Box::pin(host.virtual_client(cluster)).await? else { return Ok(None) };
    Box::pin(host.refuse_relay(&virt)).await?;
    Ok(Some(virt))
}

/// Brings the queued clusters' bindings in step (`service::credentials::resync`
/// of several),
/// one at a time, until none waits: the access queue's loop runs it when
/// rung (`controllers::access_sync::follow_queue`), the CLI before it exits.
pub(crate) async fn drain(pool: &AnyPool, host: &HostHandle) {
    while let Some(id) = host.access.pop() {
        resync_logged(pool, host, id).await;
    }
}

/// One cluster's resync; its failure logged and returned in words.
pub(crate) async fn resync_logged(pool: &AnyPool, host: &HostHandle, id: i64) -> Option<String> {
    let Ok(Some(cluster)) = db::clusters::get(pool, id).await else { return None };
    let e = Box::pin(resync_one(pool, host, &cluster)).await.err()?;
    tracing::warn!(cluster = id, error = %e, "bringing the cluster's access bindings in step failed; the slow loop retries");
    Some(words(&e))
}

/// What a failed repair says on the cluster's page and in the audit log:
/// the host's own words (never a credential: API errors carry none), bounded.
fn words(e: &SyncError) -> String {
    e.to_string().chars().take(500).collect()
}

/// Keeps a repair's outcome: a failure marks the cluster's access out of
/// step with `failed`'s words (its page says so) until a repair lands; each
/// change of state is audited (by the console) and every outcome counted
/// (`kubebyon_access_repairs`).
pub(crate) async fn record_outcome(pool: &AnyPool, cluster: &Cluster, failed: Option<&str>) {
    let target = format!("cluster:{}", cluster.spec.name);
    let metrics = crate::server::metrics::global();
    let changed = match failed {
        Some(words) => {
            metrics.record_access_repair("out_of_step");
            db::members::set_out_of_step(pool, cluster.id, words)
                .await
                .map(|new| new.then_some((AuditAction::AccessOutOfStep, words)))
        }
        None => {
            metrics.record_access_repair("in_step");
            // Nearly every repair finds nothing to clear: read, and write
            // only when the cluster was marked (the many-cluster resync
            // takes no write lock per cluster).
            match db::members::out_of_step(pool, cluster.id).await {
                Ok(Some(_)) => db::members::clear_out_of_step(pool, cluster.id)
                    .await
                    .map(|was| was.then_some((AuditAction::AccessInStep, ""))),
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            }
        }
    };
    match changed {
        Ok(Some((action, detail))) => {
            if let Err(e) = db::audit::record_as(pool, None, "console", action, &target, detail).await {
                tracing::error!(error = %e, "writing the audit log failed");
            }
        }
        Ok(None) => {}
        Err(e) => tracing::warn!(cluster = cluster.id, error = %e, "recording the access bindings' state failed"),
    }
}

/// One cluster's bindings in step (nothing when it has no control plane
/// yet or relays), the outcome kept ([`record_outcome`]). The number written.
pub(crate) async fn resync_one(pool: &AnyPool, host: &HostHandle, cluster: &Cluster) -> Result<usize, SyncError> {
    let outcome = bring_in_step(pool, host, cluster).await;
    record_outcome(pool, cluster, outcome.as_ref().err().map(words).as_deref()).await;
    outcome
}

/// How many times one repair writes again when the memberships changed
/// while it wrote (a stale repair never lands last: the one that ran
/// beside it, or this one's next round, writes the newer).
const ROUNDS: usize = 3;

async fn bring_in_step(pool: &AnyPool, host: &HostHandle, cluster: &Cluster) -> Result<usize, SyncError> {
    if !cluster.status.kubeconfig_available || cluster.deletion_requested {
        return Ok(0);
    }
    let virt = match own_client(host, cluster).await {
        Ok(Some(v)) => v,
        Ok(None) | Err(HostError::Relayed) => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let read =
        || async { desired(pool, cluster).await.map_err(|_| HostError::NotYet("the memberships could not be read")) };
    let mut want = read().await?;
    let mut written = 0;
    for _ in 0..ROUNDS {
        written += tokio::time::timeout(DOWNLOAD, sync(&virt, &want))
            .await
            .map_err(|_| HostError::TimedOut("the cluster's access bindings"))??;
        // Read again after writing: a change stored meanwhile (by this
        // replica or another) whose own repair wrote before this one is
        // written again here, so the last write is never the older one.
        let now = read().await?;
        if now == want {
            break;
        }
        want = now;
    }
    if written > 0 {
        tracing::info!(cluster = cluster.id, written, "access bindings brought in step");
    }
    if cluster.spec.own_nodes {
        // Who may manage its nodes through the console: its admins, and
        // console admins (bound inside or not).
        let admins = db::users::admin_ids(pool).await.map_err(|_| HostError::NotYet("the admins could not be read"))?;
        let may_manage = |u| want.holds(u, MemberRole::Admin) || admins.binary_search(&u).is_ok();
        tokio::time::timeout(DOWNLOAD, revoke_departed(&virt, cluster, may_manage))
            .await
            .map_err(|_| HostError::TimedOut("the cluster's join tokens"))??;
    }
    Ok(written)
}

/// Deletes the cluster's join tokens whose maker may no longer manage its
/// nodes (`join::departed_tokens`; `may_manage`: the bindings the console
/// keeps), at every resync of its access: a membership change, a disabled
/// account, a new owner, and the slow loop. The names deleted.
pub(crate) async fn revoke_departed(
    client: &kube::Client,
    cluster: &Cluster,
    may_manage: impl Fn(i64) -> bool,
) -> Result<Vec<String>, SyncError> {
    let lp =
        ListParams::default().labels(&format!("{}={},{}", join::TOKEN_LABEL.0, join::TOKEN_LABEL.1, join::MAKER_LABEL));
    let secrets = read::list(client, Some(join::NAMESPACE), &lp, read::TOKENS, Some).await?;
    let gone = join::departed_tokens(&secrets, may_manage);
    let api: Api<Secret> = Api::namespaced(client.clone(), join::NAMESPACE);
    for name in &gone {
        match Box::pin(api.delete(name, &DeleteParams::default())).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        tracing::info!(cluster = cluster.id, secret = %name, "join token revoked: its maker no longer manages the cluster's nodes");
    }
    Ok(gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_name_users_only_and_follow_the_roles() {
        let want = Bindings::of([(3, MemberRole::Admin), (7, MemberRole::View), (9, MemberRole::View)]);
        let b = binding(MemberRole::View, &want);
        assert_eq!(b["metadata"]["name"], "kubebyon:view");
        assert_eq!(b["roleRef"]["name"], "view");
        assert_eq!(
            b["subjects"][0],
            json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "kubebyon:u:7"})
        );
        assert_eq!(b["subjects"].as_array().unwrap().len(), 2);
        assert_eq!(binding(MemberRole::Admin, &want)["roleRef"]["name"], "cluster-admin");
        assert_eq!(binding(MemberRole::Edit, &want)["subjects"], json!([]));
        // What was written reads as in step; a deleted subject, an added
        // group or a changed role does not.
        let written: ClusterRoleBinding = serde_json::from_value(b.clone()).unwrap();
        assert!(in_step(&written, MemberRole::View, &want));
        let fewer = Bindings::of([(7, MemberRole::View)]);
        assert!(!in_step(&written, MemberRole::View, &fewer));
        let mut group = written.clone();
        group
            .subjects
            .as_mut()
            .unwrap()
            .push(serde_json::from_value(json!({"kind": "Group", "name": "system:authenticated"})).unwrap());
        assert!(!in_step(&group, MemberRole::View, &want));
        let mut escalated = written;
        escalated.role_ref.name = "cluster-admin".into();
        assert!(!in_step(&escalated, MemberRole::View, &want));
    }
}
