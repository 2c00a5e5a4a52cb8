//! Join tokens of an own-nodes cluster: created, listed and revoked inside the
//! virtual cluster (Secrets in its `kube-system`, as `vcluster token create`
//! writes them, `domain::join`), through `vc-<name>`'s credentials at the
//! cluster's internal address. The owner or an admin; others get not found.
//! The full token is returned once, at creation, and never stored, logged or
//! audited (the audit log names its id).

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::core::PartialObjectMeta;
use sqlx::AnyPool;

use super::HostHandle;
use crate::domain::audit::AuditAction;
use crate::domain::cluster::Cluster;
use crate::domain::join::{self, JoinToken, Lifetime};
use crate::domain::membership::Can;
use crate::domain::nodes::{CreatedToken, NodeView, RemovalView, TokenView, Unread};
use crate::domain::user::CurrentUser;
use crate::domain::{AppError, ErrorCode};
use crate::server::host::call_budget::UserCall;
use crate::server::service::write_limit::SpecWriteLimiter;
use crate::server::tenant::read::{self, ReadError};

/// The cluster (if `user` may see it and it has own nodes), a client for its
/// virtual API server, and the user's call it is read within
/// (`host::call_budget`: over it, `calls_rate_limited`).
async fn open<'h>(
    pool: &AnyPool,
    host: Option<&'h HostHandle>,
    user: &CurrentUser,
    id: i64,
    can: Can,
) -> Result<(Cluster, kube::Client, UserCall<'h>), AppError> {
    let cluster = super::clusters::get_for(pool, user, id, can).await?;
    connect(host, user, cluster).await
}

async fn connect<'h>(
    host: Option<&'h HostHandle>,
    user: &CurrentUser,
    cluster: Cluster,
) -> Result<(Cluster, kube::Client, UserCall<'h>), AppError> {
    if !cluster.spec.own_nodes {
        return Err(AppError::new(ErrorCode::OwnNodesOff));
    }
    let unavailable = || AppError::new(ErrorCode::ControlPlaneUnavailable);
    let host = host.ok_or_else(unavailable)?;
    let call = host.user_calls().take(user.id)?;
    match host.virtual_client(&cluster).await {
        Ok(Some(client)) => Ok((cluster, client, call)),
        Ok(None) => Err(unavailable()),
        Err(e) => {
            tracing::warn!(cluster = cluster.id, error = %e, "the virtual cluster is not reachable");
            Err(unavailable())
        }
    }
}

fn call_failed(cluster: &Cluster, what: &str, e: &kube::Error) -> AppError {
    tracing::warn!(cluster = cluster.id, error = %e, "{what} in the virtual cluster failed");
    AppError::new(ErrorCode::ControlPlaneUnavailable)
}

/// A bounded read's failure ([`read`]): past a cap, the tenant's own
/// objects are too large for the console to read (not "unavailable").
fn read_failed(cluster: &Cluster, what: &str, e: ReadError) -> AppError {
    match e {
        ReadError::Kube(e) => call_failed(cluster, what, &e),
        ReadError::TooLarge(cap) => {
            tracing::warn!(cluster = cluster.id, cap, "{what} in the virtual cluster is over the console's cap");
            AppError::new(ErrorCode::VirtualAnswerTooLarge)
        }
    }
}

/// Makes a token valid for `lifetime` (`1h` unless given).
/// Token creation, revocation and node removal are writes like a cluster's
/// edits: each valid one takes from the user's write budget
/// (`service::write_limit`, shared with cluster writes), so one user cannot
/// flood a control plane with Secrets or the audit log with rows.
pub(crate) async fn create_token(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    writes: &SpecWriteLimiter,
    user: &CurrentUser,
    id: i64,
    lifetime: &str,
) -> Result<CreatedToken, AppError> {
    let lifetime = Lifetime::parse(lifetime)?;
    writes.take(user.id)?;
    let (cluster, client, _call) = Box::pin(open(pool, host, user, id, Can::ManageNodes)).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), join::NAMESPACE);
    let token = {
        use rand::Rng;
        let mut rng = rand::rngs::OsRng;
        JoinToken::generate(|n| rng.gen_range(0..n))
    };
    let body: Secret =
        serde_json::from_value(join::bootstrap_secret(&token, crate::server::db::now(), lifetime, user.id))
            .map_err(|_| AppError::new(ErrorCode::Internal))?;
    let stored = Box::pin(secrets.create(&PostParams::default(), &body))
        .await
        .map_err(|e| call_failed(&cluster, "token create", &e))?;
    let view = join::token_view(&stored).ok_or(AppError::new(ErrorCode::Internal))?;
    tracing::info!(cluster = cluster.id, token_id = %view.id, user = %user.username, "join token created");
    // The machine discovers the API server from cluster-info: it must name
    // the endpoint the script gives (after an endpoint change it may not).
    if let Err(e) = Box::pin(ensure_cluster_info(&cluster, &client)).await {
        tracing::warn!(cluster = cluster.id, error = %e, "cluster-info not brought up to date: joins may discover the old endpoint");
    }
    let target = format!("cluster:{}", cluster.spec.name);
    super::audit::record(pool, user, AuditAction::JoinTokenCreated, &target, &format!("token: {}", view.id)).await;
    Ok(CreatedToken { token: token.to_string(), view })
}

