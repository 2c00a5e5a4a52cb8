//! Per-user quotas: how many clusters a user may own and how much CPU,
//! memory and storage they may ask for in all. The admin sets platform
//! defaults and per-user overrides; admins themselves are not limited.
//!
//! The check is pure ([`Quota::refuses`]); the database applies it inside the
//! write's transaction, after locking the owner's row, so two concurrent
//! creates cannot both pass (docs/architecture.md, "Quotas").

use serde::{Deserialize, Serialize};

use super::resources::{CPU_MILLIS, MEMORY_GIB, STORAGE_GIB};
use super::{AppError, ErrorCode, Field, Resources};

/// Limits; `None` is no limit on that dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quota {
    pub clusters: Option<u32>,
    pub cpu_millis: Option<u64>,
    pub memory_gib: Option<u64>,
    pub storage_gib: Option<u64>,
}

impl Default for Quota {
    /// The platform default until an admin changes it: 5 clusters, 16 CPU,
    /// 64 GiB memory, 500 GiB storage.
    fn default() -> Self {
        Self { clusters: Some(5), cpu_millis: Some(16_000), memory_gib: Some(64), storage_gib: Some(500) }
    }
}

/// What one user's clusters (not being deleted) hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub clusters: u32,
    pub cpu_millis: u64,
    pub memory_gib: u64,
    pub storage_gib: u64,
}

impl Usage {
    /// This usage with one more cluster of `r` (`new`), or with a cluster's
    /// resources changed from `from` to `r`.
    pub(crate) fn with(self, from: Option<Resources>, r: Resources) -> Self {
        let old = from.unwrap_or(Resources { cpu_millis: 0, memory_gib: 0, storage_gib: 0 });
        Self {
            clusters: self.clusters + u32::from(from.is_none()),
            cpu_millis: (self.cpu_millis + u64::from(r.cpu_millis)).saturating_sub(u64::from(old.cpu_millis)),
            memory_gib: (self.memory_gib + u64::from(r.memory_gib)).saturating_sub(u64::from(old.memory_gib)),
            storage_gib: (self.storage_gib + u64::from(r.storage_gib)).saturating_sub(u64::from(old.storage_gib)),
        }
    }
}

/// One dimension of a quota, in the order the check reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::VariantArray)]
pub enum Dimension {
    Clusters,
    Cpu,
    Memory,
    Storage,
}

impl Dimension {
    /// The refusal users read: names the limit (the field it belongs to).
    pub(crate) fn error(self) -> AppError {
        match self {
            Self::Clusters => AppError::new(ErrorCode::QuotaClustersExceeded),
            Self::Cpu => AppError::at(ErrorCode::QuotaExceeded, Field::Cpu),
            Self::Memory => AppError::at(ErrorCode::QuotaExceeded, Field::Memory),
            Self::Storage => AppError::at(ErrorCode::QuotaExceeded, Field::Storage),
        }
    }

    fn of_usage(self, u: &Usage) -> u64 {
        match self {
            Self::Clusters => u64::from(u.clusters),
            Self::Cpu => u.cpu_millis,
            Self::Memory => u.memory_gib,
            Self::Storage => u.storage_gib,
        }
    }

    fn of_quota(self, q: &Quota) -> Option<u64> {
        match self {
            Self::Clusters => q.clusters.map(u64::from),
            Self::Cpu => q.cpu_millis,
            Self::Memory => q.memory_gib,
            Self::Storage => q.storage_gib,
        }
    }
}

impl Quota {
    pub const UNLIMITED: Quota = Quota { clusters: None, cpu_millis: None, memory_gib: None, storage_gib: None };

