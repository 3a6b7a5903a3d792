//! `history`, after Ring Leader: the earliest predicted completion of the
//! expected CPU length, from each node's availability summary and speed,
//! starting now. Nodes without a summary (or never idle) come after every
//! node with a prediction, in least-loaded order.

use std::cmp::Ordering;

use super::{Candidate, Context, Policy, by_load_per_cpu, top_by};

/// See the module documentation.
pub struct History;

impl Policy for History {
    fn needs_length(&self) -> bool {
        true
    }

    fn rank(&self, c: &mut Vec<Candidate<'_>>, count: usize, ctx: &mut Context<'_>) {
        let cpu = ctx.expected_cpu_secs.unwrap_or(0.0);
        for cand in c.iter_mut() {
            cand.predicted = cand.predict(ctx.week_secs, cpu);
        }
        top_by(c, count, |a, b| {
            match (a.predicted, b.predicted) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => by_load_per_cpu(&a.status, &b.status),
            }
            .then(b.idle_cpus.cmp(&a.idle_cpus))
            .then_with(|| a.name().cmp(b.name()))
        });
    }
}
