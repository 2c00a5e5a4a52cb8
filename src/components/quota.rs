//! The line above the create form: what the user holds of their quota.

use leptos::prelude::*;

use crate::domain::Field;
use crate::domain::quota::{QuotaText, QuotaView, cores};
use crate::i18n::*;

#[component]
pub(crate) fn QuotaLine(quota: QuotaView) -> impl IntoView {
    let i18n = use_i18n();
    let locale = i18n.get_locale_untracked();
    let (u, l) = (quota.used, quota.limit.unwrap_or(crate::domain::quota::Quota::UNLIMITED));
    let one = |n: u32| crate::components::labels::singular(locale, i64::from(n));
    let used = [
        if one(u.clusters) {
            td_string!(locale, quota.clusters_used_singular, used = u.clusters).to_string()
        } else {
            td_string!(locale, quota.clusters_used, used = u.clusters).to_string()
        },
        td_string!(locale, quota.cpu_used, used = cores(u.cpu_millis)).to_string(),
        td_string!(locale, quota.memory_used, used = u.memory_gib).to_string(),
        td_string!(locale, quota.storage_used, used = u.storage_gib).to_string(),
    ];
    let of_limit = [
        l.clusters.map(|n| {
            if one(n) {
                td_string!(locale, quota.clusters_singular, used = u.clusters, limit = n).to_string()
            } else {
                td_string!(locale, quota.clusters, used = u.clusters, limit = n).to_string()
            }
        }),
        l.cpu_millis.map(|n| td_string!(locale, quota.cpu, used = cores(u.cpu_millis), limit = cores(n)).to_string()),
        l.memory_gib.map(|n| td_string!(locale, quota.memory, used = u.memory_gib, limit = n).to_string()),
        l.storage_gib.map(|n| td_string!(locale, quota.storage, used = u.storage_gib, limit = n).to_string()),
    ];
    let unlimited = td_string!(locale, quota.unlimited);
    // "2 of 5 clusters" under a limit; "2 clusters (no limit)" without one;
    // for admins (no limits at all) what they hold, and the line says why.
    let parts: Vec<String> = used
        .into_iter()
        .zip(of_limit)
        .map(|(used, limited)| match (quota.limit.is_some(), limited) {
            (false, _) => used,
            (true, Some(text)) => text,
            (true, None) => format!("{used} ({unlimited})"),
        })
        .collect();
    view! {
        <p id="quota-usage" class="note mb-4" data-admin=quota.limit.is_none().to_string()>
            <span class="font-medium">{t!(i18n, quota.title)}</span>
            " "
            {parts.join(" · ")}
            {quota
                .limit
                .is_none()
                .then(|| {
                    // Its own line: not read as one more part of the list.
                    view! { <span class="block">{t!(i18n, quota.admin)}</span> }
                })}
        </p>
    }
}

/// The four quota fields of the settings and users forms, in order: the
/// field, its label, the keyboard it wants, and its value in `text`.
pub(crate) fn quota_fields(locale: Locale, text: QuotaText) -> [(Field, &'static str, &'static str, String); 4] {
    [
        (Field::QuotaClusters, td_string!(locale, quota.clusters_label), "numeric", text.clusters),
        (Field::QuotaCpu, td_string!(locale, quota.cpu_label), "decimal", text.cpu),
        (Field::QuotaMemory, td_string!(locale, quota.memory_label), "numeric", text.memory_gib),
        (Field::QuotaStorage, td_string!(locale, quota.storage_label), "numeric", text.storage_gib),
    ]
}
