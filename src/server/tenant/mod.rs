//! A tenant's own cluster: what the console does inside a virtual cluster's
//! API server, where the tenant is cluster-admin and may make any answer
//! huge: its bounded reads ([`read`]), who may do what there ([`access`])
//! and users' certificates signed there ([`certificates`]). Services keep
//! who may ask, budgets, audit of users' acts and error mapping; workers
//! reach a tenant's cluster only through here. (Join tokens, nodes and
//! their drains and the `/node/join` fetch are still in `service::join` and
//! `service::join_script`.)

pub mod access;
pub mod certificates;
pub mod read;
