//! Idle and busy time of the CPUs the node's jobs run on, from the kernel's
//! `/proc/stat`: what the share caps may have left unused, and what anything (jobs or
//! other work) ran.
//!
//! While the node is contended the caps hold the jobs near what they received last
//! tick (see `control::caps::reach`); when other work leaves, only the idle time it
//! leaves behind says that the caps, not other work, now stand between the jobs and
//! the CPUs. When other work stays and takes what the caps free, the busy time less
//! the jobs' own says how much it took (see `control::caps::Tick`). The counters are
//! the kernel's `idle` and `iowait` columns (idle), and `user`, `nice`, `system`,
//! `irq` and `softirq` (busy; `steal` is time no one here ran), summed over the node's
//! CPUs (its `cpus` set, or the whole machine), in clock ticks.

use std::time::Instant;

use crate::cgroup::CpuSet;

/// Reads the idle time of a set of CPUs.
#[derive(Debug, Clone)]
pub struct IdleClock {
    /// The CPUs counted; `None`: every CPU (the `cpu` line).
    cpus: Option<CpuSet>,
    /// Clock ticks per second of `/proc/stat`'s columns.
    hz: f64,
}

/// One reading: idle and busy CPU-seconds so far and when they were read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IdleReading {
    /// Idle CPU-seconds of the counted CPUs since boot.
    pub idle_secs: f64,
    /// Busy CPU-seconds of the counted CPUs since boot, whoever ran.
    pub busy_secs: f64,
    /// When it was read.
    pub at: Instant,
}

/// The node's CPUs over a tick, on average: idle, and busy with anything.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeCpu {
    /// CPUs that stood idle.
    pub idle: f64,
    /// CPUs that ran something (the jobs or other work).
    pub busy: f64,
}

impl IdleReading {
    /// Idle and busy CPUs on average between `earlier` and this reading (see
    /// [`IdleReading::idle_cpus_since`]).
    pub fn since(&self, earlier: &IdleReading) -> NodeCpu {
        let secs = self.at.saturating_duration_since(earlier.at).as_secs_f64();
        let busy = if secs > 0.0 {
            ((self.busy_secs - earlier.busy_secs) / secs).max(0.0)
        } else {
            0.0
        };
        NodeCpu {
            idle: self.idle_cpus_since(earlier),
            busy,
        }
    }

    /// Idle CPUs on average between `earlier` and this reading (0 when none, or when
    /// the counters went backwards, as they may for a CPU that was taken offline).
    pub fn idle_cpus_since(&self, earlier: &IdleReading) -> f64 {
        let secs = self.at.saturating_duration_since(earlier.at).as_secs_f64();
        if secs <= 0.0 {
            return 0.0;
        }
        ((self.idle_secs - earlier.idle_secs) / secs).max(0.0)
    }
}

impl IdleClock {
    /// A clock over `cpus` (`None`: the whole machine).
    pub fn new(cpus: Option<CpuSet>) -> IdleClock {
        let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .filter(|&hz| hz > 0)
            .unwrap_or(100) as f64;
        IdleClock { cpus, hz }
    }

    /// Reads the counters now; `None` when `/proc/stat` cannot be read or names none
    /// of the CPUs (the caps then work without it, as before this reading existed).
    pub fn read(&self) -> Option<IdleReading> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        let ticks = cpu_ticks(&text, self.cpus.as_ref())?;
        Some(IdleReading {
            idle_secs: ticks.idle as f64 / self.hz,
            busy_secs: ticks.busy as f64 / self.hz,
            at: Instant::now(),
        })
    }
}

/// Clock ticks of some CPUs in `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ticks {
    /// `idle` plus `iowait`.
    pub idle: u64,
    /// `user`, `nice`, `system`, `irq` and `softirq` (guest time is in `user` and
    /// `nice` already).
    pub busy: u64,
}

