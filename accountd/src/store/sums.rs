//! The balances' sum for metrics, kept by the writer thread without costing
//! a group commit anything: it is read (one query over every account) at
//! most once per [`EVERY`], after the batch's answers are sent, and, when
//! writes stop, once more within [`EVERY`] of the last one, while the writer
//! waits for work. The gauge lags the ledger by at most [`EVERY`].

use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::rows::Writer;
use crate::metrics::StoreMeters;

/// Longest the balances' sum may lag a write.
pub const EVERY: Duration = Duration::from_secs(1);

/// When the balances' sum was read and whether writes came since.
pub struct BalanceSums<'m> {
    meters: &'m StoreMeters,
    read_at: Instant,
    stale: bool,
    /// Waits for work with a deadline (the writer thread is not async).
    clock: Option<tokio::runtime::Runtime>,
}

impl<'m> BalanceSums<'m> {
    /// Reads the sum once, to start.
    pub fn new(conn: &mut dyn Writer, meters: &'m StoreMeters) -> BalanceSums<'m> {
        let clock = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|e| tracing::warn!(error = %e, "no timer for the balances' sum"))
            .ok();
        let mut s = BalanceSums {
            meters,
            read_at: Instant::now(),
            stale: true,
            clock,
        };
        s.read(conn);
        s
    }

    fn read(&mut self, conn: &mut dyn Writer) {
        match conn.balances() {
            Ok(sum) => self.meters.set_balances(sum),
            Err(e) => tracing::debug!(error = %e, "cannot sum the balances"),
        }
        self.read_at = Instant::now();
        self.stale = false;
    }

    /// A group commit wrote something: the sum is read when due.
    pub fn wrote(&mut self, conn: &mut dyn Writer) {
        self.stale = true;
        if self.read_at.elapsed() >= EVERY {
            self.read(conn);
        }
    }

    /// The next job, `None` once the queue is closed; when the sum is stale
    /// and no job comes before it is due, reads it first.
    pub fn next_job<J>(&mut self, conn: &mut dyn Writer, rx: &mut mpsc::Receiver<J>) -> Option<J> {
        if self.stale
            && let Some(clock) = &self.clock
        {
            let left = EVERY.saturating_sub(self.read_at.elapsed());
            // The timer is made inside the runtime that drives it.
            match clock.block_on(async { tokio::time::timeout(left, rx.recv()).await }) {
                Ok(job) => return job,
                Err(_) => self.read(conn),
            }
        }
        rx.blocking_recv()
    }
}
