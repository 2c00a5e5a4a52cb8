//! Spec writes (create, edit, delete of clusters) per user: a token bucket
//! of [`BURST`] writes refilled one every [`INTERVAL_MS`], in memory, per
//! console process (each replica counts its own). A write past it is refused
//! with `rate_limited` (429, `Retry-After`), so one user cannot flood the
//! queue the reconciler serves everyone from. Only writes that passed
//! validation count: a typo costs nothing. `KUBEBYON_SPEC_WRITE_LIMIT=off`
//! turns it off (load tests and benchmarks).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::domain::token_bucket::{Bucket, take};
use crate::domain::{AppError, ErrorCode};

/// Writes one user may make at once.
pub(crate) const BURST: u32 = 20;
/// One more write every 3 s (20 a minute, sustained).
pub(crate) const INTERVAL_MS: i64 = 3_000;
/// What `Retry-After` says: when the next write is allowed, at most.
pub(crate) const RETRY_AFTER_SECS: u64 = (INTERVAL_MS as u64).div_ceil(1000);

/// The limiter of one console process. `Default` is off (every write passes).
#[derive(Debug, Default)]
pub struct SpecWriteLimiter {
    on: bool,
    buckets: Mutex<HashMap<i64, Bucket>>,
}

impl SpecWriteLimiter {
    pub fn new(on: bool) -> Self {
        Self { on, buckets: Mutex::default() }
    }

    /// One write of `user`, or `rate_limited`. The table holds one entry per
    /// user who wrote (users are accounts, not anonymous: bounded by them).
    pub(crate) fn take(&self, user: i64) -> Result<(), AppError> {
        if !self.on {
            return Ok(());
        }
        let now = crate::server::db::now_ms();
        let mut buckets = self.buckets.lock().map_err(|_| AppError::new(ErrorCode::Internal))?;
        match take(buckets.get(&user).copied(), now, BURST, INTERVAL_MS) {
            Some(b) => {
                buckets.insert(user, b);
                Ok(())
            }
            None => {
                tracing::warn!(user, "spec writes rate-limited");
                Err(AppError::new(ErrorCode::RateLimited))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_one_per_interval() {
        let mut bucket = None;
        let taken = (0..25).filter(|_| take(bucket, 0, BURST, INTERVAL_MS).inspect(|b| bucket = Some(*b)).is_some());
        assert_eq!(taken.count(), BURST as usize);
        assert!(take(bucket, INTERVAL_MS - 1, BURST, INTERVAL_MS).is_none());
        assert!(take(bucket, INTERVAL_MS, BURST, INTERVAL_MS).is_some());
        let limiter = SpecWriteLimiter::new(false);
        assert!((0..1_000).all(|_| limiter.take(1).is_ok()), "off: never refused");
    }
}
