//! The island that keeps a server-rendered region current (the cluster
//! page's [`Overview`](crate::components::cluster_overview::Overview), the
//! list and the move pages): while the region says work is in
//! progress, it fetches the page again every 2 s and swaps the region in;
//! copy buttons inside it work. Without JavaScript the page is complete at
//! each reload.

use leptos::prelude::*;

use crate::components::hydration::hydration_flag;

/// The id of the detail page's element [`LiveRegion`] swaps.
pub(crate) const REGION_ID: &str = "cluster-live";

/// Keeps its (server-rendered) children current: while they say work is in
/// progress, fetches the page every 2 s and swaps in the fresh region (HTML
/// over the wire: the page is rendered once, on the server, with or without
/// JavaScript); stops once settled. Also shows times in the viewer's locale
/// and makes the copy buttons work.
#[island]
pub(crate) fn LiveRegion(
    /// The id of the element (inside the children) to keep current.
    region: String,
    children: Children,
) -> impl IntoView {
    let root = NodeRef::<leptos::html::Div>::new();
    let live = hydration_flag();
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        // Once, after hydration (the node is there by then; nothing to track).
        if let Some(el) = root.get_untracked() {
            live::start(region.clone(), el.into());
        }
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = &region;
    view! {
        <div node_ref=root data-testid="live" data-live=live>
            {children()}
        </div>
    }
}

#[cfg(feature = "hydrate")]
mod live {
    //! The browser side of [`super::LiveRegion`], on plain DOM calls.
    use leptos::prelude::*;
    use wasm_bindgen::JsCast;
    use wasm_bindgen::prelude::Closure;
    use web_sys::{DomParser, Element, HtmlElement, SupportedType};

    const POLL: std::time::Duration = std::time::Duration::from_millis(2000);

    pub fn start(region_id: String, root: HtmlElement) {
        decorate(&root);
        // Copy buttons: one listener for the region, whatever was swapped in.
        let on_click = Closure::<dyn Fn(web_sys::Event)>::new(move |ev: web_sys::Event| {
            let button = ev
                .target()
                .and_then(|t| t.dyn_into::<Element>().ok())
                .and_then(|t| t.closest("[data-copy]").ok().flatten());
            if let Some(button) = button {
                copy(button);
            }
        });
        let _ = root.add_event_listener_with_callback("click", on_click.as_ref().unchecked_ref());
        on_click.forget();
        let busy = std::rc::Rc::new(std::cell::Cell::new(false));
        let tick = {
            let root = root.clone();
            move || {
                let in_progress = region(&root, &region_id).and_then(|r| r.get_attribute("data-in-progress"));
                if in_progress.as_deref() != Some("true") || busy.replace(true) {
                    return;
                }
                let (root, busy, region_id) = (root.clone(), busy.clone(), region_id.clone());
                leptos::task::spawn_local(async move {
                    refresh(&region_id, &root).await;
                    busy.set(false);
                });
            }
        };
        if let Ok(handle) = set_interval_with_handle(tick, POLL) {
            on_cleanup(move || handle.clear());
        }
    }

    fn region(root: &HtmlElement, id: &str) -> Option<Element> {
        root.query_selector(&format!("#{id}")).ok().flatten()
    }

    /// Fetches the page and swaps in its region; a cluster gone meanwhile
    /// leads back to the list.
    async fn refresh(region_id: &str, root: &HtmlElement) {
        use wasm_bindgen_futures::JsFuture;
        // The page as it is addressed now (a `?probe=` outcome stays shown).
        let Ok(path) = window().location().href() else { return };
        let Ok(resp) = JsFuture::from(window().fetch_with_str(&path)).await else { return };
        let Ok(resp) = resp.dyn_into::<web_sys::Response>() else { return };
        if resp.status() == 404 {
            let _ = window().location().set_href("/clusters");
            return;
        }
        if !resp.ok() || resp.redirected() {
            return;
        }
        let Some(text) = resp.text().ok().map(JsFuture::from) else { return };
        let Some(html) = text.await.ok().and_then(|t| t.as_string()) else { return };
        let Ok(parser) = DomParser::new() else { return };
        let Ok(doc) = parser.parse_from_string(&html, SupportedType::TextHtml) else { return };
        let fresh = doc.get_element_by_id(region_id);
        if let (Some(fresh), Some(current)) = (fresh, region(root, region_id))
            && fresh.outer_html() != current.outer_html()
        {
            current.set_outer_html(&fresh.outer_html());
            decorate(root);
        }
    }

    /// Times in the viewer's locale; copy buttons shown (they need JavaScript).
    fn decorate(root: &HtmlElement) {
        let lang = document().document_element().and_then(|e| e.get_attribute("lang")).unwrap_or_else(|| "en".into());
        if let Ok(times) = root.query_selector_all("time[data-epoch]") {
            for i in 0..times.length() {
                let Some(el) = times.item(i).and_then(|n| n.dyn_into::<Element>().ok()) else { continue };
                let Some(secs) = el.get_attribute("data-epoch").and_then(|s| s.parse::<f64>().ok()) else { continue };
                let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(secs * 1000.0));
                if let Some(text) = date.to_locale_string(&lang, &wasm_bindgen::JsValue::UNDEFINED).as_string() {
                    el.set_text_content(Some(&text));
                }
            }
        }
        if let Ok(buttons) = root.query_selector_all("[data-copy]") {
            for i in 0..buttons.length() {
                if let Some(el) = buttons.item(i).and_then(|n| n.dyn_into::<Element>().ok()) {
                    let _ = el.remove_attribute("hidden");
                }
            }
        }
    }

    fn copy(button: Element) {
        let Some(text) = button.get_attribute("data-copy") else { return };
        let clipboard = window().navigator().clipboard();
        leptos::task::spawn_local(async move {
            if wasm_bindgen_futures::JsFuture::from(clipboard.write_text(&text)).await.is_ok()
                && let Some(label) = button.get_attribute("data-copied")
            {
                button.set_text_content(Some(&label));
            }
        });
    }
}
