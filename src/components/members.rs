//! A cluster's members on its page: who it is shared with and
//! their roles; for those who may manage members, plain forms to share it
//! and to take it back (they work the same with JavaScript off).

use leptos::prelude::*;
use leptos_i18n::I18nContext;
use server_fn::ServerFn;

use super::error_text::{FieldError, FormError};
use super::field::{TextField, options};
use crate::actions::members::{PutMember, RemoveMember, TransferCluster};
use crate::domain::membership::{Member, MemberKind, MemberRole};
use crate::domain::{AppError, Field};
use crate::i18n::*;

/// A role's name as pages show it.
pub(crate) fn role_label(i18n: I18nContext<Locale>, role: MemberRole) -> &'static str {
    match role {
        MemberRole::Admin => t_string!(i18n, members.role_admin),
        MemberRole::Edit => t_string!(i18n, members.role_edit),
        MemberRole::View => t_string!(i18n, members.role_view),
    }
}

fn kind_label(i18n: I18nContext<Locale>, kind: MemberKind) -> &'static str {
    match kind {
        MemberKind::User => t_string!(i18n, members.kind_user),
        MemberKind::Team => t_string!(i18n, members.kind_team),
    }
}

/// What was typed into a refused share form (from the URL), to show again.
#[derive(Debug, Clone, Default)]
pub(crate) struct Typed {
    pub kind: Option<MemberKind>,
    pub name: String,
    pub role: Option<MemberRole>,
}

#[component]
pub(crate) fn MembersSection(
    id: i64,
    owner: String,
    members: Vec<Member>,
    /// Whether the viewer may share the cluster and take it back.
    manage: bool,
    /// The viewer's own role, as a line above the table.
    your_role: MemberRole,
    typed: Typed,
    put_error: Option<AppError>,
    remove_error: Option<AppError>,
    /// A console admin's form to move the cluster to another owner, with a
    /// refused post's error and what was typed.
    transfer: Option<(String, Option<AppError>)>,
) -> impl IntoView {
    let i18n = use_i18n();
    let empty = members.is_empty();
    let rows = members
        .into_iter()
        .map(|m| {
            let label = t_string!(i18n, members.remove_label, name = m.name.clone()).to_string();
            view! {
                <tr data-member=format!("{}:{}", m.kind.as_str(), m.name)>
                    <th scope="row" class="font-mono">
                        {m.name.clone()}
                    </th>
                    <td>{kind_label(i18n, m.kind)}</td>
                    <td data-field="role">{role_label(i18n, m.role)}</td>
                    {manage
                        .then(|| {
                            view! {
                                <td>
                                    <form method="post" action=RemoveMember::PATH data-form="remove-member">
                                        <input type="hidden" name="id" value=id />
                                        <input type="hidden" name="kind" value=m.kind.as_str() />
                                        <input type="hidden" name="member_id" value=m.id />
                                        <button type="submit" class="btn btn-small btn-danger" aria-label=label>
                                            {t!(i18n, members.remove)}
                                        </button>
                                    </form>
                                </td>
                            }
                        })}
                </tr>
            }
        })
        .collect_view();
    let put_error = Signal::stored(put_error);
    let remove_error = Signal::stored(remove_error);
    view! {
        <section class="card" id="members" data-testid="members">
            <h2 class="section-title">{t!(i18n, members.title)}</h2>
            <p class="text-slate-600">{t!(i18n, members.intro)}</p>
            <p class="mt-2" data-testid="your-role">
                {t!(i18n, members.owner)}
                ": "
                <span class="font-mono">{owner}</span>
                " · "
                {t!(i18n, members.your_role)}
                ": "
                <strong>{role_label(i18n, your_role)}</strong>
            </p>
            <FormError error=remove_error />
            {empty.then(|| view! { <p class="field-hint mt-2">{t!(i18n, members.none)}</p> })}
            <table class="table mt-2" hidden=empty>
                <caption class="sr-only">{t!(i18n, members.title)}</caption>
                <thead>
                    <tr>
                        <th scope="col">{t!(i18n, members.col_name)}</th>
                        <th scope="col">{t!(i18n, members.col_kind)}</th>
                        <th scope="col">{t!(i18n, members.col_role)}</th>
                        {manage.then(|| view! { <th scope="col">{t!(i18n, members.col_actions)}</th> })}
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
            {manage.then(|| view! { <ShareForm id typed put_error /> })}
            {transfer.map(|(typed, error)| view! { <TransferForm id typed error /> })}
        </section>
    }
}

/// The form that shares the cluster with a user or team (those who manage
/// members), and what a removal cannot take back.
#[component]
fn ShareForm(id: i64, typed: Typed, put_error: Signal<Option<AppError>>) -> impl IntoView {
    let i18n = use_i18n();
    view! {
        <form method="post" action=PutMember::PATH class="form mt-4" data-form="put-member">
            <FormError error=put_error />
            <input type="hidden" name="id" value=id />
            <div class="field">
                <label for="member_kind" class="field-label">
                    {t!(i18n, members.col_kind)}
                </label>
                <select id="member_kind" name="member_kind" class="field-input">
                    {options(
                        [MemberKind::User, MemberKind::Team],
                        typed.kind.or(Some(MemberKind::User)),
                        MemberKind::as_str,
                        move |k| kind_label(i18n, k),
                    )}
                </select>
            </div>
            <TextField
                field=Field::Member
                label=t_string!(i18n, members.name)
                hint=t_string!(i18n, members.name_hint)
                value=typed.name.clone()
                error=put_error
                autocomplete="off"
                required=true
            />
            <div class="field">
                <label for="member_role" class="field-label">
                    {t!(i18n, members.col_role)}
                </label>
                <select id="member_role" name="member_role" class="field-input" aria-describedby="member_role-hint">
                    {options(
                        [MemberRole::View, MemberRole::Edit, MemberRole::Admin],
                        typed.role.or(Some(MemberRole::View)),
                        MemberRole::as_str,
                        move |r| role_label(i18n, r),
                    )}
                </select>
                <p id="member_role-hint" class="field-hint">
                    {t!(i18n, members.role_hint)}
                </p>
                <FieldError field=Field::MemberRole error=put_error />
            </div>
            <button type="submit" class="btn btn-primary self-start">
                {t!(i18n, members.share)}
            </button>
        </form>
        <p class="field-hint mt-2" data-testid="members-what-stays">
            {t!(i18n, members.what_stays)}
        </p>
    }
}

/// A console admin's form to move the cluster to another owner.
#[component]
fn TransferForm(id: i64, typed: String, error: Option<AppError>) -> impl IntoView {
    let i18n = use_i18n();
    let error = Signal::stored(error);
    view! {
        <form method="post" action=TransferCluster::PATH class="form mt-6" data-form="transfer">
            <h3 class="font-semibold">{t!(i18n, members.move_title)}</h3>
            <FormError error />
            <input type="hidden" name="id" value=id />
            <TextField
                field=Field::Owner
                label=t_string!(i18n, members.new_owner)
                hint=t_string!(i18n, members.move_hint)
                value=typed
                error
                autocomplete="off"
                required=true
            />
            <button type="submit" class="btn self-start">
                {t!(i18n, members.move_submit)}
            </button>
        </form>
    }
}
