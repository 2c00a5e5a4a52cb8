//! Admin forms for accounts: create a user; per user, set the role and reset
//! the password.

use leptos::form::ActionForm;
use leptos::prelude::*;

use crate::actions::users::{CreateUser, ResetPassword, SetDisabled, SetQuota, SetRole};
use crate::components::error_text::{FieldError, FormError, action_error};
use crate::components::field::TextField;
use crate::components::island_form::IslandForm;
use crate::components::quota::quota_fields;
use crate::domain::user::{Role, UserSummary};
use crate::domain::{AppError, Field};
use crate::i18n::*;

#[component]
fn RoleSelect(id: String, selected: Role) -> impl IntoView {
    let i18n = use_i18n();
    view! {
        <select id=id name="role" class="field-input">
            <option value="user" selected=selected == Role::User>
                {t!(i18n, app.role_user)}
            </option>
            <option value="admin" selected=selected == Role::Admin>
                {t!(i18n, app.role_admin)}
            </option>
        </select>
    }
}

#[island]
pub(crate) fn CreateUserForm(
    /// What a refused plain post typed (never the password).
    username: String,
    role: Role,
    url_error: Option<AppError>,
) -> impl IntoView {
    let i18n = use_i18n();
    let action = ServerAction::<CreateUser>::new();
    let error = action_error(action.value(), action.version(), url_error);
    view! {
        <IslandForm action name="create-user" error>
            <div class="grid gap-4 sm:grid-cols-3">
                <TextField
                    field=Field::Username
                    label=t_string!(i18n, users.username)
                    hint=t_string!(i18n, users.username_hint)
                    value=username
                    error
                    autocomplete="off"
                    required=true
                />
                <TextField
                    field=Field::Password
                    label=t_string!(i18n, users.password)
                    hint=t_string!(i18n, users.password_hint)
                    value=""
                    error
                    input_type="password"
                    autocomplete="new-password"
                    required=true
                />
                <div class="field">
                    <label for="role" class="field-label">
                        {t!(i18n, users.role)}
                    </label>
                    <RoleSelect id="role".into() selected=role />
                    <FieldError field=Field::Role error />
                </div>
            </div>
            <div class="form-actions">
                <button type="submit" class="btn btn-primary" disabled=move || action.pending().get()>
                    {t!(i18n, users.create_submit)}
                </button>
            </div>
        </IslandForm>
    }
}

