//! First come, first served, with no backfilling (`fifo`), EASY backfilling (`easy`) or
//! conservative backfilling (`conservative`): the classic, valuation-blind schedulers.
//! The order is by submission time, then id. The simulator's queue is in that order
//! already, as is a live queue on one batchd, so FIFO only checks it. A live queue that
//! several batchd instances share numbers jobs in the database's order of arrival,
//! while each job's submission time is the clock of the instance that took it: two
//! jobs taken within a tick through different instances can be numbered against their
//! times, and FIFO then sorts (a debug build once asserted the order here, and a
//! leader panicked in the fault test).

use super::backfill::{Backfill, schedule};
use super::{Decision, Policy, Snapshot};

/// FIFO order under a backfilling mode.
#[derive(Debug, Clone)]
pub struct Fifo {
    backfill: Backfill,
}

impl Fifo {
    /// FIFO with the given backfilling.
    pub fn new(backfill: Backfill) -> Self {
        Fifo { backfill }
    }
}

impl Policy for Fifo {
    fn name(&self) -> String {
        match self.backfill {
            Backfill::None => "fifo",
            Backfill::Easy => "easy",
            Backfill::Conservative => "conservative",
        }
        .to_string()
    }

    fn decide(&mut self, snap: &Snapshot<'_>) -> Decision {
        let key = |i: usize| {
            let j = snap.queued[i].job;
            (j.submit, j.id)
        };
        let mut order: Vec<usize> = (0..snap.queued.len()).collect();
        if !order.windows(2).all(|w| key(w[0]) <= key(w[1])) {
            order.sort_by_key(|&i| key(i));
        }
        schedule(snap, &order, self.backfill)
    }
}
