//! The one back-off rule of the background work: a wait that doubles with
//! each failure in a row, up to a cap. Its users pick the base and the cap
//! (a restarted worker, a probe that keeps failing, a host call retried with
//! jitter by the reconciler).

use std::time::Duration;

/// The wait before try `n` in a row (from 1; 0 counts as 1): `base·2^(n−1)`,
/// at most `cap`.
pub(crate) fn backoff(base: Duration, n: u32, cap: Duration) -> Duration {
    base.saturating_mul(1u32 << n.saturating_sub(1).min(24)).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_up_to_the_cap() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        for (base, n, cap, want) in [
            (s(1), 0, s(30), s(1)),
            (s(1), 1, s(30), s(1)),
            (s(1), 2, s(30), s(2)),
            (s(1), 5, s(30), s(16)),
            (s(1), 6, s(30), s(30)),
            (s(1), u32::MAX, s(30), s(30)),
            (ms(10), 12, s(300), ms(20_480)),
            (s(2), 12, s(300), s(300)),
        ] {
            assert_eq!(backoff(base, n, cap), want, "{base:?} {n} {cap:?}");
        }
    }
}