    /// The first dimension a change from `before` to `after` takes over its
    /// limit. Only growth is refused: a user already over a lowered limit may
    /// still shrink a cluster, delete one, or change what is not counted.
    pub(crate) fn refuses(&self, before: &Usage, after: &Usage) -> Option<Dimension> {
        <Dimension as strum::VariantArray>::VARIANTS.iter().copied().find(|d| {
            let (was, will) = (d.of_usage(before), d.of_usage(after));
            will > was && d.of_quota(self).is_some_and(|limit| will > limit)
        })
    }

    /// A user's limits: each of the override's dimensions where set, else the platform's.
    pub(crate) fn effective(platform: &Quota, user: &Quota) -> Quota {
        Quota {
            clusters: user.clusters.or(platform.clusters),
            cpu_millis: user.cpu_millis.or(platform.cpu_millis),
            memory_gib: user.memory_gib.or(platform.memory_gib),
            storage_gib: user.storage_gib.or(platform.storage_gib),
        }
    }

    /// Form text: a cluster count, CPU in cores (`16`, `0.5`), memory and
    /// storage in GiB; an empty field is `None` (no limit for the platform, the
    /// platform's limit for a user).
    pub(crate) fn parse(input: &QuotaInput<'_>) -> Result<Quota, AppError> {
        Ok(Quota {
            clusters: parse_clusters(input.clusters)?,
            cpu_millis: parse_cpu(input.cpu)?,
            memory_gib: parse_gib(input.memory_gib, Dimension::Memory)?,
            storage_gib: parse_gib(input.storage_gib, Dimension::Storage)?,
        })
    }

    /// A quota given as numbers (the JSON API), within the limits
    /// [`Quota::parse`] applies to text.
    pub(crate) fn checked(self) -> Result<Quota, AppError> {
        let within = |value: Option<u64>, d: Dimension| match value {
            Some(n) if n > d.max() => Err(d.invalid()),
            _ => Ok(()),
        };
        within(self.clusters.map(u64::from), Dimension::Clusters)?;
        within(self.cpu_millis, Dimension::Cpu)?;
        within(self.memory_gib, Dimension::Memory)?;
        within(self.storage_gib, Dimension::Storage)?;
        Ok(self)
    }

    /// CPU as the form shows it (cores), empty when unlimited.
    pub(crate) fn cpu_text(&self) -> String {
        self.cpu_millis.map(cores).unwrap_or_default()
    }
}

/// Ten thousand of the largest cluster is far beyond any host; it keeps sums in range.
const MAX_CLUSTERS: u64 = 10_000;
/// The most cores text may name (five digits before the point).
const MAX_CPU_TEXT_MILLIS: u64 = 99_999_999;

impl Dimension {
    /// The largest limit a quota may set on this dimension.
    fn max(self) -> u64 {
        match self {
            Self::Clusters => MAX_CLUSTERS,
            Self::Cpu => (MAX_CLUSTERS * u64::from(CPU_MILLIS.1)).min(MAX_CPU_TEXT_MILLIS),
            Self::Memory => MAX_CLUSTERS * u64::from(MEMORY_GIB.1),
            Self::Storage => MAX_CLUSTERS * u64::from(STORAGE_GIB.1),
        }
    }

    /// The refusal of a limit that is not one, on the quota field it names.
    fn invalid(self) -> AppError {
        let field = match self {
            Self::Clusters => Field::QuotaClusters,
            Self::Cpu => Field::QuotaCpu,
            Self::Memory => Field::QuotaMemory,
            Self::Storage => Field::QuotaStorage,
        };
        AppError::at(ErrorCode::QuotaInvalid, field)
    }
}

/// A cluster count as the form writes it; empty: no limit.
pub(crate) fn parse_clusters(text: &str) -> Result<Option<u32>, AppError> {
    parse_gib(text, Dimension::Clusters)?
        .map(|n| u32::try_from(n).map_err(|_| Dimension::Clusters.invalid()))
        .transpose()
}

