//! Geweke's Vickrey scheduler: every job, running or queued, is ranked by its bid per
//! processor per unit of time; the ranking is descended while the jobs fit; the first job
//! that does not fit sets the price every running job pays (second price); the
//! descent stops there (Geweke's PBS scheduler, `vickrey-strict`) or goes on running
//! whatever still fits (`vickrey`, the default: run what fits). Jobs above the line run
//! (start or resume), running jobs below it are suspended. Bids come from the jobs'
//! utility functions, so they change with time and a job can be suspended and resumed
//! several times.
//!
//! Under `vickrey-strict` the queue grows long and the descent ends near its top, so
//! waiting jobs' bids are computed lazily ([`bounds`]): the scheduler keeps, between decisions, an upper bound on
//! each waiting job's bid (its bid when last computed, since a utility that never rises
//! gives a bid that never rises while the job waits) and computes a bid only when its bound
//! could reach the line. A decision costs the running jobs plus the few waiting jobs near
//! the top, not the whole queue.
//!
//! A live queue asks for the decision and the order at once
//! ([`Policy::decide_and_order`]); the order ranks every waiting job anyway, so the
//! descent then walks that ranking merged with the running jobs' (the same sequence a
//! heap of them all would give) and keeps no bounds.

mod bounds;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{Decision, Policy, Snapshot};
use crate::job::JobId;
use crate::utility::Micros;

/// Heap key: bid, running, earlier arrival, lower id, then where the job is.
type Rank = (Micros, bool, Reverse<i64>, Reverse<JobId>, Slot);

/// A ranked job: index into the snapshot's running or queued jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    Running(usize),
    Queued(usize),
}

/// The Vickrey scheduler.
#[derive(Debug, Clone)]
pub struct Vickrey {
    fill: bool,
    lazy: bool,
    bounds: bounds::Bounds,
}

impl Vickrey {
    /// Run what fits (`true`, the `vickrey` policy) or stop at the first job that does not
    /// fit (`false`, Geweke's original rule, `vickrey-strict`).
    pub fn new(fill: bool) -> Self {
        Self::ranking(fill, !fill)
    }

    /// As [`Vickrey::new`], choosing whether waiting jobs are ranked lazily through their
    /// bounds or all at once (the decisions are the same; tests compare the two).
    pub fn ranking(fill: bool, lazy: bool) -> Self {
        Vickrey {
            fill,
            lazy,
            bounds: bounds::Bounds::default(),
        }
    }
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
        self.decide_with(snap, None)
    }

    fn order_at(&self, snap: &Snapshot<'_>) -> Vec<usize> {
        order_by_bid(snap, &bids(snap))
    }

    fn decide_and_order(&mut self, snap: &Snapshot<'_>) -> (Decision, Vec<usize>) {
        // The order ranks every waiting job, as the descent does: rank them once, and
        // descend that ranking merged with the running jobs'.
        let bids = bids(snap);
        let order = order_by_bid(snap, &bids);
        let d = self.decide_with(snap, Some((&bids, &order)));
        (d, order)
    }
}

/// The ranking a decision descends: a heap of the running and (all at once or
/// lazily) the waiting jobs, or the running jobs' ranks merged with the waiting
/// jobs' already ranked (their bids, and their positions by bid).
enum Ranking<'r> {
    Heap(BinaryHeap<Rank>),
    Merged {
        /// The running jobs' ranks, highest first, and the next one's place.
        running: Vec<Rank>,
        r: usize,
        bids: &'r [Micros],
        order: &'r [usize],
        /// The next waiting job's place in `order`.
        q: usize,
    },
}

impl Ranking<'_> {
    /// The highest rank not yet taken.
    fn next(&mut self, snap: &Snapshot<'_>) -> Option<Rank> {
        match self {
            Ranking::Heap(heap) => heap.pop(),
            Ranking::Merged {
                running,
                r,
                bids,
                order,
                q,
            } => {
                let waiting = order.get(*q).map(|&i| {
                    let j = snap.queued[i].job;
                    (
                        bids[i],
                        false,
                        Reverse(j.submit),
                        Reverse(j.id),
                        Slot::Queued(i),
                    )
                });
                match (running.get(*r), waiting) {
                    (Some(&a), Some(b)) if a < b => {
                        *q += 1;
                        Some(b)
                    }
                    (Some(&a), _) => {
                        *r += 1;
                        Some(a)
                    }
                    (None, b) => {
                        *q += 1;
                        b
                    }
                }
            }
        }
    }
}

