//! Pages updated by push: `GET /events/clusters/{id}` and
//! `GET /events/clusters` are server-sent event streams carrying a version
//! — a cluster's revision (migration 12), or the newest revision among the
//! clusters a list shows — and nothing else. A page compares it with the
//! version it was rendered at and fetches its region only when it changed
//! (`components::islands::live_region`).
//!
//! One task per process ([`Hub::watch_database`], started by
//! `controllers::start`) reads what changed since
//! the last revision it saw, every [`POLL`] while anyone listens: one read
//! of the counter when nothing changed, whichever replica wrote. It sends
//! each change to the streams that asked for that cluster or that list on
//! `tokio::sync::watch` channels, which keep only the newest version: a
//! slow client skips versions, it never queues them.
//!
//! Streams are bounded per user and in total ([`Limits`]); past a bound the
//! stream says so in one `bound` event and ends, and the page polls instead.
//! A stream ends after [`Limits::lifetime`] (the browser reconnects), and
//! carries a comment every [`Limits::heartbeat`] so proxies and the browser
//! know it is alive. At each heartbeat who may follow is read again (one
//! user row, and the cluster's for a cluster's stream: 1,000 open pages are
//! ~67 reads a second at the 15 s default); a stream its user may no longer
//! follow ends then.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use sqlx::AnyPool;
use tokio::sync::watch;

use crate::server::db::{self, DbError};

/// How often the database is asked what changed while streams are open.
pub(crate) const POLL: Duration = Duration::from_millis(200);

/// What a stream follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Topic {
    Cluster(i64),
    /// A user's list: their own clusters and those shared with them.
    User(i64),
    /// Every cluster (an admin's list).
    All,
}

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub per_user: usize,
    pub total: usize,
    pub heartbeat: Duration,
    pub lifetime: Duration,
}

impl Limits {
    pub const DEFAULT: Self =
        Self { per_user: 128, total: 2048, heartbeat: Duration::from_secs(15), lifetime: Duration::from_secs(600) };
}

pub struct Hub {
    pool: AnyPool,
    limits: Limits,
    topics: Mutex<HashMap<Topic, watch::Sender<i64>>>,
    open: AtomicUsize,
    per_user: Mutex<HashMap<i64, usize>>,
    /// The revision the poller has read up to; `None` while nobody listens.
    cursor: tokio::sync::Mutex<Option<i64>>,
}

/// An open stream's place in the bounds, given back when it ends.
struct Slot {
    hub: Arc<Hub>,
    user: i64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.hub.open.fetch_sub(1, Ordering::Relaxed);
        if let Ok(mut m) = self.hub.per_user.lock()
            && let Some(n) = m.get_mut(&self.user)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&self.user);
            }
        }
    }
}

/// Why a stream was not opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    PerUser(usize),
    Total(usize),
}

impl Hub {
    pub fn new(pool: AnyPool, limits: Limits) -> Arc<Self> {
        Arc::new(Self {
            pool,
            limits,
            topics: Mutex::default(),
            open: AtomicUsize::new(0),
            per_user: Mutex::default(),
            cursor: tokio::sync::Mutex::new(None),
        })
    }

