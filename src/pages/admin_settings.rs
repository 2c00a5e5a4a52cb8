//! `/admin/settings` (admins only).

use leptos::prelude::*;
use leptos_meta::Title;
use server_fn::ServerFn;

use super::problem::problem_view;
use super::{SavedBanner, url_error};
use crate::actions::settings::{SaveSettings, load_settings};
use crate::components::layout::Layout;
use crate::components::settings_form::SettingsForm;
use crate::domain::gateway::{Admits, GatewayApiView};
use crate::domain::settings::{SettingsView, StorageClassView};
use crate::i18n::*;

/// What the host offers for gateway access and storage, as detected: the
/// Gateway API versions served, the Gateways with their listeners (which
/// can carry the console's routes) and addresses, the StorageClasses.
#[component]
fn HostFacts(
    gateway_api: Option<GatewayApiView>,
    storage_classes: Option<Vec<StorageClassView>>,
    /// The platform key's Secret (`namespace/name`) and whether the host has it.
    platform_key: Option<(String, bool)>,
) -> impl IntoView {
    let i18n = use_i18n();
    let platform_key = platform_key.map(|(key, found)| {
        let (class, words) = match found {
            true => ("badge badge-ready ml-2", t_string!(i18n, settings.platform_key_found)),
            false => ("ml-2 text-red-900", t_string!(i18n, settings.platform_key_missing)),
        };
        let shown = key.clone();
        view! {
            <h3 class="field-label mt-4">{t!(i18n, settings.platform_key_title)}</h3>
            <p class="text-sm" data-platform-key=key data-found=found.to_string()>
                <span class="font-mono">{shown}</span>
                <span class=class>{words}</span>
            </p>
        }
    });
    let gateway = match gateway_api {
        None => view! { <p class="note">{t!(i18n, settings.detected_no_host)}</p> }.into_any(),
        Some(api) if api.served.is_empty() => view! {
            <p class="note" data-gateway-api="none">
                {t!(i18n, settings.gateway_api_none)}
            </p>
        }
        .into_any(),
        Some(api) => {
            let served = api.served.join(", ");
            let route = api.route_version.map(|v| v.as_str()).unwrap_or("-");
            let gateways = api
                .gateways
                .into_iter()
                .map(|g| {
                    let listeners = g
                        .listeners
                        .iter()
                        .map(|l| {
                            let usable = l.usable();
                            let admits = match l.admits {
                                Admits::ClusterNamespaces => t_string!(i18n, settings.gateway_admits),
                                Admits::Not => t_string!(i18n, settings.gateway_admits_not),
                            };
                            view! {
                                <li data-listener=l.name.clone() data-usable=usable.to_string()>
                                    <span class="font-mono">{l.name.clone()}</span>
                                    {format!(
                                        " · {} {} · tls {} · {}{}",
                                        l.protocol,
                                        l.port,
                                        l.tls_mode,
                                        admits,
                                        l.hostname.as_ref().map(|h| format!(" · {h}")).unwrap_or_default(),
                                    )}
                                    {usable
                                        .then(|| {
                                            view! {
                                                <span class="badge badge-ready ml-2">
                                                    {t!(i18n, settings.gateway_usable)}
                                                </span>
                                            }
                                        })}
                                </li>
                            }
                        })
                        .collect_view();
                    let addresses = if g.addresses.is_empty() { "-".to_owned() } else { g.addresses.join(", ") };
                    view! {
                        <li data-gateway=format!("{}/{}", g.namespace, g.name)>
                            <span class="font-mono">{format!("{}/{}", g.namespace, g.name)}</span>
                            {format!(" · {} · ", g.class)}
                            {t!(i18n, settings.gateway_address)}
                            " "
                            <span class="font-mono" data-gateway-address>
                                {addresses}
                            </span>
                            <ul class="ml-4 list-disc">{listeners}</ul>
                        </li>
                    }
                })
                .collect_view();
            view! {
                <p class="note" data-gateway-api=served.clone()>
                    {t!(i18n, settings.gateway_api_served)}
                    " "
                    <span class="font-mono">{served.clone()}</span>
                    " · TLSRoute "
                    <span class="font-mono" data-route-version>
                        {route.to_owned()}
                    </span>
                </p>
                <ul class="mt-2 text-sm">{gateways}</ul>
            }
            .into_any()
        }
    };
    let classes = storage_classes.map(|list| {
        list.into_iter()
            .map(|c| {
                view! {
                    <li data-storage-class=c.name.clone()>
                        <span class="font-mono">{c.name.clone()}</span>
                        {format!(" · {}", c.provisioner)}
                        {c
                            .default
                            .then(|| view! { <span class="badge ml-2">{t!(i18n, settings.storage_default)}</span> })}
                    </li>
                }
            })
            .collect_view()
    });
    view! {
        <section class="card max-w-3xl mt-6" aria-labelledby="host-facts-title">
            <h2 id="host-facts-title" class="section-title">
                {t!(i18n, settings.host_facts_title)}
            </h2>
            <h3 class="field-label mt-2">{t!(i18n, settings.gateway_title)}</h3>
            {gateway}
            <h3 class="field-label mt-4">{t!(i18n, settings.storage_classes)}</h3>
            <ul class="text-sm">{classes}</ul>
            {platform_key}
        </section>
    }
}

