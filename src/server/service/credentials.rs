//! Per-user credentials (issue 42). A download is a credential of the user
//! who asks, made inside the cluster's own control plane: a key made for
//! this one download (never stored or logged), a certificate request
//! (`kubernetes.io/kube-apiserver-client`, CN `kubebyon:u:<id>`,
//! `expirationSeconds`) approved by the console and signed by the virtual
//! cluster's kube-controller-manager with the CA its API server trusts.
//! What the certificate may do is the virtual cluster's RBAC, kept in step
//! with the console's memberships by three ClusterRoleBindings the console
//! owns (`kubebyon:admin|edit|view`, naming Users; teams expanded) and, for
//! editors, the console's own role bound namespace by namespace outside
//! `kube-system` (`domain::rbac`): a role changed or taken away takes effect
//! without a new certificate.
//!
//! The bindings are repaired on every download and membership change
//! ([`resync`]) and by a slow loop (`controllers::access_sync`), never in the
//! observer's passes. A cluster whose endpoint is the host's own API server
//! (a relaying test host) is refused: nothing is written there.
//!
//! `vc-<name>`'s admin credential is the console's; an admin may take it
//! only by the audited break-glass ([`break_glass`]).

use std::time::Duration;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use secrecy::SecretString;
use serde_json::json;
use sqlx::AnyPool;

use super::HostHandle;
use super::virtual_read::{self, ReadError};
use super::write_limit::SpecWriteLimiter;
use crate::domain::audit::AuditAction;
use crate::domain::cluster::Cluster;
use crate::domain::membership::{self, Access, Bindings, Can, CredentialLifetime, MemberRole};
use crate::domain::rbac;
use crate::domain::user::CurrentUser;
use crate::domain::{AppError, ClusterName, ErrorCode, Field};
use crate::server::db;
use crate::server::host::error::Error as HostError;

/// The label on what the console writes inside a virtual cluster.
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
const FIELD_MANAGER: &str = "kubebyon";
/// How long the console waits for the controller-manager to sign.
const SIGNING: Duration = Duration::from_secs(15);
/// A whole download's calls to the virtual cluster.
const DOWNLOAD: Duration = Duration::from_secs(25);

/// Who each role binds in `cluster`: its owner as admin, its members (teams
/// expanded) at their roles, and a console admin only while a grant lasts
/// (their own download, [`kubeconfig`]: no standing admin identity in every
/// tenant's cluster, issue 55). A disabled account is bound to nothing,
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
    let found = virtual_read::get_opt::<ClusterRole>(virt, None, name).await?;
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

