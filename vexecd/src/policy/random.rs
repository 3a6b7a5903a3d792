//! `random`: `count` nodes uniformly at random (a partial Fisher-Yates
//! shuffle driven by the injected random source).

use super::{Candidate, Context, Policy};

/// See the module documentation.
pub struct Random;

impl Policy for Random {
    fn rank(&self, c: &mut [Candidate<'_>], count: usize, ctx: &mut Context<'_>) {
        let n = c.len();
        for i in 0..count.min(n) {
            let j = i + ctx.rng.below(n - i);
            c.swap(i, j);
        }
    }
}
