//! Create and edit forms for a cluster. Both share the field components;
//! the create form preselects the admin's default mode.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::actions::clusters::{CreateCluster, UpdateCluster};
use crate::components::error_text::{FieldError, action_error};
use crate::components::field::TextField;
use crate::components::island_form::IslandForm;
use crate::components::public_access_fields::PublicAccessFields;
use crate::domain::cluster::Cluster;
use crate::domain::gateway::GatewayOffer;
use crate::domain::public_access::PublicAccessInput;
use crate::domain::{AppError, Field, Host, PublicAccess, PublicAccessMode, Resources};
use crate::i18n::*;

/// The editable values of a cluster, as form text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ClusterFormValues {
    /// Typed on create; fixed on edit.
    pub name: String,
    pub cpu: String,
    pub memory_gib: String,
    pub storage_gib: String,
    pub enabled: bool,
    pub mode: PublicAccessMode,
    pub host: String,
    /// Create only: the user's own machines join it.
    pub own_nodes: bool,
    /// Gateway access as the admin offers it (not typed: the page sets it).
    #[serde(default)]
    pub gateway: Option<GatewayOffer>,
}

impl ClusterFormValues {
    pub(crate) fn new_cluster(default_mode: PublicAccessMode) -> Self {
        Self::from_parts(String::new(), &Resources::default(), true, default_mode, String::new())
    }

    /// What a refused plain form post typed (carried back in the URL by
    /// `keep_input_on_error`); the name only on create.
    pub(crate) fn retyped(mut self, get: impl Fn(&str) -> Option<String>, with_name: bool) -> Self {
        if with_name {
            self.name = get("name").unwrap_or_default();
        }
        self.cpu = get("cpu").unwrap_or_default();
        self.memory_gib = get("memory_gib").unwrap_or_default();
        self.storage_gib = get("storage_gib").unwrap_or_default();
        self.enabled = get("public_access_enabled").is_some();
        self.mode = get("public_access_mode").and_then(|m| PublicAccessMode::parse(&m)).unwrap_or(self.mode);
        self.host = get("control_plane_host").unwrap_or_default();
        self.own_nodes = get("own_nodes").is_some();
        self
    }

    /// The public access these values ask for; `None` while the host is not valid.
    pub(crate) fn access(&self) -> Option<PublicAccess> {
        let input = PublicAccessInput { enabled: self.enabled, mode: Some(self.mode.as_str()), host: &self.host };
        PublicAccess::from_input(&input, self.mode, &GatewayOffer::rules(self.gateway.as_ref(), &self.name)).ok()
    }

    /// A disabled cluster preselects the mode and host it remembers.
    pub(crate) fn of(cluster: &Cluster, remembered: PublicAccessMode, remembered_host: Option<String>) -> Self {
        let access = &cluster.spec.public_access;
        Self::from_parts(
            cluster.spec.name.to_string(),
            &cluster.spec.resources,
            access.is_enabled(),
            access.mode().unwrap_or(remembered),
            access.host().map(ToString::to_string).or(remembered_host).unwrap_or_default(),
        )
    }

    fn from_parts(name: String, r: &Resources, enabled: bool, mode: PublicAccessMode, host: String) -> Self {
        Self {
            name,
            cpu: r.cpu_cores(),
            memory_gib: r.memory_gib.to_string(),
            storage_gib: r.storage_gib.to_string(),
            enabled,
            mode,
            host,
            own_nodes: false,
            gateway: None,
        }
    }
}