    /// Streams open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    fn take_slot(self: &Arc<Self>, user: i64) -> Result<Slot, Refused> {
        let mut per_user = self.per_user.lock().map_err(|_| Refused::Total(self.limits.total))?;
        let mine = per_user.get(&user).copied().unwrap_or(0);
        if mine >= self.limits.per_user {
            return Err(Refused::PerUser(self.limits.per_user));
        }
        if self.open.fetch_add(1, Ordering::Relaxed) >= self.limits.total {
            self.open.fetch_sub(1, Ordering::Relaxed);
            return Err(Refused::Total(self.limits.total));
        }
        per_user.insert(user, mine + 1);
        Ok(Slot { hub: self.clone(), user })
    }

    fn subscribe(&self, topic: Topic, current: i64) -> watch::Receiver<i64> {
        let mut topics = self.topics.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let tx = topics.entry(topic).or_insert_with(|| watch::Sender::new(current));
        // Never backwards: a version read before a change the poller already sent.
        raise(tx, current);
        tx.subscribe()
    }

    /// Tells the streams of each topic a change touched; forgets topics no
    /// one follows any more.
    fn publish(&self, touched: &[(i64, i64, i64)]) {
        let Ok(mut topics) = self.topics.lock() else { return };
        topics.retain(|_, tx| tx.receiver_count() > 0);
        for &(id, owner, revision) in touched {
            for topic in [Topic::Cluster(id), Topic::User(owner), Topic::All] {
                if let Some(tx) = topics.get(&topic) {
                    raise(tx, revision);
                }
            }
        }
    }

    /// Reads what changed, every [`POLL`] while any stream is open (run by
    /// `controllers::start`, supervised).
    pub async fn watch_database(self: Arc<Self>) {
        loop {
            tokio::time::sleep(POLL).await;
            let mut cursor = self.cursor.lock().await;
            if self.open() == 0 {
                // Nobody listens: start from the present when someone does.
                *cursor = None;
                continue;
            }
            let read = async {
                let after = match *cursor {
                    Some(c) => c,
                    None => db::clusters::revision_now(&self.pool).await?,
                };
                db::clusters::touched_since(&self.pool, after).await
            };
            match read.await {
                Ok((touched, upto)) => {
                    if !touched.is_empty() {
                        self.publish(&touched);
                    }
                    *cursor = Some(upto);
                }
                Err(e) => tracing::warn!(error = %e, "live updates: reading what changed failed; retrying"),
            }
        }
    }

    /// Opens a stream of `topic`'s versions for `user` (who may follow it:
    /// the caller checked), starting with the version it is at now; past a
    /// bound, a stream of one `bound` event.
    ///
    /// `allowed` is asked again every heartbeat while the stream is open; the
    /// stream ends once it says no (a demoted admin's list of every cluster,
    /// a cluster no longer the user's), not only at its lifetime's end.
    pub(crate) async fn follow<F, Fut>(
        self: &Arc<Self>,
        user: i64,
        topic: Topic,
        allowed: F,
    ) -> Result<Sse<impl Stream<Item = Result<Event, std::convert::Infallible>> + use<F, Fut>>, DbError>
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = bool> + Send + 'static,
    {
        let opened = match self.take_slot(user) {
            Err(refused) => Err(refused),
            Ok(slot) => {
                // The poller's starting point before the version is read: a
                // change after it is announced, one before is in the version.
                {
                    let mut cursor = self.cursor.lock().await;
                    if cursor.is_none() {
                        *cursor = Some(db::clusters::revision_now(&self.pool).await?);
                    }
                }
                let version = current(&self.pool, topic).await?;
                Ok((slot, self.subscribe(topic, version)))
            }
        };
        Ok(self.stream(opened, allowed))
    }

    /// The stream of versions of what was opened, or the one `bound` event.
    fn stream<F, Fut>(
        &self,
        opened: Result<(Slot, watch::Receiver<i64>), Refused>,
        mut allowed: F,
    ) -> Sse<impl Stream<Item = Result<Event, std::convert::Infallible>> + use<F, Fut>>
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = bool> + Send + 'static,
    {
        let limits = self.limits;
        let stream = futures::stream::unfold(Some((opened, true)), move |state| async move {
            let (opened, first) = state?;
            match opened {
                Err(refused) => {
                    let (scope, limit) = match refused {
                        Refused::PerUser(n) => ("user", n),
                        Refused::Total(n) => ("total", n),
                    };
                    let data = serde_json::json!({"code": "live_bound", "scope": scope, "limit": limit}).to_string();
                    let event = Event::default().event("bound").retry(Duration::from_secs(300)).data(data);
                    Some((Ok(event), None))
                }
                Ok((slot, mut rx)) => {
                    if !first && rx.changed().await.is_err() {
                        return None;
                    }
                    let version = *rx.borrow_and_update();
                    let event = Event::default().event("version").data(version.to_string());
                    Some((Ok(event), Some((Ok((slot, rx)), false))))
                }
            }
        });
        let revoked = async move {
            loop {
                tokio::time::sleep(limits.heartbeat).await;
                if !allowed().await {
                    break;
                }
            }
        };
        let ends = futures::future::select(Box::pin(tokio::time::sleep(limits.lifetime)), Box::pin(revoked));
        let stream = futures::StreamExt::take_until(stream, ends);
        Sse::new(stream).keep_alive(KeepAlive::new().interval(limits.heartbeat))
    }
}

/// Moves a topic to `version` if that is newer (streams wake only then).
fn raise(tx: &watch::Sender<i64>, version: i64) {
    tx.send_if_modified(|v| {
        let newer = version > *v;
        if newer {
            *v = version;
        }
        newer
    });
}

/// The version a topic is at now.
pub(crate) async fn current(pool: &AnyPool, topic: Topic) -> Result<i64, DbError> {
    match topic {
        Topic::Cluster(id) => Ok(db::clusters::revision_of(pool, id).await?.unwrap_or(0)),
        Topic::User(owner) => db::clusters::list_revision(pool, Some(owner)).await,
        Topic::All => db::clusters::list_revision(pool, None).await,
    }
}
