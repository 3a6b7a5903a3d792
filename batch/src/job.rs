//! A batch job as the market sees it: when it arrives, how wide it is, how long it really
//! runs and how long its owner said it would, what it is worth, and which priority queue
//! and bid class it belongs to.

use crate::utility::{Micros, Utility};

/// A job's identifier, unique within a workload.
pub type JobId = u64;

/// One batch job.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Identifier.
    pub id: JobId,
    /// Submission time (seconds).
    pub submit: i64,
    /// Processors needed, all at once (rigid job).
    pub width: u32,
    /// Real run time in seconds (unknown to policies).
    pub runtime: i64,
    /// The owner's estimate (seconds), never below `runtime`; what policies plan with.
    pub estimate: i64,
    /// Value of completing, as a function of completion time after submission.
    pub utility: Utility,
    /// Priority queue for PRIOFIFO: 0 is the highest priority.
    pub queue: u8,
    /// Bid class for reporting (0 = high value, 1 = low value, ...).
    pub class: u8,
}

impl Job {
    /// Processor-seconds of real work.
    pub fn work(&self) -> i64 {
        self.runtime * self.width as i64
    }

    /// Bid in micro-credits per processor per hour if the job were to start at `now` with
    /// `remaining` estimated seconds left: the utility of completing then, spread over the
    /// processor-time still needed. Time-varying because the utility decays.
    pub fn bid_at(&self, now: i64, remaining: i64) -> Micros {
        rate_per_proc_hour(
            self.utility.value_at(now + remaining - self.submit),
            self.width,
            remaining,
        )
    }
}

/// `value` spread over `width` processors for `secs` seconds, per processor-hour.
pub fn rate_per_proc_hour(value: Micros, width: u32, secs: i64) -> Micros {
    let denom = (width.max(1) as i128) * (secs.max(1) as i128);
    (value as i128 * 3600 / denom) as Micros
}
