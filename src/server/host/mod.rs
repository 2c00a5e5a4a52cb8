//! The console's one handle on the host cluster ([`Host`]): the client, who
//! the console is there ([`Installation`]), what the host was seen as
//! ([`facts::Seen`]), `vc-<name>` as last read ([`secrets::Memo`]), the slots
//! requests make their host calls in ([`Slots`]), and the doorbell of the
//! loop that makes the host match what is stored ([`Changes`]).
//!
//! Requests (`service`, `http`, `actions`) and the background loops
//! (`controllers`) both take a `Host`; no request reaches into a loop. What
//! one loop keeps for itself between passes stays in that loop
//! (`controllers::reconciler::Context`).
//!
//! - [`objects`]: the kinds the console writes, its annotations, [`objects::Owner`];
//! - [`facts`]: the host's provider, route version, Gateway, StorageClasses;
//! - [`secrets`]: `vc-<name>` read, and its memo;
//! - [`virtual_cluster`]: clients of a cluster's own API server, the
//!   kubeconfig download, the probe run now;
//! - [`probe`], [`kubeconfig`]: the endpoint probe and the kubeconfig a user
//!   gets, pure but for the probe's connection;
//! - [`https`]: the one HTTPS client (the probe's and the join script's);
//! - [`error`]: what a host call's failure is and whether to try again.

pub mod call_budget;
pub mod error;
pub mod facts;
pub(crate) mod https;
pub(crate) mod kubeconfig;
pub(crate) mod objects;
pub mod probe;
pub(crate) mod secrets;
pub(crate) mod virtual_cluster;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kube::Client;
use kube::api::DynamicObject;
use sqlx::AnyPool;
use tokio::sync::{Notify, OnceCell, Semaphore};

use crate::domain::render::AddressRequest;
use crate::server::db;
use error::{Error, Result};
pub use facts::detect_address_request;
pub(crate) use virtual_cluster::InternalTarget;

/// The host as every part of the console reaches it.
pub struct Host {
    pub client: Client,
    /// Who the console is on the host.
    pub(crate) installation: Installation,
    /// How names are resolved and which addresses may be connected to
    /// (cluster DNS in production, fixed addresses in tests).
    pub resolver: probe::Resolver,
    /// Where requests make their host calls.
    pub(crate) slots: Slots,
    /// What the host was last seen as.
    pub(crate) seen: facts::Seen,
    /// `vc-<name>` per cluster, as last read.
    pub(crate) secrets: secrets::Memo,
    /// The reconciler's doorbell.
    pub(crate) changes: Changes,
    /// Clusters whose access bindings wait to be brought in step.
    pub(crate) access: AccessQueue,
    /// The watch caches' sizes, once they run.
    watched: OnceLock<Arc<dyn Watched>>,
    /// The host's own `kube-system` UID, read once: a virtual cluster's
    /// endpoint that shows the same one is the host's API server (a relay).
    kube_system: OnceCell<String>,
}

impl Host {
    /// The handle on the host `client` reaches, whose LoadBalancer provider
    /// was `detected`; `pool` holds the installation id.
    pub fn new(client: Client, pool: AnyPool, detected: AddressRequest) -> Self {
        Self {
            client,
            installation: Installation { pool, id: OnceCell::new() },
            resolver: probe::Resolver::default(),
            slots: Slots::default(),
            seen: facts::Seen::new(detected),
            secrets: secrets::Memo::default(),
            changes: Changes::default(),
            access: AccessQueue::default(),
            watched: OnceLock::new(),
            kube_system: OnceCell::new(),
        }
    }

    /// Runs host calls for a request: bounded in number and in time, so a
    /// host that does not answer ties up neither requests nor memory.
    pub(crate) async fn for_request<T>(&self, calls: impl Future<Output = Result<T>>) -> Result<T> {
        self.for_request_in(Calls::Users, calls).await
    }

    /// [`Self::for_request`] from pool `pool`.
    pub(crate) async fn for_request_in<T>(&self, pool: Calls, calls: impl Future<Output = Result<T>>) -> Result<T> {
        let semaphore = match pool {
            Calls::Users => &self.slots.users,
            Calls::Join => &self.slots.join,
        };
        let bounded = async {
            let _slot = semaphore.acquire().await.map_err(|_| Error::NotYet("shutting down"))?;
            calls.await
        };
        tokio::time::timeout(REQUEST_CALL_TIMEOUT, bounded)
            .await
            .unwrap_or(Err(Error::TimedOut("the host did not answer in time")))
    }

    /// This console's installation id, the label of what it creates on the host.
    pub async fn installation(&self) -> Result<&str> {
        self.installation.id().await
    }

    /// Each user's share of the request slots (`host::call_budget`).
    pub(crate) fn user_calls(&self) -> &call_budget::UserCalls {
        &self.slots.per_user
    }

    /// Wakes the reconciler (a change was stored).
    pub fn wake(&self) {
        self.changes.wake.notify_one();
    }

    /// Asks for a pass over every cluster (settings that affect rendering changed).
    pub fn resync_all(&self) {
        self.changes.everything.store(true, Ordering::Relaxed);
        self.wake();
    }

