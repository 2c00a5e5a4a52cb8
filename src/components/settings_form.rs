//! The admin's system settings form, rendered on the server. Its fields are
//! the children of the island that saves them
//! ([`super::islands::settings_form::SettingsSave`]), so none of their code
//! ships to the browser: after a save with JavaScript, the island puts a
//! field's error into them ([`super::island_form::show_field_errors`]); without
//! JavaScript the page shows it from the URL, as every form does.

use leptos::prelude::*;

use crate::components::error_text::FieldError;
use crate::components::field::{TextAreaField, TextField, options};
use crate::components::islands::settings_form::SettingsSave;
use crate::components::quota::quota_fields;
use crate::domain::placement::Spread;
use crate::domain::quota::QuotaText;
use crate::domain::settings::{AddressRequest, AddressStyle, PodSecurity};
use crate::domain::{AppError, Field, PublicAccessMode, SystemSettings};
use crate::i18n::*;
use leptos_i18n::I18nContext;

#[component]
pub(crate) fn SettingsForm(
    settings: SystemSettings,
    detected: Option<AddressRequest>,
    /// k3s's ServiceLB seen serving the console's LoadBalancer Services.
    servicelb: bool,
    url_error: Option<AppError>,
) -> impl IntoView {
    let i18n = use_i18n();
    // What the fields show on the server: the error of a post without JavaScript.
    let error = Signal::stored(url_error);
    view! {
        <SettingsSave url_error>
            {default_mode_fieldset(i18n, settings.default_mode, error)}
            {load_balancer_fields(i18n, &settings, detected, servicelb, error)}
            {chart_and_quota(i18n, &settings, error)} {isolation_and_nodes(i18n, &settings, error)}
            {gateway_and_placement(i18n, &settings, error)}
        </SettingsSave>
    }
}

/// The default public access mode for new clusters.
fn default_mode_fieldset(
    i18n: I18nContext<Locale>,
    mode: PublicAccessMode,
    error: Signal<Option<AppError>>,
) -> impl IntoView + use<> {
    let radio = move |m: PublicAccessMode, label: &'static str| {
        let id = format!("default_mode_{}", m.as_str());
        view! {
            <div class="radio-inline">
                <input type="radio" id=id.clone() name="default_mode" value=m.as_str() checked=mode == m />
                <label for=id>{label}</label>
            </div>
        }
    };
    view! {
        <fieldset class="card-section" aria-describedby="default_mode-hint lb-note">
            <legend class="section-title">{t!(i18n, settings.default_mode)}</legend>
            <div class="flex gap-6">
                {radio(PublicAccessMode::NodePort, t_string!(i18n, mode.nodeport))}
                {radio(PublicAccessMode::LoadBalancer, t_string!(i18n, mode.loadbalancer))}
                {radio(PublicAccessMode::Gateway, t_string!(i18n, mode.gateway))}
            </div>
            <p id="default_mode-hint" class="field-hint">
                {t!(i18n, settings.default_mode_hint)}
            </p>
            <p id="lb-note" class="note">
                {t!(i18n, settings.lb_note)}
            </p>
            <FieldError field=Field::DefaultMode error />
        </fieldset>
    }
}

/// NodePort's public host and how LoadBalancer Services are asked for an address.
fn load_balancer_fields(
    i18n: I18nContext<Locale>,
    settings: &SystemSettings,
    detected: Option<AddressRequest>,
    servicelb: bool,
    error: Signal<Option<AppError>>,
) -> impl IntoView + use<> {
    view! {
        <TextField
            field=Field::NodeportPublicHost
            label=t_string!(i18n, settings.nodeport_host)
            hint=t_string!(i18n, settings.nodeport_host_hint)
            value=settings.nodeport_public_host.as_ref().map(ToString::to_string).unwrap_or_default()
            error
            autocomplete="off"
        />
        <TextAreaField
            field=Field::LoadBalancerAnnotations
            label=t_string!(i18n, settings.annotations)
            hint=t_string!(i18n, settings.annotations_hint)
            value=annotations_text(&settings.load_balancer_annotations)
            error
        />
        <TextField
            field=Field::LoadBalancerClass
            label=t_string!(i18n, settings.lb_class)
            hint=t_string!(i18n, settings.lb_class_hint)
            value=settings.load_balancer_class.clone().unwrap_or_default()
            error
            autocomplete="off"
        />
        <div class="field">
            <label for="load_balancer_address_request" class="field-label">
                {t!(i18n, settings.address_request)}
            </label>
            <select
                id="load_balancer_address_request"
                name="load_balancer_address_request"
                class="field-input"
                aria-describedby="load_balancer_address_request-hint load_balancer_address_request-detected"
            >
                {options(
                    <AddressStyle as strum::VariantArray>::VARIANTS.iter().copied(),
                    Some(settings.load_balancer_address_request),
                    AddressStyle::as_str,
                    move |style| match style {
                        AddressStyle::Auto => t_string!(i18n, settings.address_auto),
                        AddressStyle::MetalLb => t_string!(i18n, settings.address_metallb),
                        AddressStyle::KubeVip => t_string!(i18n, settings.address_kube_vip),
                        AddressStyle::None => t_string!(i18n, settings.address_none),
                    },
                )}
            </select>
            <p id="load_balancer_address_request-hint" class="field-hint">
                {t!(i18n, settings.address_request_hint)}
            </p>
            <p
                id="load_balancer_address_request-detected"
                class="note"
                data-detected=detected.map_or("no-host", AddressRequest::as_str)
            >
                {match detected {
                    Some(AddressRequest::MetalLb) => t_string!(i18n, settings.detected_metallb),
                    Some(_) => t_string!(i18n, settings.detected_none),
                    None => t_string!(i18n, settings.detected_no_host),
                }}
            </p>
            {servicelb
                .then(|| {
                    view! {
                        <p id="servicelb-warning" class="banner mt-2" role="alert">
                            {t!(i18n, settings.servicelb_warning)}
                        </p>
                    }
                })}
            <FieldError field=Field::LoadBalancerAddressRequest error />
        </div>
    }
}

