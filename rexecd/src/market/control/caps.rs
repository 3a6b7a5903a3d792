//! CFS bandwidth caps: while the node is contended, each job the model gives CPU is
//! limited to its allocation times [`HEADROOM`], every [`PERIOD_US`]; uncontended (or
//! open loop), no job is limited.
//!
//! Weights alone cannot give a single thread its share on two CPUs: a thread is either
//! on a CPU or not, and which CPU it sits on is the load balancer's choice, so a small
//! change of weight can move a whole thread. A cap bounds what a job receives whatever
//! the balancer does: caps at the model's allocations add up to the node's CPUs, so
//! every job that is not at its cap can only be short, and the weight controller
//! (`control::step`) then only has to decide who gets CPU that a capped job leaves.
//! Caps never raise a job above what the weights would give it; they cannot starve a
//! job the model gives CPU (the smallest cap is the kernel's 1 ms a period).

use crate::cgroup::CpuQuota;

/// Cap on a job, as a multiple of its model allocation.
pub const HEADROOM: f64 = 1.0;
/// The CFS period of a cap, microseconds: short enough that a 1 s window holds fifty
/// of them, long enough that the kernel's throttling costs nothing measurable.
pub const PERIOD_US: u64 = 20_000;

/// Each job's cap, in the order of `model` (the model's allocations, CPUs): `None`
/// for every job when `contended` is false, and for a job the model gives nothing.
///
/// ```
/// use rexecd::market::control::caps::caps;
/// let c = caps(&[0.889, 0.667, 0.444, 0.0], true);
/// assert_eq!(c[0].unwrap().quota_us, 17_780);
/// assert_eq!(c[3], None);
/// assert!(caps(&[1.0, 1.0], false).iter().all(Option::is_none));
/// ```
pub fn caps(model: &[f64], contended: bool) -> Vec<Option<CpuQuota>> {
    model
        .iter()
        .map(|&a| {
            if contended && a > 0.0 {
                CpuQuota::for_cpus(a * HEADROOM, PERIOD_US)
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_add_up_to_the_node_and_follow_the_model() {
        let model = [0.8, 0.6, 0.4, 0.2];
        let c = caps(&model, true);
        let total: f64 = c.iter().flatten().map(CpuQuota::cpus).sum();
        assert!((total - 2.0 * HEADROOM).abs() < 1e-3, "{c:?}");
        for (q, a) in c.iter().zip(model) {
            assert!((q.unwrap().cpus() - a * HEADROOM).abs() < 1e-3);
        }
    }

    #[test]
    fn a_tiny_allocation_gets_the_kernels_smallest_cap_not_none() {
        let c = caps(&[1.99, 0.001], true);
        assert_eq!(c[1].unwrap().quota_us, CpuQuota::MIN_US);
    }
}