#[island]
pub(crate) fn UserRowForms(
    user: UserSummary,
    /// The errors of this row's posts refused without JavaScript.
    role_url_error: Option<AppError>,
    reset_url_error: Option<AppError>,
    quota_url_error: Option<AppError>,
    disable_url_error: Option<AppError>,
    /// The signed-in admin's own row: no Disable button.
    own: bool,
) -> impl IntoView {
    let i18n = use_i18n();
    let hydrated = crate::components::hydration::hydration_flag();
    let set_role = ServerAction::<SetRole>::new();
    let reset = ServerAction::<ResetPassword>::new();
    let role_error = action_error(set_role.value(), set_role.version(), role_url_error);
    let reset_error = action_error(reset.value(), reset.version(), reset_url_error);
    let set_quota = ServerAction::<SetQuota>::new();
    let quota_error = action_error(set_quota.value(), set_quota.version(), quota_url_error);
    let set_disabled = ServerAction::<SetDisabled>::new();
    let disable_error = action_error(set_disabled.value(), set_disabled.version(), disable_url_error);
    let quota = crate::domain::quota::QuotaText::of(&user.quota);
    let quota_label = t_string!(i18n, quota.user_for, username = user.username.as_str());
    let quota_input = move |(field, label, inputmode, value): (Field, &'static str, &'static str, String)| {
        let id = format!("{}-{}", field.as_str(), user.id);
        view! {
            <div class="flex flex-col">
                <label for=id.clone() class="field-label">
                    {label}
                </label>
                <input
                    id=id
                    name=field.as_str()
                    value=value
                    class="field-input w-24"
                    inputmode=inputmode
                    autocomplete="off"
                    placeholder=t_string!(i18n, quota.platform)
                    aria-invalid=move || quota_error.get().is_some_and(|e| e.field == Some(field)).to_string()
                />
            </div>
        }
    };
    let role_id = format!("role-{}", user.id);
    let role_label = t_string!(i18n, users.role_for, username = user.username.as_str());
    view! {
        <div class="flex flex-wrap items-end gap-4">
            <ActionForm
                action=set_role
                attr:data-hydrated=hydrated
                attr:class="flex items-end gap-2"
                attr:novalidate=true
            >
                <input type="hidden" name="user_id" value=user.id />
                <div>
                    <label for=role_id.clone() class="field-label">
                        {role_label}
                    </label>
                    <RoleSelect id=role_id selected=user.role />
                </div>
                <button type="submit" class="btn">
                    {t!(i18n, users.set_role)}
                </button>
            </ActionForm>
            {(!user.organisation)
                .then(|| {
                    view! { <PasswordForm action=reset user_id=user.id username=user.username.clone() hydrated /> }
                })}
            {(!own)
                .then(|| {
                    view! {
                        <DisableForm
                            action=set_disabled
                            user_id=user.id
                            username=user.username.clone()
                            disable=!user.disabled
                            hydrated
                        />
                    }
                })}
            <ActionForm
                action=set_quota
                attr:data-hydrated=hydrated
                attr:class="flex flex-wrap items-end gap-2"
                attr:novalidate=true
                attr:data-form="user-quota"
                attr:aria-label=quota_label
            >
                <input type="hidden" name="user_id" value=user.id />
                {quota_fields(i18n.get_locale_untracked(), quota).into_iter().map(quota_input).collect_view()}
                <button type="submit" class="btn" title=t_string!(i18n, quota.user_hint)>
                    {t!(i18n, quota.user_submit)}
                </button>
            </ActionForm>
        </div>
        <FormError error=disable_error />
        <FormError error=quota_error />
        {quota_fields(i18n.get_locale_untracked(), Default::default())
            .into_iter()
            .map(|(field, ..)| view! { <FieldError field error=quota_error /> })
            .collect_view()}
        <FormError error=role_error />
        <FieldError field=Field::Role error=role_error />
        <FormError error=reset_error />
        <FieldError field=Field::Password error=reset_error />
    }
}

/// A new password for one account (local accounts only).
#[component]
fn PasswordForm(
    action: ServerAction<ResetPassword>,
    user_id: i64,
    username: String,
    hydrated: Signal<&'static str>,
) -> impl IntoView {
    let i18n = use_i18n();
    let id = format!("password-{user_id}");
    view! {
        <ActionForm action attr:data-hydrated=hydrated attr:class="flex items-end gap-2" attr:novalidate=true>
            <input type="hidden" name="user_id" value=user_id />
            <div>
                <label for=id.clone() class="field-label">
                    {t_string!(i18n, users.new_password, username = username.as_str())}
                </label>
                <input id=id name="password" type="password" autocomplete="new-password" class="field-input" />
            </div>
            <button type="submit" class="btn">
                {t!(i18n, users.reset_submit)}
            </button>
        </ActionForm>
    }
}

/// Disables an account (`disable`) or enables it again: one button.
#[component]
fn DisableForm(
    action: ServerAction<SetDisabled>,
    user_id: i64,
    username: String,
    disable: bool,
    hydrated: Signal<&'static str>,
) -> impl IntoView {
    let i18n = use_i18n();
    let (label, text, class) = if disable {
        (
            t_string!(i18n, users.disable_for, username = username.as_str()),
            t_string!(i18n, users.disable),
            "btn btn-danger",
        )
    } else {
        (t_string!(i18n, users.enable_for, username = username.as_str()), t_string!(i18n, users.enable), "btn")
    };
    view! {
        <ActionForm
            action
            attr:data-hydrated=hydrated
            attr:class="flex items-end gap-2"
            attr:novalidate=true
            attr:data-form="user-disabled"
        >
            <input type="hidden" name="user_id" value=user_id />
            <input type="hidden" name="disabled" value=disable.to_string() />
            <button type="submit" class=class aria-label=label>
                {text}
            </button>
        </ActionForm>
    }
}
