//! `least-loaded` (in the simulation, "lowest-load-now"): the lowest load
//! average per CPU, ties broken by more idle CPUs, then by speed (from the
//! availability summary, when given), then by a hash of the name.

use super::{Candidate, Context, Policy, top_by_key};

/// See the module documentation.
pub struct LeastLoaded;

impl Policy for LeastLoaded {
    fn rank(&self, c: &mut [Candidate<'_>], count: usize, _: &mut Context<'_>) {
        for cand in c.iter_mut() {
            let h = cand.hot;
            let slow = u16::MAX - h.speed_milli.min(u16::MAX as u32) as u16;
            let tie =
                ((u32::MAX - h.idle_milli) as u64) << 32 | (slow as u64) << 16 | h.name_hash >> 48;
            cand.key = [cand.load_key(), tie];
        }
        top_by_key(c, count);
    }
}
