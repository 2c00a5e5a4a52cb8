//! Deleting a cluster: the user types its name to confirm.

use leptos::prelude::*;

use crate::actions::clusters::DeleteCluster;
use crate::components::error_text::action_error;
use crate::components::field::TextField;
use crate::components::island_form::IslandForm;
use crate::domain::{AppError, Field};
use crate::i18n::*;

#[island]
pub(crate) fn DeleteClusterForm(id: i64, url_error: Option<AppError>) -> impl IntoView {
    let i18n = use_i18n();
    let action = ServerAction::<DeleteCluster>::new();
    let error = action_error(action.value(), action.version(), url_error);
    view! {
        <IslandForm action name="delete-cluster" error>
            <p class="text-sm text-slate-700">{t!(i18n, detail.delete_warning)}</p>
            <input type="hidden" name="id" value=id />
            <TextField
                field=Field::Confirm
                label=t_string!(i18n, detail.delete_confirm)
                value=""
                error
                autocomplete="off"
                required=true
            />
            <button type="submit" class="btn btn-danger" disabled=move || action.pending().get()>
                {t!(i18n, detail.delete_submit)}
            </button>
        </IslandForm>
    }
}
