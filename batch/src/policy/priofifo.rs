//! PRIOFIFO, the supercomputing centre policy: several FIFO queues with strict priorities,
//! the earliest job of the highest non-empty queue is most eligible, EASY backfilling
//! within that order, and each queue charges its own rate per processor-hour.

use super::backfill::{Backfill, order_by, schedule_at};
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

impl PrioFifo {
    /// The decision over `snap` with its queue in `order`.
    fn decide_in(&self, snap: &Snapshot<'_>, order: &[usize]) -> Decision {
        let (mut d, started) = schedule_at(snap, order, Backfill::Easy);
        d.rates = d
            .start
            .iter()
            .zip(started)
            .map(|(&id, i)| {
                let qi = snap.queued[i].job.queue as usize;
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
}

impl Policy for PrioFifo {
    fn name(&self) -> String {
        "priofifo".into()
    }

    fn decide(&mut self, snap: &Snapshot<'_>) -> Decision {
        self.decide_in(snap, &self.order_at(snap))
    }

    fn order_at(&self, snap: &Snapshot<'_>) -> Vec<usize> {
        order_by(snap, |i| snap.queued[i].job.queue)
    }

    fn decide_and_order(&mut self, snap: &Snapshot<'_>) -> (Decision, Vec<usize>) {
        let order = self.order_at(snap);
        (self.decide_in(snap, &order), order)
    }
}
