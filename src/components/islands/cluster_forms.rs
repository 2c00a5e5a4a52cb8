//! The islands that submit the create and edit forms of a cluster. Their
//! fields are server-rendered children (`components::cluster_fields`), so
//! only the frame, the typing the planned names follow, the errors and the
//! buttons hydrate.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::actions::clusters::{CreateCluster, UpdateCluster};
use crate::components::error_text::action_error;
use crate::components::island_form::{IslandForm, show_field_errors};
use crate::domain::cluster::Cluster;
use crate::domain::gateway::GatewayOffer;
use crate::domain::public_access::PublicAccessInput;
use crate::domain::{AppError, Host, PublicAccess, PublicAccessMode, Resources};
use crate::i18n::*;

/// `data-form` of the create and edit forms.
const CREATE: &str = "create-cluster";
const EDIT: &str = "edit-cluster";

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
    url_error: Option<AppError>,
    /// The fields (`components::cluster_fields::ClusterFields`) and the
    /// planned-names panel, rendered by the page.
    children: Children,
) -> impl IntoView {
    let i18n = use_i18n();
    let action = ServerAction::<CreateCluster>::new();
    let error = action_error(action.value(), action.version(), url_error);
    show_field_errors(CREATE, error);
    let draft = RwSignal::new(values);
    let typing = track_typing(draft);
    follow_planned_names(draft, nodeport_host, None);
    view! {
        <IslandForm action name=CREATE error>
            <div class="contents" on:input=typing on:change=typing>
                {children()}
            </div>
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
    /// The fields (`components::cluster_fields::ClusterFields`) and the
    /// planned-names panel, rendered by the page.
    children: Children,
) -> impl IntoView {
    let i18n = use_i18n();
    let action = ServerAction::<UpdateCluster>::new();
    let error = action_error(action.value(), action.version(), url_error);
    show_field_errors(EDIT, error);
    let draft = RwSignal::new(values);
    let typing = track_typing(draft);
    follow_planned_names(draft, nodeport_host, Some(current));
    view! {
        <IslandForm action name=EDIT error>
            <input type="hidden" name="id" value=id />
            <div class="contents" on:input=typing on:change=typing>
                {children()}
            </div>
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
