//! Cluster server functions: load for pages, create, update, delete.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::domain::change::ClusterEvent;
use crate::domain::cluster::Cluster;
use crate::domain::{AppError, Host, PublicAccessMode};

/// Which page of a cluster's history is shown: the id to page on from (when
/// older requests may follow), and whether it is an older page.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub(crate) struct HistoryPage {
    pub older: Option<i64>,
    pub paged: bool,
}

/// What the cluster pages show.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ClusterPage {
    pub cluster: Cluster,
    pub events: Vec<ClusterEvent>,
    /// Where the shown page of the history sits.
    pub history: HistoryPage,
    /// How the viewer reaches the cluster (owner, console admin, member
    /// with a role) and what the page offers them.
    pub access: crate::domain::membership::Access,
    pub allowed: crate::domain::membership::Allowed,
    /// Who it is shared with.
    pub members: Vec<crate::domain::membership::Member>,
    /// Why its access inside is out of step with its members, if it is (the host's words).
    pub access_out_of_step: Option<String>,
    /// The viewer is a console admin: the page offers break-glass.
    pub break_glass: bool,
    /// The longest a downloaded kubeconfig may last (the admin's setting).
    pub max_lifetime: crate::domain::membership::CredentialLifetime,
    /// The stored mode a disabled cluster returns to (preselected in the edit form).
    pub remembered_mode: PublicAccessMode,
    /// The host it had before public access was turned off (prefilled).
    pub remembered_host: Option<String>,
    /// The admin's NodePort public host (the forms' planned certificate names).
    pub nodeport_host: Option<Host>,
    /// Gateway access, when the admin offers it (the edit form).
    pub gateway: Option<crate::domain::gateway::GatewayOffer>,
    /// A gateway cluster: the shared Gateway's address, where its host's DNS must point.
    pub gateway_address: Option<String>,
    /// The machines joined as its nodes (own nodes; empty when none or unreadable).
    pub joined_nodes: Vec<String>,
}

/// What the create form starts from: the admin's default mode and NodePort
/// public host, and the user's quota.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ClusterDefaults {
    pub mode: PublicAccessMode,
    pub nodeport_host: Option<Host>,
    /// Whether the admin offers own nodes (vCluster private nodes).
    pub own_nodes_offered: bool,
    /// Gateway access, when the admin offers it.
    pub gateway: Option<crate::domain::gateway::GatewayOffer>,
    /// What the user holds and may hold.
    pub quota: crate::domain::quota::QuotaView,
}

/// One page of the clusters list (search, filters and page from the URL).
#[server(prefix = "/fn", endpoint = "clusters/list")]
pub(crate) async fn list_clusters(
    query: crate::domain::listing::ListQuery,
) -> Result<crate::domain::listing::Page<Cluster>, AppError> {
    use crate::server::context::{require_user, state};
    let page_size = crate::domain::listing::PAGE_SIZE;
    crate::server::service::clusters::list_page(&state()?.pool, &require_user()?, &query, page_size).await
}

#[server(prefix = "/fn", endpoint = "clusters/get")]
pub(crate) async fn load_cluster(id: i64, before: Option<i64>) -> Result<ClusterPage, AppError> {
    use crate::server::context::{require_user, state};
    use crate::server::service::clusters;
    let (st, user) = (state()?, require_user()?);
    let clusters::Detail { cluster, access, events, remembered_mode, remembered_host: host, members } =
        clusters::detail(&st.pool, &user, id, before).await?;
    // A full page may have older requests after it.
    let full = events.len() == usize::try_from(crate::domain::change::HISTORY_PAGE).unwrap_or(usize::MAX);
    let history = HistoryPage { older: events.last().filter(|_| full).map(|e| e.id), paged: before.is_some() };
    let remembered_host = host.map(|h| h.to_string());
    let defaults = crate::server::service::settings::public_defaults(&st.pool).await?;
    let (nodeport_host, gateway) = (defaults.nodeport_public_host, defaults.gateway);
    let joined_nodes = crate::server::service::join::joined_node_names(st.host.as_ref(), &user, &cluster).await;
    let gateway_address = clusters::gateway_address(st.host.as_ref(), &cluster, gateway.as_ref()).await;
    let access_out_of_step = crate::server::db::members::out_of_step(&st.pool, cluster.id).await?;
    Ok(ClusterPage {
        access_out_of_step,
        cluster,
        events,
        history,
        access,
        allowed: access.allowed(),
        members,
        break_glass: user.is_admin(),
        max_lifetime: defaults.kubeconfig_max_lifetime,
        remembered_mode,
        remembered_host,
        nodeport_host,
        gateway,
        gateway_address,
        joined_nodes,
    })
}

/// The admin's default mode, which the create form preselects, and NodePort public host.
#[server(prefix = "/fn", endpoint = "clusters/defaults")]
pub(crate) async fn form_defaults() -> Result<ClusterDefaults, AppError> {
    use crate::server::context::{require_user, state};
    let user = require_user()?;
    let pool = &state()?.pool;
    let defaults = crate::server::service::settings::public_defaults(pool).await?;
    let quota = crate::server::service::quota::view(pool, &user).await?;
    Ok(ClusterDefaults {
        mode: defaults.default_mode,
        nodeport_host: defaults.nodeport_public_host,
        own_nodes_offered: defaults.own_nodes_offered,
        gateway: defaults.gateway,
        quota,
    })
}

