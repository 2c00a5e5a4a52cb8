//! Cluster server functions: load for pages, create, update, delete.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::domain::change::ClusterEvent;
use crate::domain::cluster::Cluster;
use crate::domain::{AppError, PublicAccessMode};

/// What the cluster pages show.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterPage {
    pub cluster: Cluster,
    pub events: Vec<ClusterEvent>,
    pub viewer_is_admin: bool,
    /// The stored mode a disabled cluster returns to (preselected in the edit form).
    pub remembered_mode: PublicAccessMode,
    /// The host it had before public access was turned off (prefilled).
    pub remembered_host: Option<String>,
}

/// One page of the clusters list (search, filters and page from the URL).
#[server(prefix = "/fn", endpoint = "clusters/list")]
pub async fn list_clusters(
    query: crate::domain::listing::ListQuery,
) -> Result<crate::domain::listing::ClusterPageOf<Cluster>, AppError> {
    use crate::server::context::{require_user, state};
    let page_size = crate::domain::listing::PAGE_SIZE;
    crate::server::service::clusters::list_page(&state()?.pool, &require_user()?, &query, page_size).await
}

#[server(prefix = "/fn", endpoint = "clusters/get")]
pub async fn load_cluster(id: i64) -> Result<ClusterPage, AppError> {
    use crate::server::context::{require_user, state};
    use crate::server::service::clusters;
    let (st, user) = (state()?, require_user()?);
    let (cluster, events, remembered_mode, host) = clusters::page(&st.pool, &user, id).await?;
    let remembered_host = host.map(|h| h.to_string());
    Ok(ClusterPage { cluster, events, viewer_is_admin: user.is_admin(), remembered_mode, remembered_host })
}

/// The admin's default mode, which the create form preselects.
#[server(prefix = "/fn", endpoint = "clusters/defaults")]
pub async fn default_mode() -> Result<PublicAccessMode, AppError> {
    use crate::server::context::{require_user, state};
    require_user()?;
    Ok(crate::server::service::settings::get(&state()?.pool).await?.default_mode)
}

#[cfg(feature = "ssr")]
fn access_request(
    enabled: Option<String>,
    mode: Option<String>,
    host: Option<String>,
) -> crate::domain::public_access::PublicAccessRequest {
    crate::domain::public_access::PublicAccessRequest { enabled: enabled.is_some(), mode, control_plane_host: host }
}

#[cfg(feature = "ssr")]
fn resources_request(
    cpu: String,
    memory_gib: String,
    storage_gib: String,
) -> crate::domain::resources::ResourcesRequest {
    use crate::domain::resources::NumberOrText::Text;
    crate::domain::resources::ResourcesRequest { cpu, memory_gib: Text(memory_gib), storage_gib: Text(storage_gib) }
}

#[server(prefix = "/fn", endpoint = "clusters/create")]
#[allow(clippy::too_many_arguments)]
pub async fn create_cluster(
    name: String,
    cpu: String,
    memory_gib: String,
    storage_gib: String,
    public_access_enabled: Option<String>,
    public_access_mode: Option<String>,
    control_plane_host: Option<String>,
) -> Result<(), AppError> {
    use crate::server::context::{require_user, state};
    use crate::server::service::clusters::{ClusterDraft, create};
    let draft = ClusterDraft {
        name,
        resources: resources_request(cpu, memory_gib, storage_gib),
        public_access: Some(access_request(public_access_enabled, public_access_mode, control_plane_host)),
    };
    let cluster = create(&state()?.pool, &require_user()?, &draft).await?;
    leptos_axum::redirect(&format!("/clusters/{}", cluster.id));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "clusters/update")]
#[allow(clippy::too_many_arguments)]
pub async fn update_cluster(
    id: i64,
    cpu: String,
    memory_gib: String,
    storage_gib: String,
    public_access_enabled: Option<String>,
    public_access_mode: Option<String>,
    control_plane_host: Option<String>,
) -> Result<(), AppError> {
    use crate::server::context::{require_user, state};
    use crate::server::service::clusters::{ClusterPatch, update};
    let patch = ClusterPatch {
        resources: Some(resources_request(cpu, memory_gib, storage_gib)),
        public_access: Some(access_request(public_access_enabled, public_access_mode, control_plane_host)),
    };
    update(&state()?.pool, &require_user()?, id, &patch).await?;
    leptos_axum::redirect(&format!("/clusters/{id}"));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "clusters/delete")]
pub async fn delete_cluster(id: i64, confirm: String) -> Result<(), AppError> {
    use crate::server::context::{require_user, state};
    crate::server::service::clusters::delete(&state()?.pool, &require_user()?, id, Some(&confirm)).await?;
    leptos_axum::redirect(&format!("/clusters/{id}"));
    Ok(())
}

/// Tests the connection now (the detail page's plain form, with or without
/// JavaScript) and lands back on the page with the outcome in the URL
/// (`?probe=<status>[&probe_detail=<what the probe saw>]`).
#[server(prefix = "/fn", endpoint = "clusters/probe")]
pub async fn probe_cluster(id: i64) -> Result<(), AppError> {
    use crate::server::context::{require_user, state};
    let st = state()?;
    let outcome = crate::server::service::clusters::probe(&st.pool, st.host.as_ref(), &require_user()?, id).await?;
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.append_pair("probe", outcome.status.as_str());
    if let Some(detail) = &outcome.detail {
        query.append_pair("probe_detail", detail);
    }
    leptos_axum::redirect(&format!("/clusters/{id}?{}", query.finish()));
    Ok(())
}
