//! `/admin/teams` (admins only): teams are named groups of users a
//! cluster can be shared with. Create and delete them, add and remove users.
//! With `KUBEBYON_OIDC_TEAM_PREFIX` set, each team names the provider's group
//! whose members it follows (set again at each of their sign-ins).
//! Plain forms: the same with JavaScript off.

use leptos::prelude::*;
use leptos_meta::Title;
use server_fn::ServerFn;

use super::problem::problem_view;
use super::{SavedBanner, retyped, url_error};
use crate::actions::members::{CreateTeam, DeleteTeam, SetTeamMember, list_teams};
use crate::components::error_text::FormError;
use crate::components::field::TextField;
use crate::components::layout::Layout;
use crate::domain::membership::{Team, TeamsView};
use crate::domain::{AppError, Field};
use crate::i18n::*;

#[component]
pub(crate) fn TeamsPage() -> impl IntoView {
    let i18n = use_i18n();
    let content = Suspend::new(async move {
        let TeamsView { teams, provider_prefix } = match list_teams().await {
            Err(e) => return problem_view(e),
            Ok(view) => view,
        };
        // A refused add or remove without JavaScript: its team shows the error.
        let member_error = url_error(SetTeamMember::PATH);
        let failed_team = retyped(SetTeamMember::PATH).and_then(|q| q.get("team_id")?.parse::<i64>().ok());
        let typed_name = retyped(CreateTeam::PATH).and_then(|q| q.get("team_name")).unwrap_or_default();
        let empty = teams.is_empty();
        let rows = teams
            .into_iter()
            .map(|t| {
                let error = member_error.filter(|_| failed_team == Some(t.id));
                let group = provider_prefix.as_ref().map(|p| format!("{p}{}", t.name));
                view! { <TeamRow team=t error group /> }
            })
            .collect_view();
        let create_error = Signal::stored(url_error(CreateTeam::PATH));
        view! {
            <section class="card">
                <h1 class="page-title">{t!(i18n, teams.title)}</h1>
                <p class="mb-4 text-slate-600">{t!(i18n, teams.intro)}</p>
                {provider_prefix
                    .clone()
                    .map(|prefix| {
                        view! {
                            <p class="mb-4 text-slate-600" data-testid="teams-provider">
                                {t!(i18n, teams.provider_intro, prefix = prefix.clone())}
                            </p>
                        }
                    })}
                <SavedBanner />
                {empty.then(|| view! { <p class="field-hint">{t!(i18n, teams.none)}</p> })}
                <table class="table" hidden=empty>
                    <caption class="sr-only">{t!(i18n, teams.title)}</caption>
                    <thead>
                        <tr>
                            <th scope="col">{t!(i18n, teams.col_name)}</th>
                            <th scope="col">{t!(i18n, teams.col_members)}</th>
                            <th scope="col">{t!(i18n, teams.col_actions)}</th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            </section>
            <section class="card">
                <h2 class="section-title">{t!(i18n, teams.create_title)}</h2>
                <form method="post" action=CreateTeam::PATH class="form" data-form="team-create">
                    <FormError error=create_error />
                    <TextField
                        field=Field::TeamName
                        label=t_string!(i18n, teams.name)
                        hint=t_string!(i18n, teams.name_hint)
                        value=typed_name
                        error=create_error
                        autocomplete="off"
                        required=true
                    />
                    <button type="submit" class="btn btn-primary self-start">
                        {t!(i18n, teams.create)}
                    </button>
                </form>
            </section>
        }
        .into_any()
    });
    view! {
        <Layout>
            <Title text=t_string!(i18n, teams.title) />
            <Suspense fallback=|| ()>{content}</Suspense>
        </Layout>
    }
}

/// One team: its users with a remove button each, a form to add one, and
/// its delete button; `error`: this team's refused add or remove (from the
/// URL); `group`: the provider's group whose members it follows, if any.
#[component]
fn TeamRow(team: Team, error: Option<AppError>, group: Option<String>) -> impl IntoView {
    let i18n = use_i18n();
    let t = team;
    // The username is the form's only input: the error shows above the form, not at a field.
    let error = Signal::stored(error.map(|e| AppError { field: None, ..e }));
    let input_id = format!("member-{}", t.id);
    let users = t
        .members
        .iter()
        .map(|u| {
            let label = t_string!(i18n, teams.remove_label, name = u.clone()).to_string();
            view! {
                <li class="flex items-center gap-2">
                    <span class="font-mono">{u.clone()}</span>
                    <form method="post" action=SetTeamMember::PATH data-form="team-remove">
                        <input type="hidden" name="team_id" value=t.id />
                        <input type="hidden" name="member" value=u.clone() />
                        <input type="hidden" name="add" value="false" />
                        <button type="submit" class="btn btn-small" aria-label=label>
                            {t!(i18n, teams.remove)}
                        </button>
                    </form>
                </li>
            }
        })
        .collect_view();
    let delete_label = t_string!(i18n, teams.delete_label, name = t.name.clone()).to_string();
    view! {
        <tr data-team=t.name.clone()>
            <th scope="row">
                <span class="font-mono">{t.name.clone()}</span>
                {group
                    .map(|g| {
                        view! {
                            <p class="field-hint font-normal">
                                {t!(i18n, teams.provider_group)} " " <code data-provider-group="">{g}</code>
                            </p>
                        }
                    })}
            </th>
            <td>
                {t.members.is_empty().then(|| view! { <p class="field-hint">{t!(i18n, teams.no_members)}</p> })}
                <ul>{users}</ul>
                <form method="post" action=SetTeamMember::PATH class="flex items-end gap-2 mt-2" data-form="team-add">
                    <input type="hidden" name="team_id" value=t.id />
                    <input type="hidden" name="add" value="true" />
                    <label for=input_id.clone() class="sr-only">
                        {t!(i18n, teams.username)}
                    </label>
                    <input
                        id=input_id
                        name="member"
                        class="field-input"
                        autocomplete="off"
                        required=true
                        placeholder=t_string!(i18n, teams.username)
                    />
                    <button type="submit" class="btn btn-small whitespace-nowrap">
                        {t!(i18n, teams.add)}
                    </button>
                </form> <FormError error />
            </td>
            <td>
                <form method="post" action=DeleteTeam::PATH data-form="team-delete">
                    <input type="hidden" name="team_id" value=t.id />
                    <button type="submit" class="btn btn-small btn-danger" aria-label=delete_label>
                        {t!(i18n, teams.delete)}
                    </button>
                </form>
            </td>
        </tr>
    }
}