/// `kube-public/cluster-info` names the endpoint machines join at
/// (`render::join_endpoint`). kubeadm's token discovery then talks to the
/// server cluster-info names (`cmd/kubeadm/app/discovery/token/token.go`);
/// whether vCluster (Pro, closed) rewrites it when `controlPlane.endpoint`
/// changes is not known, so the console assumes it does not: at each token's
/// creation it rewrites the server when it differs, keeping the rest (the
/// CA), and kube-controller-manager's `bootstrapsigner` signs it again. The
/// update carries the resourceVersion read; the signer writes the same
/// object for the token just made (its `jws-kubeconfig-<id>`), so a conflict
/// is read again and retried (a few times: each is a fresh read).
async fn ensure_cluster_info(cluster: &Cluster, client: &kube::Client) -> Result<bool, String> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let Some(endpoint) = crate::domain::render::join_endpoint(&cluster.spec) else { return Ok(false) };
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-public");
    let server = format!("https://{endpoint}");
    for _ in 0..5 {
        let Some(mut info) = api.get_opt("cluster-info").await.map_err(|e| e.to_string())? else { return Ok(false) };
        let text = info.data.as_ref().and_then(|d| d.get("kubeconfig")).cloned().unwrap_or_default();
        let Some(rewritten) = with_server(&text, &server) else { return Ok(false) };
        info.data.get_or_insert_default().insert("kubeconfig".into(), rewritten);
        match api.replace("cluster-info", &PostParams::default(), &info).await {
            Ok(_) => {
                tracing::info!(cluster = cluster.id, %server, "cluster-info names the current endpoint again");
                return Ok(true);
            }
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("cluster-info kept changing under the update".into())
}

/// `cluster-info`'s kubeconfig with its (first) cluster's server set to
/// `server`; `None` when it names it already or is not a kubeconfig.
fn with_server(kubeconfig: &str, server: &str) -> Option<String> {
    let mut doc: serde_yaml::Value = serde_yaml::from_str(kubeconfig).ok()?;
    let slot = doc.get_mut("clusters")?.get_mut(0)?.get_mut("cluster")?.get_mut("server")?;
    if slot.as_str() == Some(server) {
        return None;
    }
    *slot = serde_yaml::Value::String(server.to_owned());
    serde_yaml::to_string(&doc).ok()
}

/// The cluster's tokens (vCluster's label), soonest to expire first.
pub(crate) async fn list_tokens(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    user: &CurrentUser,
    id: i64,
) -> Result<Vec<TokenView>, AppError> {
    let (cluster, client, _call) = Box::pin(open(pool, host, user, id, Can::See)).await?;
    Box::pin(tokens_of(&cluster, &client)).await
}

async fn tokens_of(cluster: &Cluster, client: &kube::Client) -> Result<Vec<TokenView>, AppError> {
    let lp = ListParams::default().labels(&format!("{}={}", join::TOKEN_LABEL.0, join::TOKEN_LABEL.1));
    let keep = |s: Secret| join::token_view(&s);
    let mut views = read::list(client, Some(join::NAMESPACE), &lp, read::TOKENS, keep)
        .await
        .map_err(|e| read_failed(cluster, "token list", e))?;
    views.sort_by_key(|v| (v.expires_at.unwrap_or(i64::MAX), v.id.clone()));
    // Which nodes joined with each: their bootstrap CSRs (kubelets' client
    // certificates only), while kept (csrcleaner removes approved ones after an hour).
    let lp = ListParams::default().fields("spec.signerName=kubernetes.io/kube-apiserver-client-kubelet");
    let keep = |csr: CertificateSigningRequest| {
        join::csr_node(csr.spec.username.as_deref().unwrap_or_default(), &csr.spec.request.0)
    };
    let joins =
        read::list(client, None, &lp, read::CSRS, keep).await.map_err(|e| read_failed(cluster, "CSR list", e))?;
    for (id, node) in joins {
        if let Some(view) = views.iter_mut().find(|v| v.id == id)
            && !view.nodes.contains(&node)
        {
            view.nodes.push(node);
        }
    }
    Ok(views)
}

/// Deletes token `token_id`; an id that is not one of the cluster's tokens is not found.
pub(crate) async fn revoke_token(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    writes: &SpecWriteLimiter,
    user: &CurrentUser,
    id: i64,
    token_id: &str,
) -> Result<(), AppError> {
    let not_found = || AppError::new(ErrorCode::NotFound);
    // Only an id of the token form names a Secret here (no other Secret of
    // kube-system can be reached through this).
    let token_id = join::token_id(token_id).ok_or_else(not_found)?;
    writes.take(user.id)?;
    let secret_name = join::secret_name(token_id);
    let (cluster, client, _call) = Box::pin(open(pool, host, user, id, Can::ManageNodes)).await?;
    match Box::pin(read::get_opt::<Secret>(&client, Some(join::NAMESPACE), &secret_name)).await {
        Ok(Some(s)) if join::token_view(&s).is_some() => {}
        Ok(_) => return Err(not_found()),
        Err(e) => return Err(read_failed(&cluster, "token read", e)),
    }
    let secrets: Api<Secret> = Api::namespaced(client, join::NAMESPACE);
    match Box::pin(secrets.delete(&secret_name, &DeleteParams::default())).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => return Err(not_found()),
        Err(e) => return Err(call_failed(&cluster, "token revoke", &e)),
    }
    tracing::info!(cluster = cluster.id, token_id, user = %user.username, "join token revoked");
    let target = format!("cluster:{}", cluster.spec.name);
    super::audit::record(pool, user, AuditAction::JoinTokenRevoked, &target, &format!("token: {token_id}")).await;
    Ok(())
}

