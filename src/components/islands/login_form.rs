//! The sign-in form.

use leptos::prelude::*;

use crate::actions::auth::Login;
use crate::components::error_text::action_error;
use crate::components::field::TextField;
use crate::components::island_form::IslandForm;
use crate::domain::{AppError, Field};
use crate::i18n::*;

#[island]
pub(crate) fn LoginForm(next: Option<String>, url_error: Option<AppError>) -> impl IntoView {
    let i18n = use_i18n();
    let action = ServerAction::<Login>::new();
    let error = action_error(action.value(), action.version(), url_error);
    view! {
        <IslandForm action name="login" error>
            <input type="hidden" name="next" value=next.unwrap_or_default() />
            <TextField
                field=Field::Username
                label=t_string!(i18n, login.username)
                value=""
                error
                autocomplete="username"
                required=true
            />
            <TextField
                field=Field::Password
                label=t_string!(i18n, login.password)
                value=""
                error
                input_type="password"
                autocomplete="current-password"
                required=true
            />
            <button type="submit" class="btn btn-primary w-full" disabled=move || action.pending().get()>
                {t!(i18n, login.submit)}
            </button>
        </IslandForm>
    }
}
