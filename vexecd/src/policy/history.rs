//! `history`, after Ring Leader: the earliest predicted completion of the
//! expected CPU length, from each node's availability summary and speed,
//! starting now. Nodes without a summary (or never idle) come after every
//! node with a prediction, in least-loaded order.
//!
//! Predicting all of 10,000 nodes takes about a millisecond (two for day-long
//! jobs), so once `count` predictions are in hand a node is passed over
//! when a lower bound on its completion is already worse than the
//! `count`-th best: first CPU length over speed (the node fully idle: read
//! from the packed record, no summary), then [`Summary::finish_bound`]
//! (each slot at the highest level of its two-hour block, of its
//! eight-hour span beyond the first eight hours: one cache line of the summary, read ahead a chunk of
//! candidates at a time so the cache misses overlap). The fastest nodes
//! are predicted first, so the `count`-th best tightens early. Only nodes
//! that pass both bounds are predicted, and the picks are the same as
//! ranking every node by its prediction (a property test checks this).
//!
//! [`Summary::finish_bound`]: crate::profile::summary::Summary::finish_bound

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{Candidate, Context, Policy, top_by_key};
use crate::profile::summary::Job;

/// See the module documentation.
pub struct History;

/// Key of candidates passed over by a bound (never among the picks).
const PRUNED: [u64; 2] = [u64::MAX - 1, 0];

/// Slack on a bound, so that rounding cannot pass over a node whose
/// prediction ties the `count`-th best.
const SLACK: f64 = 1.0 + 1e-9;

/// Candidates whose summaries are read ahead together.
const CHUNK: usize = 32;

impl Policy for History {
    fn needs_length(&self) -> bool {
        true
    }

