//! Own nodes: join tokens, nodes and their removal (owner or admin), and
//! the join script machines fetch with a token.

use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use http::header;
use serde::Deserialize;

use super::{ApiError, ApiJson, ApiResult, ApiUser, cluster_id};
use crate::domain::{AppError, ErrorCode};
use crate::server::http::request::RequestFacts;
use crate::server::service::join;
use crate::server::state::AppState;

/// The routes of own nodes.
pub(crate) fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![
        ("/api/console/clusters/{id}/join-tokens", get(list_join_tokens).post(create_join_token)),
        ("/api/console/clusters/{id}/join-tokens/{token}", axum::routing::delete(revoke_join_token)),
        ("/api/console/clusters/{id}/nodes", get(list_nodes)),
        ("/api/console/clusters/{id}/nodes/{node}", axum::routing::delete(remove_node)),
        ("/api/console/clusters/{id}/node-removals", get(list_node_removals)),
        // No session: machines fetch their join script with a join token.
        ("/api/join/clusters/{id}/script", get(join_script)),
    ]
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct TokenRequest {
    /// `10m` … `7d`; absent: 1 hour.
    #[serde(default)]
    lifetime: Option<String>,
}

pub(crate) async fn list_join_tokens(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
) -> ApiResult<Vec<crate::domain::join::TokenView>> {
    Ok(Json(join::list_tokens(&st.pool, st.host.as_ref(), &u, cluster_id(&id)?).await?))
}

pub(crate) async fn list_nodes(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
) -> ApiResult<Vec<crate::domain::nodes::NodeView>> {
    Ok(Json(join::list_nodes(&st.pool, st.host.as_ref(), &u, cluster_id(&id)?).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RemoveQuery {
    /// `false`: delete the Node without draining (a machine that is gone).
    #[serde(default = "yes")]
    drain: bool,
}

fn yes() -> bool {
    true
}

/// `202` with the removal: it runs in the background (`GET …/node-removals`).
pub(crate) async fn remove_node(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path((id, node)): Path<(String, String)>,
    query: Result<axum::extract::Query<RemoveQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let axum::extract::Query(q) = query.map_err(|_| ApiError(AppError::new(ErrorCode::BadRequest)))?;
    let removal =
        join::remove_node(&st.pool, st.host.as_ref(), &st.spec_writes, &u, cluster_id(&id)?, &node, q.drain).await?;
    Ok((StatusCode::ACCEPTED, Json(removal)).into_response())
}

/// The cluster's latest node removals, newest first.
pub(crate) async fn list_node_removals(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
) -> ApiResult<Vec<crate::domain::nodes::RemovalView>> {
    Ok(Json(join::removals(&st.pool, &u, cluster_id(&id)?).await?))
}

/// `201` with the token (shown this once) and `Cache-Control: no-store`.
pub(crate) async fn create_join_token(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<TokenRequest>,
) -> Result<Response, ApiError> {
    let lifetime = body.lifetime.unwrap_or_default();
    let created =
        join::create_token(&st.pool, st.host.as_ref(), &st.spec_writes, &u, cluster_id(&id)?, &lifetime).await?;
    Ok((StatusCode::CREATED, [(header::CACHE_CONTROL, "no-store")], Json(created)).into_response())
}

pub(crate) async fn revoke_join_token(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path((id, token)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    join::revoke_token(&st.pool, st.host.as_ref(), &st.spec_writes, &u, cluster_id(&id)?, &token).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/join/clusters/{id}/script?token=…`: no session; the control
/// plane's join script, byte for byte (`service::join_script`).
pub(crate) async fn join_script(
    State(st): State<AppState>,
    Extension(request): Extension<RequestFacts>,
    Path(id): Path<String>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Response {
    let token = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let client = request.client_key;
    // The id is the service's to judge: a malformed one is one more refusal.
    let answer = crate::server::service::join_script::script(&st.pool, st.host.as_ref(), &id, &token, &client)
        .await
        .map_err(ApiError);
    let mut res = match answer {
        Ok(body) => ([(header::CONTENT_TYPE, "text/x-shellscript")], body).into_response(),
        Err(e) => e.into_response(),
    };
    res.headers_mut().insert(header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    res
}