/// The vCluster chart and each user's quota.
fn chart_and_quota(
    i18n: I18nContext<Locale>,
    settings: &SystemSettings,
    error: Signal<Option<AppError>>,
) -> impl IntoView + use<> {
    let quota = QuotaText::of(&settings.quota);
    view! {
        <fieldset class="card-section">
            <legend class="section-title">{t!(i18n, settings.chart)}</legend>
            <TextField
                field=Field::ChartRepo
                label=t_string!(i18n, settings.chart_repo)
                hint=t_string!(i18n, settings.chart_repo_hint)
                value=settings.chart_repo.clone()
                error
                autocomplete="off"
            />
            <TextField
                field=Field::ChartVersion
                label=t_string!(i18n, settings.chart_version)
                hint=t_string!(i18n, settings.chart_version_hint)
                value=settings.chart_version.clone()
                error
                autocomplete="off"
            />
        </fieldset>
        <fieldset class="card-section" aria-describedby="quota-hint">
            <legend class="section-title">{t!(i18n, quota.settings_title)}</legend>
            <p id="quota-hint" class="field-hint">
                {t!(i18n, quota.settings_hint)}
            </p>
            <div class="grid grid-cols-2 gap-x-4 sm:grid-cols-4">
                {quota_fields(i18n.get_locale_untracked(), quota)
                    .into_iter()
                    .map(|(field, label, inputmode, value)| {
                        view! { <TextField field label value error inputmode autocomplete="off" /> }
                    })
                    .collect_view()}
            </div>
        </fieldset>
    }
}

/// Tenant isolation and own nodes.
fn isolation_and_nodes(
    i18n: I18nContext<Locale>,
    settings: &SystemSettings,
    error: Signal<Option<AppError>>,
) -> impl IntoView + use<> {
    view! {
        <fieldset class="card-section">
            <legend class="section-title">{t!(i18n, settings.isolation)}</legend>
            <div class="field">
                <label for="pod_security" class="field-label">
                    {t!(i18n, settings.pod_security)}
                </label>
                <select id="pod_security" name="pod_security" class="field-input" aria-describedby="pod_security-hint">
                    {options(
                        <PodSecurity as strum::VariantArray>::VARIANTS.iter().copied(),
                        Some(settings.pod_security),
                        PodSecurity::as_str,
                        move |p| match p {
                            PodSecurity::Baseline => t_string!(i18n, settings.pod_security_baseline),
                            PodSecurity::Privileged => t_string!(i18n, settings.pod_security_privileged),
                        },
                    )}
                </select>
                <p id="pod_security-hint" class="field-hint">
                    {t!(i18n, settings.pod_security_hint)}
                </p>
                <FieldError field=Field::PodSecurity error />
            </div>
            <OnOffField
                field=Field::NetworkPolicy
                label=t_string!(i18n, settings.network_policy)
                hint=t_string!(i18n, settings.network_policy_hint)
                on_text=t_string!(i18n, settings.on)
                off_text=t_string!(i18n, settings.off)
                on=settings.network_policy
                error
            />
            <TextAreaField
                field=Field::ExtraEgress
                label=t_string!(i18n, settings.extra_egress)
                hint=t_string!(i18n, settings.extra_egress_hint)
                value=settings.extra_egress.text()
                error
                rows=3
                placeholder="10443 vcluster-platform"
            />
            <TextField
                field=Field::KubeconfigMaxLifetime
                label=t_string!(i18n, settings.kubeconfig_max_lifetime)
                hint=t_string!(i18n, settings.kubeconfig_max_lifetime_hint)
                value=settings.kubeconfig_max_lifetime.text()
                error
                autocomplete="off"
            />
        </fieldset>
        <fieldset class="card-section">
            <legend class="section-title">{t!(i18n, settings.nodes_title)}</legend>
            <OnOffField
                field=Field::PrivateNodes
                label=t_string!(i18n, settings.private_nodes)
                hint=t_string!(i18n, settings.private_nodes_hint)
                on_text=t_string!(i18n, settings.private_nodes_on)
                off_text=t_string!(i18n, settings.off)
                on=settings.private_nodes
                error
            />
            <TextField
                field=Field::PlatformApiKey
                label=t_string!(i18n, settings.platform_api_key)
                hint=t_string!(i18n, settings.platform_api_key_hint)
                value=settings.platform_api_key.as_ref().map(ToString::to_string).unwrap_or_default()
                error
                autocomplete="off"
            />
        </fieldset>
    }
}

