//! Reusable UI pieces. Files under `islands/` hydrate in the browser; the rest
//! render on the server only (and inside islands where they are used).

pub(crate) mod cluster_fields;
pub(crate) mod cluster_overview;
pub(crate) mod error_text;
pub(crate) mod field;
pub(crate) mod hydration;
pub(crate) mod island_form;
pub(crate) mod islands;
pub(crate) mod labels;
pub(crate) mod layout;
pub(crate) mod members;
pub(crate) mod planned_names;
pub(crate) mod public_access_fields;
pub(crate) mod quota;
pub(crate) mod settings_form;
