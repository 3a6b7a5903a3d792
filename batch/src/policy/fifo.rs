//! First come, first served, with no backfilling (`fifo`), EASY backfilling (`easy`) or
//! conservative backfilling (`conservative`): the classic, valuation-blind schedulers.

use super::backfill::{Backfill, order_by, schedule};
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
        let order = order_by(snap, |i| snap.queued[i].job.submit);
        schedule(snap, &order, self.backfill)
    }
}
