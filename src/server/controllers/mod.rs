//! Background work, in one place: what runs without a request.
//!
//! - [`reconciler`]: brings the host cluster to the stored specs and writes
//!   back what it observes. Every replica works the operation queue (each
//!   operation claimed with a lease, `KUBEBYON_CLAIM_LEASE_SECS`); one replica
//!   at a time holds the observer lease (`KUBEBYON_LEADER_LEASE_SECS`) and
//!   observes, probes and repairs drift.
//! - [`move_driver`]: moves the clusters of running moves from NodePort
//!   to LoadBalancer. No lease: each of its steps is a compare-and-set in the
//!   database, so replicas driving at once cannot repeat one.
//! - [`node_removal`]: removes joined nodes as `vcluster node delete` does
//!   (cordon, evict, wait, delete), one idempotent step per pass; no lease.
//! - [`supervise`]: restarts a background task that panicked, and reports it.
//!
//! Request handlers never call these; they store a change and wake the
//! reconciler (`service::wake`).

pub mod move_driver;
pub mod node_removal;
pub mod reconciler;
pub mod supervise;