/// CPU in cores as the form writes it (`16`, `0.5`); empty: no limit.
pub(crate) fn parse_cpu(text: &str) -> Result<Option<u64>, AppError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    super::resources::parse_cores(text)
        .map(u64::from)
        .filter(|m| *m <= Dimension::Cpu.max())
        .map(Some)
        .ok_or(Dimension::Cpu.invalid())
}

/// Memory or storage in GiB (or a cluster count) as the form writes it;
/// empty: no limit.
pub(crate) fn parse_gib(text: &str, d: Dimension) -> Result<Option<u64>, AppError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    text.trim().parse::<u64>().ok().filter(|n| *n <= d.max()).map(Some).ok_or(d.invalid())
}

/// Millicores as cores, as users write them (`1.5`).
pub(crate) fn cores(millis: u64) -> String {
    let (whole, frac) = (millis / 1000, millis % 1000);
    if frac == 0 { whole.to_string() } else { format!("{whole}.{frac:03}").trim_end_matches('0').to_owned() }
}

/// Submitted quota text, before validation.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct QuotaInput<'a> {
    pub clusters: &'a str,
    pub cpu: &'a str,
    pub memory_gib: &'a str,
    pub storage_gib: &'a str,
}

/// A quota as form text (what [`Quota::parse`] reads back to the same quota).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct QuotaText {
    pub clusters: String,
    pub cpu: String,
    pub memory_gib: String,
    pub storage_gib: String,
}

impl QuotaText {
    pub(crate) fn of(q: &Quota) -> Self {
        let text = |v: Option<u64>| v.map(|n| n.to_string()).unwrap_or_default();
        Self {
            clusters: text(q.clusters.map(u64::from)),
            cpu: q.cpu_text(),
            memory_gib: text(q.memory_gib),
            storage_gib: text(q.storage_gib),
        }
    }

    #[cfg(test)]
    pub(crate) fn as_input(&self) -> QuotaInput<'_> {
        QuotaInput {
            clusters: &self.clusters,
            cpu: &self.cpu,
            memory_gib: &self.memory_gib,
            storage_gib: &self.storage_gib,
        }
    }
}

