//! Server functions (`/fn/...`): what pages and island forms call. Each is
//! thin — find the user, hand raw input to a service, redirect on success —
//! and works as a plain HTML form post with JavaScript off.

pub mod audit;
pub mod auth;
pub mod clusters;
pub mod moves;
pub mod settings;
pub mod users;

/// The URL prefix of every server function.
pub const PREFIX: &str = "/fn";
