//! `lowest-price`, the REXEC paper's policy: the cheapest nodes (lowest sum
//! of competing bids), ties broken by more idle CPUs, then by name so the
//! answer is the same from every selector.

use super::{Candidate, Context, Policy, top_by};

/// See the module documentation.
pub struct LowestPrice;

impl Policy for LowestPrice {
    fn rank(&self, c: &mut Vec<Candidate<'_>>, count: usize, _: &mut Context<'_>) {
        top_by(c, count, |a, b| {
            a.status
                .price
                .cmp(&b.status.price)
                .then(b.idle_cpus.cmp(&a.idle_cpus))
                .then_with(|| a.name().cmp(b.name()))
        });
    }
}
