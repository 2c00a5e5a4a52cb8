//! Moves (admins): clusters from NodePort to LoadBalancer or a Gateway.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use http::header;

use super::{ApiError, ApiJson, ApiResult, ApiUser, cluster_id};
use crate::server::state::AppState;

/// The routes of moves.
pub(crate) fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![
        ("/api/admin/moves", get(list_moves).post(start_move)),
        ("/api/admin/moves/dry-run", post(move_dry_run)),
        ("/api/admin/moves/{id}", get(get_move)),
        ("/api/admin/moves/{id}/clusters/{cluster}/{action}", post(move_item_action)),
    ]
}

use crate::domain::moves::{MoveRequest, MoveView, Plan};
use crate::server::service::{HostLink, moves};

pub(crate) async fn move_dry_run(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    ApiJson(body): ApiJson<MoveRequest>,
) -> ApiResult<Plan> {
    Ok(Json(moves::dry_run(&st.pool, &u, HostLink::of(st.host.as_ref()), &body).await?))
}

pub(crate) async fn start_move(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    ApiJson(body): ApiJson<MoveRequest>,
) -> Result<Response, ApiError> {
    let id = moves::start(&st.pool, &u, HostLink::of(st.host.as_ref()), &body).await?;
    let view = moves::view(&st.pool, &u, id).await?;
    Ok((StatusCode::CREATED, [(header::LOCATION, format!("/api/admin/moves/{id}"))], Json(view)).into_response())
}

pub(crate) async fn list_moves(State(st): State<AppState>, ApiUser(u): ApiUser) -> ApiResult<Vec<MoveView>> {
    Ok(Json(moves::recent(&st.pool, &u).await?))
}

pub(crate) async fn get_move(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
) -> ApiResult<MoveView> {
    Ok(Json(moves::view(&st.pool, &u, cluster_id(&id)?).await?))
}

/// `POST /api/admin/moves/{id}/clusters/{cluster}/{retry|rollback}`.
pub(crate) async fn move_item_action(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path((id, cluster, action)): Path<(String, String, String)>,
) -> ApiResult<MoveView> {
    let (id, cluster) = (cluster_id(&id)?, cluster_id(&cluster)?);
    moves::item_action(&st.pool, st.host.as_ref(), &u, id, cluster, &action).await?;
    Ok(Json(moves::view(&st.pool, &u, id).await?))
}
