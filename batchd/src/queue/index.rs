//! The live queue's jobs by state, each set in arrival order: those queued
//! for processors (with a copy of what a decision reads of them, so it reads
//! them in order without looking each up), those holding processors (running
//! or suspended) and those waiting on a dependency. A decision visits these,
//! not every job the queue keeps (ended jobs and the tasks of an array beyond
//! its window are never touched). Each queued or holding job keeps its policy
//! entry (`batch::job::Job`), built when it is filed, so a decision borrows the
//! entries instead of building one per job. Kept by [`super::Queue::touched`],
//! which every change of a job's record calls.

use std::collections::{BTreeMap, HashMap};

use batch::job::Job as SimJob;
use proto::batch::JobState;

use super::Job;
use crate::sched::clock::Clock;

/// What a decision reads of a queued job, as it was when last touched.
#[derive(Debug, Clone)]
pub struct QueuedJob {
    /// Its id.
    pub id: u64,
    /// As the policy sees it (see [`Index::policy_job`]).
    pub job: SimJob,
    /// When it was submitted, UTC ms.
    pub submitted_ms: i64,
    /// Work done before, ms.
    pub done_ms: i64,
    /// Suspensions so far.
    pub preempted: u32,
    /// Its array and index, if a task.
    pub array: Option<(u64, u32)>,
}

/// A job holding processors (running or suspended): its id and policy entry.
#[derive(Debug, Clone)]
pub struct HeldJob {
    /// Its id.
    pub id: u64,
    /// As the policy sees it (see [`Index::policy_job`]).
    pub job: SimJob,
}

/// Arrival number to job, for each state a decision looks at.
#[derive(Debug, Default)]
pub struct Index {
    /// Queued jobs.
    pub queued: BTreeMap<i64, QueuedJob>,
    /// Running or suspended jobs.
    pub holding: BTreeMap<i64, HeldJob>,
    /// Jobs waiting on a dependency.
    pub dependent: BTreeMap<i64, u64>,
    /// Each array's lowest and highest arrival number, by the array's id.
    pub spans: HashMap<u64, (i64, i64)>,
    /// The queue's clock, which the policy entries' submission times follow.
    clock: Clock,
}

impl Index {
    /// The queue's clock (see [`super::Queue::set_clock`]).
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Sets the clock; the caller files every job again.
    pub(super) fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    /// Job `j` as the policy sees it. Times are whole seconds since the queue's
    /// epoch; its `submit` is the first tick at or after its submission (when the
    /// queue first saw it); `estimate` and (unknown to the queue) `runtime` its
    /// owner's length; its utility is its own, shared (no allocation); `queue` its
    /// PRIOFIFO priority; its id its arrival number (`seq`), so ties break by
    /// arrival as in the simulator. Nothing here changes while the job waits or
    /// runs, and the clock is fixed per queue, so it is built when the job is filed.
    pub fn policy_job(&self, j: &Job) -> SimJob {
        let estimate = j.spec.length_s.clamp(1, i64::MAX as u64) as i64;
        SimJob {
            id: j.rec.seq as u64,
            submit: crate::terms::secs(
                self.clock.epoch_ms(),
                self.clock.seen_at(j.rec.submitted_ms),
            ),
            width: j.spec.width,
            runtime: estimate,
            estimate,
            utility: j.utility.clone(),
            queue: j.spec.priority,
            class: 0,
        }
    }

    /// Notes that a task of `array` arrived as `seq`.
    pub fn arrived(&mut self, array: u64, seq: i64) {
        let span = self.spans.entry(array).or_insert((seq, seq));
        *span = (span.0.min(seq), span.1.max(seq));
    }

    /// Files job `j` under its state, out of any other set.
    pub fn set(&mut self, j: &Job) {
        let (seq, id) = (j.rec.seq, j.rec.id);
        self.queued.remove(&seq);
        self.holding.remove(&seq);
        self.dependent.remove(&seq);
        let set = match j.rec.state {
            JobState::Queued => {
                let q = QueuedJob {
                    id,
                    job: self.policy_job(j),
                    submitted_ms: j.rec.submitted_ms,
                    done_ms: j.rec.done_ms,
                    preempted: j.preempted,
                    array: j.rec.array,
                };
                self.queued.insert(seq, q);
                return;
            }
            JobState::Running | JobState::Suspended => {
                let job = self.policy_job(j);
                self.holding.insert(seq, HeldJob { id, job });
                return;
            }
            JobState::Dependent => &mut self.dependent,
            _ => return,
        };
        set.insert(seq, id);
    }
}
