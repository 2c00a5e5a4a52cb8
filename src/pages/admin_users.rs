//! `/admin/users` (admins only): list, create, set role, reset password.

use leptos::prelude::*;
use leptos_meta::Title;
use server_fn::ServerFn;

use super::problem::problem_view;
use super::{SavedBanner, retyped, url_error};
use crate::actions::users::{CreateUser, ResetPassword, SetDisabled, SetQuota, SetRole, list_users};
use crate::components::islands::user_forms::{CreateUserForm, UserRowForms};
use crate::components::labels::format_time;
use crate::components::layout::Layout;
use crate::domain::user::Role;
use crate::i18n::*;

#[component]
pub(crate) fn UsersPage() -> impl IntoView {
    let i18n = use_i18n();
    let content = Suspend::new(async move {
        let users = match list_users().await {
            Err(e) => return problem_view(e),
            Ok(users) => users,
        };
        // A role/password post refused without JavaScript: its row shows the error.
        let failed_row = retyped(SetRole::PATH)
            .or_else(|| retyped(ResetPassword::PATH))
            .or_else(|| retyped(SetQuota::PATH))
            .or_else(|| retyped(SetDisabled::PATH))
            .and_then(|q| q.get("user_id")?.parse::<i64>().ok());
        let (role_error, reset_error) = (url_error(SetRole::PATH), url_error(ResetPassword::PATH));
        let quota_error = url_error(SetQuota::PATH);
        let disable_error = url_error(SetDisabled::PATH);
        let me = crate::actions::auth::session_now().ok().and_then(|s| s.user).map(|u| u.id);
        let typed = retyped(CreateUser::PATH);
        let typed_username = typed.as_ref().and_then(|q| q.get("username")).unwrap_or_default();
        let typed_role = typed.and_then(|q| q.get("role")).and_then(|r| Role::parse(&r).ok()).unwrap_or(Role::User);
        view! {
            <section class="card">
                <h1 class="page-title">{t!(i18n, users.title)}</h1>
                <p class="mb-4 text-slate-600">{t!(i18n, users.intro)}</p>
                <SavedBanner />
                <table class="table">
                    <caption class="sr-only">{t!(i18n, users.table_caption)}</caption>
                    <thead>
                        <tr>
                            <th scope="col">{t!(i18n, users.col_username)}</th>
                            <th scope="col">{t!(i18n, users.col_role)}</th>
                            <th scope="col">{t!(i18n, users.col_sign_in)}</th>
                            <th scope="col">{t!(i18n, users.col_created)}</th>
                            <th scope="col">{t!(i18n, users.col_actions)}</th>
                        </tr>
                    </thead>
                    <tbody>
                        {users
                            .into_iter()
                            .map(|u| {
                                let role = if u.role == Role::Admin {
                                    t_string!(i18n, app.role_admin)
                                } else {
                                    t_string!(i18n, app.role_user)
                                };
                                let sign_in = if u.organisation {
                                    t_string!(i18n, users.sign_in_organisation)
                                } else {
                                    t_string!(i18n, users.sign_in_password)
                                };
                                let status = u.disabled.then(|| t_string!(i18n, users.disabled));
                                let (name, key) = (u.username.clone(), u.username.clone());
                                let failed = failed_row == Some(u.id);
                                let role_url_error = role_error.filter(|_| failed);
                                let reset_url_error = reset_error.filter(|_| failed);
                                let quota_url_error = quota_error.filter(|_| failed);
                                let disable_url_error = disable_error.filter(|_| failed);
                                let disabled = u.disabled;
                                let u_id = u.id;
                                view! {
                                    <tr data-user=key data-disabled=disabled.to_string()>
                                        <th scope="row">{name}</th>
                                        <td>{role}</td>
                                        <td>
                                            {sign_in}
                                            {status
                                                .map(|s| {
                                                    view! { <span class="badge badge-failed ml-2">{s}</span> }
                                                })}
                                        </td>
                                        <td class="whitespace-nowrap text-sm">{format_time(u.created_at)}</td>
                                        <td>
                                            <UserRowForms
                                                user=u
                                                role_url_error
                                                reset_url_error
                                                quota_url_error
                                                disable_url_error
                                                own=me == Some(u_id)
                                            />
                                        </td>
                                    </tr>
                                }
                            })
                            .collect_view()}
                    </tbody>
                </table>
            </section>
            <section class="card">
                <h2 class="section-title">{t!(i18n, users.create_title)}</h2>
                <CreateUserForm username=typed_username role=typed_role url_error=url_error(CreateUser::PATH) />
            </section>
        }
        .into_any()
    });
    view! {
        <Layout>
            <Title text=t_string!(i18n, users.title) />
            <Suspense fallback=|| ()>{content}</Suspense>
        </Layout>
    }
}
