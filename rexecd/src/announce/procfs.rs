//! What the node measures of the whole machine for its announcements: CPU idle
//! time from `/proc/stat` (all online CPUs, or only the ones the node owns), the
//! one-minute load average from `/proc/loadavg`, and available memory from
//! `/proc/meminfo`. Parsing is separate from reading so it is tested on text.

/// Cumulative CPU time of the CPUs looked at, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// Idle and waiting for I/O.
    pub idle: u64,
    /// Everything (user, nice, system, idle, iowait, irq, softirq, steal).
    pub total: u64,
}

impl CpuTimes {
    /// The fraction of `self - earlier` spent idle; `None` when no time passed.
    pub fn idle_fraction_since(&self, earlier: &CpuTimes) -> Option<f64> {
        let total = self.total.saturating_sub(earlier.total);
        if total == 0 {
            return None;
        }
        let idle = self.idle.saturating_sub(earlier.idle).min(total);
        Some(idle as f64 / total as f64)
    }
}

/// The CPU times in `/proc/stat` text: of the `cpu` line (all online CPUs) when
/// `cpus` is `None`, else the sum of the `cpuN` lines of those CPUs (CPUs absent,
/// such as offline ones, count nothing). `None` when nothing matched.
pub fn parse_stat(text: &str, cpus: Option<&[u32]>) -> Option<CpuTimes> {
    let mut sum: Option<CpuTimes> = None;
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(label) = fields.next() else {
            continue;
        };
        let Some(id) = label.strip_prefix("cpu") else {
            continue;
        };
        let wanted = match cpus {
            None => id.is_empty(),
            Some(list) => id.parse::<u32>().is_ok_and(|n| list.contains(&n)),
        };
        if !wanted {
            continue;
        }
        // user nice system idle iowait irq softirq steal (guest time is in user).
        let values: Vec<u64> = fields.take(8).map_while(|f| f.parse().ok()).collect();
        if values.len() < 4 {
            continue;
        }
        let idle = values[3] + values.get(4).copied().unwrap_or(0);
        let total = values.iter().sum::<u64>();
        let s = sum.get_or_insert_with(CpuTimes::default);
        s.idle = s.idle.saturating_add(idle);
        s.total = s.total.saturating_add(total);
    }
    sum
}

/// The one-minute load average times 1000, from `/proc/loadavg` text.
pub fn parse_loadavg(text: &str) -> Option<u32> {
    let first: f64 = text.split_ascii_whitespace().next()?.parse().ok()?;
    (first.is_finite() && first >= 0.0)
        .then(|| (first * 1000.0).round().min(u32::MAX as f64) as u32)
}

/// `MemAvailable` in MiB, from `/proc/meminfo` text.
pub fn parse_mem_available(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

/// Reads `/proc/stat` (see [`parse_stat`]).
pub fn read_stat(cpus: Option<&[u32]>) -> Option<CpuTimes> {
    parse_stat(&std::fs::read_to_string("/proc/stat").ok()?, cpus)
}

/// Reads `/proc/loadavg` (see [`parse_loadavg`]).
pub fn read_loadavg() -> Option<u32> {
    parse_loadavg(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

/// Reads `/proc/meminfo` (see [`parse_mem_available`]).
pub fn read_mem_available() -> Option<u64> {
    parse_mem_available(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  300 0 100 500 100 0 0 0 0 0\n\
                        cpu0 200 0 50 100 50 0 0 0 0 0\n\
                        cpu1 100 0 50 400 50 0 0 0 0 0\n\
                        intr 1 2 3\n";

    #[test]
    fn stat_of_all_or_some_cpus() {
        assert_eq!(
            parse_stat(STAT, None),
            Some(CpuTimes {
                idle: 600,
                total: 1000
            })
        );
        assert_eq!(
            parse_stat(STAT, Some(&[1])),
            Some(CpuTimes {
                idle: 450,
                total: 600
            })
        );
        assert_eq!(parse_stat(STAT, Some(&[0, 1])), parse_stat(STAT, None));
        assert_eq!(parse_stat(STAT, Some(&[7])), None);
        assert_eq!(parse_stat("garbage\ncpu x y\n", None), None);
    }

    #[test]
    fn idle_fraction_over_an_interval() {
        let a = CpuTimes {
            idle: 100,
            total: 200,
        };
        let b = CpuTimes {
            idle: 175,
            total: 300,
        };
        assert_eq!(b.idle_fraction_since(&a), Some(0.75));
        assert_eq!(a.idle_fraction_since(&a), None);
        // Counters that went back (CPU hot-unplug) never give more than all idle.
        let c = CpuTimes {
            idle: 900,
            total: 250,
        };
        assert_eq!(c.idle_fraction_since(&a), Some(1.0));
    }

    #[test]
    fn loadavg_and_meminfo() {
        assert_eq!(parse_loadavg("3.28 1.69 0.88 7/177 7258\n"), Some(3280));
        assert_eq!(parse_loadavg(""), None);
        assert_eq!(parse_loadavg("-1 0 0"), None);
        let mem = "MemTotal:  32000000 kB\nMemFree: 1 kB\nMemAvailable:   23410760 kB\n";
        assert_eq!(parse_mem_available(mem), Some(22862));
        assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn this_machine_reads() {
        let t = read_stat(None).expect("/proc/stat");
        assert!(t.total >= t.idle && t.total > 0);
        assert!(read_loadavg().is_some());
        assert!(read_mem_available().is_some_and(|m| m > 0));
    }
}