/// The resource and public access fields of the create and edit forms, as
/// posted (under the form's names).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Posted {
    cpu: String,
    memory_gib: String,
    storage_gib: String,
    #[serde(default, deserialize_with = "super::empty_is_none", rename = "public_access_enabled")]
    enabled: Option<String>,
    #[serde(default, deserialize_with = "super::empty_is_none", rename = "public_access_mode")]
    mode: Option<String>,
    #[serde(default, deserialize_with = "super::empty_is_none", rename = "control_plane_host")]
    host: Option<String>,
}

#[cfg(feature = "ssr")]
impl Posted {
    /// What a refused plain post carries back (none of it is secret).
    fn fields(&self) -> Vec<(&'static str, &str)> {
        let mut fields =
            vec![("cpu", &*self.cpu), ("memory_gib", &*self.memory_gib), ("storage_gib", &*self.storage_gib)];
        fields.extend(self.enabled.as_deref().map(|v| ("public_access_enabled", v)));
        fields.extend(self.mode.as_deref().map(|v| ("public_access_mode", v)));
        fields.extend(self.host.as_deref().map(|v| ("control_plane_host", v)));
        fields
    }

    fn resources(&self) -> crate::domain::resources::ResourcesRequest {
        use crate::domain::resources::NumberOrText::Text;
        crate::domain::resources::ResourcesRequest {
            cpu: self.cpu.clone(),
            memory_gib: Text(self.memory_gib.clone()),
            storage_gib: Text(self.storage_gib.clone()),
        }
    }

    fn access(&self) -> crate::domain::public_access::PublicAccessRequest {
        crate::domain::public_access::PublicAccessRequest {
            enabled: self.enabled.is_some(),
            mode: self.mode.clone(),
            control_plane_host: self.host.clone(),
        }
    }
}

#[server(prefix = "/fn", endpoint = "clusters/create")]
pub(crate) async fn create_cluster(
    name: String,
    #[server(flatten)] posted: Posted,
    own_nodes: Option<String>,
) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, require_user, state};
    use crate::server::service::clusters::{ClusterDraft, create};
    use server_fn::ServerFn as _;
    let (st, user) = (state()?, require_user()?);
    let mut fields = posted.fields();
    fields.insert(0, ("name", &name));
    if own_nodes.is_some() {
        fields.push(("own_nodes", "on"));
    }
    let draft = ClusterDraft {
        name: name.clone(),
        resources: posted.resources(),
        public_access: Some(posted.access()),
        own_nodes: own_nodes.is_some(),
    };
    let cluster = create(&st.pool, &st.spec_writes, &st.host_policy(), &user, &draft)
        .await
        .inspect_err(|e| keep_input_on_error(CreateCluster::PATH, "/clusters/new", &fields, e))?;
    leptos_axum::redirect(&format!("/clusters/{}", cluster.id));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "clusters/update")]
pub(crate) async fn update_cluster(id: i64, #[server(flatten)] posted: Posted) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, require_user, state};
    use crate::server::service::clusters::{ClusterPatch, update};
    use server_fn::ServerFn as _;
    let (st, user) = (state()?, require_user()?);
    let fields = posted.fields();
    let patch = ClusterPatch { resources: Some(posted.resources()), public_access: Some(posted.access()) };
    update(&st.pool, &st.spec_writes, &st.host_policy(), &user, id, &patch)
        .await
        .inspect_err(|e| keep_input_on_error(UpdateCluster::PATH, &format!("/clusters/{id}/edit"), &fields, e))?;
    leptos_axum::redirect(&format!("/clusters/{id}"));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "clusters/delete")]
pub(crate) async fn delete_cluster(id: i64, confirm: String) -> Result<(), AppError> {
    use crate::server::context::{require_user, state};
    let st = state()?;
    crate::server::service::clusters::delete(&st.pool, &st.spec_writes, &require_user()?, id, Some(&confirm)).await?;
    leptos_axum::redirect(&format!("/clusters/{id}"));
    Ok(())
}

/// Tests the connection now (the detail page's plain form, with or without
/// JavaScript) and lands back on the page with the outcome's status in the
/// URL (`?probe=<status>`, one of a fixed set). What the probe saw (a version,
/// certificate names) is not put in the URL: a page never shows text a link
/// could have written.
#[server(prefix = "/fn", endpoint = "clusters/probe")]
pub(crate) async fn probe_cluster(id: i64) -> Result<(), AppError> {
    use crate::server::context::{require_user, state};
    let st = state()?;
    let outcome = crate::server::service::clusters::probe(&st.pool, st.host.as_ref(), &require_user()?, id).await?;
    leptos_axum::redirect(&format!("/clusters/{id}?probe={}", outcome.status.as_str()));
    Ok(())
}

/// Hides the detail page's "endpoint moved" notice (a plain form).
#[server(prefix = "/fn", endpoint = "clusters/dismiss-moved")]
pub(crate) async fn dismiss_moved_notice(id: i64) -> Result<(), AppError> {
    use crate::server::context::{require_user, state};
    crate::server::service::clusters::dismiss_moved_notice(&state()?.pool, &require_user()?, id).await?;
    leptos_axum::redirect(&format!("/clusters/{id}"));
    Ok(())
}