/// The host problem that stops every create and edit: the host's
/// helm-controller would reinstall a control plane after a failed change.
#[component]
fn HelmProblemBanner(problem: crate::domain::helm::HelmProblem) -> impl IntoView {
    let i18n = use_i18n();
    let offered = match problem.offered.is_empty() {
        true => t_string!(i18n, settings.helm_offered_none).to_string(),
        false => problem.offered.join(", "),
    };
    let minimum = problem.advice.minimum_k3s.clone();
    let release = match (problem.advice.k3s.clone(), problem.advice.helm_controller.clone()) {
        (Some(k3s), Some(helm_controller)) => Some(
            t_string!(i18n, settings.helm_unsupported_embedded, k3s = k3s, helm_controller = helm_controller)
                .to_string(),
        ),
        (Some(k3s), None) => Some(t_string!(i18n, settings.helm_unsupported_release, k3s = k3s).to_string()),
        _ => None,
    };
    view! {
        <p class="banner" role="alert" data-warning="helm_unsupported">
            {t_string!(i18n, settings.helm_unsupported, offered = offered, minimum = minimum).to_string()}
            // Sentences are spaced in English; Chinese and Japanese write them
            // end to end (their full stop ends the first).
            {release.map(|r| if matches!(i18n.get_locale(), Locale::en) { format!(" {r}") } else { r })}
        </p>
    }
}

#[component]
pub(crate) fn SettingsPage() -> impl IntoView {
    let i18n = use_i18n();
    // How many clusters the last save re-renders (`?rerendered=N` after saving).
    let query = leptos_router::hooks::use_query_map().get_untracked();
    let rerendered =
        query.get("rerendered").and_then(|n| n.parse::<u32>().ok()).filter(|_| query.get("__err").is_none());
    let content = Suspend::new(async move {
        match load_settings().await {
            Err(e) => problem_view(e),
            Ok(SettingsView {
                settings,
                detected,
                servicelb,
                gateway_api,
                storage_classes,
                platform_key_found,
                gateway_any_host,
                helm_problem,
            }) => {
                // A Gateway without a suffix: refused to users, or any name theirs to claim.
                let gateway_note =
                    (settings.gateway.is_some() && settings.gateway_domain_suffix.is_none()).then(|| {
                        let (key, text) = if gateway_any_host {
                            ("any_host", t_string!(i18n, settings.gateway_any_host_warning))
                        } else {
                            ("suffix_required", t_string!(i18n, settings.gateway_suffix_required_warning))
                        };
                        view! {
                            <p class="banner" role="alert" data-warning=key>
                                {text}
                            </p>
                        }
                    });
                let platform_key =
                    settings.platform_api_key.as_ref().zip(platform_key_found).map(|(k, found)| (k.to_string(), found));
                view! {
                    <section class="card max-w-3xl">
                        <h1 class="page-title">{t!(i18n, settings.title)}</h1>
                        <p class="mb-4 text-slate-600">{t!(i18n, settings.intro)}</p>
                        {match rerendered {
                            Some(n) => {
                                view! {
                                    <p class="banner banner-ok" role="status">
                                        {t!(i18n, settings.rerendered, n = n)}
                                    </p>
                                }
                                    .into_any()
                            }
                            None => view! { <SavedBanner /> }.into_any(),
                        }}
                        {gateway_note}
                        {helm_problem.map(|p| view! { <HelmProblemBanner problem=p /> })}
                        <SettingsForm settings detected servicelb url_error=url_error(SaveSettings::PATH) />
                    </section>
                    <HostFacts gateway_api storage_classes platform_key />
                }
                .into_any()
            }
        }
    });
    view! {
        <Layout>
            <Title text=t_string!(i18n, settings.title) />
            <Suspense fallback=|| ()>{content}</Suspense>
        </Layout>
    }
}
