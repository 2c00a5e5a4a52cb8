//! How long the simulated node takes, so no test passes by the luck of ordering:
//! a vCluster pod's start (after install and after every values change, endpoint
//! refusing meanwhile), the certificate refresh after the SAN set changes, and the
//! kubelet's back-off before restarting a failed container. Pure.
//!
//! Upstream figures (see docs/testing.md for the sources): the vCluster pod needs
//! tens of seconds before its readiness probe passes; vCluster checks its
//! certificate every 2–4.5 s; the kubelet restarts a crashed container after
//! 10 s, doubling up to 5 min (`MaxContainerBackOff`, CrashLoopBackOff).

use std::str::FromStr;
use std::time::Duration;

/// A duration picked uniformly in `[min, max]` each time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub min: Duration,
    pub max: Duration,
}

impl Span {
    pub const fn fixed(d: Duration) -> Self {
        Self { min: d, max: d }
    }

    pub const fn millis(min: u64, max: u64) -> Self {
        Self { min: Duration::from_millis(min), max: Duration::from_millis(max) }
    }

    pub fn sample(&self) -> Duration {
        let (lo, hi) = (self.min.as_millis() as u64, self.max.as_millis() as u64);
        Duration::from_millis(fastrand::u64(lo.min(hi)..=hi.max(lo)))
    }
}

impl FromStr for Span {
    type Err = String;

    /// `2s-5s`, `300ms`, `1m`; `0` for none.
    fn from_str(s: &str) -> Result<Self, String> {
        let parse = |p: &str| {
            let p = p.trim();
            if p == "0" {
                return Ok(Duration::ZERO);
            }
            humantime::parse_duration(p).map_err(|e| format!("{p:?}: {e}"))
        };
        let (min, max) = match s.split_once('-') {
            Some((a, b)) => (parse(a)?, parse(b)?),
            None => {
                let d = parse(s)?;
                (d, d)
            }
        };
        if max < min {
            return Err(format!("{s:?}: the maximum is below the minimum"));
        }
        Ok(Self { min, max })
    }
}

/// Every delay the node adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Latency {
    /// From a release's install or values change to its endpoint answering.
    pub vcluster_start: Span,
    /// From the SAN set changing to the new certificate being served.
    pub cert_refresh: Span,
    /// The kubelet's first restart delay after a container failed; it doubles
    /// per failure, capped at 5 min (upstream: 10 s).
    pub restart_backoff: Duration,
}

impl Latency {
    /// Upstream-like figures, for `hostsim up` (`make run`).
    pub const UPSTREAM: Self = Self {
        // A vCluster pod on a k3s host: image pull, its API server and syncer
        // starting, the readiness probe passing (30-90 s in practice).
        vcluster_start: Span::millis(30_000, 90_000),
        cert_refresh: Span::millis(2_000, 4_500),
        restart_backoff: Duration::from_secs(10),
    };

    /// Short but non-zero, for test hosts: every step still happens after the
    /// step before it has been observed.
    pub const TEST: Self = Self {
        vcluster_start: Span::millis(500, 1_000),
        cert_refresh: Span::millis(300, 600),
        restart_backoff: Duration::from_millis(500),
    };

    /// The restart delay after `failures` failed runs (10 s, 20 s, 40 s … ≤ 5 min).
    pub fn retry_after(&self, failures: u32) -> Duration {
        let cap = Duration::from_secs(300);
        let factor = 1u32 << failures.saturating_sub(1).min(16);
        self.restart_backoff.saturating_mul(factor).min(cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_parse() {
        for (text, min, max) in
            [("2s-5s", 2_000, 5_000), ("300ms", 300, 300), ("0", 0, 0), ("1s - 1500ms", 1_000, 1_500)]
        {
            assert_eq!(text.parse(), Ok(Span::millis(min, max)), "{text}");
        }
        for bad in ["5s-2s", "soon", "1s-", ""] {
            assert!(bad.parse::<Span>().is_err(), "{bad}");
        }
    }

    #[test]
    fn samples_stay_in_their_span() {
        let span = Span::millis(10, 20);
        for _ in 0..200 {
            let d = span.sample();
            assert!(d >= span.min && d <= span.max, "{d:?}");
        }
    }

    #[test]
    fn restarts_back_off_doubling_up_to_five_minutes() {
        let l = Latency::UPSTREAM;
        let secs: Vec<u64> = (1..=8).map(|n| l.retry_after(n).as_secs()).collect();
        assert_eq!(secs, [10, 20, 40, 80, 160, 300, 300, 300]);
    }
}
