//! Per-user credentials. A download is a credential of the user
//! who asks, made inside the cluster's own control plane: a key made for
//! this one download (never stored or logged), a certificate request
//! (`kubernetes.io/kube-apiserver-client`, CN `kubebyon:u:<id>`,
//! `expirationSeconds`) approved by the console and signed by the virtual
//! cluster's kube-controller-manager with the CA its API server trusts.
//! What the certificate may do is the virtual cluster's RBAC, kept in step
//! with the console's memberships (`tenant::access`): a role changed or
//! taken away takes effect without a new certificate. The bindings are
//! repaired on every download and membership change ([`resync`]), by the
//! access queue and by a slow loop (`controllers::access_sync`).
//!
//! `vc-<name>`'s admin credential is the console's; an admin may take it
//! only by the audited break-glass ([`break_glass`]).

use std::time::Duration;

use sqlx::AnyPool;

use super::HostHandle;
use super::write_limit::SpecWriteLimiter;
use crate::domain::audit::AuditAction;
use crate::domain::cluster::Cluster;
use crate::domain::membership::{Access, Can, CredentialLifetime};
use crate::domain::user::CurrentUser;
use crate::domain::{AppError, ClusterName, ErrorCode, Field};
use crate::server::db;
use crate::server::host::error::Error as HostError;
use crate::server::tenant::access::{DOWNLOAD, SyncError, desired, record_outcome, resync_logged};
use crate::server::tenant::certificates::{MintError, mint};
use crate::server::tenant::read::ReadError;

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
            host.access.push(many);
            None
        }
    }
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
    let (cluster, access) = super::access::with_access(pool, user, id).await?;
    if !access.allows(Can::Kubeconfig) {
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
    let (cluster, _) = super::access::with_access(pool, admin, id).await?;
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
