//! KubeBYON: a self-hosted console for virtual Kubernetes clusters.
//!
//! - `domain`: validated types and pure rules (no I/O).
//! - `actions`: server functions the pages call (thin: auth, parse, call a service).
//! - `pages`, `components`: the Leptos UI (islands: only forms hydrate).
//! - `server` (ssr only): storage, accounts, services, HTTP.

#![recursion_limit = "256"]

pub mod actions;
pub mod app;
pub mod components;
pub mod domain;
pub mod pages;
#[cfg(feature = "ssr")]
pub mod server;

/// `i18n`, generated from `locales/*.json` by build.rs (not ours to lint).
#[allow(clippy::all, clippy::pedantic)]
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
