//! The island that keeps a server-rendered region current (the cluster
//! page's [`Overview`](crate::components::cluster_overview::Overview), the
//! list, the join and the move pages); copy buttons inside it work. Without
//! JavaScript the page is complete at each reload.
//!
//! A region that names an event stream (`data-stream`, `server::push`) and
//! the version it was rendered at (`data-version`) is fetched again only
//! when the stream announces a newer version. When the stream says nothing
//! within [`STREAM_SILENCE`](live) — a proxy that buffers it — or refuses
//! (too many open pages: the page's `data-live-bound` note is shown), or for
//! a region without a stream, the island polls as before: while the region
//! says work is in progress, it fetches the page every 2 s.

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

/// The note shown when the server refuses a live page's stream (too many
/// open): hidden until then, shown by [`LiveRegion`]. Rendered by the page.
#[component]
pub(crate) fn LiveBound() -> impl IntoView {
    use crate::i18n::*;
    let i18n = use_i18n();
    view! {
        <p class="field-hint" data-live-bound hidden role="status">
            {t!(i18n, detail.live_bound)}
        </p>
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
    /// A stream that says nothing for this long after opening is buffered
    /// somewhere (the server speaks at once): poll instead.
    pub const STREAM_SILENCE: std::time::Duration = std::time::Duration::from_millis(3000);

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
        let stream = region(&root, &region_id).and_then(|r| r.get_attribute("data-stream"));
        match stream.and_then(|url| web_sys::EventSource::new(&url).ok()) {
            Some(source) => follow(source, region_id, root, busy),
            None => poll(region_id, root, busy),
        }
    }

    /// The version the region was rendered at.
    fn version(root: &HtmlElement, region_id: &str) -> i64 {
        region(root, region_id).and_then(|r| r.get_attribute("data-version")).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// Fetches the region whenever the stream announces a version newer
    /// than the one shown; falls back to [`poll`].
    fn follow(
        source: web_sys::EventSource,
        region_id: String,
        root: HtmlElement,
        busy: std::rc::Rc<std::cell::Cell<bool>>,
    ) {
        use std::cell::Cell;
        use std::rc::Rc;
        let heard = Rc::new(Cell::new(false));
        let polling = Rc::new(Cell::new(false));
        let wanted = Rc::new(Cell::new(0i64));
        let fall_back = {
            let (source, region_id, root, busy, polling) =
                (source.clone(), region_id.clone(), root.clone(), busy.clone(), polling.clone());
            move || {
                source.close();
                if !polling.replace(true) {
                    poll(region_id.clone(), root.clone(), busy.clone());
                }
            }
        };
        let on_version = {
            let (region_id, root, heard, wanted) = (region_id.clone(), root.clone(), heard.clone(), wanted.clone());
            Closure::<dyn Fn(web_sys::MessageEvent)>::new(move |ev: web_sys::MessageEvent| {
                heard.set(true);
                let Some(v) = ev.data().as_string().and_then(|d| d.trim().parse::<i64>().ok()) else { return };
                wanted.set(wanted.get().max(v));
                if wanted.get() <= version(&root, &region_id) || busy.replace(true) {
                    return;
                }
                let (root, busy, region_id, wanted) = (root.clone(), busy.clone(), region_id.clone(), wanted.clone());
                leptos::task::spawn_local(async move {
                    // Again while a newer version came in during the fetch.
                    for _ in 0..3 {
                        refresh(&region_id, &root).await;
                        if wanted.get() <= version(&root, &region_id) {
                            break;
                        }
                    }
                    busy.set(false);
                });
            })
        };
        let _ = source.add_event_listener_with_callback("version", on_version.as_ref().unchecked_ref());
        on_version.forget();
        let on_bound = {
            let (heard, fall_back) = (heard.clone(), fall_back.clone());
            Closure::<dyn Fn(web_sys::Event)>::new(move |_| {
                heard.set(true);
                if let Ok(Some(note)) = document().query_selector("[data-live-bound]") {
                    let _ = note.remove_attribute("hidden");
                }
                fall_back();
            })
        };
        let _ = source.add_event_listener_with_callback("bound", on_bound.as_ref().unchecked_ref());
        on_bound.forget();
        // Closed for good (refused, or not a stream): poll.
        let on_error = {
            let (source, fall_back) = (source.clone(), fall_back.clone());
            Closure::<dyn Fn(web_sys::Event)>::new(move |_| {
                if source.ready_state() == web_sys::EventSource::CLOSED {
                    fall_back();
                }
            })
        };
        source.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        on_error.forget();
        set_timeout(
            move || {
                if !heard.get() {
                    fall_back();
                }
            },
            STREAM_SILENCE,
        );
    }

    /// Fetches the page every [`POLL`] while the region says work is in progress.
    fn poll(region_id: String, root: HtmlElement, busy: std::rc::Rc<std::cell::Cell<bool>>) {
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
