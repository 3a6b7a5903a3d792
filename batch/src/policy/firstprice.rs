//! FIRSTPRICE: a first-price auction for the processors. The most eligible job is the one
//! bidding most per processor per unit of time, its bid derived from the current value of
//! its utility function (so bids fall as a job waits); EASY backfilling never delays it;
//! each started job pays its own bid. With `preempt`, when the most eligible job cannot
//! start, it is swapped with a running job (not preempted before) if running them in the
//! swapped order gives more utility, the batch paper's pairwise rule.

use super::backfill::{Backfill, order_by, schedule_at};
use super::{Decision, Policy, Queued, Snapshot};
use crate::job::JobId;
use crate::utility::Micros;

/// FIRSTPRICE, optionally with preemption.
#[derive(Debug, Clone, Copy)]
pub struct FirstPrice {
    /// Swap a running job out for the most eligible queued one when that raises utility.
    pub preempt: bool,
}

/// The job's bid now (micro-credits per processor-hour).
pub fn bid(q: &Queued<'_>, now: i64) -> Micros {
    q.job.bid_at(now, q.remaining_estimate())
}

impl FirstPrice {
    /// The running job to swap out for the most eligible queued job, if any.
    fn swap(&self, snap: &Snapshot<'_>, order: &[usize]) -> Option<(JobId, usize)> {
        let now = snap.now;
        let free = snap.free();
        // The most eligible job that does not fit now.
        let &h = order.iter().find(|&&i| snap.queued[i].job.width > free)?;
        // Only if it is the head: every job ahead of it fits and would start anyway.
        let ahead: u32 = order
            .iter()
            .take_while(|&&i| i != h)
            .map(|&i| snap.queued[i].job.width)
            .sum();
        if ahead > 0 {
            return None;
        }
        let hq = &snap.queued[h];
        let h_est = hq.remaining_estimate();
        let h_val = |done_at: i64| hq.job.utility.value_at(done_at - hq.job.submit);
        let mut best: Option<(i128, JobId)> = None;
        for r in &snap.running {
            if r.preempted > 0 || free + r.job.width < hq.job.width {
                continue;
            }
            let r_rem = r.estimated_end(now) - now;
            let r_val = |done_at: i64| r.job.utility.value_at(done_at - r.job.submit) as i128;
            let keep = r_val(now + r_rem) + h_val(now + r_rem + h_est) as i128;
            let swap = h_val(now + h_est) as i128 + r_val(now + h_est + r_rem);
            let gain = swap - keep;
            if gain > 0 && best.is_none_or(|(g, _)| gain > g) {
                best = Some((gain, r.job.id));
            }
        }
        best.map(|(_, id)| (id, h))
    }
}

impl FirstPrice {
    /// The queue's bids now, and its positions by bid (highest first).
    fn ranked(snap: &Snapshot<'_>) -> (Vec<Micros>, Vec<usize>) {
        let bids: Vec<Micros> = snap.queued.iter().map(|q| bid(q, snap.now)).collect();
        let order = order_by(snap, |i| std::cmp::Reverse(bids[i]));
        (bids, order)
    }

    /// The decision over `snap` given its `bids` and the queue in `order`.
    fn decide_in(&self, snap: &Snapshot<'_>, bids: &[Micros], order: &[usize]) -> Decision {
        let (mut d, started) = match self.preempt.then(|| self.swap(snap, order)).flatten() {
            Some((victim, head)) => {
                // Schedule as if the victim had left: the head first, then the rest.
                let mut reduced = snap.clone();
                reduced.running.retain(|r| r.job.id != victim);
                let mut order2 = vec![head];
                order2.extend(order.iter().copied().filter(|&i| i != head));
                let (mut d, started) = schedule_at(&reduced, &order2, Backfill::Easy);
                d.suspend.push(victim);
                (d, started)
            }
            None => schedule_at(snap, order, Backfill::Easy),
        };
        d.rates = d
            .start
            .iter()
            .zip(started)
            .map(|(&id, i)| (id, bids[i].max(0)))
            .collect();
        d
    }
}

impl Policy for FirstPrice {
    fn name(&self) -> String {
        if self.preempt {
            "firstprice-preempt".into()
        } else {
            "firstprice".into()
        }
    }

    fn decide(&mut self, snap: &Snapshot<'_>) -> Decision {
        let (bids, order) = Self::ranked(snap);
        self.decide_in(snap, &bids, &order)
    }

    fn order_at(&self, snap: &Snapshot<'_>) -> Vec<usize> {
        Self::ranked(snap).1
    }

    fn decide_and_order(&mut self, snap: &Snapshot<'_>) -> (Decision, Vec<usize>) {
        let (bids, order) = Self::ranked(snap);
        (self.decide_in(snap, &bids, &order), order)
    }
}
