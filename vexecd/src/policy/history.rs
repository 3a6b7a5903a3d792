//! `history`, after Ring Leader: the earliest predicted completion of the
//! expected CPU length, from each node's availability summary and speed,
//! starting now. Nodes without a summary (or never idle) come after every
//! node with a prediction, in least-loaded order.
//!
//! A node can finish no sooner than its speed allows on a fully idle week
//! (CPU length over speed), so once `count` predictions are in hand, a node
//! whose bound is already worse than the `count`-th best is not predicted
//! at all: with thousands of nodes most are passed over after reading only
//! their speed.

use std::collections::BinaryHeap;

use super::{Candidate, Context, Policy, top_by_key};

/// See the module documentation.
pub struct History;

/// Key of candidates passed over by the bound (never among the picks).
const PRUNED: u64 = u64::MAX - 1;

impl Policy for History {
    fn needs_length(&self) -> bool {
        true
    }

    fn rank(&self, c: &mut [Candidate<'_>], count: usize, ctx: &mut Context<'_>) {
        let cpu = ctx.expected_cpu_secs.unwrap_or(0.0);
        // First the bounds (from the hot record alone), and the nodes with
        // the best bounds moved to the front, so the threshold below is
        // tight from the start.
        for cand in c.iter_mut() {
            cand.key = match cand.hot.summary {
                Some(_) => [
                    (cpu / (cand.hot.speed_milli.max(1) as f64 / 1000.0)).to_bits(),
                    0,
                ],
                None => [u64::MAX, cand.load_key()],
            };
        }
        let front = (2 * count + 16).min(c.len());
        if front < c.len() {
            c.select_nth_unstable_by_key(front - 1, |cand| cand.key);
        }
        // The `count` best predictions so far (as f64 bits: non-negative
        // floats order like their bits), largest on top.
        let mut best: BinaryHeap<u64> = BinaryHeap::with_capacity(count + 1);
        for cand in c.iter_mut() {
            if cand.key[0] == u64::MAX {
                continue;
            }
            let bound = f64::from_bits(cand.key[0]);
            if best.len() == count
                && best
                    .peek()
                    .is_some_and(|&kth| bound > f64::from_bits(kth) * (1.0 + 1e-9))
            {
                cand.key = [PRUNED, 0];
                continue;
            }
            cand.predicted = cand.predict(ctx.week_secs, cpu);
            match cand.predicted {
                Some(t) => {
                    let bits = t.max(0.0).to_bits();
                    cand.key = [bits, cand.idle_then_name()];
                    best.push(bits);
                    if best.len() > count {
                        best.pop();
                    }
                }
                None => cand.key = [u64::MAX, cand.load_key()],
            }
        }
        top_by_key(c, count);
    }
}
