//! The frame every island form shares: an `ActionForm` that posts to its
//! server function (a plain HTML form without JavaScript), marks itself
//! hydrated, skips browser validation (the server's translated errors are the
//! ones users see) and shows a form-wide error on top.

use leptos::form::ActionForm;
use leptos::prelude::*;
use leptos::web_sys::FormData;
use serde::de::DeserializeOwned;
use server_fn::client::Client;
use server_fn::codec::PostUrl;
use server_fn::request::ClientReq;
use server_fn::{Http, ServerFn};

use super::error_text::FormError;
use super::hydration::hydration_flag;
use crate::domain::AppError;

#[component]
pub(crate) fn IslandForm<S, O>(
    action: ServerAction<S>,
    /// `data-form`, for tests and styling.
    name: &'static str,
    #[prop(into)] error: Signal<Option<AppError>>,
    #[prop(default = "form")] class: &'static str,
    children: Children,
) -> impl IntoView
where
    S: DeserializeOwned + ServerFn<Protocol = Http<PostUrl, O>, Error = AppError> + Clone + Send + Sync + 'static,
    <<S::Client as Client<AppError>>::Request as ClientReq<AppError>>::FormData: From<FormData>,
    S::Output: Send + Sync + 'static,
    S::Client: Client<AppError>,
{
    let hydrated = hydration_flag();
    view! {
        <ActionForm action attr:data-hydrated=hydrated attr:class=class attr:novalidate=true attr:data-form=name>
            <FormError error />
            {children()}
        </ActionForm>
    }
}

/// Shows `error`'s field error in fields the server rendered as an island's
/// children (which do not hydrate), in the form `data-form={form}`: what
/// [`super::error_text::FieldError`] and [`super::field::TextField`] render
/// for it — the error's paragraph at the end of the field's box (or of its
/// fieldset, for a group of radios) and the input marked invalid and
/// described by it. The previous error, also one the server rendered from the
/// URL, is taken away first. Runs in the browser only.
pub(crate) fn show_field_errors(form: &'static str, error: Signal<Option<AppError>>) {
    let i18n = crate::i18n::use_i18n();
    Effect::new(move |_| {
        let error = error.get();
        let locale = i18n.get_locale();
        #[cfg(feature = "hydrate")]
        in_the_page::show(form, error.as_ref(), |code| super::error_text::error_text(locale, code));
        #[cfg(not(feature = "hydrate"))]
        let _ = (form, error, locale);
    });
}

#[cfg(feature = "hydrate")]
mod in_the_page {
    use leptos::wasm_bindgen::JsCast;
    use leptos::web_sys::Element;

    use crate::domain::{AppError, ErrorCode};

    /// The ids `aria-describedby` names, without the error ones.
    fn without_errors(described: &str) -> String {
        described.split_whitespace().filter(|id| !id.ends_with("-error")).collect::<Vec<_>>().join(" ")
    }

    fn each(form: &Element, selector: &str, mut f: impl FnMut(Element)) {
        let Ok(found) = form.query_selector_all(selector) else { return };
        for i in 0..found.length() {
            if let Some(el) = found.item(i).and_then(|n| n.dyn_into::<Element>().ok()) {
                f(el);
            }
        }
    }

    pub(super) fn show(form: &str, error: Option<&AppError>, text: impl Fn(ErrorCode) -> &'static str) -> Option<()> {
        let document = leptos::prelude::document();
        let form = document.query_selector(&format!("form[data-form=\"{form}\"]")).ok()??;
        each(&form, ".field-error", |el| el.remove());
        each(&form, "[aria-invalid=\"true\"]", |el| {
            let _ = el.set_attribute("aria-invalid", "false");
            let described = without_errors(&el.get_attribute("aria-describedby").unwrap_or_default());
            let _ = el.set_attribute("aria-describedby", &described);
        });
        let error = error?;
        let id = error.field?.as_str();
        let own = form.query_selector(&format!("#{id}")).ok().flatten();
        let input = own.clone().or_else(|| form.query_selector(&format!("[name=\"{id}\"]")).ok().flatten())?;
        let place = input.closest(".field").ok().flatten().or_else(|| input.closest("fieldset").ok().flatten())?;
        let p = document.create_element("p").ok()?;
        p.set_id(&format!("{id}-error"));
        p.set_class_name("field-error");
        p.set_attribute("data-error-code", error.code.as_str()).ok()?;
        p.set_text_content(Some(text(error.code)));
        place.append_child(&p).ok()?;
        if let Some(input) = own {
            input.set_attribute("aria-invalid", "true").ok()?;
            let described = without_errors(&input.get_attribute("aria-describedby").unwrap_or_default());
            let described =
                if described.is_empty() { format!("{id}-error") } else { format!("{described} {id}-error") };
            input.set_attribute("aria-describedby", &described).ok()?;
        }
        Some(())
    }
}
