//! Server functions (`/fn/...`): what pages and island forms call. Each is
//! thin — find the user, hand raw input to a service, redirect on success —
//! and works as a plain HTML form post with JavaScript off.

pub(crate) mod audit;
pub(crate) mod auth;
pub(crate) mod clusters;
pub(crate) mod join;
pub(crate) mod members;
pub(crate) mod moves;
pub(crate) mod settings;
pub(crate) mod users;
