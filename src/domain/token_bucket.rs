//! A token bucket (pure): a user's spec writes (`service::write_limit`) and
//! on-demand host calls (`host::call_budget`) are limited by it.

/// One user's bucket: tokens left, and when it was last refilled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    pub tokens: u32,
    pub at_ms: i64,
}

/// Pure rule: the bucket after taking one more at `now_ms`, or `None` when
/// none is left. Whole intervals since `at_ms` add one token each, up to `burst`.
pub fn take(bucket: Option<Bucket>, now_ms: i64, burst: u32, interval_ms: i64) -> Option<Bucket> {
    let b = bucket.unwrap_or(Bucket { tokens: burst, at_ms: now_ms });
    let intervals = (now_ms - b.at_ms).max(0) / interval_ms;
    let refilled = u32::try_from(intervals).unwrap_or(u32::MAX).saturating_add(b.tokens).min(burst);
    // Keep the remainder of a partial interval: refill time advances by whole intervals only.
    let at_ms = if refilled == burst { now_ms } else { b.at_ms + intervals * interval_ms };
    (refilled > 0).then(|| Bucket { tokens: refilled - 1, at_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_table() {
        let b = |tokens, at_ms| Some(Bucket { tokens, at_ms });
        for (before, now, want) in [
            // A first write: a full bucket less one.
            (None, 1_000, b(2, 1_000)),
            (b(2, 0), 0, b(1, 0)),
            // Empty, and not a whole interval later: refused.
            (b(0, 0), 999, None),
            // One interval later: one token, used at once; the refill time advances by the interval.
            (b(0, 0), 1_500, b(0, 1_000)),
            // Long idle: full again, never beyond the burst.
            (b(0, 0), 1_000_000, b(2, 1_000_000)),
            // A clock that went back refills nothing.
            (b(1, 5_000), 4_000, b(0, 5_000)),
        ] {
            assert_eq!(take(before, now, 3, 1_000), want, "{before:?} at {now}");
        }
    }
}
