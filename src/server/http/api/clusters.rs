//! Clusters: list, create, read, change, delete; their history, kubeconfig,
//! connection check; and the signed-in user's quota.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use http::header;

use super::{ApiError, ApiJson, ApiResult, ApiUser, BeforeQuery, cluster_id};
use crate::domain::change::ClusterEvent;
use crate::domain::cluster::Cluster;
use crate::domain::user::CurrentUser;
use crate::domain::{AppError, ClusterName, ErrorCode};
use crate::server::service::clusters;
use crate::server::state::AppState;

/// The routes of clusters.
pub(crate) fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![
        ("/api/console/clusters", get(list_clusters).post(create_cluster)),
        ("/api/console/clusters/{id}", get(get_cluster).patch(update_cluster).delete(delete_cluster)),
        ("/api/console/clusters/{id}/events", get(cluster_events)),
        // Credentials are made by POST only: a link (a cross-site one too) mints nothing.
        ("/api/console/clusters/{id}/kubeconfig", post(cluster_kubeconfig)),
        ("/api/console/clusters/{id}/probe", post(probe_cluster)),
        ("/api/console/quota", get(my_quota)),
        ("/clusters/{id}/kubeconfig", post(cluster_kubeconfig_page)),
        // Break-glass: the cluster's own admin credential, for an admin with a reason.
        ("/api/console/clusters/{id}/admin-kubeconfig", post(break_glass_json)),
        ("/clusters/{id}/admin-kubeconfig", post(break_glass_form)),
        // Moving a cluster to another owner (console admins).
        ("/api/console/clusters/{id}/owner", axum::routing::put(transfer_cluster)),
    ]
}

/// `per_page` of the API list when not given, and its upper bound.
const API_PAGE: u32 = 100;
const API_PAGE_MAX: u32 = 500;

/// One page of clusters, filtered like the list page (`q`, `mode`, `phase`,
/// `owner`, `page`, plus `per_page`); the body stays an array, the count of
/// every match is in `X-Total-Count`.
pub(crate) async fn list_clusters(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    axum::extract::Query(params): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let query = crate::domain::listing::ListQuery::from_params(|k| params.get(k).cloned());
    let per_page =
        params.get("per_page").and_then(|p| p.parse::<u32>().ok()).unwrap_or(API_PAGE).clamp(1, API_PAGE_MAX);
    let page = clusters::list_page(&st.pool, &u, &query, per_page).await?;
    Ok(([("x-total-count", page.total.to_string())], Json(page.items)).into_response())
}

pub(crate) async fn create_cluster(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    ApiJson(draft): ApiJson<clusters::ClusterDraft>,
) -> Result<(StatusCode, Json<Cluster>), ApiError> {
    Ok((StatusCode::CREATED, Json(clusters::create(&st.pool, &st.spec_writes, &st.host_policy(), &u, &draft).await?)))
}

pub(crate) async fn get_cluster(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
) -> ApiResult<Cluster> {
    Ok(Json(clusters::get(&st.pool, &u, cluster_id(&id)?).await?))
}

pub(crate) async fn update_cluster(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
    ApiJson(patch): ApiJson<clusters::ClusterPatch>,
) -> ApiResult<Cluster> {
    Ok(Json(clusters::update(&st.pool, &st.spec_writes, &st.host_policy(), &u, cluster_id(&id)?, &patch).await?))
}

pub(crate) async fn delete_cluster(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Cluster>), ApiError> {
    Ok((StatusCode::ACCEPTED, Json(clusters::delete(&st.pool, &st.spec_writes, &u, cluster_id(&id)?, None).await?)))
}

