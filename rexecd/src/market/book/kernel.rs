//! What the book asks of the kernel for its ranks: the ticket count each rank's weight
//! follows, each rank's CFS bandwidth cap, and, for contended single-threaded ranks,
//! where their threads may run (`control::placement`).

use super::{Book, control};
use crate::cgroup::CpuQuota;
use crate::market::placer::PlacedJob;
use money::Bid;

/// Tickets of a placed rank whose weight hint is 1 (`Book::placement`); hints are at
/// most 49, so the largest stays well inside the tickets of bids (2^20).
const PLACED_TICKETS: f64 = 4096.0;

/// Where the placed ranks run and what their weights follow (`Book::placement`).
#[derive(Debug, Clone, PartialEq)]
pub struct Placed {
    /// Each placed rank: its cgroup, slot and allocation.
    pub jobs: Vec<PlacedJob>,
    /// Every rank's ticket count, by cgroup id.
    pub tickets: Vec<(u64, u64)>,
    /// Each rank's CFS bandwidth cap, by cgroup id (see [`Book::placement`]).
    pub caps: Vec<(u64, Option<CpuQuota>)>,
}

impl Book {
    /// The ticket count each rank's kernel weight should follow: tickets from the bids
    /// in force, times the closed-loop gain.
    pub fn weight_tickets(&self) -> Vec<(u64, u64)> {
        let bids: Vec<Bid> = self.ranks.values().map(|r| r.effective_bid()).collect();
        stride::tickets_for_bids(&bids)
            .into_iter()
            .zip(self.ranks.values())
            .map(|(t, r)| (r.cgroup, control::corrected_tickets(t, r.share.gain)))
            .collect()
    }

    /// Each rank's CFS bandwidth cap (by cgroup id): under closed-loop control, while
    /// the node is contended, its model allocation scaled to what the jobs reach (see
    /// `control::caps`); else none.
    pub fn caps(&self, closed_loop: bool) -> Vec<(u64, Option<CpuQuota>)> {
        self.caps_paying(closed_loop, true)
    }

    /// [`Self::caps`], with each cap moved by the rank's lag (`pay_lag`) or not: a
    /// bound at the allocation alone, where the weights divide below it.
    fn caps_paying(&self, closed_loop: bool, pay_lag: bool) -> Vec<(u64, Option<CpuQuota>)> {
        let model: Vec<f64> = self
            .ranks
            .values()
            .map(|r| r.model_milli as f64 / 1000.0)
            .collect();
        // What each rank is owed over the next tick: its lag over the tick's length.
        let owed: Vec<f64> = self
            .ranks
            .values()
            .map(|r| {
                if pay_lag && r.tick_secs > 0.0 {
                    r.share.lag / r.tick_secs
                } else {
                    0.0
                }
            })
            .collect();
        control::caps::caps(&model, &owed, closed_loop && self.contended, self.reach)
            .into_iter()
            .zip(self.ranks.values())
            .map(|(c, r)| (r.cgroup, c))
            .collect()
    }

    /// While the node is contended by single-threaded ranks only, where each rank's
    /// thread may run (`control::placement`), by cgroup, and the ticket count each
    /// rank's weight should then follow: the placement's weight hints times the
    /// closed-loop gain (instead of [`Self::weight_tickets`]). `None` when placement
    /// does not apply.
    pub fn placement(&self) -> Option<Placed> {
        if !self.contended {
            return None;
        }
        let inputs: Vec<control::placement::Input> = self
            .ranks
            .values()
            .map(|r| control::placement::Input {
                allocation: r.model_milli as f64 / 1000.0,
                demand: r.demand,
            })
            .collect();
        let plan = control::placement::plan(self.cpus as usize, &inputs)?;
        let packed = plan.packed;
        let jobs: Vec<PlacedJob> = plan
            .slots
            .into_iter()
            .zip(&inputs)
            .zip(self.ranks.values())
            .filter_map(|((slot, input), r)| {
                slot.map(|slot| PlacedJob {
                    cgroup: r.cgroup,
                    slot,
                    allocation: input.allocation,
                })
            })
            .collect();
        let tickets = plan
            .hints
            .iter()
            .zip(self.ranks.values())
            .map(|(&hint, r)| {
                let base = (hint * PLACED_TICKETS).round().max(1.0) as u64;
                (r.cgroup, control::corrected_tickets(base, r.share.gain))
            })
            .collect();
        // Packed, every rank is capped at its allocation while the layout turns, the
        // caps paying back lags. Split, only the split ranks are, and at their
        // allocation (times the reach) alone: each shares every CPU it visits with a
        // pinned rank, so its cap never leaves a CPU idle; it bounds what the weights
        // alone did not, a split rank ahead of its share for whole intervals (issue 41:
        // 3.8 to 4.3 points of one CPU over 5 s in one run of ten, the loop beside it
        // starved), and leaves the division below it to the weights, which a cap
        // that also paid back lags would correct a second time.
        let caps = if packed {
            self.caps(true)
        } else {
            let split: Vec<u64> = jobs
                .iter()
                .filter(|j| !j.slot.is_pinned())
                .map(|j| j.cgroup)
                .collect();
            self.caps_paying(true, false)
                .into_iter()
                .map(|(id, c)| (id, c.filter(|_| split.contains(&id))))
                .collect()
        };
        Some(Placed {
            jobs,
            tickets,
            caps,
        })
    }
}
