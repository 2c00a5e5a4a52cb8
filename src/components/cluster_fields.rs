//! The fields of a cluster's create and edit forms, rendered on the server as
//! the children of their islands (`islands::cluster_forms`): the name (on
//! create), the resources, the public access and, when the admin offers them,
//! own nodes. After a refused save with JavaScript the island puts the
//! field's error into them ([`super::island_form::show_field_errors`]).

use leptos::prelude::*;

use crate::components::error_text::FieldError;
use crate::components::field::{CheckField, TextField};
use crate::components::islands::cluster_forms::ClusterFormValues;
use crate::components::public_access_fields::PublicAccessFields;
use crate::domain::{AppError, Field};
use crate::i18n::*;

#[component]
pub(crate) fn ClusterFields(
    values: ClusterFormValues,
    /// The error of a post without JavaScript.
    url_error: Option<AppError>,
    /// An existing cluster: no name field, its storage fixed.
    #[prop(optional)]
    editing: bool,
    /// Whether the admin offers own nodes (create only): the checkbox shows only then.
    #[prop(optional)]
    own_nodes_offered: bool,
) -> impl IntoView {
    let i18n = use_i18n();
    let error = Signal::stored(url_error);
    let own_nodes = values.own_nodes;
    view! {
        {(!editing)
            .then(|| {
                view! {
                    <TextField
                        field=Field::Name
                        label=t_string!(i18n, form.name)
                        hint=t_string!(i18n, form.name_hint)
                        value=values.name.clone()
                        error
                        autocomplete="off"
                        required=true
                    />
                }
            })}
        <ResourceFields values=values.clone() error editing />
        <PublicAccessFields
            enabled=values.enabled
            mode=values.mode
            host=values.host.clone()
            gateway=values.gateway.clone()
            error
            default_note=!editing
        />
        {own_nodes_offered
            .then(|| {
                view! {
                    <fieldset class="card-section">
                        <legend class="section-title">{t!(i18n, form.nodes)}</legend>
                        <CheckField
                            id="own_nodes"
                            label=t_string!(i18n, form.own_nodes)
                            hint=t_string!(i18n, form.own_nodes_hint)
                            checked=own_nodes
                        />
                        <FieldError field=Field::OwnNodes error />
                    </fieldset>
                }
            })}
    }
}

#[component]
fn ResourceFields(
    values: ClusterFormValues,
    #[prop(into)] error: Signal<Option<AppError>>,
    /// An existing cluster: its storage is fixed at creation.
    editing: bool,
) -> impl IntoView {
    let i18n = use_i18n();
    let storage_hint =
        if editing { t_string!(i18n, form.storage_fixed_hint) } else { t_string!(i18n, form.storage_hint) };
    view! {
        <fieldset class="card-section">
            <legend class="section-title">{t!(i18n, form.resources)}</legend>
            <div class="grid gap-4 sm:grid-cols-3">
                <TextField
                    field=Field::Cpu
                    label=t_string!(i18n, form.cpu)
                    hint=t_string!(i18n, form.cpu_hint)
                    value=values.cpu
                    error
                    inputmode="decimal"
                />
                <TextField
                    field=Field::Memory
                    label=t_string!(i18n, form.memory)
                    hint=t_string!(i18n, form.memory_hint)
                    value=values.memory_gib
                    error
                    inputmode="numeric"
                />
                <TextField
                    field=Field::Storage
                    label=t_string!(i18n, form.storage)
                    hint=storage_hint
                    value=values.storage_gib
                    error
                    inputmode="numeric"
                    readonly=editing
                />
            </div>
        </fieldset>
    }
}
