//! The live queue's jobs by state, each set in arrival order: those queued
//! for processors (with a copy of what a decision reads of them, so it reads
//! them in order without looking each up), those holding processors (running
//! or suspended) and those waiting on a dependency. A decision visits these,
//! not every job the queue keeps (ended jobs and the tasks of an array beyond
//! its window are never touched). Kept by [`super::Queue::touched`], which
//! every change of a job's record calls.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use batch::utility::Utility;
use proto::batch::{JobSpec, JobState};

use super::Job;

/// What a decision reads of a queued job, as it was when last touched.
#[derive(Debug, Clone)]
pub struct QueuedJob {
    /// Its id.
    pub id: u64,
    /// Its spec (an array's, shared by its tasks).
    pub spec: Arc<JobSpec>,
    /// Its utility, shared with the job's (see [`Job::utility`]).
    pub utility: Utility,
    /// When it was submitted, UTC ms.
    pub submitted_ms: i64,
    /// When it last started, UTC ms.
    pub started_ms: Option<i64>,
    /// Work done before, ms.
    pub done_ms: i64,
    /// Suspensions so far.
    pub preempted: u32,
    /// Its array and index, if a task.
    pub array: Option<(u64, u32)>,
}

/// Arrival number to job id, for each state a decision looks at.
#[derive(Debug, Default)]
pub struct Index {
    /// Queued jobs.
    pub queued: BTreeMap<i64, QueuedJob>,
    /// Running or suspended jobs.
    pub holding: BTreeMap<i64, u64>,
    /// Jobs waiting on a dependency.
    pub dependent: BTreeMap<i64, u64>,
    /// Each array's lowest and highest arrival number, by the array's id.
    pub spans: HashMap<u64, (i64, i64)>,
}

impl Index {
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
                    spec: j.spec.clone(),
                    utility: j.utility.clone(),
                    submitted_ms: j.rec.submitted_ms,
                    started_ms: j.rec.started_ms,
                    done_ms: j.rec.done_ms,
                    preempted: j.preempted,
                    array: j.rec.array,
                };
                self.queued.insert(seq, q);
                return;
            }
            JobState::Running | JobState::Suspended => &mut self.holding,
            JobState::Dependent => &mut self.dependent,
            _ => return,
        };
        set.insert(seq, id);
    }
}
