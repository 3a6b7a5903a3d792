//! CFS bandwidth caps: while the node is contended, each job the model gives CPU is
//! limited to its allocation times the jobs' [`reach`] (times [`HEADROOM`]), every
//! [`PERIOD_US`]; uncontended (or open loop), no job is limited.
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

/// Cap on a job, as a multiple of its model allocation, when the jobs receive all the
/// model hands out.
pub const HEADROOM: f64 = 1.0;
/// How much more than they received last tick the caps let the jobs receive together.
pub const GROWTH: f64 = 1.1;
/// Smallest reach: caps never fall below this share of the allocations.
pub const MIN_REACH: f64 = 0.5;
/// The CFS period of a cap, microseconds: short enough that a 1 s window holds fifty
/// of them, long enough that the kernel's throttling costs nothing measurable.
pub const PERIOD_US: u64 = 20_000;

/// The share of their allocations the caps give the jobs next tick, from what the
/// model handed out (`model_sum`) and what they received together (`measured_sum`):
/// `GROWTH` times what they received, at most all of it, at least `MIN_REACH`.
///
/// Other work that takes CPU from some jobs leaves the others at their caps, above
/// their share of what the jobs receive together; scaling every cap down to what the
/// jobs can reach keeps them in proportion, and the growth lets them take the CPU back
/// within a few ticks once the other work leaves.
pub fn reach(model_sum: f64, measured_sum: f64) -> f64 {
    if !(model_sum > 0.0 && measured_sum.is_finite()) {
        return 1.0;
    }
    (GROWTH * measured_sum / model_sum).clamp(MIN_REACH, 1.0)
}

/// Each job's cap, in the order of `model` (the model's allocations, CPUs) scaled by
/// `reach` (see [`reach`]): `None` for every job when `contended` is false, and for a
/// job the model gives nothing.
///
/// ```
/// use rexecd::market::control::caps::caps;
/// let c = caps(&[0.889, 0.667, 0.444, 0.0], true, 1.0);
/// assert_eq!(c[0].unwrap().quota_us, 17_780);
/// assert_eq!(c[3], None);
/// assert!(caps(&[1.0, 1.0], false, 1.0).iter().all(Option::is_none));
/// ```
pub fn caps(model: &[f64], contended: bool, reach: f64) -> Vec<Option<CpuQuota>> {
    let reach = reach.clamp(MIN_REACH, 1.0);
    model
        .iter()
        .map(|&a| {
            if contended && a > 0.0 {
                CpuQuota::for_cpus(a * HEADROOM * reach, PERIOD_US)
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
        let c = caps(&model, true, 1.0);
        let total: f64 = c.iter().flatten().map(CpuQuota::cpus).sum();
        assert!((total - 2.0 * HEADROOM).abs() < 1e-3, "{c:?}");
        for (q, a) in c.iter().zip(model) {
            assert!((q.unwrap().cpus() - a * HEADROOM).abs() < 1e-3);
        }
    }

    #[test]
    fn caps_follow_what_the_jobs_reach_and_grow_back() {
        // Quiet: the jobs receive nearly all the model hands out; caps at the model.
        assert_eq!(reach(2.0, 1.9), 1.0);
        // Other work takes 0.3 CPU: caps at 1.1 times what the jobs received.
        let r = reach(2.0, 1.7);
        assert!((r - 0.935).abs() < 1e-9, "{r}");
        let c = caps(&[1.0, 0.667, 0.333], true, r);
        assert!((c[1].unwrap().cpus() - 0.667 * 0.935).abs() < 1e-3, "{c:?}");
        // The work leaves: the jobs reach their caps, which grow back by GROWTH a tick.
        let mut r = reach(2.0, 1.7);
        let mut ticks = 0;
        while r < 1.0 {
            r = reach(2.0, 2.0 * r);
            ticks += 1;
        }
        assert!(ticks <= 1, "{ticks}");
        // Never below MIN_REACH, and nonsense in, no scaling out.
        assert_eq!(reach(2.0, 0.0), MIN_REACH);
        assert_eq!(reach(0.0, 1.0), 1.0);
        assert_eq!(reach(2.0, f64::NAN), 1.0);
    }

    #[test]
    fn a_tiny_allocation_gets_the_kernels_smallest_cap_not_none() {
        let c = caps(&[1.99, 0.001], true, 1.0);
        assert_eq!(c[1].unwrap().quota_us, CpuQuota::MIN_US);
    }
}
