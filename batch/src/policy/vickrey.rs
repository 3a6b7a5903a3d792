//! Geweke's Vickrey scheduler: every job, running or queued, is ranked by its bid per
//! processor per unit of time; the ranking is descended while the jobs fit; the first job
//! that does not fit sets the price every running job pays (second price); the
//! descent stops there (Geweke's PBS scheduler, `fill: false`) or goes on running whatever
//! still fits (`fill: true`, the default: run what fits). Jobs above the line run (start or resume), running jobs below it are
//! suspended. Bids come from the jobs' utility functions, so they change with time and a
//! job can be suspended and resumed several times.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{Decision, Policy, Snapshot};
use crate::job::JobId;
use crate::utility::Micros;

/// Heap key: bid, running, earlier arrival, lower id, then the index into the job list.
type Rank = (Micros, bool, Reverse<i64>, Reverse<JobId>, usize);

/// The Vickrey scheduler.
#[derive(Debug, Clone, Copy)]
pub struct Vickrey {
    /// Keep descending past a job that does not fit (default); `false` is Geweke's
    /// original stop at the first misfit.
    pub fill: bool,
}

impl Policy for Vickrey {
    fn name(&self) -> String {
        if self.fill {
            "vickrey".into()
        } else {
            "vickrey-strict".into()
        }
    }

    fn decide(&mut self, snap: &Snapshot<'_>) -> Decision {
        let now = snap.now;
        // (bid, submit, id, width, running)
        let mut all: Vec<(Micros, i64, JobId, u32, bool)> = Vec::new();
        for q in snap.queued.iter() {
            all.push((
                q.job.bid_at(now, q.remaining_estimate()),
                q.job.submit,
                q.job.id,
                q.job.width,
                false,
            ));
        }
        for r in &snap.running {
            let rem = r.estimated_end(now) - now;
            all.push((
                r.job.bid_at(now, rem),
                r.job.submit,
                r.job.id,
                r.job.width,
                true,
            ));
        }
        // Highest bid first; among equal bids running jobs stay, then earlier arrivals.
        // A heap, not a sort: the descent usually ends long before the bottom of the queue.
        let mut heap: BinaryHeap<Rank> = all
            .iter()
            .enumerate()
            .map(|(i, &(b, submit, id, _, running))| (b, running, Reverse(submit), Reverse(id), i))
            .collect();
        // Descend the ranking: a job runs if it fits in what is left. Geweke's scheduler
        // stops at the first job that does not fit; with `fill` the descent goes on and
        // smaller, lower bids use the processors that would otherwise idle. Either way the
        // price is the bid of the highest-bidding job that cannot run.
        let mut left = snap.procs;
        let mut runs = vec![false; all.len()];
        let mut price = None;
        while let Some((b, _, _, _, i)) = heap.pop() {
            let w = all[i].3;
            if w <= left {
                left -= w;
                runs[i] = true;
            } else {
                price.get_or_insert(b.max(0));
                if !self.fill {
                    break;
                }
            }
            if left == 0 && price.is_some() {
                break;
            }
        }
        let price = price.unwrap_or(0);
        let mut d = Decision {
            price: Some(price),
            ..Decision::default()
        };
        for (k, &(_, _, id, _, running)) in all.iter().enumerate() {
            match (runs[k], running) {
                (true, false) => d.start.push(id),
                (false, true) => d.suspend.push(id),
                _ => {}
            }
        }
        d
    }
}
