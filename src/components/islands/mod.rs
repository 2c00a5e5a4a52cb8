//! The parts of the UI that hydrate: forms that submit through server
//! functions and show translated errors in place. Each one is also a plain
//! HTML form that works with JavaScript off.

pub mod cluster_forms;
pub mod cluster_live;
pub mod delete_form;
pub mod login_form;
pub mod settings_form;
pub mod user_forms;
