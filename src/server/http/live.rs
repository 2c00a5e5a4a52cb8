//! The live pages' event streams (`server::push`): who may follow what.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;

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
    let topic = Topic::Cluster(id);
    let stream = st.push.follow(u.id, topic, still_allowed(&st, u.id, topic)).await.map_err(|e| ApiError(e.into()))?;
    Ok(unbuffered(stream.into_response()))
}

/// `GET /events/clusters`: the version of the clusters the user's list
/// shows (an admin's: every cluster's).
pub(crate) async fn list_stream(State(st): State<AppState>, ApiUser(u): ApiUser) -> Result<Response, ApiError> {
    let topic = clusters::list_topic(&u);
    let stream = st.push.follow(u.id, topic, still_allowed(&st, u.id, topic)).await.map_err(|e| ApiError(e.into()))?;
    Ok(unbuffered(stream.into_response()))
}

/// Whether `user` may still follow `topic`, read again from the database
/// each heartbeat: a user removed or disabled, an admin demoted (the list of every
/// cluster), a cluster that is no longer theirs end the stream. A database
/// that does not answer, or a cluster deleted meanwhile (the page finds it
/// gone), keeps it.
fn still_allowed(st: &AppState, user: i64, topic: Topic) -> impl FnMut() -> BoxFuture<'static, bool> + use<> {
    let pool = st.pool.clone();
    move || {
        let pool = pool.clone();
        Box::pin(async move {
            let now = match crate::server::db::users::by_id(&pool, user).await {
                Ok(Some(row)) if row.disabled_at.is_none() => row.current_user(),
                Ok(_) => return false,
                Err(_) => return true,
            };
            match topic {
                Topic::Cluster(id) => match crate::server::db::clusters::get(&pool, id).await {
                    // The owner, an admin, a member still.
                    Ok(Some(c)) => {
                        !matches!(crate::server::service::access::access_of(&pool, &now, &c).await, Ok(None))
                    }
                    Ok(None) | Err(_) => true,
                },
                list => clusters::list_topic(&now) == list,
            }
        })
    }
}
