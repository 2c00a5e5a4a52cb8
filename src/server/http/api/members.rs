//! Sharing: a cluster's members, and the admins' teams.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get};
use serde::Deserialize;

use super::{ApiError, ApiJson, ApiResult, ApiUser, cluster_id as id_of};
use crate::domain::membership::{Member, Team};
use crate::server::service::members::{self, MemberInput};
use crate::server::state::AppState;

pub(crate) fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![
        ("/api/console/clusters/{id}/members", get(list).put(put)),
        ("/api/console/clusters/{id}/members/{kind}/{member}", delete(remove)),
        ("/api/admin/teams", get(teams).post(create_team)),
        ("/api/admin/teams/{id}", delete(delete_team)),
        ("/api/admin/teams/{id}/members/{username}", axum::routing::put(add_to_team).delete(remove_from_team)),
    ]
}

async fn list(State(st): State<AppState>, ApiUser(u): ApiUser, Path(id): Path<String>) -> ApiResult<Vec<Member>> {
    Ok(Json(members::list(&st.pool, &u, id_of(&id)?).await?))
}

async fn put(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<MemberInput>,
) -> Result<Response, ApiError> {
    Ok(answer(members::put(&st.pool, st.host.as_ref(), &st.spec_writes, &u, id_of(&id)?, &body).await?))
}

async fn remove(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path((id, kind, member)): Path<(String, String, String)>,
) -> Result<Response, ApiError> {
    let changed =
        members::remove(&st.pool, st.host.as_ref(), &st.spec_writes, &u, id_of(&id)?, &kind, id_of(&member)?).await?;
    Ok(answer(changed))
}

/// A membership change's answer: `200` with the members when the cluster's
/// access is in step; `202` with `{"pending": true, "reason": <the host's
/// words>, "members": …}` when the change is stored but the cluster did not
/// take it yet (the console keeps trying; its page says "access out of step").
fn answer(changed: members::Changed) -> Response {
    match changed.pending {
        None => Json(changed.members).into_response(),
        Some(reason) => (
            StatusCode::ACCEPTED,
            Json(serde_json::json!({"pending": true, "reason": reason, "members": changed.members})),
        )
            .into_response(),
    }
}

async fn teams(State(st): State<AppState>, ApiUser(u): ApiUser) -> ApiResult<Vec<Team>> {
    Ok(Json(members::teams(&st.pool, &u).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TeamRequest {
    name: String,
}

async fn create_team(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    ApiJson(body): ApiJson<TeamRequest>,
) -> Result<(StatusCode, Json<Team>), super::ApiError> {
    Ok((StatusCode::CREATED, Json(members::create_team(&st.pool, &u, &body.name).await?)))
}

async fn delete_team(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
) -> Result<StatusCode, super::ApiError> {
    members::delete_team(&st.pool, st.host.as_ref(), &u, id_of(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn add_to_team(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path((id, username)): Path<(String, String)>,
) -> ApiResult<Team> {
    Ok(Json(members::set_in_team(&st.pool, st.host.as_ref(), &u, id_of(&id)?, &username, true).await?))
}

async fn remove_from_team(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path((id, username)): Path<(String, String)>,
) -> ApiResult<Team> {
    Ok(Json(members::set_in_team(&st.pool, st.host.as_ref(), &u, id_of(&id)?, &username, false).await?))
}
