//! `lowest-price`, the REXEC paper's policy: the cheapest nodes (lowest sum
//! of competing bids), ties broken by more idle CPUs, then by a hash of the
//! name so every selector gives the same answer.

use super::{Candidate, Context, Policy, top_by_key};

/// See the module documentation.
pub struct LowestPrice;

impl Policy for LowestPrice {
    fn rank(&self, c: &mut [Candidate<'_>], count: usize, _: &mut Context<'_>) {
        for cand in c.iter_mut() {
            cand.key = [cand.hot.price.max(0) as u64, cand.idle_then_name()];
        }
        top_by_key(c, count);
    }
}