    fn rank(&self, c: &mut [Candidate<'_>], count: usize, ctx: &mut Context<'_>) {
        let cpu = ctx.expected_cpu_secs.unwrap_or(0.0);
        let job = Job::new(ctx.week_secs, cpu);
        // The fastest nodes with a summary first, so the `count`-th best
        // is tight early.
        let front = (2 * count + 16).min(c.len());
        move_fastest_first(c, front);
        // The `count` best predictions so far (as f64 bits: non-negative
        // floats order like their bits), largest on top, and the slowest
        // speed (in thousandths) that can still beat the largest.
        let mut best: BinaryHeap<u64> = BinaryHeap::with_capacity(count + 1);
        let mut min_speed = 0.0f64;
        // Predicted candidates are gathered at the front.
        let mut predicted = 0;
        let mut touched = 0.0;
        for i in 0..c.len() {
            if i.is_multiple_of(CHUNK) {
                // Read the summaries the speed bound lets through in the
                // next chunk before working on any: their cache misses
                // then overlap instead of coming one after another.
                for cand in &c[i..(i + CHUNK).min(c.len())] {
                    if let Some(s) = cand.hot.summary.as_deref()
                        && cand.hot.speed_milli as f64 >= min_speed
                    {
                        touched += s.speed();
                    }
                }
            }
            let cand = &mut c[i];
            let Some(summary) = cand.hot.summary.as_deref() else {
                continue;
            };
            if best.len() == count {
                let kth = f64::from_bits(*best.peek().unwrap_or(&0));
                if (cand.hot.speed_milli as f64) < min_speed
                    || summary.finish_bound_of(&job) > kth * SLACK
                {
                    cand.key = PRUNED;
                    continue;
                }
            }
            cand.predicted = summary.predict_of(&job);
            // Never idle (no prediction): ranked with the nodes without a
            // summary.
            if let Some(t) = cand.predicted {
                let bits = t.max(0.0).to_bits();
                cand.key = [bits, cand.idle_then_name()];
                // Most predictions lose to the `count`-th best: the heap
                // changes only for the others.
                let changed = if best.len() < count {
                    best.push(bits);
                    true
                } else if let Some(mut kth) = best.peek_mut().filter(|kth| bits < **kth) {
                    *kth = bits;
                    true
                } else {
                    false
                };
                if changed && best.len() == count {
                    // speed_milli < cpu * 1000 / (kth * SLACK) means the
                    // speed bound is over kth * SLACK.
                    let kth = f64::from_bits(*best.peek().unwrap_or(&0));
                    min_speed = if kth > 0.0 {
                        cpu * 1000.0 / (kth * SLACK) * (1.0 - 1e-12)
                    } else {
                        0.0 // a zero-length job: every node ties
                    };
                }
                c.swap(predicted, i);
                predicted += 1;
            }
        }
        std::hint::black_box(touched);
        if predicted >= count {
            // Every node passed over has a bound, so a prediction, worse
            // than the `count` best predicted.
            top_by_key(&mut c[..predicted], count);
        } else {
            // Nothing was passed over: rank all, unpredictable ones last.
            for cand in &mut c[predicted..] {
                cand.key = [u64::MAX, cand.load_key()];
            }
            top_by_key(c, count);
        }
    }
}

/// Move the `front` fastest candidates with a summary to the front, found
/// with a small heap in one pass that moves nothing and computes no key.
fn move_fastest_first(c: &mut [Candidate<'_>], front: usize) {
    let mut fastest: BinaryHeap<Reverse<(u32, usize)>> = BinaryHeap::with_capacity(front + 1);
    for (i, cand) in c.iter().enumerate() {
        if cand.hot.summary.is_none() {
            continue;
        }
        let speed = cand.hot.speed_milli;
        if fastest.len() < front {
            fastest.push(Reverse((speed, i)));
        } else if fastest.peek().is_some_and(|Reverse((s, _))| speed > *s) {
            fastest.pop();
            fastest.push(Reverse((speed, i)));
        }
    }
    let mut at: Vec<usize> = fastest.into_iter().map(|Reverse((_, i))| i).collect();
    at.sort_unstable();
    // In ascending order each position is at least its destination, so no
    // swap moves one already placed.
    for (to, &from) in at.iter().enumerate() {
        c.swap(to, from);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use proptest::prelude::*;

    use super::*;
    use crate::profile::SLOTS;
    use crate::profile::summary::Summary;
    use crate::rng::{RandomSource, SeedableRng, SplitMix64};
    use crate::table::Hot;

    fn hot(i: usize, summary: Option<Summary>, rng: &mut SplitMix64) -> Hot {
        let cpus = 1 + rng.below(8) as u32;
        let load_milli = rng.below(cpus as usize * 1500) as u32;
        Hot {
            deadline: Instant::now(),
            price: 0,
            cpus,
            load_milli,
            idle_milli: (cpus * 1000).saturating_sub(load_milli),
            speed_milli: summary
                .as_ref()
                .map_or(1000, |s| (s.speed() * 1000.0).round() as u32),
            name_hash: (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            summary: summary.map(Arc::new),
        }
    }

    /// Ranking every node by its full key (prediction, then idle CPUs and
    /// name; unpredictable nodes by load), with no bound.
    fn brute_force(hots: &[Hot], count: usize, week_secs: f64, cpu: f64) -> Vec<usize> {
        let mut keyed: Vec<([u64; 2], usize)> = hots
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let c = Candidate {
                    position: i,
                    hot: h,
                    key: [0; 2],
                    predicted: None,
                };
                let key = match c.predict(week_secs, cpu) {
                    Some(t) => [t.max(0.0).to_bits(), c.idle_then_name()],
                    None => [u64::MAX, c.load_key()],
                };
                (key, i)
            })
            .collect();
        keyed.sort();
        keyed.into_iter().take(count).map(|(_, i)| i).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        /// The bounds only skip work: the picks, in order, are those of
        /// ranking every node, on tables with desktop-like profiles, flat
        /// ones, identical ones (ties), never-idle ones and none at all.
        #[test]
        fn picks_the_same_nodes_as_ranking_every_node(
            seed in any::<u64>(),
            nodes in 1usize..400,
            count in 1usize..40,
            start in 0.0..(crate::clock::WEEK_SECS as f64),
            cpu in prop_oneof![1.0..7200.0f64, 1.0..(2.0 * crate::clock::WEEK_SECS as f64)],
        ) {
            let mut rng = SplitMix64::seed_from_u64(seed);
            let shared = Summary::from_busy(&[0.3; SLOTS], 1.0);
            let hots: Vec<Hot> = (0..nodes)
                .map(|i| {
                    let summary = match rng.below(10) {
                        0 => None,
                        1 => Some(Summary::from_busy(&[1.0; SLOTS], 1.0)),
                        2 | 3 => Some(shared.clone()),
                        4 => Some(Summary::from_busy(&[rng.unit(); SLOTS], 0.5 + rng.unit())),
                        _ => {
                            let base = rng.unit() * 0.7;
                            let busy: Vec<f64> = (0..SLOTS)
                                .map(|s| {
                                    let work = s / 144 < 5 && (48..108).contains(&(s % 144));
                                    if work { (base + 0.4 * rng.unit()).min(1.0) } else { 0.1 * rng.unit() }
                                })
                                .collect();
                            Some(Summary::from_busy(&busy, 0.5 + rng.below(3) as f64 * 0.25))
                        }
                    };
                    hot(i, summary, &mut rng)
                })
                .collect();
            let count = count.min(nodes);
            let mut cands: Vec<Candidate<'_>> = hots
                .iter()
                .enumerate()
                .map(|(i, h)| Candidate { position: i, hot: h, key: [0; 2], predicted: None })
                .collect();
            let mut pick_rng = SplitMix64::seed_from_u64(1);
            let mut ctx = Context { week_secs: start, expected_cpu_secs: Some(cpu), rng: &mut pick_rng };
            History.rank(&mut cands, count, &mut ctx);
            let got: Vec<usize> = cands[..count].iter().map(|c| c.position).collect();
            prop_assert_eq!(got, brute_force(&hots, count, start, cpu));
        }
    }
}
