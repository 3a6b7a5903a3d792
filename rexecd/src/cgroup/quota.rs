//! CFS bandwidth limits: at most `quota` microseconds of CPU time per `period`
//! microseconds for a job cgroup, across all its threads and CPUs (v1
//! `cpu.cfs_quota_us` and `cpu.cfs_period_us`, v2 `cpu.max`). The market caps each
//! job at its allocation while the node is contended (see `market::control::caps`);
//! this module holds the value and its two file formats.

use std::path::Path;

use super::error::{CgroupError, Result};

/// A CPU bandwidth limit: `quota_us` of CPU time every `period_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuQuota {
    /// CPU time allowed per period, microseconds (at least [`CpuQuota::MIN_US`]).
    pub quota_us: u64,
    /// The period, microseconds, in [`CpuQuota::MIN_US`], [`CpuQuota::MAX_PERIOD_US`].
    pub period_us: u64,
}

impl CpuQuota {
    /// The smallest quota and period the kernel accepts, microseconds.
    pub const MIN_US: u64 = 1_000;
    /// The longest period the kernel accepts, microseconds.
    pub const MAX_PERIOD_US: u64 = 1_000_000;

    /// A limit of `cpus` CPUs over periods of `period_us` (clamped to the kernel's
    /// range); `None` when `cpus` is not a positive finite number.
    ///
    /// ```
    /// use rexecd::cgroup::CpuQuota;
    /// let q = CpuQuota::for_cpus(0.444, 20_000).unwrap();
    /// assert_eq!((q.quota_us, q.period_us), (8_880, 20_000));
    /// assert_eq!(CpuQuota::for_cpus(0.01, 20_000).unwrap().quota_us, 1_000);
    /// assert!(CpuQuota::for_cpus(f64::NAN, 20_000).is_none());
    /// ```
    pub fn for_cpus(cpus: f64, period_us: u64) -> Option<CpuQuota> {
        if !(cpus.is_finite() && cpus > 0.0) {
            return None;
        }
        let period_us = period_us.clamp(CpuQuota::MIN_US, CpuQuota::MAX_PERIOD_US);
        // Bounded: a node has far fewer than 2^40 CPUs.
        let quota = (cpus.min(1e6) * period_us as f64).round() as u64;
        Some(CpuQuota {
            quota_us: quota.max(CpuQuota::MIN_US),
            period_us,
        })
    }

    /// The limit in CPUs.
    pub fn cpus(&self) -> f64 {
        self.quota_us as f64 / self.period_us.max(1) as f64
    }

    /// The v2 `cpu.max` line for `limit` (`max PERIOD` for none).
    pub fn v2_line(limit: Option<CpuQuota>, default_period_us: u64) -> String {
        match limit {
            Some(q) => format!("{} {}", q.quota_us, q.period_us),
            None => format!("max {default_period_us}"),
        }
    }

    /// Parses a v2 `cpu.max` (`QUOTA PERIOD` or `max PERIOD`).
    pub fn parse_v2(path: &Path, text: &str) -> Result<Option<CpuQuota>> {
        let bad = || CgroupError::Parse {
            path: path.to_path_buf(),
            detail: format!("expected \"QUOTA PERIOD\" or \"max PERIOD\", found {text:?}"),
        };
        let mut parts = text.split_whitespace();
        let (Some(quota), Some(period), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad());
        };
        let period_us: u64 = period.parse().map_err(|_| bad())?;
        if quota == "max" {
            return Ok(None);
        }
        let quota_us = quota.parse().map_err(|_| bad())?;
        Ok(Some(CpuQuota {
            quota_us,
            period_us,
        }))
    }

    /// Reads v1's pair (`cpu.cfs_quota_us` of -1 means none).
    pub fn from_v1(quota: i64, period_us: u64) -> Option<CpuQuota> {
        u64::try_from(quota).ok().map(|quota_us| CpuQuota {
            quota_us,
            period_us,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_lines_round_trip_and_bad_ones_name_the_file() {
        let p = Path::new("/x/cpu.max");
        let q = CpuQuota::for_cpus(0.889, 20_000);
        let line = CpuQuota::v2_line(q, 100_000);
        assert_eq!(line, "17780 20000");
        assert_eq!(CpuQuota::parse_v2(p, &format!("{line}\n")).unwrap(), q);
        assert_eq!(CpuQuota::v2_line(None, 100_000), "max 100000");
        assert_eq!(CpuQuota::parse_v2(p, "max 100000\n").unwrap(), None);
        for bad in ["", "max", "12 x", "1 2 3", "-5 100000"] {
            let err = CpuQuota::parse_v2(p, bad).unwrap_err().to_string();
            assert!(err.contains("/x/cpu.max"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn limits_stay_in_the_kernels_range() {
        let q = CpuQuota::for_cpus(2.5, 500).unwrap();
        assert_eq!((q.quota_us, q.period_us), (2_500, 1_000));
        let q = CpuQuota::for_cpus(0.5, 5_000_000).unwrap();
        assert_eq!(q.period_us, 1_000_000);
        assert!((q.cpus() - 0.5).abs() < 1e-9);
        assert!(CpuQuota::for_cpus(0.0, 20_000).is_none());
        assert!(CpuQuota::for_cpus(-1.0, 20_000).is_none());
        assert_eq!(CpuQuota::from_v1(-1, 100_000), None);
        assert_eq!(
            CpuQuota::from_v1(5_000, 20_000),
            Some(CpuQuota {
                quota_us: 5_000,
                period_us: 20_000
            })
        );
    }
}
