//! HTTP glue: the axum router, the request guard (sessions, same-origin
//! writes, sign-in redirects), the JSON API and the language switch.

pub(crate) mod api;
pub(crate) mod guard;
pub(crate) mod lang;
pub(crate) mod live;
pub(crate) mod request;
pub mod router;
pub mod serve;
pub(crate) mod telemetry;
