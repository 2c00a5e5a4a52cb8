//! Reusable UI pieces. Files under `islands/` hydrate in the browser; the rest
//! render on the server only (and inside islands where they are used).

pub mod cluster_overview;
pub mod error_text;
pub mod field;
pub mod hydration;
pub mod island_form;
pub mod islands;
pub mod labels;
pub mod layout;
pub mod planned_names;
pub mod public_access_fields;
pub mod quota;
