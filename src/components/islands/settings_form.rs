//! The island that saves the admin's system settings. Its children are the
//! server-rendered fields (`components::settings_form`): only this frame, its
//! errors and its button hydrate.

use leptos::prelude::*;

use crate::actions::settings::SaveSettings;
use crate::components::error_text::action_error;
use crate::components::island_form::{IslandForm, show_field_errors};
use crate::domain::AppError;
use crate::i18n::*;

/// `data-form` of the settings form.
const NAME: &str = "settings";

#[island]
pub(crate) fn SettingsSave(url_error: Option<AppError>, children: Children) -> impl IntoView {
    let i18n = use_i18n();
    let action = ServerAction::<SaveSettings>::new();
    let error = action_error(action.value(), action.version(), url_error);
    show_field_errors(NAME, error);
    view! {
        <IslandForm action name=NAME error>
            {children()}
            <div class="form-actions">
                <button type="submit" class="btn btn-primary" disabled=move || action.pending().get()>
                    {t!(i18n, settings.submit)}
                </button>
            </div>
        </IslandForm>
    }
}
