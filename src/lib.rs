//! KubeBYON: a self-hosted console for virtual Kubernetes clusters.
//!
//! - `domain`: validated types and pure rules (no I/O).
//! - `actions`: server functions the pages call (thin: auth, parse, call a service).
//! - `pages`, `components`: the Leptos UI (islands: the forms and the live region hydrate).
//! - `server` (ssr only): storage, accounts, services, HTTP.

#![recursion_limit = "256"]
// The public surface is what the binary and the tests use; the rest is pub(crate).
#![warn(unreachable_pub)]
// The browser build compiles the shared domain for the few types islands use;
// what only the server calls is dead there. The server build checks dead code.
#![cfg_attr(not(feature = "ssr"), allow(dead_code))]
// No function past 120 lines (clippy.toml), views included: split it.
#![warn(clippy::too_many_lines)]

pub(crate) mod actions;
pub mod app;
// Leptos' `#[component]` gives each component a props builder whose methods are
// `pub`: not ours to restrict (the modules themselves are crate-only).
#[allow(unreachable_pub)]
pub(crate) mod components;
pub mod domain;
#[allow(unreachable_pub)]
pub(crate) mod pages;
#[cfg(feature = "ssr")]
pub mod server;

/// `i18n`, generated from `locales/*.json` by build.rs (not ours to lint).
#[allow(clippy::all, clippy::pedantic, unreachable_pub)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/i18n/mod.rs"));
}
pub use generated::i18n;

#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_islands();
}
