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

/// An optional field of a form posted to a server function whose fields are
/// a flattened struct, read as the function's own arguments are (serde_qs
/// reads an empty value as none; serde's flatten buffer would keep `""`).
pub(crate) fn empty_is_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(<Option<String> as serde::Deserialize>::deserialize(d)?.filter(|s| !s.is_empty()))
}
