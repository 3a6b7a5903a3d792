//! `least-loaded` (in the simulation, "lowest-load-now"): the lowest load
//! average per CPU, ties broken by more idle CPUs, then by speed (from the
//! availability summary, when given), then by name.

use super::{Candidate, Context, Policy, by_load_per_cpu, top_by};

/// See the module documentation.
pub struct LeastLoaded;

impl Policy for LeastLoaded {
    fn rank(&self, c: &mut Vec<Candidate<'_>>, count: usize, _: &mut Context<'_>) {
        top_by(c, count, |a, b| {
            by_load_per_cpu(&a.status, &b.status)
                .then(b.idle_cpus.cmp(&a.idle_cpus))
                .then_with(|| b.speed().total_cmp(&a.speed()))
                .then_with(|| a.name().cmp(b.name()))
        });
    }
}
