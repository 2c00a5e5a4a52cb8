//! A visible sign that an island is live: forms carry `data-hydrated`, which
//! the server renders as "false" and the browser flips to "true" once the
//! island has hydrated. Tests wait for it before they type.

use leptos::prelude::*;

pub(crate) fn hydration_flag() -> Signal<&'static str> {
    let live = RwSignal::new(false);
    // Effects run only in the browser, after hydration.
    Effect::new(move |_| live.set(true));
    Signal::derive(move || if live.get() { "true" } else { "false" })
}