/// Gateway access and where new clusters are placed.
fn gateway_and_placement(
    i18n: I18nContext<Locale>,
    settings: &SystemSettings,
    error: Signal<Option<AppError>>,
) -> impl IntoView + use<> {
    // Each field as the form writes it (what `actions::settings::SettingsForm` reads back).
    let gateway = settings.gateway.as_ref();
    let (gateway_key, listener) = (
        gateway.map(crate::domain::gateway::GatewayRef::key).unwrap_or_default(),
        gateway.and_then(|g| g.listener.clone()).unwrap_or_default(),
    );
    let suffix = settings.gateway_domain_suffix.as_ref().map(ToString::to_string).unwrap_or_default();
    let placement = settings.placement.clone();
    let spread = settings.placement.spread;
    view! {
        <fieldset class="card-section" aria-describedby="gateway-hint">
            <legend class="section-title">{t!(i18n, settings.gateway_title)}</legend>
            <p id="gateway-hint" class="field-hint">
                {t!(i18n, settings.gateway_hint)}
            </p>
            <TextField
                field=Field::Gateway
                label=t_string!(i18n, settings.gateway)
                hint=t_string!(i18n, settings.gateway_ref_hint)
                value=gateway_key
                error
                autocomplete="off"
            />
            <TextField
                field=Field::GatewayListener
                label=t_string!(i18n, settings.gateway_listener)
                hint=t_string!(i18n, settings.gateway_listener_hint)
                value=listener
                error
                autocomplete="off"
            />
            <TextField
                field=Field::GatewayDomainSuffix
                label=t_string!(i18n, settings.gateway_domain_suffix)
                hint=t_string!(i18n, settings.gateway_domain_suffix_hint)
                value=suffix
                error
                autocomplete="off"
            />
        </fieldset>
        <fieldset class="card-section" aria-describedby="placement-hint">
            <legend class="section-title">{t!(i18n, settings.placement_title)}</legend>
            <p id="placement-hint" class="note">
                {t!(i18n, settings.placement_hint)}
            </p>
            <div class="field">
                <label for="spread" class="field-label">
                    {t!(i18n, settings.spread)}
                </label>
                <select id="spread" name="spread" class="field-input" aria-describedby="spread-hint">
                    {options(
                        <Spread as strum::VariantArray>::VARIANTS.iter().copied(),
                        Some(spread),
                        Spread::as_str,
                        move |s| match s {
                            Spread::Off => t_string!(i18n, settings.spread_off),
                            Spread::Preferred => t_string!(i18n, settings.spread_preferred),
                            Spread::Required => t_string!(i18n, settings.spread_required),
                        },
                    )}
                </select>
                <p id="spread-hint" class="field-hint">
                    {t!(i18n, settings.spread_hint)}
                </p>
                <FieldError field=Field::Spread error />
            </div>
            <TextField
                field=Field::SpreadTopologyKey
                label=t_string!(i18n, settings.spread_topology_key)
                hint=t_string!(i18n, settings.spread_topology_key_hint)
                value=placement.topology_key.clone()
                error
                autocomplete="off"
            />
            <TextField
                field=Field::StorageClass
                label=t_string!(i18n, settings.storage_class)
                hint=t_string!(i18n, settings.storage_class_hint)
                value=placement.storage_class.clone().unwrap_or_default()
                error
                autocomplete="off"
            />
        </fieldset>
    }
}

/// An on/off setting as a `<select>` posting `on` or `off` (works without JavaScript).
#[component]
fn OnOffField(
    field: Field,
    label: &'static str,
    hint: &'static str,
    on_text: &'static str,
    off_text: &'static str,
    on: bool,
    #[prop(into)] error: Signal<Option<AppError>>,
) -> impl IntoView {
    let name = field.as_str();
    view! {
        <div class="field">
            <label for=name class="field-label">
                {label}
            </label>
            <select id=name name=name class="field-input" aria-describedby=format!("{name}-hint")>
                <option value="on" selected=on>
                    {on_text}
                </option>
                <option value="off" selected=!on>
                    {off_text}
                </option>
            </select>
            <p id=format!("{name}-hint") class="field-hint">
                {hint}
            </p>
            <FieldError field error />
        </div>
    }
}

/// The annotations as the form writes them, one `key: value` per line.
fn annotations_text(annotations: &std::collections::BTreeMap<String, String>) -> String {
    annotations.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join("\n")
}
