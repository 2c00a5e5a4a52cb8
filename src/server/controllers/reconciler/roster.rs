//! The clusters the observer works on, kept in memory and brought up to date
//! from what changed in the database (rows whose revision is past the last
//! one read, and tombstones of deleted rows: migration 12), so a pass with
//! nothing changed reads one counter and no cluster row. The whole table is
//! read again only when the observer lease was just taken (another replica
//! may have written anything) and on a long period ([`RELOAD`]), which heals
//! anything a bug let slip.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use sqlx::AnyPool;

use crate::domain::cluster::Cluster;
use crate::server::db::{DbError, clusters};

/// How often the whole table is read again without cause.
pub(crate) const RELOAD: Duration = Duration::from_secs(600);

#[derive(Default)]
pub(crate) struct Roster {
    clusters: BTreeMap<i64, Cluster>,
    by_name: HashMap<String, i64>,
    /// The revision read up to.
    revision: i64,
    loaded_at: Option<Instant>,
}

impl Roster {
    /// Brings the roster up to date; the ids whose rows changed (every id
    /// after a whole read). `reload`: read the whole table.
    pub(crate) async fn refresh(&mut self, pool: &AnyPool, reload: bool) -> Result<BTreeSet<i64>, DbError> {
        let due = self.loaded_at.is_none_or(|t| t.elapsed() >= RELOAD);
        if reload || due {
            // The counter first: what commits after it is the next refresh's.
            let revision = clusters::revision_now(pool).await?;
            let all = clusters::list(pool, None).await?;
            self.clusters = all.into_iter().map(|c| (c.id, c)).collect();
            self.by_name = self.clusters.values().map(|c| (c.spec.name.as_str().to_owned(), c.id)).collect();
            self.revision = revision;
            self.loaded_at = Some(Instant::now());
            return Ok(self.clusters.keys().copied().collect());
        }
        let changes = clusters::changed_since(pool, self.revision).await?;
        let mut changed = BTreeSet::new();
        for id in changes.deleted {
            self.remove(id);
            changed.insert(id);
        }
        for c in changes.clusters {
            changed.insert(c.id);
            self.remove(c.id);
            self.by_name.insert(c.spec.name.as_str().to_owned(), c.id);
            self.clusters.insert(c.id, c);
        }
        self.revision = changes.revision;
        Ok(changed)
    }

    fn remove(&mut self, id: i64) {
        if let Some(old) = self.clusters.remove(&id) {
            self.by_name.remove(old.spec.name.as_str());
        }
    }

    pub(crate) fn get(&self, id: i64) -> Option<&Cluster> {
        self.clusters.get(&id)
    }

    pub(crate) fn id_of(&self, name: &str) -> Option<i64> {
        self.by_name.get(name).copied()
    }

    pub(crate) fn ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.clusters.keys().copied()
    }

    pub(crate) fn len(&self) -> usize {
        self.clusters.len()
    }
}