/// The virtual cluster's nodes, by name.
pub(crate) async fn list_nodes(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    user: &CurrentUser,
    id: i64,
) -> Result<Vec<NodeView>, AppError> {
    let (cluster, client, _call) = Box::pin(open(pool, host, user, id, Can::See)).await?;
    Box::pin(nodes_of(&cluster, &client)).await
}

async fn nodes_of(cluster: &Cluster, client: &kube::Client) -> Result<Vec<NodeView>, AppError> {
    use k8s_openapi::api::core::v1::Node;
    let keep = |node: Node| Some(node_view(&node));
    let mut views = read::list(client, None, &ListParams::default(), read::NODES, keep)
        .await
        .map_err(|e| read_failed(cluster, "node list", e))?;
    views.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(views)
}

fn node_view(node: &k8s_openapi::api::core::v1::Node) -> NodeView {
    let status = node.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    NodeView {
        name: node.metadata.name.clone().unwrap_or_default(),
        ready,
        kubelet_version: status.and_then(|s| s.node_info.as_ref()).map(|i| i.kubelet_version.clone()),
        internal_ip: status
            .and_then(|s| s.addresses.as_ref())
            .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
            .map(|a| a.address.clone()),
        since: node.metadata.creation_timestamp.as_ref().map(|t| t.0.as_second()),
    }
}

/// What the join page shows ([`Overview`]).
pub(crate) async fn overview(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    user: &CurrentUser,
    id: i64,
) -> Result<Overview, AppError> {
    let cluster = super::clusters::get(pool, user, id).await?;
    if !cluster.spec.own_nodes {
        return Ok(Overview { cluster, read: Ok(Default::default()), removals: Vec::new() });
    }
    let removals = removals_of(pool, &cluster).await?;
    let read = async {
        let (cluster, client, _call) = Box::pin(connect(host, user, cluster.clone())).await?;
        let tokens = Box::pin(tokens_of(&cluster, &client)).await?;
        Ok::<_, AppError>((tokens, Box::pin(nodes_of(&cluster, &client)).await?))
    };
    match Box::pin(read).await {
        Ok(read) => Ok(Overview { cluster, read: Ok(read), removals }),
        Err(e) if e.code == ErrorCode::ControlPlaneUnavailable => {
            Ok(Overview { cluster, read: Err(Unread::Unavailable), removals })
        }
        Err(e) if e.code == ErrorCode::VirtualAnswerTooLarge => {
            Ok(Overview { cluster, read: Err(Unread::TooLarge), removals })
        }
        Err(e) => Err(e),
    }
}

/// What the join page shows: the cluster; its tokens and nodes when the
/// virtual cluster can be read now (otherwise why not: the page says it);
/// its latest node removals (from the database: shown either way).
pub(crate) struct Overview {
    pub cluster: Cluster,
    pub read: Result<(Vec<TokenView>, Vec<NodeView>), Unread>,
    pub removals: Vec<RemovalView>,
}

