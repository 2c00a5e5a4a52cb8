//! Create and edit forms for a cluster. Both share the field components;
//! the create form preselects the admin's default mode.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::actions::clusters::{CreateCluster, UpdateCluster};
use crate::components::error_text::action_error;
use crate::components::field::TextField;
use crate::components::island_form::IslandForm;
use crate::components::public_access_fields::PublicAccessFields;
use crate::domain::cluster::Cluster;
use crate::domain::{AppError, Field, PublicAccessMode, Resources};
use crate::i18n::*;

/// The editable values of a cluster, as form text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterFormValues {
    pub cpu: String,
    pub memory_gib: String,
    pub storage_gib: String,
    pub enabled: bool,
    pub mode: PublicAccessMode,
    pub host: String,
}

impl ClusterFormValues {
    pub fn new_cluster(default_mode: PublicAccessMode) -> Self {
        Self::from_parts(&Resources::default(), true, default_mode, String::new())
    }

    /// A disabled cluster preselects the mode and host it remembers.
    pub fn of(cluster: &Cluster, remembered: PublicAccessMode, remembered_host: Option<String>) -> Self {
        let access = &cluster.spec.public_access;
        Self::from_parts(
            &cluster.spec.resources,
            access.is_enabled(),
            access.mode().unwrap_or(remembered),
            access.host().map(ToString::to_string).or(remembered_host).unwrap_or_default(),
        )
    }

    fn from_parts(r: &Resources, enabled: bool, mode: PublicAccessMode, host: String) -> Self {
        Self {
            cpu: r.cpu_cores(),
            memory_gib: r.memory_gib.to_string(),
            storage_gib: r.storage_gib.to_string(),
            enabled,
            mode,
            host,
        }
    }
}

#[component]
fn ResourceFields(values: ClusterFormValues, #[prop(into)] error: Signal<Option<AppError>>) -> impl IntoView {
    let i18n = use_i18n();
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
                    hint=t_string!(i18n, form.storage_hint)
                    value=values.storage_gib
                    error
                    inputmode="numeric"
                />
            </div>
        </fieldset>
    }
}

#[island]
pub fn CreateClusterForm(default_mode: PublicAccessMode, url_error: Option<AppError>) -> impl IntoView {
    let i18n = use_i18n();
    let action = ServerAction::<CreateCluster>::new();
    let error = action_error(action.value(), url_error);
    let values = ClusterFormValues::new_cluster(default_mode);
    view! {
        <IslandForm action name="create-cluster" error>
            <TextField
                field=Field::Name
                label=t_string!(i18n, form.name)
                hint=t_string!(i18n, form.name_hint)
                value=""
                error
                autocomplete="off"
                required=true
            />
            <ResourceFields values=values.clone() error />
            <PublicAccessFields enabled=values.enabled mode=values.mode host=values.host error default_note=true />
            <div class="form-actions">
                <button type="submit" class="btn btn-primary" disabled=move || action.pending().get()>
                    {t!(i18n, form.create_submit)}
                </button>
                <a href="/clusters" class="btn">
                    {t!(i18n, form.cancel)}
                </a>
            </div>
        </IslandForm>
    }
}

#[island]
pub fn EditClusterForm(id: i64, values: ClusterFormValues, url_error: Option<AppError>) -> impl IntoView {
    let i18n = use_i18n();
    let action = ServerAction::<UpdateCluster>::new();
    let error = action_error(action.value(), url_error);
    view! {
        <IslandForm action name="edit-cluster" error>
            <input type="hidden" name="id" value=id />
            <ResourceFields values=values.clone() error />
            <PublicAccessFields enabled=values.enabled mode=values.mode host=values.host error />
            <div class="form-actions">
                <button type="submit" class="btn btn-primary" disabled=move || action.pending().get()>
                    {t!(i18n, form.save_submit)}
                </button>
                <a href=format!("/clusters/{id}") class="btn">
                    {t!(i18n, form.cancel)}
                </a>
            </div>
        </IslandForm>
    }
}
