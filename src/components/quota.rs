//! The line above the create form: what the user holds of their quota.

use leptos::prelude::*;

use crate::domain::Field;
use crate::domain::quota::{QuotaText, QuotaView, cores};
use crate::i18n::*;

#[component]
pub fn QuotaLine(quota: QuotaView) -> impl IntoView {
    let i18n = use_i18n();
    let locale = i18n.get_locale_untracked();
    let limit_text = |limit: Option<u64>, show: &dyn Fn(u64) -> String| match limit {
        Some(n) => show(n),
        None => td_string!(locale, quota.unlimited).to_owned(),
    };
    let plain = |n: u64| n.to_string();
    let cpu = |m: u64| cores(m);
    let (u, l) = (quota.used, quota.limit.unwrap_or(crate::domain::quota::Quota::UNLIMITED));
    let parts = [
        td_string!(locale, quota.clusters, used = u.clusters, limit = limit_text(l.clusters.map(u64::from), &plain))
            .to_string(),
        td_string!(locale, quota.cpu, used = cores(u.cpu_millis), limit = limit_text(l.cpu_millis, &cpu)).to_string(),
        td_string!(locale, quota.memory, used = u.memory_gib, limit = limit_text(l.memory_gib, &plain)).to_string(),
        td_string!(locale, quota.storage, used = u.storage_gib, limit = limit_text(l.storage_gib, &plain)).to_string(),
    ];
    view! {
        <p id="quota-usage" class="note mb-4" data-admin=quota.limit.is_none().to_string()>
            <span class="font-medium">{t!(i18n, quota.title)}</span>
            " "
            {parts.join(" · ")}
            {quota
                .limit
                .is_none()
                .then(|| {
                    view! {
                        " "
                        {t!(i18n, quota.admin)}
                    }
                })}
        </p>
    }
}

/// The four quota fields of the settings and users forms, in order: the
/// field, its label, the keyboard it wants, and its value in `text`.
pub fn quota_fields(locale: Locale, text: QuotaText) -> [(Field, &'static str, &'static str, String); 4] {
    [
        (Field::QuotaClusters, td_string!(locale, quota.clusters_label), "numeric", text.clusters),
        (Field::QuotaCpu, td_string!(locale, quota.cpu_label), "decimal", text.cpu),
        (Field::QuotaMemory, td_string!(locale, quota.memory_label), "numeric", text.memory_gib),
        (Field::QuotaStorage, td_string!(locale, quota.storage_label), "numeric", text.storage_gib),
    ]
}
