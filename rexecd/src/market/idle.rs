//! Idle time of the CPUs the node's jobs run on, from the kernel's `/proc/stat`: what
//! the share caps may have left unused.
//!
//! While the node is contended the caps hold the jobs near what they received last
//! tick (see `control::caps::reach`); when other work leaves, only the idle time it
//! leaves behind says that the caps, not other work, now stand between the jobs and
//! the CPUs. The counters are the kernel's `idle` and `iowait` columns, summed over
//! the node's CPUs (its `cpus` set, or the whole machine), in clock ticks.

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

/// One reading: idle CPU-seconds so far and when they were read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IdleReading {
    /// Idle CPU-seconds of the counted CPUs since boot.
    pub idle_secs: f64,
    /// When it was read.
    pub at: Instant,
}

impl IdleReading {
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
        let ticks = idle_ticks(&text, self.cpus.as_ref())?;
        Some(IdleReading {
            idle_secs: ticks as f64 / self.hz,
            at: Instant::now(),
        })
    }
}

/// The `idle` plus `iowait` clock ticks of `cpus` (`None`: the aggregate `cpu` line) in
/// the text of `/proc/stat`; `None` when none of them is listed.
pub fn idle_ticks(stat: &str, cpus: Option<&CpuSet>) -> Option<u64> {
    let mut total = None;
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
        // user nice system idle iowait ...: columns 4 and 5.
        let cols: Vec<u64> = fields.take(5).filter_map(|f| f.parse().ok()).collect();
        let (Some(idle), iowait) = (cols.get(3), cols.get(4).copied().unwrap_or(0)) else {
            continue;
        };
        total = Some(total.unwrap_or(0) + idle + iowait);
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
        let absent: CpuSet = "7".parse().unwrap();
        assert_eq!(idle_ticks(STAT, Some(&absent)), None);
        assert_eq!(idle_ticks("garbage\ncpu x y\n", None), None);
    }

    #[test]
    fn idle_cpus_between_readings_never_negative() {
        let t0 = Instant::now();
        let a = IdleReading {
            idle_secs: 10.0,
            at: t0,
        };
        let b = IdleReading {
            idle_secs: 10.5,
            at: t0 + std::time::Duration::from_secs(1),
        };
        assert!((b.idle_cpus_since(&a) - 0.5).abs() < 1e-9);
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
