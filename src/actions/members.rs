//! Sharing's server functions: a cluster's members (its page's
//! plain forms) and the admins' teams (`/admin/teams`). Each redirects back
//! to its page; a refused post lands there with the error and what was typed.

use leptos::prelude::*;

use crate::domain::AppError;
use crate::domain::membership::TeamsView;

/// Shares the cluster with a user or team, or changes their role.
#[server(prefix = "/fn", endpoint = "members/put")]
pub(crate) async fn put_member(
    id: i64,
    member_kind: String,
    member: String,
    member_role: String,
) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, require_user, state};
    use crate::server::service::members::{self, MemberInput};
    use server_fn::ServerFn as _;
    let page = format!("/clusters/{id}");
    let typed =
        [("member_kind", member_kind.as_str()), ("member", member.as_str()), ("member_role", member_role.as_str())];
    let input = MemberInput { kind: Some(member_kind.clone()), name: member.clone(), role: member_role.clone() };
    let (st, user) = (state()?, require_user()?);
    members::put(&st.pool, st.host.as_ref(), &st.spec_writes, &user, id, &input)
        .await
        .inspect_err(|e| keep_input_on_error(PutMember::PATH, &page, &typed, e))?;
    leptos_axum::redirect(&format!("{page}#members"));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "members/remove")]
pub(crate) async fn remove_member(id: i64, kind: String, member_id: i64) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, require_user, state};
    use server_fn::ServerFn as _;
    let page = format!("/clusters/{id}");
    let (st, user) = (state()?, require_user()?);
    crate::server::service::members::remove(&st.pool, st.host.as_ref(), &st.spec_writes, &user, id, &kind, member_id)
        .await
        .inspect_err(|e| keep_input_on_error(RemoveMember::PATH, &page, &[], e))?;
    leptos_axum::redirect(&format!("{page}#members"));
    Ok(())
}

/// Moves the cluster to another owner (console admins; its page's form).
#[server(prefix = "/fn", endpoint = "clusters/owner")]
pub(crate) async fn transfer_cluster(id: i64, owner: String) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, require_user, state};
    use server_fn::ServerFn as _;
    let page = format!("/clusters/{id}");
    let (st, user) = (state()?, require_user()?);
    crate::server::service::clusters::transfer(&st.pool, st.host.as_ref(), &user, id, &owner)
        .await
        .inspect_err(|e| keep_input_on_error(TransferCluster::PATH, &page, &[("owner", owner.as_str())], e))?;
    // The admin still sees it (every cluster); the page shows the new owner.
    leptos_axum::redirect(&format!("{page}#members"));
    Ok(())
}

#[server(prefix = "/fn", endpoint = "teams/list")]
pub(crate) async fn list_teams() -> Result<TeamsView, AppError> {
    use crate::server::context::{require_admin, state};
    let st = state()?;
    let teams = crate::server::service::members::teams(&st.pool, &require_admin()?).await?;
    let provider_prefix = st.oidc.as_deref().and_then(|p| p.team_prefix()).map(str::to_owned);
    Ok(TeamsView { teams, provider_prefix })
}

#[server(prefix = "/fn", endpoint = "teams/create")]
pub(crate) async fn create_team(team_name: String) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, require_admin, state};
    use server_fn::ServerFn as _;
    crate::server::service::members::create_team(&state()?.pool, &require_admin()?, &team_name).await.inspect_err(
        |e| keep_input_on_error(CreateTeam::PATH, "/admin/teams", &[("team_name", team_name.as_str())], e),
    )?;
    leptos_axum::redirect("/admin/teams?saved=1");
    Ok(())
}

#[server(prefix = "/fn", endpoint = "teams/delete")]
pub(crate) async fn delete_team(team_id: i64) -> Result<(), AppError> {
    use crate::server::context::{require_admin, state};
    let st = state()?;
    crate::server::service::members::delete_team(&st.pool, st.host.as_ref(), &require_admin()?, team_id).await?;
    leptos_axum::redirect("/admin/teams?saved=1");
    Ok(())
}

/// Adds (`add` = `1`) or removes a user to or from a team.
#[server(prefix = "/fn", endpoint = "teams/member")]
pub(crate) async fn set_team_member(team_id: i64, member: String, add: bool) -> Result<(), AppError> {
    use crate::server::context::{keep_input_on_error, require_admin, state};
    use server_fn::ServerFn as _;
    let team = team_id.to_string();
    let typed = [("team_id", team.as_str()), ("member", member.as_str())];
    let (st, admin) = (state()?, require_admin()?);
    crate::server::service::members::set_in_team(&st.pool, st.host.as_ref(), &admin, team_id, &member, add)
        .await
        .inspect_err(|e| keep_input_on_error(SetTeamMember::PATH, "/admin/teams", &typed, e))?;
    leptos_axum::redirect("/admin/teams?saved=1");
    Ok(())
}
