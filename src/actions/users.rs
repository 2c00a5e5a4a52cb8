//! User management server functions (admins only).

use leptos::prelude::*;

use crate::domain::AppError;
use crate::domain::user::UserSummary;

#[server(prefix = "/fn", endpoint = "users/list")]
pub(crate) async fn list_users() -> Result<Vec<UserSummary>, AppError> {
    use crate::server::context::{require_admin, state};
    crate::server::service::accounts::list_users(&state()?.pool, &require_admin()?).await
}

#[server(prefix = "/fn", endpoint = "users/create")]
pub(crate) async fn create_user(username: String, password: String, role: String) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, require_admin, state};
    use server_fn::ServerFn as _;
    // The password is not carried back.
    let typed = [("username", username.as_str()), ("role", role.as_str())];
    crate::server::service::accounts::create_user(&state()?.pool, &require_admin()?, &username, &password, &role)
        .await
        .inspect_err(|e| keep_input_on_error(CreateUser::PATH, "/admin/users", &typed, e))?;
    leptos_axum::redirect("/admin/users?saved=1");
    Ok(())
}

#[server(prefix = "/fn", endpoint = "users/role")]
pub(crate) async fn set_role(user_id: i64, role: String) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, require_admin, state};
    use server_fn::ServerFn as _;
    // Without JavaScript the page shows the error in this user's row.
    let row = user_id.to_string();
    let st = state()?;
    crate::server::service::accounts::set_role(&st.pool, st.host.as_ref(), &require_admin()?, user_id, &role)
        .await
        .inspect_err(|e| keep_input_on_error(SetRole::PATH, "/admin/users", &[("user_id", row.as_str())], e))?;
    leptos_axum::redirect("/admin/users?saved=1");
    Ok(())
}

#[server(prefix = "/fn", endpoint = "users/password")]
pub(crate) async fn reset_password(user_id: i64, password: String) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, require_admin, state};
    use server_fn::ServerFn as _;
    // Without JavaScript the page shows the error in this user's row.
    let row = user_id.to_string();
    crate::server::service::accounts::reset_password(&state()?.pool, &require_admin()?, user_id, &password)
        .await
        .inspect_err(|e| keep_input_on_error(ResetPassword::PATH, "/admin/users", &[("user_id", row.as_str())], e))?;
    leptos_axum::redirect("/admin/users?saved=1");
    Ok(())
}

/// Disables an account (`disabled=true`) or enables it again.
#[server(prefix = "/fn", endpoint = "users/disabled")]
pub(crate) async fn set_disabled(user_id: i64, disabled: bool) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, require_admin, state};
    use server_fn::ServerFn as _;
    // Without JavaScript the page shows the error in this user's row.
    let row = user_id.to_string();
    let st = state()?;
    crate::server::service::accounts::set_disabled(&st.pool, st.host.as_ref(), &require_admin()?, user_id, disabled)
        .await
        .inspect_err(|e| keep_input_on_error(SetDisabled::PATH, "/admin/users", &[("user_id", row.as_str())], e))?;
    leptos_axum::redirect("/admin/users?saved=1");
    Ok(())
}

/// A user's own quota limits; empty fields: the platform's.
#[server(prefix = "/fn", endpoint = "users/quota")]
pub(crate) async fn set_quota(
    user_id: i64,
    quota_clusters: String,
    quota_cpu: String,
    quota_memory_gib: String,
    quota_storage_gib: String,
) -> Result<(), AppError> {
    use crate::domain::quota::QuotaInput;
    use crate::server::context::{keep_input_on_error, require_admin, state};
    use server_fn::ServerFn as _;
    let input = QuotaInput {
        clusters: &quota_clusters,
        cpu: &quota_cpu,
        memory_gib: &quota_memory_gib,
        storage_gib: &quota_storage_gib,
    };
    // Without JavaScript the page shows the error in this user's row.
    let row = user_id.to_string();
    crate::server::service::quota::set_user_quota(&state()?.pool, &require_admin()?, user_id, &input)
        .await
        .inspect_err(|e| keep_input_on_error(SetQuota::PATH, "/admin/users", &[("user_id", row.as_str())], e))?;
    leptos_axum::redirect("/admin/users?saved=1");
    Ok(())
}