/// What the create form shows: what the user holds and may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct QuotaView {
    pub used: Usage,
    /// `None` for admins (not limited).
    pub limit: Option<Quota>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(clusters: u32, cpu: u64, mem: u64, storage: u64) -> Usage {
        Usage { clusters, cpu_millis: cpu, memory_gib: mem, storage_gib: storage }
    }

    fn res(cpu: u32, mem: u32, storage: u32) -> Resources {
        Resources { cpu_millis: cpu, memory_gib: mem, storage_gib: storage }
    }

    #[test]
    fn refusal_table() {
        let q = Quota { clusters: Some(2), cpu_millis: Some(4_000), memory_gib: Some(8), storage_gib: Some(40) };
        for (before, change, want) in [
            // A new cluster that fits.
            (usage(1, 2_000, 4, 20), (None, res(2_000, 4, 20)), None),
            // The count is checked first.
            (usage(2, 0, 0, 0), (None, res(100, 1, 1)), Some(Dimension::Clusters)),
            (usage(1, 3_000, 4, 20), (None, res(2_000, 1, 1)), Some(Dimension::Cpu)),
            (usage(1, 1_000, 7, 20), (None, res(1_000, 2, 1)), Some(Dimension::Memory)),
            (usage(1, 1_000, 1, 39), (None, res(1_000, 1, 2)), Some(Dimension::Storage)),
            // Growing an existing cluster past the CPU limit.
            (usage(2, 4_000, 8, 40), (Some(res(2_000, 4, 20)), res(2_500, 4, 20)), Some(Dimension::Cpu)),
            // Over a lowered limit already: shrinking or keeping passes.
            (usage(3, 9_000, 20, 80), (Some(res(4_000, 8, 40)), res(2_000, 8, 40)), None),
            (usage(3, 9_000, 20, 80), (Some(res(4_000, 8, 40)), res(4_000, 8, 40)), None),
            // Exactly at the limit is allowed.
            (usage(1, 2_000, 4, 20), (None, res(2_000, 4, 20)), None),
        ] {
            let after = before.with(change.0, change.1);
            assert_eq!(q.refuses(&before, &after), want, "{before:?} {change:?}");
        }
        assert_eq!(Quota::UNLIMITED.refuses(&usage(0, 0, 0, 0), &usage(999, 1 << 40, 1 << 40, 1 << 40)), None);
    }

    #[test]
    fn effective_takes_the_override_where_set() {
        let platform = Quota::default();
        let user = Quota { clusters: Some(20), ..Quota::UNLIMITED };
        let got = Quota::effective(&platform, &user);
        assert_eq!(got.clusters, Some(20));
        assert_eq!(got.cpu_millis, platform.cpu_millis);
        assert_eq!(Quota::effective(&platform, &Quota::UNLIMITED), platform);
    }

    #[test]
    fn parse_table() {
        let input = |c, cpu, m, s| QuotaInput { clusters: c, cpu, memory_gib: m, storage_gib: s };
        assert_eq!(Quota::parse(&input("", "", "", "")), Ok(Quota::UNLIMITED));
        assert_eq!(
            Quota::parse(&input(" 5 ", "16", "64", "500")),
            Ok(Quota::default()),
            "the default round-trips through its own text"
        );
        assert_eq!(Quota::parse(&input("0", "0.5", "1", "1")).map(|q| q.cpu_millis), Ok(Some(500)));
        for (bad, field) in [
            (input("-1", "", "", ""), Field::QuotaClusters),
            (input("many", "", "", ""), Field::QuotaClusters),
            (input("10001", "", "", ""), Field::QuotaClusters),
            (input("", "x", "", ""), Field::QuotaCpu),
            (input("", "1e9", "", ""), Field::QuotaCpu),
            (input("", "", "1.5", ""), Field::QuotaMemory),
            (input("", "", "", "99999999999"), Field::QuotaStorage),
        ] {
            assert_eq!(Quota::parse(&bad), Err(AppError::at(ErrorCode::QuotaInvalid, field)), "{bad:?}");
        }
        assert_eq!(Quota::default().cpu_text(), "16");
        for q in [Quota::default(), Quota::UNLIMITED, Quota { cpu_millis: Some(2_500), ..Quota::UNLIMITED }] {
            assert_eq!(Quota::parse(&QuotaText::of(&q).as_input()), Ok(q), "text round trip");
        }
        assert_eq!(cores(1_500), "1.5");
    }

    /// A quota given as numbers meets the same limits as text: what the form
    /// could write back, and nothing beyond.
    #[test]
    fn numbers_meet_the_limits_text_does() {
        let q = |clusters, cpu_millis, memory_gib, storage_gib| Quota { clusters, cpu_millis, memory_gib, storage_gib };
        assert_eq!(Quota::default().checked(), Ok(Quota::default()));
        assert_eq!(Quota::UNLIMITED.checked(), Ok(Quota::UNLIMITED));
        let widest = q(Some(10_000), Some(99_999_999), Some(5_120_000), Some(40_960_000));
        assert_eq!(widest.checked(), Ok(widest));
        assert_eq!(Quota::parse(&QuotaText::of(&widest).as_input()), Ok(widest), "the form reads it back");
        for (over, field) in [
            (q(Some(10_001), None, None, None), Field::QuotaClusters),
            (q(None, Some(100_000_000), None, None), Field::QuotaCpu),
            (q(None, None, Some(5_120_001), None), Field::QuotaMemory),
            (q(None, None, None, Some(40_960_001)), Field::QuotaStorage),
        ] {
            assert_eq!(over.checked(), Err(AppError::at(ErrorCode::QuotaInvalid, field)), "{over:?}");
            assert!(Quota::parse(&QuotaText::of(&over).as_input()).is_err(), "text refuses it too: {over:?}");
        }
    }
}