/// `GET /api/console/clusters/{id}/events[?before=ID]`: the newest 50
/// requests (older ones with `before`, the last id of the previous page).
pub(crate) async fn cluster_events(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
    query: Result<axum::extract::Query<BeforeQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Vec<ClusterEvent>> {
    let axum::extract::Query(q) = query.map_err(|_| ApiError(AppError::new(ErrorCode::BadRequest)))?;
    Ok(Json(clusters::events(&st.pool, &u, cluster_id(&id)?, q.before).await?))
}

/// A kubeconfig asked for: its `lifetime` (`10m` … `365d`; absent: 8 hours),
/// as JSON (`{}` for the default) or the page's form.
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct LifetimeQuery {
    #[serde(default)]
    lifetime: Option<String>,
}

/// The caller's own kubeconfig of a cluster (a certificate for
/// them, signed inside the cluster now): anyone who may see it, an
/// attachment, never cached, stored or logged. 409 when there is none.
pub(crate) async fn cluster_kubeconfig(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
    ApiJson(q): ApiJson<LifetimeQuery>,
) -> Result<Response, ApiError> {
    kubeconfig_file(&st, &u, &id, q).await
}

/// The cluster page's download button (a plain form post, origin-checked
/// as every write): the file, or back to the page, which says why not.
pub(crate) async fn cluster_kubeconfig_page(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
    axum::extract::Form(q): axum::extract::Form<LifetimeQuery>,
) -> Response {
    kubeconfig_file(&st, &u, &id, q).await.unwrap_or_else(|e| back_to_page(&id, e))
}

async fn kubeconfig_file(st: &AppState, u: &CurrentUser, id: &str, q: LifetimeQuery) -> Result<Response, ApiError> {
    let lifetime = q.lifetime.unwrap_or_default();
    let (name, text) = crate::server::service::credentials::kubeconfig(
        &st.pool,
        st.host.as_ref(),
        &st.spec_writes,
        u,
        cluster_id(id)?,
        &lifetime,
    )
    .await?;
    Ok(attachment(&name, "", text))
}

/// A download the browser asked for and did not get: a JSON body would be
/// all the reader sees, so they go back to the cluster's page, which says
/// why in their language (`?download_error=<code>`: a code from a fixed set,
/// never text from the request). A path that names no cluster keeps its
/// plain answer.
fn back_to_page(id: &str, e: ApiError) -> Response {
    match id.parse::<i64>() {
        Ok(id) => axum::response::Redirect::to(&format!(
            "/clusters/{id}?{}={}",
            crate::domain::cluster::DOWNLOAD_ERROR,
            e.0.code.as_str()
        ))
        .into_response(),
        Err(_) => e.into_response(),
    }
}

fn attachment(name: &ClusterName, suffix: &str, text: String) -> Response {
    let disposition = format!("attachment; filename=\"kubeconfig-{}{suffix}.yaml\"", name.as_str());
    let headers = [
        (header::CONTENT_TYPE, "application/yaml".to_owned()),
        (header::CACHE_CONTROL, "no-store".to_owned()),
        (header::CONTENT_DISPOSITION, disposition),
    ];
    (headers, text).into_response()
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BreakGlass {
    #[serde(default)]
    reason: String,
}

async fn break_glass(st: &AppState, u: &CurrentUser, id: &str, reason: &str) -> Result<Response, ApiError> {
    let (name, text) =
        crate::server::service::credentials::break_glass(&st.pool, st.host.as_ref(), u, cluster_id(id)?, reason)
            .await?;
    Ok(attachment(&name, "-admin", text))
}

/// Break-glass as JSON: `{"reason": "..."}`.
pub(crate) async fn break_glass_json(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<BreakGlass>,
) -> Result<Response, ApiError> {
    break_glass(&st, &u, &id, &body.reason).await
}

/// Break-glass from the cluster's page (a plain form with its reason).
pub(crate) async fn break_glass_form(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
    axum::extract::Form(body): axum::extract::Form<BreakGlass>,
) -> Response {
    break_glass(&st, &u, &id, &body.reason).await.unwrap_or_else(|e| back_to_page(&id, e))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewOwner {
    username: String,
}

/// `PUT …/owner {"username"}`: the cluster moved to that account (admins;
/// within the new owner's quota). The cluster as it is after.
pub(crate) async fn transfer_cluster(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<NewOwner>,
) -> ApiResult<Cluster> {
    Ok(Json(clusters::transfer(&st.pool, st.host.as_ref(), &u, cluster_id(&id)?, &body.username).await?))
}

/// Runs the connection check now (owner or admin) and wakes the reconciler.
pub(crate) async fn probe_cluster(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
) -> ApiResult<crate::domain::cluster::ProbeOutcome> {
    Ok(Json(clusters::probe(&st.pool, st.host.as_ref(), &u, cluster_id(&id)?).await?))
}

/// What the signed-in user holds of their quota, and their limits (`limit`
/// is `null` for admins).
pub(crate) async fn my_quota(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
) -> ApiResult<crate::domain::quota::QuotaView> {
    Ok(Json(crate::server::service::quota::view(&st.pool, &u).await?))
}