/// Starts removing node `name` (`drain`: cordon, evict its pods and wait
/// for them, as `vcluster node delete` does; without: delete the Node now,
/// for a machine that is gone), as a background operation
/// (`controllers::node_removal`) whose progress the join page shows. The
/// same request while one runs returns that one. Audited when started.
pub(crate) async fn remove_node(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    writes: &SpecWriteLimiter,
    user: &CurrentUser,
    id: i64,
    name: &str,
    drain: bool,
) -> Result<RemovalView, AppError> {
    use k8s_openapi::api::core::v1::Node;
    let not_found = || AppError::new(ErrorCode::NotFound);
    let name = crate::domain::nodes::node_name(name).ok_or_else(not_found)?;
    writes.take(user.id)?;
    let (cluster, client, _call) = Box::pin(open(pool, host, user, id, Can::ManageNodes)).await?;
    match Box::pin(read::exists::<Node>(&client, None, name)).await {
        Ok(true) => {}
        Ok(false) => return Err(not_found()),
        Err(e) => return Err(read_failed(&cluster, "node read", e)),
    }
    let (row, started) = crate::server::db::node_removals::start(pool, cluster.id, name, drain, user.id).await?;
    if started {
        tracing::info!(cluster = cluster.id, node = name, drain, user = %user.username, "node removal started");
        let target = format!("cluster:{}", cluster.spec.name);
        let detail = if drain { format!("node: {name}") } else { format!("node: {name} (without draining)") };
        super::audit::record(pool, user, AuditAction::NodeRemoved, &target, &detail).await;
    }
    Ok(row.view())
}

/// The cluster's latest node removals, newest first (the owner or an admin).
pub(crate) async fn removals(pool: &AnyPool, user: &CurrentUser, id: i64) -> Result<Vec<RemovalView>, AppError> {
    let cluster = super::clusters::get(pool, user, id).await?;
    removals_of(pool, &cluster).await
}

/// How many removals the join page and the API show.
const RECENT_REMOVALS: i64 = 20;

async fn removals_of(pool: &AnyPool, cluster: &Cluster) -> Result<Vec<RemovalView>, AppError> {
    let rows = crate::server::db::node_removals::recent(pool, cluster.id, RECENT_REMOVALS).await?;
    Ok(rows.iter().map(|r| r.view()).collect())
}

/// Unix seconds now, the clock the tokens' expiry is read against (the join
/// page's countdowns start from it).
pub(crate) fn now() -> i64 {
    crate::server::db::now()
}

/// The names of the cluster's joined nodes, if it has own nodes and its
/// control plane answers within two seconds (pages warn with them; no answer
/// is no warning, never an error).
/// Within the user's call budget: over it, no warning either.
pub(crate) async fn joined_node_names(host: Option<&HostHandle>, user: &CurrentUser, cluster: &Cluster) -> Vec<String> {
    if !cluster.spec.own_nodes || cluster.deletion_requested {
        return Vec::new();
    }
    let names = async {
        let (_, client, _call) = connect(host, user, cluster.clone()).await.ok()?;
        let keep = |n: PartialObjectMeta<k8s_openapi::api::core::v1::Node>| n.metadata.name;
        let lp = ListParams::default();
        read::list_metadata(&client, None, &lp, read::NAMES, keep).await.ok()
    };
    match tokio::time::timeout(std::time::Duration::from_secs(2), Box::pin(names)).await {
        Ok(Some(mut names)) => {
            names.sort();
            names
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::with_server;

    #[test]
    fn cluster_info_is_pointed_at_the_current_endpoint_and_keeps_its_ca() {
        let info = "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: Q0E=\n    server: https://old.example:443\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\npreferences: {}\nusers: null\n";
        let new = with_server(info, "https://new.example:443").expect("rewritten");
        let doc: serde_yaml::Value = serde_yaml::from_str(&new).unwrap();
        assert_eq!(doc["clusters"][0]["cluster"]["server"].as_str(), Some("https://new.example:443"));
        assert_eq!(doc["clusters"][0]["cluster"]["certificate-authority-data"].as_str(), Some("Q0E="));
        assert_eq!(doc["kind"].as_str(), Some("Config"));
        assert_eq!(with_server(&new, "https://new.example:443"), None, "already current: nothing to write");
        assert_eq!(with_server("not: [a kubeconfig", "https://x:443"), None);
        assert_eq!(with_server("kind: Config\n", "https://x:443"), None, "no cluster to point");
    }
}
