//! PRIOFIFO, the supercomputing centre policy: several FIFO queues with strict priorities,
//! the earliest job of the highest non-empty queue is most eligible, EASY backfilling
//! within that order, and each queue charges its own rate per processor-hour.

use super::backfill::{Backfill, order_by, schedule};
use super::{Decision, Policy, Snapshot};
use crate::utility::{MICROS_PER_CREDIT, Micros};

/// PRIOFIFO with per-queue charging rates (index = queue, 0 the highest priority).
#[derive(Debug, Clone)]
pub struct PrioFifo {
    /// Micro-credits per processor-hour charged by each queue; queues past the end pay the
    /// last rate.
    pub rates: Vec<Micros>,
}

impl Default for PrioFifo {
    fn default() -> Self {
        PrioFifo {
            rates: vec![
                4 * MICROS_PER_CREDIT,
                2 * MICROS_PER_CREDIT,
                MICROS_PER_CREDIT,
            ],
        }
    }
}

impl Policy for PrioFifo {
    fn name(&self) -> String {
        "priofifo".into()
    }

    fn decide(&mut self, snap: &Snapshot<'_>) -> Decision {
        let order = order_by(snap, |i| snap.queued[i].job.queue);
        let mut d = schedule(snap, &order, Backfill::Easy);
        d.rates = d
            .start
            .iter()
            .map(|&id| {
                let q = snap
                    .queued
                    .iter()
                    .find(|q| q.job.id == id)
                    .map(|q| q.job.queue);
                let qi = q.unwrap_or(0) as usize;
                let rate = self
                    .rates
                    .get(qi)
                    .or(self.rates.last())
                    .copied()
                    .unwrap_or(0);
                (id, rate)
            })
            .collect();
        d
    }

    fn order(&self, snap: &Snapshot<'_>) -> Vec<crate::job::JobId> {
        super::ids_by(snap, |i| snap.queued[i].job.queue)
    }
}
