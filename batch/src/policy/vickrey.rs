//! Geweke's Vickrey scheduler: every job, running or queued, is ranked by its bid per
//! processor per unit of time; the ranking is descended while the jobs fit; the first job
//! that does not fit stops the descent and its bid is the price every running job pays
//! (second price). Jobs above the line run (start or resume), running jobs below it are
//! suspended. Bids come from the jobs' utility functions, so they change with time and a
//! job can be suspended and resumed several times.

use super::{Decision, Policy, Snapshot};
use crate::job::JobId;
use crate::utility::Micros;

/// The Vickrey scheduler.
#[derive(Debug, Clone, Copy)]
pub struct Vickrey;

impl Policy for Vickrey {
    fn name(&self) -> String {
        "vickrey".into()
    }

    fn decide(&mut self, snap: &Snapshot<'_>) -> Decision {
        let now = snap.now;
        // (bid, submit, id, width, running)
        let mut all: Vec<(Micros, i64, JobId, u32, bool)> = Vec::new();
        for q in &snap.queued {
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
        all.sort_by(|a, b| {
            b.0.cmp(&a.0)
                .then(b.4.cmp(&a.4))
                .then(a.1.cmp(&b.1))
                .then(a.2.cmp(&b.2))
        });
        let mut left = snap.procs;
        let mut cut = all.len();
        for (k, &(_, _, _, w, _)) in all.iter().enumerate() {
            if w > left {
                cut = k;
                break;
            }
            left -= w;
        }
        let price = if cut < all.len() {
            all[cut].0.max(0)
        } else {
            0
        };
        let mut d = Decision {
            price: Some(price),
            ..Decision::default()
        };
        for (k, &(_, _, id, _, running)) in all.iter().enumerate() {
            match (k < cut, running) {
                (true, false) => d.start.push(id),
                (false, true) => d.suspend.push(id),
                _ => {}
            }
        }
        d
    }
}
