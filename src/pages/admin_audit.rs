//! `/admin/audit` (admins only): who changed settings, accounts and
//! moves, newest first, 50 a page (`?before=ID` for older ones).

use leptos::prelude::*;
use leptos_meta::Title;

use super::problem::problem_view;
use crate::actions::audit::load_audit;
use crate::components::labels::format_time;
use crate::components::layout::Layout;
use crate::domain::audit::AuditAction;
use crate::i18n::*;

#[component]
pub(crate) fn AuditPage() -> impl IntoView {
    let i18n = use_i18n();
    let before = leptos_router::hooks::use_query_map().get_untracked().get("before").and_then(|b| b.parse().ok());
    let action_label = move |a: AuditAction| match a {
        AuditAction::SettingsChanged => t_string!(i18n, audit.settings_changed),
        AuditAction::UserCreated => t_string!(i18n, audit.user_created),
        AuditAction::RoleChanged => t_string!(i18n, audit.role_changed),
        AuditAction::PasswordReset => t_string!(i18n, audit.password_reset),
        AuditAction::QuotaChanged => t_string!(i18n, audit.quota_changed),
        AuditAction::SignedIn => t_string!(i18n, audit.signed_in),
        AuditAction::SignInFailed => t_string!(i18n, audit.sign_in_failed),
        AuditAction::KubeconfigDownloaded => t_string!(i18n, audit.kubeconfig_downloaded),
        AuditAction::ClusterChangedByAdmin => t_string!(i18n, audit.cluster_changed_by_admin),
        AuditAction::ClusterDeletedByAdmin => t_string!(i18n, audit.cluster_deleted_by_admin),
        AuditAction::MoveStarted => t_string!(i18n, audit.move_started),
        AuditAction::MoveItemRetried => t_string!(i18n, audit.move_item_retried),
        AuditAction::MoveItemRolledBack => t_string!(i18n, audit.move_item_rolled_back),
        AuditAction::JoinTokenCreated => t_string!(i18n, audit.join_token_created),
        AuditAction::JoinTokenRevoked => t_string!(i18n, audit.join_token_revoked),
        AuditAction::NodeRemoved => t_string!(i18n, audit.node_removed),
        AuditAction::MemberAdded => t_string!(i18n, audit.member_added),
        AuditAction::MemberRoleChanged => t_string!(i18n, audit.member_role_changed),
        AuditAction::MemberRemoved => t_string!(i18n, audit.member_removed),
        AuditAction::TeamCreated => t_string!(i18n, audit.team_created),
        AuditAction::TeamDeleted => t_string!(i18n, audit.team_deleted),
        AuditAction::TeamMemberAdded => t_string!(i18n, audit.team_member_added),
        AuditAction::TeamMemberRemoved => t_string!(i18n, audit.team_member_removed),
        AuditAction::UserDisabled => t_string!(i18n, audit.user_disabled),
        AuditAction::UserEnabled => t_string!(i18n, audit.user_enabled),
        AuditAction::OwnerChanged => t_string!(i18n, audit.owner_changed),
        AuditAction::AccessOutOfStep => t_string!(i18n, audit.access_out_of_step),
        AuditAction::AccessInStep => t_string!(i18n, audit.access_in_step),
        AuditAction::BreakGlass => t_string!(i18n, audit.break_glass),
    };
    let content = Suspend::new(async move {
        let entries = match load_audit(before).await {
            Err(e) => return problem_view(e),
            Ok(entries) => entries,
        };
        // A full page may have older entries behind it.
        let older = (entries.len() as i64 >= crate::domain::audit::PAGE)
            .then(|| entries.last().map(|e| format!("/admin/audit?before={}", e.id)))
            .flatten();
        let empty = entries.is_empty();
        view! {
            <section class="card">
                <h1 class="page-title">{t!(i18n, audit.title)}</h1>
                <p class="mb-4 text-slate-600">{t!(i18n, audit.intro)}</p>
                {empty.then(|| view! { <p data-testid="audit-empty">{t!(i18n, audit.empty)}</p> })}
                <table class="table" hidden=empty>
                    <caption class="sr-only">{t!(i18n, audit.title)}</caption>
                    <thead>
                        <tr>
                            <th scope="col">{t!(i18n, audit.col_when)}</th>
                            <th scope="col">{t!(i18n, audit.col_who)}</th>
                            <th scope="col">{t!(i18n, audit.col_what)}</th>
                            <th scope="col">{t!(i18n, audit.col_target)}</th>
                            <th scope="col">{t!(i18n, audit.col_detail)}</th>
                        </tr>
                    </thead>
                    <tbody>
                        {entries
                            .into_iter()
                            .map(|e| {
                                view! {
                                    <tr data-audit=e.action.as_str()>
                                        <td class="whitespace-nowrap text-sm">{format_time(e.at)}</td>
                                        <td>{e.actor}</td>
                                        <td class="whitespace-nowrap">{action_label(e.action)}</td>
                                        <td class="font-mono text-sm">{e.target}</td>
                                        <td class="text-sm break-all">
                                            {if e.detail.is_empty() {
                                                t_string!(i18n, audit.no_change).to_string()
                                            } else {
                                                e.detail
                                            }}
                                        </td>
                                    </tr>
                                }
                            })
                            .collect_view()}
                    </tbody>
                </table>
                {older
                    .map(|href| {
                        view! {
                            <p class="mt-4">
                                <a href=href>{t!(i18n, audit.older)}</a>
                            </p>
                        }
                    })}
            </section>
        }
        .into_any()
    });
    view! {
        <Layout>
            <Title text=t_string!(i18n, audit.title) />
            <Suspense fallback=|| ()>{content}</Suspense>
        </Layout>
    }
}
