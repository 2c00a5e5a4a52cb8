//! The parts of the UI that hydrate (every file holds `#[island]`s and only
//! the components they render): forms that submit through server functions
//! and show translated errors in place, each also a plain HTML form that
//! works with JavaScript off; and the live region that keeps a
//! server-rendered part of a page current.

pub(crate) mod cluster_forms;
pub(crate) mod delete_form;
pub(crate) mod live_region;
pub(crate) mod login_form;
pub(crate) mod settings_form;
pub(crate) mod user_forms;
