//! The policy interface: a snapshot of the queue and the machine in, decisions out.
//!
//! A [`Policy`] sees a [`Snapshot`] (the time, the machine's size, the queued jobs with
//! their utility functions and work already done, the running jobs) and returns a
//! [`Decision`]: which queued jobs to start (or resume), which running jobs to suspend
//! (preemption is a suspension plus a start), the rate each started job is charged, and the
//! market price if the policy sets one. Nothing here knows about simulated time: the
//! [`crate::sim`] simulator and a live batch queue call the same code.
//!
//! One module per policy: [`fifo`] (FIFO, EASY, conservative), [`sjf`], [`priofifo`],
//! [`firstprice`] (with and without preemption), [`vickrey`], [`ga`]; the shared
//! backfilling engine is [`backfill`].

pub mod backfill;
pub mod fifo;
pub mod firstprice;
pub mod ga;
pub mod priofifo;
pub mod sjf;
pub mod vickrey;

use std::borrow::Cow;

use crate::job::{Job, JobId};
use crate::utility::Micros;

/// A job waiting to run (never started, or suspended).
#[derive(Debug, Clone, Copy)]
pub struct Queued<'a> {
    /// The job.
    pub job: &'a Job,
    /// Seconds of work already done (non-zero only for a suspended job).
    pub done: i64,
    /// How many times the job has been preempted or suspended.
    pub preempted: u32,
}

impl Queued<'_> {
    /// Estimated seconds still to run.
    pub fn remaining_estimate(&self) -> i64 {
        (self.job.estimate - self.done).max(1)
    }
}

/// A job holding processors.
#[derive(Debug, Clone, Copy)]
pub struct Running<'a> {
    /// The job.
    pub job: &'a Job,
    /// When it last started or resumed.
    pub since: i64,
    /// Seconds of work done before `since`.
    pub done_before: i64,
    /// How many times the job has been preempted or suspended.
    pub preempted: u32,
}

impl Running<'_> {
    /// Estimated end, never earlier than `now + 1`.
    pub fn estimated_end(&self, now: i64) -> i64 {
        (self.since + self.job.estimate - self.done_before).max(now + 1)
    }
}

/// What a policy sees.
#[derive(Debug, Clone)]
pub struct Snapshot<'a> {
    /// Current time (seconds).
    pub now: i64,
    /// Processors in the machine.
    pub procs: u32,
    /// Waiting jobs, in arrival order (submission time, then id; a queue shared by
    /// several batchd may be a tick out of it, and FIFO then sorts).
    /// Borrowed from the caller's queue when it keeps one (the simulator does), so a
    /// snapshot costs nothing per waiting job; a hand-built snapshot owns a `Vec`.
    pub queued: Cow<'a, [Queued<'a>]>,
    /// Running jobs.
    pub running: Vec<Running<'a>>,
}

impl Snapshot<'_> {
    /// Processors not held by running jobs.
    pub fn free(&self) -> u32 {
        let used: u32 = self.running.iter().map(|r| r.job.width).sum();
        self.procs.saturating_sub(used)
    }
}

/// What a policy decides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// Queued jobs to start or resume now.
    pub start: Vec<JobId>,
    /// Running jobs to suspend now (they keep their work and return to the queue).
    pub suspend: Vec<JobId>,
    /// Charging rate (micro-credits per processor-hour) for jobs started now; a job not
    /// listed is charged nothing.
    pub rates: Vec<(JobId, Micros)>,
    /// A market price (micro-credits per processor-hour) that every running job pays from
    /// now on, replacing individual rates (the Vickrey scheduler).
    pub price: Option<Micros>,
    /// The most eligible job that could not start, and when the policy promised it would.
    pub reserved: Option<(JobId, i64)>,
}

/// A batch queue policy.
pub trait Policy {
    /// Short name used in tables ("firstprice", "easy", ...).
    fn name(&self) -> String;
    /// Decide what to do now.
    fn decide(&mut self, snap: &Snapshot<'_>) -> Decision;
    /// The waiting jobs in the order this policy considers them now (most eligible
    /// first), as positions in `snap.queued`, for showing a queue to its users. The
    /// simulator never asks, so a policy that orders lazily pays for it only in a
    /// live queue. By arrival unless the policy orders otherwise.
    fn order_at(&self, snap: &Snapshot<'_>) -> Vec<usize> {
        (0..snap.queued.len()).collect()
    }

    /// [`Policy::order_at`] as job ids.
    fn order(&self, snap: &Snapshot<'_>) -> Vec<JobId> {
        self.order_at(snap)
            .into_iter()
            .map(|i| snap.queued[i].job.id)
            .collect()
    }

    /// [`Policy::decide`] and [`Policy::order_at`] of one snapshot, as a live queue
    /// asks for both at each decision: a policy that ranks the whole queue to decide
    /// does it once for both.
    fn decide_and_order(&mut self, snap: &Snapshot<'_>) -> (Decision, Vec<usize>) {
        let d = self.decide(snap);
        (d, self.order_at(snap))
    }
}

/// Every policy by name, for the command line. `ga_budget` applies to `ga`.
pub fn by_name(name: &str, seed: u64, ga: ga::GaConfig) -> Option<Box<dyn Policy>> {
    use backfill::Backfill;
    Some(match name {
        "fifo" => Box::new(fifo::Fifo::new(Backfill::None)),
        "easy" => Box::new(fifo::Fifo::new(Backfill::Easy)),
        "conservative" => Box::new(fifo::Fifo::new(Backfill::Conservative)),
        "sjf" => Box::new(sjf::Sjf),
        "priofifo" => Box::new(priofifo::PrioFifo::default()),
        "firstprice" => Box::new(firstprice::FirstPrice { preempt: false }),
        "firstprice-preempt" => Box::new(firstprice::FirstPrice { preempt: true }),
        "vickrey" => Box::new(vickrey::Vickrey::new(true)),
        "vickrey-strict" => Box::new(vickrey::Vickrey::new(false)),
        "ga" => Box::new(ga::Ga::new(ga, seed)),
        _ => return None,
    })
}

/// Names accepted by [`by_name`].
pub const NAMES: &[&str] = &[
    "fifo",
    "easy",
    "conservative",
    "sjf",
    "priofifo",
    "firstprice",
    "firstprice-preempt",
    "vickrey",
    "vickrey-strict",
    "ga",
];