#[component]
fn ResourceFields(
    values: ClusterFormValues,
    #[prop(into)] error: Signal<Option<AppError>>,
    /// An existing cluster: its storage is fixed at creation.
    #[prop(optional)]
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

/// Follows what is typed into the form (any input inside it), for the planned names.
fn track_typing(draft: RwSignal<ClusterFormValues>) -> impl Fn(leptos::ev::Event) + Copy {
    move |ev: leptos::ev::Event| {
        let input = event_target::<leptos::web_sys::HtmlInputElement>(&ev);
        let value = input.value();
        draft.update(|d| match input.name().as_str() {
            "name" => d.name = value,
            "public_access_enabled" => d.enabled = input.checked(),
            "public_access_mode" if input.checked() => d.mode = PublicAccessMode::parse(&value).unwrap_or(d.mode),
            "control_plane_host" => d.host = value,
            _ => {}
        });
    }
}

/// Keeps the server-rendered planned-names panel (`PlannedNames`, passed in
/// as the island's children) current as the form is filled in: a few
/// attributes and texts set on it directly, so the panel costs the browser
/// bundle almost nothing.
fn follow_planned_names(
    draft: RwSignal<ClusterFormValues>,
    nodeport_host: Option<Host>,
    current: Option<PublicAccess>,
) {
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        let shown = crate::components::planned_names::shown(&draft.get(), nodeport_host.as_ref(), current.as_ref());
        let Some(panel) = document().query_selector("[data-planned-sans]").ok().flatten() else { return };
        let _ = panel.set_attribute("data-line", shown.line);
        let _ = panel.set_attribute("data-assigned", shown.assigned);
        let _ = panel.set_attribute("data-breaks", if shown.breaks { "true" } else { "false" });
        for (selector, text) in [
            ("[data-public-host]", &shown.public_host),
            ("[data-name]", &shown.name),
            ("[data-ns-name]", &shown.ns_name),
        ] {
            if let Ok(Some(el)) = panel.query_selector(selector) {
                el.set_text_content(Some(text));
            }
        }
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = (draft, nodeport_host, current);
}

#[island]
pub(crate) fn CreateClusterForm(
    values: ClusterFormValues,
    nodeport_host: Option<Host>,
    /// Whether the admin offers own nodes: the checkbox shows only then.
    own_nodes_offered: bool,
    url_error: Option<AppError>,
    /// The planned-names panel, rendered by the page.
    children: Children,
) -> impl IntoView {
    let i18n = use_i18n();
    let action = ServerAction::<CreateCluster>::new();
    let error = action_error(action.value(), action.version(), url_error);
    let draft = RwSignal::new(values.clone());
    let typing = track_typing(draft);
    follow_planned_names(draft, nodeport_host, None);
    view! {
        <IslandForm action name="create-cluster" error>
            <div class="contents" on:input=typing on:change=typing>
                <TextField
                    field=Field::Name
                    label=t_string!(i18n, form.name)
                    hint=t_string!(i18n, form.name_hint)
                    value=values.name.clone()
                    error
                    autocomplete="off"
                    required=true
                />
                <ResourceFields values=values.clone() error />
                <PublicAccessFields
                    enabled=values.enabled
                    mode=values.mode
                    host=values.host.clone()
                    gateway=values.gateway.clone()
                    error
                    default_note=true
                />
                {own_nodes_offered
                    .then(|| {
                        view! {
                            <fieldset class="card-section">
                                <legend class="section-title">{t!(i18n, form.nodes)}</legend>
                                <div class="check">
                                    <input
                                        type="checkbox"
                                        id="own_nodes"
                                        name="own_nodes"
                                        value="on"
                                        checked=values.own_nodes
                                        aria-describedby="own_nodes-hint"
                                    />
                                    <label for="own_nodes">{t!(i18n, form.own_nodes)}</label>
                                </div>
                                <p id="own_nodes-hint" class="field-hint">
                                    {t!(i18n, form.own_nodes_hint)}
                                </p>
                                <FieldError field=Field::OwnNodes error />
                            </fieldset>
                        }
                    })}
            </div>
            {children()}
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
pub(crate) fn EditClusterForm(
    id: i64,
    values: ClusterFormValues,
    nodeport_host: Option<Host>,
    /// The stored public access (for the warning).
    current: PublicAccess,
    url_error: Option<AppError>,
    /// The planned-names panel, rendered by the page.
    children: Children,
) -> impl IntoView {
    let i18n = use_i18n();
    let action = ServerAction::<UpdateCluster>::new();
    let error = action_error(action.value(), action.version(), url_error);
    let draft = RwSignal::new(values.clone());
    let typing = track_typing(draft);
    follow_planned_names(draft, nodeport_host, Some(current));
    view! {
        <IslandForm action name="edit-cluster" error>
            <input type="hidden" name="id" value=id />
            <div class="contents" on:input=typing on:change=typing>
                <ResourceFields values=values.clone() error editing=true />
                <PublicAccessFields
                    enabled=values.enabled
                    mode=values.mode
                    host=values.host.clone()
                    gateway=values.gateway.clone()
                    error
                />
            </div>
            {children()}
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
