//! Migration server functions (admins): the page's candidates and dry run,
//! starting a migration, its progress, retry and roll back.

use leptos::prelude::*;

use crate::domain::AppError;
use crate::domain::migration::{MigrationForm, MigrationView, Movable, Plan};

#[server(prefix = "/fn", endpoint = "migrations/movable")]
pub async fn movable_clusters() -> Result<Vec<Movable>, AppError> {
    use crate::server::context::{require_admin, state};
    crate::server::service::migration::movable(&state()?.pool, &require_admin()?).await
}

#[server(prefix = "/fn", endpoint = "migrations/plan")]
pub async fn migration_plan(form: MigrationForm) -> Result<Plan, AppError> {
    use crate::server::context::{require_admin, state};
    let st = state()?;
    let detected = st.host.as_ref().map(|h| h.detected());
    crate::server::service::migration::dry_run(&st.pool, &require_admin()?, detected, &form.request()?).await
}

#[server(prefix = "/fn", endpoint = "migrations/start")]
pub async fn start_migration(
    clusters: String,
    include_disabled: Option<String>,
    source: String,
    hosts: String,
    typed: Option<String>,
    concurrency: String,
    grace_days: String,
) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, require_admin, state};
    use server_fn::ServerFn as _;
    let st = state()?;
    let form = MigrationForm {
        clusters,
        include_disabled: include_disabled.is_some(),
        source,
        hosts,
        typed: typed.unwrap_or_default(),
        concurrency,
        grace_days,
    };
    let fields = [
        ("clusters", form.clusters.as_str()),
        ("include_disabled", if form.include_disabled { "on" } else { "" }),
        ("source", form.source.as_str()),
        ("hosts", form.hosts.as_str()),
        ("typed", form.typed.as_str()),
        ("concurrency", form.concurrency.as_str()),
        ("grace_days", form.grace_days.as_str()),
    ];
    let detected = st.host.as_ref().map(|h| h.detected());
    let started = async {
        crate::server::service::migration::start(&st.pool, &require_admin()?, detected, &form.request()?).await
    };
    let id =
        started.await.inspect_err(|e| keep_input_on_error(StartMigration::PATH, "/admin/migrations", &fields, e))?;
    crate::server::service::wake(st.host.as_ref());
    leptos_axum::redirect(&format!("/admin/migrations/{id}"));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "migrations/get")]
pub async fn load_migration(id: i64) -> Result<MigrationView, AppError> {
    use crate::server::context::{require_admin, state};
    crate::server::service::migration::view(&state()?.pool, &require_admin()?, id).await
}

#[server(prefix = "/fn", endpoint = "migrations/recent")]
pub async fn recent_migrations() -> Result<Vec<MigrationView>, AppError> {
    use crate::server::context::{require_admin, state};
    crate::server::service::migration::recent(&state()?.pool, &require_admin()?).await
}

/// Retry or roll back one failed cluster (plain forms on the progress page).
#[server(prefix = "/fn", endpoint = "migrations/item")]
pub async fn migration_item(id: i64, cluster_id: i64, action: String) -> Result<(), AppError> {
    use crate::server::context::{require_admin, state};
    let (st, admin) = (state()?, require_admin()?);
    crate::server::service::migration::item_action(&st.pool, st.host.as_ref(), &admin, id, cluster_id, &action).await?;
    leptos_axum::redirect(&format!("/admin/migrations/{id}"));
    Ok(())
}
