//! HTTP glue: the axum router, the request guard (sessions, same-origin
//! writes, sign-in redirects), the JSON API and the language switch.

pub mod api;
pub mod guard;
pub mod lang;
pub mod router;
pub mod serve;
pub mod telemetry;
