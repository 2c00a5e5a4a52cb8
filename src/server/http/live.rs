//! The live pages' event streams (`server::push`): who may follow what.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};

use super::api::{ApiError, ApiUser, cluster_id};
use crate::server::push::Topic;
use crate::server::service::clusters;
use crate::server::state::AppState;

/// Proxies that buffer (nginx) are asked not to.
fn unbuffered(mut res: Response) -> Response {
    res.headers_mut().insert("x-accel-buffering", http::HeaderValue::from_static("no"));
    res
}

/// `GET /events/clusters/{id}`: the cluster's revision, as it changes; only
/// for whoever may see the cluster (else 404, as the page).
pub(crate) async fn cluster_stream(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = cluster_id(&id)?;
    clusters::get(&st.pool, &u, id).await?;
    let stream = st.push.follow(u.id, Topic::Cluster(id)).await.map_err(|e| ApiError(e.into()))?;
    Ok(unbuffered(stream.into_response()))
}

/// `GET /events/clusters`: the version of the clusters the user's list
/// shows (an admin's: every cluster's).
pub(crate) async fn list_stream(State(st): State<AppState>, ApiUser(u): ApiUser) -> Result<Response, ApiError> {
    let stream = st.push.follow(u.id, clusters::list_topic(&u)).await.map_err(|e| ApiError(e.into()))?;
    Ok(unbuffered(stream.into_response()))
}
