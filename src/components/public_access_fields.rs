//! The public access part of the create and edit forms: a switch, the mode,
//! and the control plane host. What shows depends only on CSS `:has()` on the
//! checked inputs (style/main.css), so it works with JavaScript off; the
//! server validates either way.

use leptos::prelude::*;

use super::error_text::FieldError;
use super::field::CheckField;
use crate::domain::gateway::GatewayOffer;
use crate::domain::{AppError, Field, PublicAccessMode};
use crate::i18n::*;

#[component]
pub(crate) fn PublicAccessFields(
    enabled: bool,
    mode: PublicAccessMode,
    host: String,
    /// Gateway access as the admin offers it (none: no gateway choice, unless
    /// the cluster is already in gateway mode).
    gateway: Option<GatewayOffer>,
    #[prop(into)] error: Signal<Option<AppError>>,
    /// Say that the mode was preselected from the platform default.
    #[prop(optional)]
    default_note: bool,
) -> impl IntoView {
    let i18n = use_i18n();
    let suffix = gateway.as_ref().and_then(|g| g.suffix.as_ref()).map(ToString::to_string);
    let host_invalid = move || error.get().is_some_and(|e| e.field == Some(Field::ControlPlaneHost));
    let mode_radio = move |m: PublicAccessMode, label: &'static str, hint: &'static str| {
        let id = format!("public_access_mode_{}", m.as_str());
        let hint_id = format!("{id}-hint");
        view! {
            <div class="radio-card">
                <input
                    type="radio"
                    id=id.clone()
                    name="public_access_mode"
                    value=m.as_str()
                    checked=mode == m
                    aria-describedby=hint_id.clone()
                />
                <label for=id>
                    <span class="radio-title">{label}</span>
                    <span id=hint_id class="field-hint">
                        {hint}
                    </span>
                </label>
            </div>
        }
    };
    view! {
        <fieldset class="pa-form card-section">
            <legend class="section-title">{t!(i18n, form.public_access)}</legend>
            <CheckField
                id="public_access_enabled"
                label=t_string!(i18n, form.public_access_enabled)
                hint=t_string!(i18n, form.public_access_hint)
                checked=enabled
            />
            <div class="pa-when-enabled">
                <fieldset class="mode-choice" aria-describedby=default_note.then_some("public_access_mode-note")>
                    <legend class="field-label">{t!(i18n, form.mode)}</legend>
                    {mode_radio(
                        PublicAccessMode::NodePort,
                        t_string!(i18n, form.mode_nodeport),
                        t_string!(i18n, form.mode_nodeport_hint),
                    )}
                    {mode_radio(
                        PublicAccessMode::LoadBalancer,
                        t_string!(i18n, form.mode_loadbalancer),
                        t_string!(i18n, form.mode_loadbalancer_hint),
                    )}
                    {(gateway.is_some() || mode == PublicAccessMode::Gateway)
                        .then(|| {
                            mode_radio(
                                PublicAccessMode::Gateway,
                                t_string!(i18n, form.mode_gateway),
                                t_string!(i18n, form.mode_gateway_hint),
                            )
                        })}
                    {default_note
                        .then(|| {
                            view! {
                                <p id="public_access_mode-note" class="field-hint">
                                    {t!(i18n, form.default_mode_note)}
                                </p>
                            }
                        })}
                    <FieldError field=Field::PublicAccessMode error />
                </fieldset>
                <div class="field">
                    <label for="control_plane_host" class="field-label">
                        {t!(i18n, form.host)}
                    </label>
                    <input
                        id="control_plane_host"
                        name="control_plane_host"
                        type="text"
                        value=host
                        class="field-input"
                        autocomplete="off"
                        spellcheck="false"
                        aria-invalid=move || host_invalid().to_string()
                        aria-describedby=move || {
                            let mut ids = String::from(
                                "control_plane_host-hint-lb control_plane_host-hint-np control_plane_host-hint-gw",
                            );
                            if host_invalid() {
                                ids.push_str(" control_plane_host-error");
                            }
                            ids
                        }
                    />
                    <p id="control_plane_host-hint-lb" class="field-hint only-lb">
                        {t!(i18n, form.host_hint_loadbalancer)}
                    </p>
                    <p id="control_plane_host-hint-np" class="field-hint only-np">
                        {t!(i18n, form.host_hint_nodeport)}
                    </p>
                    <p id="control_plane_host-hint-gw" class="field-hint only-gw">
                        {match suffix {
                            Some(suffix) => {
                                t_string!(i18n, form.host_hint_gateway_suffix, suffix = suffix.as_str()).to_string()
                            }
                            None => t_string!(i18n, form.host_hint_gateway).to_string(),
                        }}
                    </p>
                    <FieldError field=Field::ControlPlaneHost error />
                </div>
            </div>
        </fieldset>
    }
}