    /// Tells the watch caches' sizes to `/metrics` from now on.
    pub(crate) fn watching(&self, watched: Arc<dyn Watched>) {
        let _ = self.watched.set(watched);
    }

    /// Objects and bytes kept per watch cache (empty until the watches listed once).
    pub fn cache_sizes(&self) -> Vec<(&'static str, usize, usize)> {
        self.watched.get().map(|w| w.sizes()).unwrap_or_default()
    }
}

/// What the watch caches tell of themselves.
pub(crate) trait Watched: Send + Sync {
    /// Objects and bytes kept per watch.
    fn sizes(&self) -> Vec<(&'static str, usize, usize)>;
}

/// The host cluster's client: `KUBECONFIG` (or `~/.kube/config`), else the
/// in-cluster service account.
pub async fn connect() -> std::result::Result<Client, String> {
    let config = kube::Config::infer().await.map_err(|e| e.to_string())?;
    Client::try_from(config).map_err(|e| e.to_string())
}

/// Who the console is on the host: its installation id (the label of what it
/// creates, read from the database once).
pub(crate) struct Installation {
    pool: AnyPool,
    id: OnceCell<String>,
}

impl Installation {
    /// This console's installation id.
    pub(crate) async fn id(&self) -> Result<&str> {
        let id = self.id.get_or_try_init(|| db::shared::installation_id(&self.pool)).await?;
        Ok(id.as_str())
    }

    /// Who the console is on the host for one cluster, with what the
    /// database remembers of the cluster's objects.
    pub(crate) async fn owner(&self, cluster_id: i64) -> Result<objects::Owner> {
        let record = db::clusters::host_record(&self.pool, cluster_id).await?;
        self.owner_by(cluster_id, record).await
    }

    /// The console as an object's labels name it (nothing stored is consulted):
    /// with `adopt_legacy`, the labels of before the installation id count too.
    pub(crate) async fn label_owner(&self, cluster_id: i64, adopt_legacy: bool) -> Result<objects::Owner> {
        self.owner_by(cluster_id, db::clusters::HostRecord { namespace_uid: None, adopt_legacy }).await
    }

    /// The console as `record` says it made cluster `cluster_id`'s objects.
    async fn owner_by(&self, cluster_id: i64, record: db::clusters::HostRecord) -> Result<objects::Owner> {
        Ok(objects::Owner { installation: self.id().await?.to_owned(), cluster_id, record })
    }

    /// Whether a HelmChart read from the host is this cluster's, made by this
    /// console: what is read from any other is never shown or probed.
    pub(crate) async fn chart_is_ours(&self, cluster_id: i64, chart: Option<&DynamicObject>) -> Result<bool> {
        let Some(chart) = chart else { return Ok(false) };
        Ok(self.label_owner(cluster_id, false).await?.created(&chart.metadata))
    }
}

/// Host calls on signed-in users' request paths at once, per process.
pub(crate) const REQUEST_CALLS: usize = 16;
/// Host calls for the anonymous join script at once, per process.
pub(crate) const JOIN_CALLS: usize = 8;
/// How long a request waits for the host (a slot and the calls together).
pub(crate) const REQUEST_CALL_TIMEOUT: Duration = Duration::from_secs(25);

/// Host calls made for requests (kubeconfig download, probe now, a virtual
/// cluster's credentials): at most [`REQUEST_CALLS`] at once for signed-in
/// users, each user within their own share, and a pool of its own
/// ([`JOIN_CALLS`]) for the anonymous join script.
pub(crate) struct Slots {
    users: Semaphore,
    join: Semaphore,
    per_user: call_budget::UserCalls,
}

impl Default for Slots {
    fn default() -> Self {
        Self { users: Semaphore::new(REQUEST_CALLS), join: Semaphore::new(JOIN_CALLS), per_user: Default::default() }
    }
}

/// Whose request pool a host call is made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Calls {
    /// Signed-in users (each also within `host::call_budget`).
    Users,
    /// The anonymous join script.
    Join,
}

/// The console's handle on the host, as requests and loops hold it.
pub(crate) type HostHandle = Arc<Host>;

/// Clusters whose access bindings wait to be brought in step in the
/// background (a change that touched several: `service::credentials::resync`),
/// and the doorbell of the loop that works them (`controllers::access_sync`).
#[derive(Default)]
pub(crate) struct AccessQueue {
    pending: std::sync::Mutex<std::collections::BTreeSet<i64>>,
    pub(crate) wake: Notify,
}

impl AccessQueue {
    /// Queues `clusters` (each once, however often asked) and rings.
    pub(crate) fn push(&self, clusters: &[i64]) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.extend(clusters);
        }
        self.wake.notify_one();
    }

    /// The next cluster waiting, taken off the queue.
    pub(crate) fn pop(&self) -> Option<i64> {
        self.pending.lock().ok()?.pop_first()
    }
}

/// The reconciler's doorbell: rung when a change was stored, and whether
/// the next pass should look at every cluster.
#[derive(Default)]
pub(crate) struct Changes {
    pub(crate) wake: Arc<Notify>,
    everything: AtomicBool,
}

impl Changes {
    /// Whether a pass over every cluster was asked for since the last call.
    pub(crate) fn take_everything(&self) -> bool {
        self.everything.swap(false, Ordering::Relaxed)
    }
}
