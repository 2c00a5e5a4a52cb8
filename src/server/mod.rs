//! Server-only code (compiled with the `ssr` feature): storage, accounts, the
//! request services shared by server functions and the JSON API, HTTP glue.

pub mod auth;
pub mod cli;
pub mod config;
pub(crate) mod context;
pub mod controllers;
pub mod db;
pub mod host;
pub mod http;
pub(crate) mod metrics;
pub mod push;
pub mod service;
pub mod state;
pub mod tenant;
pub mod testing;
