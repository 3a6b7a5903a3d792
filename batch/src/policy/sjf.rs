//! Shortest job first: ordered by estimated remaining length (the batch paper orders SJF
//! by "smaller job CPU lengths"), with EASY backfilling.

use super::backfill::{Backfill, order_by, schedule};
use super::{Decision, Policy, Snapshot};

/// SJF with EASY backfilling.
#[derive(Debug, Clone, Copy)]
pub struct Sjf;

impl Policy for Sjf {
    fn name(&self) -> String {
        "sjf".into()
    }

    fn decide(&mut self, snap: &Snapshot<'_>) -> Decision {
        schedule(snap, &self.order_at(snap), Backfill::Easy)
    }

    fn order_at(&self, snap: &Snapshot<'_>) -> Vec<usize> {
        order_by(snap, |i| snap.queued[i].remaining_estimate())
    }

    fn decide_and_order(&mut self, snap: &Snapshot<'_>) -> (Decision, Vec<usize>) {
        let order = self.order_at(snap);
        (schedule(snap, &order, Backfill::Easy), order)
    }
}