/// Every waiting job's bid now.
fn bids(snap: &Snapshot<'_>) -> Vec<Micros> {
    snap.queued
        .iter()
        .map(|q| q.job.bid_at(snap.now, q.remaining_estimate()))
        .collect()
}

/// Positions in `snap.queued` by `bids`, highest first, as the descent ranks them.
fn order_by_bid(snap: &Snapshot<'_>, bids: &[Micros]) -> Vec<usize> {
    super::backfill::order_by(snap, |i| Reverse(bids[i]))
}

impl Vickrey {
    /// The decision over `snap`, given the waiting jobs already ranked (their bids now
    /// and their positions by bid) if they are.
    fn decide_with(
        &mut self,
        snap: &Snapshot<'_>,
        ranked: Option<(&[Micros], &[usize])>,
    ) -> Decision {
        let now = snap.now;
        // Highest bid first; among equal bids running jobs stay, then earlier arrivals.
        let running = snap.running.iter().enumerate().map(|(i, r)| {
            let bid = r.job.bid_at(now, r.estimated_end(now) - now);
            (
                bid,
                true,
                Reverse(r.job.submit),
                Reverse(r.job.id),
                Slot::Running(i),
            )
        });
        // Running what fits descends most of a short queue anyway: rank it all at once.
        // Stopping at the first misfit descends a little of a queue that grows: rank the
        // waiting jobs lazily, through their bounds.
        // Ranked already, they are merged in as the descent reaches them; the bounds,
        // not kept up by this decision, start afresh at the next lazy one.
        let lazy = self.lazy && ranked.is_none();
        let mut ranking = if let Some((bids, order)) = ranked {
            if self.lazy {
                self.bounds = bounds::Bounds::default();
            }
            let mut running: Vec<Rank> = running.collect();
            running.sort_unstable_by(|a, b| b.cmp(a));
            Ranking::Merged {
                running,
                r: 0,
                bids,
                order,
                q: 0,
            }
        } else if lazy {
            self.bounds.sync(snap);
            Ranking::Heap(running.collect())
        } else {
            let queued = snap.queued.iter().enumerate().map(|(i, q)| {
                let bid = q.job.bid_at(now, q.remaining_estimate());
                (
                    bid,
                    false,
                    Reverse(q.job.submit),
                    Reverse(q.job.id),
                    Slot::Queued(i),
                )
            });
            Ranking::Heap(running.chain(queued).collect())
        };
        // Descend the ranking: a job runs if it fits in what is left. Geweke's scheduler
        // stops at the first job that does not fit; with `fill` the descent goes on and
        // smaller, lower bids use the processors that would otherwise idle. Either way the
        // price is the bid of the highest-bidding job that cannot run.
        let mut left = snap.procs;
        let mut runs_running = vec![false; snap.running.len()];
        let mut starts: Vec<usize> = Vec::new();
        let mut price = None;
        loop {
            if lazy && let Ranking::Heap(heap) = &mut ranking {
                let line = heap.peek().map(|r| (r.0, r.1, r.2, r.3));
                self.bounds.pull(snap, line, &mut |bid, i| {
                    let q = &snap.queued[i];
                    let id = (Reverse(q.job.submit), Reverse(q.job.id));
                    heap.push((bid, false, id.0, id.1, Slot::Queued(i)));
                });
            }
            let Some((b, _, _, _, slot)) = ranking.next(snap) else {
                break;
            };
            let w = match slot {
                Slot::Running(i) => snap.running[i].job.width,
                Slot::Queued(i) => snap.queued[i].job.width,
            };
            if w <= left {
                left -= w;
                match slot {
                    Slot::Running(i) => runs_running[i] = true,
                    Slot::Queued(i) => starts.push(i),
                }
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
        starts.sort_unstable();
        if lazy {
            self.bounds.keep(snap, &starts);
        }
        Decision {
            price: Some(price.unwrap_or(0)),
            start: starts.iter().map(|&i| snap.queued[i].job.id).collect(),
            suspend: snap
                .running
                .iter()
                .zip(&runs_running)
                .filter(|(_, runs)| !**runs)
                .map(|(r, _)| r.job.id)
                .collect(),
            ..Decision::default()
        }
    }
}
