//! The create and edit forms' "Certificate names" panel: the names the API
//! server certificate will cover for what the form says (`domain::sans`),
//! and on edit a warning when saving would stop kubeconfigs already handed
//! out from working. Rendered by the page (complete without JavaScript);
//! the form island keeps it current while typing by setting the attributes
//! and texts [`shown`] computes (`cluster_forms::follow_planned_names`).
//! Which lines show is CSS's choice from `data-line`, `data-assigned` and
//! `data-breaks` (style/main.css).

use leptos::prelude::*;

use super::islands::cluster_forms::ClusterFormValues;
use crate::domain::host_objects;
use crate::domain::sans::{self, AddedName};
use crate::domain::{Host, PublicAccess};
use crate::i18n::*;

/// What the panel shows for some form values.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shown {
    /// The public line: `public`, `none`, `off`, `required` or `invalid`.
    pub line: &'static str,
    pub public_host: String,
    /// `lb`, `node` or empty.
    pub assigned: &'static str,
    /// Saving would break kubeconfigs handed out for `current`.
    pub breaks: bool,
    pub name: String,
    pub ns_name: String,
}

/// The panel's state for form `values`; `current` is the stored public access (edit).
pub(crate) fn shown(values: &ClusterFormValues, nodeport_host: Option<&Host>, current: Option<&PublicAccess>) -> Shown {
    let name = values.name.trim().to_owned();
    let ns_name = if name.is_empty() { String::new() } else { format!("{name}.{}", host_objects::namespace(&name)) };
    let Some(access) = values.access() else {
        let line = if values.host.trim().is_empty() { "required" } else { "invalid" };
        return Shown { line, public_host: String::new(), assigned: "", breaks: false, name, ns_name };
    };
    let p = sans::planned(&name, &access, nodeport_host);
    let line = match (&p.public_host, values.enabled) {
        (Some(_), _) => "public",
        (None, false) => "off",
        (None, true) => "none",
    };
    let assigned = match p.assigned {
        Some(AddedName::LoadBalancerAddress) => "lb",
        Some(AddedName::NodeAddress) => "node",
        None => "",
    };
    let breaks = current.is_some_and(|now| sans::breaks_kubeconfigs(now, &access, nodeport_host));
    Shown {
        line,
        public_host: p.public_host.map(|h| h.to_string()).unwrap_or_default(),
        assigned,
        breaks,
        name,
        ns_name,
    }
}

#[component]
pub(crate) fn PlannedNames(
    shown: Shown,
    /// Edit: the endpoint handed out (only then can saving break a kubeconfig).
    #[prop(default = None)]
    handed_out: Option<String>,
) -> impl IntoView {
    let i18n = use_i18n();
    let warning = handed_out.map(|old| {
        view! {
            <p class="banner mt-3" role="status" data-breaks-kubeconfigs>
                {t_string!(i18n, form.sans_breaks, endpoint = old.as_str()).to_string()}
            </p>
            <p class="field-hint nojs-only mt-3">{t!(i18n, form.sans_breaks_nojs)}</p>
        }
    });
    view! {
        <section
            class="card-section planned-sans"
            data-planned-sans
            data-line=shown.line
            data-assigned=shown.assigned
            data-breaks=shown.breaks.to_string()
        >
            <h2 class="section-title">{t!(i18n, form.sans_title)}</h2>
            <p class="field-hint">{t!(i18n, form.sans_intro)}</p>
            <ul class="sans-list" aria-live="polite">
                <li data-san="public">
                    <code data-public-host>{shown.public_host}</code>
                    " — "
                    {t!(i18n, form.sans_public)}
                </li>
                <li data-san="none">{t!(i18n, form.sans_no_public_host)}</li>
                <li data-san="off">{t!(i18n, form.sans_off)}</li>
                <li data-san="required">{t!(i18n, form.sans_host_required)}</li>
                <li data-san="invalid">{t!(i18n, form.sans_host_invalid)}</li>
                <li data-san="lb">{t!(i18n, form.sans_lb_address)}</li>
                <li data-san="node">{t!(i18n, form.sans_node_address)}</li>
            </ul>
            <details class="mt-2 text-sm">
                <summary>{t!(i18n, form.sans_always)}</summary>
                <ul class="sans-list">
                    {sans::IN_CLUSTER
                        .map(|n| {
                            view! {
                                <li>
                                    <code>{n}</code>
                                </li>
                            }
                        })} <li>
                        <code data-name>{shown.name}</code>
                    </li> <li>
                        <code data-ns-name>{shown.ns_name}</code>
                    </li> <li>{t!(i18n, form.sans_cluster_ip)}</li>
                </ul>
            </details>
            {warning}
        </section>
    }
}