/// The `idle` plus `iowait` clock ticks of `cpus` (`None`: the aggregate `cpu` line) in
/// the text of `/proc/stat`; `None` when none of them is listed.
pub fn idle_ticks(stat: &str, cpus: Option<&CpuSet>) -> Option<u64> {
    cpu_ticks(stat, cpus).map(|t| t.idle)
}

/// The idle and busy clock ticks of `cpus` (`None`: the aggregate `cpu` line) in the
/// text of `/proc/stat`; `None` when none of them is listed.
pub fn cpu_ticks(stat: &str, cpus: Option<&CpuSet>) -> Option<Ticks> {
    let mut total: Option<Ticks> = None;
    for line in stat.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(name) = fields.next() else { continue };
        let Some(which) = name.strip_prefix("cpu") else {
            continue;
        };
        let wanted = match (cpus, which) {
            (None, "") => true,
            (Some(set), n) if !n.is_empty() => n.parse().is_ok_and(|n| set.contains(n)),
            _ => false,
        };
        if !wanted {
            continue;
        }
        // user nice system idle iowait irq softirq ...: idle is columns 4 and 5.
        let cols: Vec<u64> = fields.take(7).filter_map(|f| f.parse().ok()).collect();
        let (Some(idle), iowait) = (cols.get(3), cols.get(4).copied().unwrap_or(0)) else {
            continue;
        };
        let col = |i: usize| cols.get(i).copied().unwrap_or(0);
        let t = total.get_or_insert_with(Ticks::default);
        t.idle += idle + iowait;
        t.busy += col(0) + col(1) + col(2) + col(5) + col(6);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  3071222 2739942 967029 2042055 106962 0 21627 73982 0 0\n\
        cpu0 1535735 1372894 464837 1062809 31378 0 8190 36402 0 0\n\
        cpu1 1535486 1367048 502191 979245 75584 0 13436 37579 0 0\n\
        intr 1 2 3\nctxt 42\n";

    #[test]
    fn sums_idle_and_iowait_of_the_cpus_asked_for() {
        assert_eq!(idle_ticks(STAT, None), Some(2042055 + 106962));
        let one: CpuSet = "1".parse().unwrap();
        assert_eq!(idle_ticks(STAT, Some(&one)), Some(979245 + 75584));
        let both: CpuSet = "0-1".parse().unwrap();
        assert_eq!(
            idle_ticks(STAT, Some(&both)),
            Some(1062809 + 31378 + 979245 + 75584)
        );
        assert_eq!(
            cpu_ticks(STAT, Some(&one)).map(|t| t.busy),
            Some(1535486 + 1367048 + 502191 + 13436)
        );
        let absent: CpuSet = "7".parse().unwrap();
        assert_eq!(idle_ticks(STAT, Some(&absent)), None);
        assert_eq!(idle_ticks("garbage\ncpu x y\n", None), None);
    }

    #[test]
    fn idle_cpus_between_readings_never_negative() {
        let t0 = Instant::now();
        let a = IdleReading {
            idle_secs: 10.0,
            busy_secs: 4.0,
            at: t0,
        };
        let b = IdleReading {
            idle_secs: 10.5,
            busy_secs: 5.5,
            at: t0 + std::time::Duration::from_secs(1),
        };
        assert!((b.idle_cpus_since(&a) - 0.5).abs() < 1e-9);
        let node = b.since(&a);
        assert!((node.idle - 0.5).abs() < 1e-9 && (node.busy - 1.5).abs() < 1e-9);
        assert_eq!(a.since(&b).busy, 0.0);
        assert_eq!(a.idle_cpus_since(&b), 0.0);
        assert_eq!(a.idle_cpus_since(&a), 0.0);
    }

    #[test]
    fn reads_this_machine() {
        let clock = IdleClock::new(None);
        let r = clock.read().expect("/proc/stat");
        assert!(r.idle_secs >= 0.0);
    }
}
