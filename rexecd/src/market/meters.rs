//! What the market counts as it works ([`MarketMeters`]): charges, debits journaled
//! and delivered, weight writes and their time, and the CPU time of ranks that have
//! ended, by owner. [`crate::metrics`] reads them at each scrape.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use super::book::Book;

/// What the market counts as it works.
#[derive(Debug)]
pub struct MarketMeters {
    charged: AtomicI64,
    /// CPU used by ranks that have ended, nanoseconds, by owner.
    ended_cpu_ns: Mutex<BTreeMap<String, u64>>,
    journaled: Counter,
    delivered: Counter,
    weight_writes: Counter,
    weight_write_seconds: Histogram,
}

impl Default for MarketMeters {
    fn default() -> Self {
        MarketMeters {
            charged: AtomicI64::new(0),
            ended_cpu_ns: Mutex::default(),
            journaled: Counter::default(),
            delivered: Counter::default(),
            weight_writes: Counter::default(),
            // 10 µs to about 0.16 s.
            weight_write_seconds: Histogram::new(exponential_buckets(1e-5, 4.0, 8)),
        }
    }
}

impl MarketMeters {
    /// A debit of `micros` micro-credits became due (sent to accountd or not).
    pub fn charged(&self, micros: i64) {
        self.charged.fetch_add(micros.max(0), Ordering::Relaxed);
    }

    /// A rank of `owner` ended having used `cpu_ns` nanoseconds of CPU in all (the
    /// caller holds the book's lock, in which the rank no longer is).
    pub fn rank_ended(&self, owner: &str, cpu_ns: u64) {
        let mut ended = self.ended_cpu();
        let total = ended.entry(owner.to_string()).or_default();
        *total = total.saturating_add(cpu_ns);
    }

    fn ended_cpu(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, u64>> {
        // Each update is one addition: a panic cannot leave it half done.
        self.ended_cpu_ns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// CPU seconds used on this node by each user: ended ranks' and the live ranks'
    /// in `book` as of their last sample (read under the book's lock, see
    /// [`MarketMeters::rank_ended`]).
    pub(crate) fn cpu_seconds_by_user(&self, book: &Book) -> BTreeMap<String, f64> {
        let mut ns: BTreeMap<String, u64> = self.ended_cpu().clone();
        for (_, r) in book.ranks() {
            let total = ns.entry(r.owner.clone()).or_default();
            *total = total.saturating_add(r.usage_ns);
        }
        ns.into_iter()
            .map(|(user, ns)| (user, ns as f64 / 1e9))
            .collect()
    }

    /// A debit was written to the journal.
    pub fn journaled(&self) {
        self.journaled.inc();
    }

    /// accountd applied a debit.
    pub fn delivered(&self) {
        self.delivered.inc();
    }

    /// One weight was written, the write having begun at `started`.
    pub fn weight_written(&self, started: Instant) {
        self.weight_writes.inc();
        self.weight_write_seconds
            .observe(started.elapsed().as_secs_f64());
    }
    /// Micro-credits charged so far.
    pub(crate) fn charged_micros(&self) -> i64 {
        self.charged.load(Ordering::Relaxed)
    }

    /// Debits written to the journal so far.
    pub(crate) fn journaled_count(&self) -> u64 {
        self.journaled.get()
    }

    /// Debits accountd applied so far.
    pub(crate) fn delivered_count(&self) -> u64 {
        self.delivered.get()
    }

    /// Weights written so far.
    pub(crate) fn weight_write_count(&self) -> u64 {
        self.weight_writes.get()
    }

    /// How long the weight writes took.
    pub(crate) fn weight_write_seconds(&self) -> &Histogram {
        &self.weight_write_seconds
    }
}
