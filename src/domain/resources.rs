//! The resource quota a user asks for: CPU, memory and storage, within sane bounds.

use serde::{Deserialize, Serialize};

use super::{AppError, ErrorCode, Field};

pub(crate) const CPU_MILLIS: (u32, u32) = (100, 64_000);
pub(crate) const MEMORY_GIB: (u32, u32) = (1, 512);
pub(crate) const STORAGE_GIB: (u32, u32) = (1, 4_096);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    pub cpu_millis: u32,
    pub memory_gib: u32,
    pub storage_gib: u32,
}

impl Default for Resources {
    fn default() -> Self {
        Self { cpu_millis: 2_000, memory_gib: 4, storage_gib: 20 }
    }
}

impl Resources {
    /// Parses form or API text: CPU in cores (`2`, `0.5`, `1.25`), memory and storage in GiB.
    pub(crate) fn parse(cpu: &str, memory_gib: &str, storage_gib: &str) -> Result<Self, AppError> {
        let cpu_millis = parse_cores(cpu)
            .filter(|m| (CPU_MILLIS.0..=CPU_MILLIS.1).contains(m))
            .ok_or(AppError::at(ErrorCode::CpuInvalid, Field::Cpu))?;
        let memory_gib =
            parse_in(memory_gib, MEMORY_GIB).ok_or(AppError::at(ErrorCode::MemoryInvalid, Field::Memory))?;
        let storage_gib =
            parse_in(storage_gib, STORAGE_GIB).ok_or(AppError::at(ErrorCode::StorageInvalid, Field::Storage))?;
        Ok(Self { cpu_millis, memory_gib, storage_gib })
    }

    /// An edit of an existing cluster's resources: CPU and memory may change,
    /// storage may not. vCluster renders it into its StatefulSet's
    /// `volumeClaimTemplates`, which Kubernetes refuses to change: helm's
    /// upgrade would fail (docs/architecture.md, "Storage is fixed").
    pub(crate) fn edited(self, to: Resources) -> Result<Resources, AppError> {
        if to.storage_gib != self.storage_gib {
            return Err(AppError::at(ErrorCode::StorageFixed, Field::Storage));
        }
        Ok(to)
    }

    /// CPU in cores as the user wrote it, e.g. `1.5`.
    pub(crate) fn cpu_cores(&self) -> String {
        let whole = self.cpu_millis / 1000;
        let frac = self.cpu_millis % 1000;
        if frac == 0 { whole.to_string() } else { format!("{whole}.{frac:03}").trim_end_matches('0').to_owned() }
    }
}

/// The wire form of a resources request: CPU as a decimal string, the rest as
/// numbers or strings (forms send strings, JSON clients numbers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourcesRequest {
    pub cpu: String,
    pub memory_gib: NumberOrText,
    pub storage_gib: NumberOrText,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NumberOrText {
    Number(u64),
    Text(String),
}

impl NumberOrText {
    fn text(&self) -> String {
        match self {
            Self::Number(n) => n.to_string(),
            Self::Text(t) => t.clone(),
        }
    }
}

impl ResourcesRequest {
    pub(crate) fn parse(&self) -> Result<Resources, AppError> {
        Resources::parse(&self.cpu, &self.memory_gib.text(), &self.storage_gib.text())
    }
}

fn parse_in(raw: &str, (min, max): (u32, u32)) -> Option<u32> {
    raw.trim().parse::<u32>().ok().filter(|v| (min..=max).contains(v))
}

/// `"1.25"` → 1250 millicores; at most three decimals, no sign, no exponent.
pub(crate) fn parse_cores(raw: &str) -> Option<u32> {
    let raw = raw.trim();
    let (whole, frac) = raw.split_once('.').unwrap_or((raw, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || whole.len() > 5 || frac.len() > 3 || !digits(whole) || !digits(frac) {
        return None;
    }
    let frac_millis = format!("{frac:0<3}").parse::<u32>().ok()?;
    whole.parse::<u32>().ok()?.checked_mul(1000)?.checked_add(frac_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_table() {
        let ok = |c, m, s| Ok(Resources { cpu_millis: c, memory_gib: m, storage_gib: s });
        let err = |code, field| Err(AppError::at(code, field));
        let cases = [
            (("2", "4", "20"), ok(2000, 4, 20)),
            ((" 0.5 ", "1", "1"), ok(500, 1, 1)),
            (("1.25", "512", "4096"), ok(1250, 512, 4096)),
            (("0.1", "1", "1"), ok(100, 1, 1)),
            (("64", "1", "1"), ok(64_000, 1, 1)),
            (("0.05", "1", "1"), err(ErrorCode::CpuInvalid, Field::Cpu)),
            (("64.001", "1", "1"), err(ErrorCode::CpuInvalid, Field::Cpu)),
            (("1.0001", "1", "1"), err(ErrorCode::CpuInvalid, Field::Cpu)),
            (("-1", "1", "1"), err(ErrorCode::CpuInvalid, Field::Cpu)),
            (("1e3", "1", "1"), err(ErrorCode::CpuInvalid, Field::Cpu)),
            ((".5", "1", "1"), err(ErrorCode::CpuInvalid, Field::Cpu)),
            (("", "1", "1"), err(ErrorCode::CpuInvalid, Field::Cpu)),
            (("99999999999", "1", "1"), err(ErrorCode::CpuInvalid, Field::Cpu)),
            (("1", "0", "1"), err(ErrorCode::MemoryInvalid, Field::Memory)),
            (("1", "513", "1"), err(ErrorCode::MemoryInvalid, Field::Memory)),
            (("1", "1.5", "1"), err(ErrorCode::MemoryInvalid, Field::Memory)),
            (("1", "1", "0"), err(ErrorCode::StorageInvalid, Field::Storage)),
            (("1", "1", "abc"), err(ErrorCode::StorageInvalid, Field::Storage)),
        ];
        for ((c, m, s), want) in cases {
            assert_eq!(Resources::parse(c, m, s), want, "{c:?} {m:?} {s:?}");
        }
    }

    #[test]
    fn an_edit_keeps_the_storage_of_the_creation() {
        let was = Resources { cpu_millis: 1000, memory_gib: 2, storage_gib: 5 };
        let more = Resources { cpu_millis: 4000, memory_gib: 8, storage_gib: 5 };
        assert_eq!(was.edited(more), Ok(more));
        assert_eq!(was.edited(was), Ok(was));
        for storage_gib in [4, 6, 4096] {
            let to = Resources { storage_gib, ..more };
            assert_eq!(was.edited(to), Err(AppError::at(ErrorCode::StorageFixed, Field::Storage)), "{storage_gib}");
        }
    }

    #[test]
    fn cpu_cores_round_trips() {
        for raw in ["2", "0.5", "1.25", "0.125", "64"] {
            let r = Resources::parse(raw, "1", "1").unwrap();
            assert_eq!(r.cpu_cores(), raw);
        }
    }
}
