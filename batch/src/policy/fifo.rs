//! First come, first served, with no backfilling (`fifo`), EASY backfilling (`easy`) or
//! conservative backfilling (`conservative`): the classic, valuation-blind schedulers.
//! The snapshot's queue is already in arrival order (the simulator and a live queue keep
//! it so as jobs arrive and return), so FIFO never sorts it.

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
        let order: Vec<usize> = (0..snap.queued.len()).collect();
        debug_assert!(
            order.windows(2).all(|w| {
                let (a, b) = (snap.queued[w[0]].job, snap.queued[w[1]].job);
                (a.submit, a.id) < (b.submit, b.id)
            }),
            "the snapshot's queue is in arrival order"
        );
        schedule(snap, &order, self.backfill)
    }
}
