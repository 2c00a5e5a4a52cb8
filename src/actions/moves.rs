//! Move server functions (admins): the page's candidates and dry run,
//! starting a move, its progress, retry and roll back.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::domain::AppError;
use crate::domain::moves::{Movable, MoveForm, MoveView, Plan};

#[server(prefix = "/fn", endpoint = "moves/movable")]
pub(crate) async fn movable_clusters() -> Result<Vec<Movable>, AppError> {
    use crate::server::context::{require_admin, state};
    crate::server::service::moves::movable(&state()?.pool, &require_admin()?).await
}

#[server(prefix = "/fn", endpoint = "moves/plan")]
pub(crate) async fn move_plan(form: MoveForm) -> Result<Plan, AppError> {
    use crate::server::context::{require_admin, state};
    let st = state()?;
    let host = crate::server::service::HostLink::of(st.host.as_ref());
    crate::server::service::moves::dry_run(&st.pool, &require_admin()?, host, &form.request()?).await
}

/// The start form as posted (a checkbox is there or not; the typed hosts
/// and the target only when shown).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct StartPost {
    clusters: String,
    #[serde(default, deserialize_with = "super::empty_is_none")]
    include_disabled: Option<String>,
    source: String,
    hosts: String,
    #[serde(default, deserialize_with = "super::empty_is_none")]
    typed: Option<String>,
    concurrency: String,
    grace_days: String,
    #[serde(default, deserialize_with = "super::empty_is_none")]
    target: Option<String>,
}

impl From<StartPost> for MoveForm {
    fn from(p: StartPost) -> Self {
        MoveForm {
            clusters: p.clusters,
            include_disabled: p.include_disabled.is_some(),
            source: p.source,
            hosts: p.hosts,
            typed: p.typed.unwrap_or_default(),
            concurrency: p.concurrency,
            grace_days: p.grace_days,
            target: p.target.unwrap_or_default(),
        }
    }
}

#[server(prefix = "/fn", endpoint = "moves/start")]
pub(crate) async fn start_move(#[server(flatten)] posted: StartPost) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, require_admin, state};
    use server_fn::ServerFn as _;
    let st = state()?;
    let form = MoveForm::from(posted);
    let fields = [
        ("clusters", form.clusters.as_str()),
        ("include_disabled", if form.include_disabled { "on" } else { "" }),
        ("source", form.source.as_str()),
        ("hosts", form.hosts.as_str()),
        ("typed", form.typed.as_str()),
        ("concurrency", form.concurrency.as_str()),
        ("grace_days", form.grace_days.as_str()),
        ("target", form.target.as_str()),
    ];
    let host = crate::server::service::HostLink::of(st.host.as_ref());
    let started =
        async { crate::server::service::moves::start(&st.pool, &require_admin()?, host, &form.request()?).await };
    let id = started.await.inspect_err(|e| keep_input_on_error(StartMove::PATH, "/admin/moves", &fields, e))?;
    leptos_axum::redirect(&format!("/admin/moves/{id}"));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "moves/get")]
pub(crate) async fn load_move(id: i64) -> Result<MoveView, AppError> {
    use crate::server::context::{require_admin, state};
    crate::server::service::moves::view(&state()?.pool, &require_admin()?, id).await
}

#[server(prefix = "/fn", endpoint = "moves/recent")]
pub(crate) async fn recent_moves() -> Result<Vec<MoveView>, AppError> {
    use crate::server::context::{require_admin, state};
    crate::server::service::moves::recent(&state()?.pool, &require_admin()?).await
}

/// Retry or roll back one failed cluster (plain forms on the progress page).
#[server(prefix = "/fn", endpoint = "moves/item")]
pub(crate) async fn move_item(id: i64, cluster_id: i64, action: String) -> Result<(), AppError> {
    use crate::server::context::{require_admin, state};
    let (st, admin) = (state()?, require_admin()?);
    crate::server::service::moves::item_action(&st.pool, st.host.as_ref(), &admin, id, cluster_id, &action).await?;
    leptos_axum::redirect(&format!("/admin/moves/{id}"));
    Ok(())
}