/// Editors' access in `virt` brought to `want` (issue 55): the console's
/// roles (`edit` less impersonation and token minting; the namespaces'
/// read) and a RoleBinding in each namespace outside `kube-system` and its
/// kin; with no editors, the RoleBindings go. A namespace made since is
/// bound at the next resync (a download, a membership change, the slow
/// loop). The number written.
async fn sync_editors(virt: &kube::Client, want: &Bindings) -> Result<usize, SyncError> {
    let editors = want.subjects(MemberRole::Edit);
    let name = membership::binding_name(MemberRole::Edit);
    let ours = ListParams::default().labels(&format!("{MANAGED_BY}=kubebyon"));
    let found = virtual_read::list::<RoleBinding, _>(virt, None, &ours, virtual_read::NAMES, |b| {
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
        if let Some(edit) = virtual_read::get_opt::<ClusterRole>(virt, None, "edit").await? {
            let rules = rbac::editor_rules(edit.rules.as_deref().unwrap_or_default());
            written += usize::from(own_cluster_role(virt, rbac::EDITOR_ROLE, rules).await?);
        }
        let ns = MemberRole::Edit.cluster_role();
        written += usize::from(own_cluster_role(virt, ns, rbac::namespaces_rules()).await?);
        let all =
            virtual_read::list_metadata::<Namespace, _>(virt, None, &ListParams::default(), virtual_read::NAMES, |n| {
                n.metadata.name
            })
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
        let found = virtual_read::get_opt::<ClusterRoleBinding>(virt, None, &name).await?;
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
async fn own_client(host: &HostHandle, cluster: &Cluster) -> Result<Option<kube::Client>, HostError> {
    let Some(virt) = Box::pin(host.virtual_client(cluster)).await? else { return Ok(None) };
    Box::pin(host.refuse_relay(&virt)).await?;
    Ok(Some(virt))
}

/// How long a request waits for one cluster's bindings after a membership
/// change before answering (the change is stored; the slow loop finishes).
const IN_REQUEST: Duration = Duration::from_secs(10);

/// After a membership change: the bindings of each of `clusters` brought to
/// what the console now says, at once (best effort: a control plane that
/// cannot be reached is repaired by the slow loop and the next download).
/// One cluster is brought in step within the request (at most
/// [`IN_REQUEST`]); a team's many in the background, so the request does not
/// wait for each of their control planes. For one cluster: why its access
/// is not in step yet (the host's words), if it is not — the change is
/// stored and the answer says it is pending.
pub(crate) async fn resync(pool: &AnyPool, host: Option<&HostHandle>, clusters: &[i64]) -> Option<String> {
    let host = host?;
    match clusters {
        [] => None,
        [one] => match tokio::time::timeout(IN_REQUEST, resync_logged(pool, host, *one)).await {
            Ok(pending) => pending,
            Err(_) => {
                let words = format!("no answer within {} s; the console tries again", IN_REQUEST.as_secs());
                tracing::warn!(
                    cluster = one,
                    "the cluster's access bindings were not in step in time; the slow loop retries"
                );
                if let Ok(Some(cluster)) = db::clusters::get(pool, *one).await {
                    record_outcome(pool, &cluster, Some(&words)).await;
                }
                Some(words)
            }
        },
        many => {
            let (pool, host, ids) = (pool.clone(), host.clone(), many.to_vec());
            let task = tokio::spawn(async move {
                for id in ids {
                    resync_logged(&pool, &host, id).await;
                }
            });
            if let Ok(mut running) = BACKGROUND.lock() {
                running.retain(|t| !t.is_finished());
                running.push(task);
            }
            None
        }
    }
}

/// The background resyncs under way ([`resync`] of several clusters).
static BACKGROUND: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>> = std::sync::Mutex::new(Vec::new());

/// Waits for the background resyncs under way: a process about to exit (the
/// CLI) would cancel them.
pub(crate) async fn finish_background() {
    let running = BACKGROUND.lock().map(|mut r| std::mem::take(&mut *r)).unwrap_or_default();
    for task in running {
        task.await.ok();
    }
}

/// One cluster's resync; its failure logged and returned in words.
async fn resync_logged(pool: &AnyPool, host: &HostHandle, id: i64) -> Option<String> {
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

/// Keeps a repair's outcome (issue 55): a failure marks the cluster's
/// access out of step with `failed`'s words (its page says so) until a
/// repair lands; each change of state is audited (by the console) and every
/// outcome counted (`kubebyon_access_repairs`).
async fn record_outcome(pool: &AnyPool, cluster: &Cluster, failed: Option<&str>) {
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
            db::members::clear_out_of_step(pool, cluster.id)
                .await
                .map(|was| was.then_some((AuditAction::AccessInStep, "")))
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
        tokio::time::timeout(DOWNLOAD, super::join::revoke_departed(&virt, cluster, may_manage))
            .await
            .map_err(|_| HostError::TimedOut("the cluster's join tokens"))??;
    }
    Ok(written)
}

/// A key (ECDSA P-256) and its certificate request naming `user` by id
/// alone: no role rides in the credential (a tenant's binding to such a group
/// would outlive a demotion); what it may do is the bindings the console
/// keeps in step.
fn request(user: i64) -> Result<(SecretString, String), rcgen::Error> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::CommonName, membership::kube_user(user));
    let csr = params.serialize_request(&key)?.pem()?;
    Ok((SecretString::from(key.serialize_pem()), csr))
}

/// Why no credential was made.
#[derive(Debug, thiserror::Error)]
enum MintError {
    #[error(transparent)]
    Sync(#[from] SyncError),
    #[error("the key or request: {0}")]
    Key(#[from] rcgen::Error),
    #[error("the certificate request: {0}")]
    Kube(#[from] kube::Error),
    #[error("the certificate request was not signed in time")]
    NotSigned,
    #[error("the signed certificate is not the one asked for")]
    Mismatch,
    #[error("the cluster's control plane cannot be reached yet")]
    Unavailable,
}

/// The signed certificate of a request `user` made, and its end (unix secs).
async fn sign(
    virt: &kube::Client,
    user: i64,
    csr_pem: &str,
    lifetime: CredentialLifetime,
) -> Result<(String, i64), MintError> {
    let api: Api<CertificateSigningRequest> = Api::all(virt.clone());
    let object: CertificateSigningRequest = serde_json::from_value(json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"generateName": format!("kubebyon-u{user}-"), "labels": {MANAGED_BY: "kubebyon"}},
        "spec": {
            "request": k8s_openapi::ByteString(csr_pem.as_bytes().to_vec()),
            "signerName": "kubernetes.io/kube-apiserver-client",
            "expirationSeconds": lifetime.secs(),
            "usages": ["digital signature", "client auth"],
        },
    }))
    .map_err(|_| MintError::Mismatch)?;
    let made = api.create(&PostParams::default(), &object).await?;
    let name = made.metadata.name.clone().unwrap_or_default();
    let approval = json!({"status": {"conditions": [{
        "type": "Approved", "status": "True", "reason": "KubebyonConsole",
        "message": "approved by the KubeBYON console for its user",
    }]}});
    let signed = async {
        api.patch_approval(&name, &PatchParams::default(), &Patch::Merge(&approval)).await?;
        let deadline = tokio::time::Instant::now() + SIGNING;
        loop {
            let now = virtual_read::get_opt::<CertificateSigningRequest>(virt, None, &name)
                .await
                .map_err(|e| MintError::Sync(e.into()))?;
            let status = now.and_then(|c| c.status);
            if let Some(cert) = status.as_ref().and_then(|s| s.certificate.as_ref()) {
                return Ok(String::from_utf8_lossy(&cert.0).into_owned());
            }
            let failed = status.iter().flat_map(|s| s.conditions.iter().flatten()).any(|c| c.type_ == "Failed");
            if failed || tokio::time::Instant::now() >= deadline {
                return Err(MintError::NotSigned);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    .await;
    // The request is not kept (it holds no secret; the cleaner would take it in an hour).
    let _ = api.delete(&name, &DeleteParams::default()).await;
    let cert = signed?;
    let not_after = check(&cert, user).ok_or(MintError::Mismatch)?;
    Ok((cert, not_after))
}

/// The certificate's end (unix seconds) if its subject is `user`'s.
fn check(cert_pem: &str, user: i64) -> Option<i64> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).ok()?;
    let cert = pem.parse_x509().ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?;
    (cn == membership::kube_user(user)).then(|| cert.validity().not_after.timestamp())
}

/// The user's own kubeconfig for cluster `id` (anyone who may see it), its
/// certificate lasting `lifetime` (`10m` … `365d`; empty: 8 hours). Audited
/// with the role and the certificate's end, never the key.
pub(crate) async fn kubeconfig(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    writes: &SpecWriteLimiter,
    user: &CurrentUser,
    id: i64,
    lifetime: &str,
) -> Result<(ClusterName, String), AppError> {
    let (cluster, access) = super::clusters::with_access(pool, user, id).await?;
    if !access.allows(Can::Kubeconfig, true) {
        return Err(AppError::new(ErrorCode::Forbidden));
    }
    let max = db::settings::load(pool).await?.kubeconfig_max_lifetime;
    let lifetime = CredentialLifetime::parse_within(lifetime, max)?;
    let unavailable = || AppError::new(ErrorCode::KubeconfigUnavailable);
    let endpoint =
        cluster.status.api_endpoint.clone().filter(|_| cluster.kubeconfig_downloadable()).ok_or_else(unavailable)?;
    let host = host.ok_or_else(unavailable)?;
    let _call = host.user_calls().take(user.id)?;
    writes.take(user.id)?;
    // A console admin who is neither owner nor member is bound for as long
    // as this credential lasts, then no more (the resync after its end).
    let on_demand = access == Access::ConsoleAdmin;
    if on_demand {
        // A minute over the certificate's end: it is signed a moment after.
        let until = db::now() + i64::from(lifetime.secs()) + 60;
        db::users::grant_admin(pool, cluster.id, user.id, until).await?;
    }
    let want = desired(pool, &cluster).await?;
    let role = access.role();
    let made = tokio::time::timeout(DOWNLOAD, Box::pin(mint(host, &cluster, user.id, lifetime, &want)))
        .await
        .unwrap_or(Err(MintError::NotSigned));
    let minted = made.map_err(|e| refusal(&cluster, &e))?;
    let text = crate::server::host::kubeconfig::for_user(
        cluster.spec.name.as_str(),
        &endpoint,
        &minted.ca_pem,
        &minted.cert_pem,
        &minted.key,
    )
    .map_err(|_| unavailable())?;
    let target = format!("cluster:{}", cluster.spec.name);
    let detail = format!(
        "role: {}; expires: {}; owner: {}{}",
        role.as_str(),
        crate::domain::join::rfc3339(minted.not_after),
        cluster.owner,
        if on_demand { "; console admin: bound until it expires" } else { "" }
    );
    super::audit::record(pool, user, AuditAction::KubeconfigDownloaded, &target, &detail).await;
    tracing::info!(cluster = cluster.id, user = %user.username, role = role.as_str(), "per-user kubeconfig issued");
    Ok((cluster.spec.name, text))
}

/// A credential just made: the CA to trust, the signed certificate, its
/// end, and the key (never stored, never logged).
struct Minted {
    ca_pem: String,
    cert_pem: String,
    not_after: i64,
    key: SecretString,
}

/// The bindings in step, then a key, a request, the console's approval and
/// the signed certificate.
async fn mint(
    host: &HostHandle,
    cluster: &Cluster,
    user: i64,
    lifetime: CredentialLifetime,
    want: &Bindings,
) -> Result<Minted, MintError> {
    let virt = own_client(host, cluster).await.map_err(SyncError::from)?.ok_or(MintError::Unavailable)?;
    sync(&virt, want).await?;
    let ca_pem = host.cluster_ca(cluster).await.map_err(SyncError::from)?.ok_or(MintError::Unavailable)?;
    let (key, csr) = request(user)?;
    let (cert_pem, not_after) = sign(&virt, user, &csr, lifetime).await?;
    Ok(Minted { ca_pem, cert_pem, not_after, key })
}

/// What a user is told when no credential was made (the cause is logged).
fn refusal(cluster: &Cluster, e: &MintError) -> AppError {
    tracing::warn!(cluster = cluster.id, error = %e, "no per-user kubeconfig was made");
    match e {
        MintError::Sync(SyncError::Host(HostError::Relayed)) => AppError::new(ErrorCode::PerUserCredentialsUnavailable),
        MintError::NotSigned | MintError::Mismatch => AppError::new(ErrorCode::CredentialNotSigned),
        MintError::Sync(SyncError::Read(ReadError::TooLarge(_))) => AppError::new(ErrorCode::VirtualAnswerTooLarge),
        _ => AppError::new(ErrorCode::KubeconfigUnavailable),
    }
}

/// The cluster's own admin credential (`vc-<name>`), for a console admin
/// who gives a reason (3–500 characters): break-glass, audited with the
/// reason. Everyone else: `403`.
pub(crate) async fn break_glass(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    admin: &CurrentUser,
    id: i64,
    reason: &str,
) -> Result<(ClusterName, String), AppError> {
    // Those who cannot see the cluster get `NotFound` here; the others who
    // are not console admins, `Forbidden`.
    let (cluster, _) = super::clusters::with_access(pool, admin, id).await?;
    if !admin.is_admin() {
        return Err(AppError::new(ErrorCode::Forbidden));
    }
    let reason = reason.trim();
    if !(3..=500).contains(&reason.chars().count()) {
        return Err(AppError::at(ErrorCode::ReasonRequired, Field::Reason));
    }
    let unavailable = || AppError::new(ErrorCode::KubeconfigUnavailable);
    let host = host.ok_or_else(unavailable)?;
    let _call = host.user_calls().take(admin.id)?;
    let text = match host.download(&cluster).await {
        Ok(Some(text)) => text,
        Ok(None) => return Err(unavailable()),
        Err(e) => {
            tracing::warn!(cluster = cluster.id, error = %e, "break-glass download failed");
            return Err(unavailable());
        }
    };
    let target = format!("cluster:{}", cluster.spec.name);
    let detail = format!("owner: {}; reason: {reason}", cluster.owner);
    super::audit::record(pool, admin, AuditAction::BreakGlass, &target, &detail).await;
    tracing::warn!(cluster = cluster.id, admin = %admin.username, "break-glass: the cluster's admin credential was taken");
    Ok((cluster.spec.name, text))
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

    #[test]
    fn a_request_names_the_user_by_id_and_never_a_privileged_group() {
        let (key, csr) = request(42).unwrap();
        assert!(secrecy::ExposeSecret::expose_secret(&key).starts_with("-----BEGIN PRIVATE KEY-----"));
        let (_, pem) = x509_parser::pem::parse_x509_pem(csr.as_bytes()).unwrap();
        let (_, req) = <x509_parser::certification_request::X509CertificationRequest as x509_parser::prelude::FromDer<_>>::from_der(&pem.contents).unwrap();
        let subject = req.certification_request_info.subject.to_string();
        assert!(subject.contains("CN=kubebyon:u:42"), "{subject}");
        assert!(!subject.contains("O="), "no role or group rides in the credential: {subject}");
        assert!(!subject.contains("system:"), "{subject}");
    }
}
