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
        let order = order_by(snap, |i| snap.queued[i].remaining_estimate());
        schedule(snap, &order, Backfill::Easy)
    }

    fn order(&self, snap: &Snapshot<'_>) -> Vec<crate::job::JobId> {
        super::ids_by(snap, |i| snap.queued[i].remaining_estimate())
    }
}
