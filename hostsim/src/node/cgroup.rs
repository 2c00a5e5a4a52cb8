//! A container's resource limits as a kubelet enforces them: its processes
//! in a cgroup of their own, memory capped at `limits.memory` (the kernel's
//! OOM killer ends the container when it goes over: the kubelet reports
//! `OOMKilled`, exit code 137) and CPU at `limits.cpu` (the CFS quota over a
//! 100 ms period: a container at its limit is throttled, not killed), as
//! runc writes them (`memory.limit_in_bytes`, `cpu.cfs_quota_us` on cgroup
//! v1; `memory.max`, `cpu.max` on v2). No requests: the test host schedules
//! by them but nothing here shares CPU by weight.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Container;

/// The CFS period runc sets (100 ms).
const CPU_PERIOD_US: u64 = 100_000;

/// What a container's `resources.limits` cap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub memory_bytes: Option<u64>,
    pub cpu_millis: Option<u64>,
}

impl Limits {
    pub fn of(c: &Container) -> Self {
        let limits = c.resources.as_ref().and_then(|r| r.limits.as_ref());
        let get = |k: &str| limits.and_then(|l| l.get(k)).map(|q| q.0.as_str());
        Self { memory_bytes: get("memory").and_then(bytes), cpu_millis: get("cpu").and_then(millicores) }
    }
}

/// A memory quantity in bytes (`4Gi`, `512Mi`, `1G`, `1500000`, `1.5Gi`).
pub fn bytes(q: &str) -> Option<u64> {
    let q = q.trim();
    let split = q.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let factor: u64 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => return None,
    };
    let n: f64 = number.parse().ok()?;
    (n.is_finite() && n >= 0.0).then(|| (n * factor as f64).ceil() as u64)
}

/// A CPU quantity in millicores (`2000m`, `1`, `0.5`).
pub fn millicores(q: &str) -> Option<u64> {
    let q = q.trim();
    if let Some(m) = q.strip_suffix('m') {
        return m.parse().ok();
    }
    let n: f64 = q.parse().ok()?;
    (n.is_finite() && n >= 0.0).then(|| (n * 1000.0).ceil() as u64)
}

/// The container's cgroup (one per container start); removed when dropped.
pub struct Group {
    /// One folder on cgroup v2; the memory and cpu hierarchies' on v1.
    dirs: Vec<PathBuf>,
    v2: bool,
}

impl Group {
    /// Made under `/sys/fs/cgroup`, with the limits written. `None` where
    /// the machine offers no writable memory and cpu controllers (logged).
    pub fn create(name: &str, limits: Limits) -> Option<Self> {
        let root = Path::new("/sys/fs/cgroup");
        let made = if root.join("cgroup.controllers").is_file() {
            Self::v2(&root.join("hostsim").join(name), limits)
        } else {
            Self::v1(root, name, limits)
        };
        match made {
            Ok(group) => Some(group),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "kubelet: no cgroup for the container; its limits are not enforced");
                None
            }
        }
    }

    fn v1(root: &Path, name: &str, limits: Limits) -> Result<Self> {
        let (memory, cpu) = (root.join("memory/hostsim").join(name), root.join("cpu/hostsim").join(name));
        let group = Self { dirs: vec![memory.clone(), cpu.clone()], v2: false };
        for dir in &group.dirs {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        if let Some(b) = limits.memory_bytes {
            write(&memory.join("memory.limit_in_bytes"), &b.to_string())?;
        }
        if let Some(m) = limits.cpu_millis {
            write(&cpu.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())?;
            write(&cpu.join("cpu.cfs_quota_us"), &(m * CPU_PERIOD_US / 1000).max(1000).to_string())?;
        }
        Ok(group)
    }

    fn v2(dir: &Path, limits: Limits) -> Result<Self> {
        let parent = dir.parent().context("a cgroup's parent")?;
        std::fs::create_dir_all(parent)?;
        // The controllers the child needs, enabled down from the root.
        let _ = write(Path::new("/sys/fs/cgroup/cgroup.subtree_control"), "+memory +cpu");
        write(&parent.join("cgroup.subtree_control"), "+memory +cpu")?;
        std::fs::create_dir_all(dir)?;
        let group = Self { dirs: vec![dir.to_owned()], v2: true };
        if let Some(b) = limits.memory_bytes {
            write(&dir.join("memory.max"), &b.to_string())?;
        }
        if let Some(m) = limits.cpu_millis {
            write(&dir.join("cpu.max"), &format!("{} {CPU_PERIOD_US}", (m * CPU_PERIOD_US / 1000).max(1000)))?;
        }
        Ok(group)
    }

    /// Shell lines that move the shell running them (and so everything it
    /// starts) into the group: writing `0` to `cgroup.procs` moves the writer.
    pub fn join_script(&self) -> String {
        self.dirs.iter().map(|d| format!("echo 0 > '{}/cgroup.procs'\n", d.display())).collect()
    }

    /// Whether the kernel's OOM killer ended a process of the group.
    pub fn oom_killed(&self) -> bool {
        let (dir, file) = match self.v2 {
            true => (&self.dirs[0], "memory.events"),
            false => (&self.dirs[0], "memory.oom_control"),
        };
        std::fs::read_to_string(dir.join(file)).is_ok_and(|s| oom_kills(&s) > 0)
    }
}

/// `oom_kill <n>` of `memory.oom_control` (v1) or `memory.events` (v2).
fn oom_kills(text: &str) -> u64 {
    text.lines().find_map(|l| l.strip_prefix("oom_kill ")).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
}

fn write(file: &Path, value: &str) -> Result<()> {
    std::fs::write(file, value).with_context(|| format!("writing {value} to {}", file.display()))
}

impl Drop for Group {
    fn drop(&mut self) {
        // Empty once the container's PID namespace is gone; the kernel
        // refuses to remove a group that still has processes.
        for dir in &self.dirs {
            for _ in 0..50 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_read_as_the_api_server_writes_them() {
        for (q, want) in [
            ("4Gi", Some(4 << 30)),
            ("512Mi", Some(512 << 20)),
            ("1G", Some(1_000_000_000)),
            ("1.5Gi", Some(3 << 29)),
            ("1500000", Some(1_500_000)),
            ("64Ki", Some(64 << 10)),
            ("1e3", None),
            ("lots", None),
        ] {
            assert_eq!(bytes(q), want, "{q}");
        }
        for (q, want) in
            [("2000m", Some(2000)), ("1", Some(1000)), ("0.5", Some(500)), ("100m", Some(100)), ("x", None)]
        {
            assert_eq!(millicores(q), want, "{q}");
        }
    }

    #[test]
    fn the_oom_kill_count_is_read_from_either_hierarchy() {
        assert_eq!(oom_kills("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"), 2);
        assert_eq!(oom_kills("low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\noom_group_kill 0\n"), 1);
        assert_eq!(oom_kills("oom_kill_disable 0\nunder_oom 0\n"), 0);
    }
}
