//! The queue as a `batch::policy::Snapshot`: what the simulator's policies
//! see, built from the live queue on a tick of its [`Clock`]. Times are whole
//! seconds since the queue's epoch; a job's `submit` is the first tick at or
//! after its submission (when the queue first saw it), and a job submitted
//! after the tick being decided waits for the next one; `estimate` and (unknown to
//! the queue) `runtime` its owner's length; its utility is its `Worth`: a rate
//! `r` per CPU-minute is the constant utility `r × width × length` in minutes,
//! a utility function is taken as given (`Utility::new`). Its `queue` is its
//! PRIOFIFO priority. The policy's job ids are the queue's arrival numbers
//! (`seq`), so ties break by arrival as in the simulator.

use std::borrow::Cow;

use batch::job::Job as SimJob;
use batch::policy::{Queued, Running, Snapshot};
use batch::utility::Utility;
use proto::batch::{JobSpec, JobState, Worth};

use super::clock::Clock;
use crate::queue::{Job, Queue};

/// Seconds since the epoch of a UTC ms time.
pub fn secs(epoch_ms: i64, at_ms: i64) -> i64 {
    (at_ms - epoch_ms).div_euclid(1000)
}

/// The utility a spec stands for.
pub fn utility(spec: &JobSpec) -> Utility {
    match &spec.worth {
        Worth::Rate(r) => {
            let v = *r as i128 * spec.width as i128 * spec.length_s as i128 / 60;
            Utility::constant(v.clamp(0, i64::MAX as i128) as i64)
        }
        Worth::Utility(points) => {
            Utility::new(points.clone()).unwrap_or_else(|_| Utility::constant(0))
        }
    }
}

/// The simulator's view of one queued or running job.
pub fn sim_job(epoch_ms: i64, clock: Clock, j: &Job) -> SimJob {
    let estimate = j.spec.length_s.clamp(1, i64::MAX as u64) as i64;
    SimJob {
        id: j.rec.seq as u64,
        submit: secs(epoch_ms, clock.seen_at(j.rec.submitted_ms)),
        width: j.spec.width,
        runtime: estimate,
        estimate,
        utility: utility(&j.spec),
        queue: j.spec.priority,
        class: 0,
    }
}

/// The jobs a snapshot borrows: waiting (queued or suspended, not held) in
/// arrival order, and running, each with its done work in seconds.
pub struct Jobs {
    /// Waiting jobs.
    pub waiting: Vec<Entry>,
    /// Running jobs.
    pub running: Vec<Entry>,
}

/// One job of a snapshot.
pub struct Entry {
    /// As the policy sees it.
    pub job: SimJob,
    /// When it last started (running jobs), seconds.
    pub since: i64,
    /// Work done before, seconds.
    pub done: i64,
    /// Suspensions so far.
    pub preempted: u32,
    /// The queue's id.
    pub id: u64,
}

/// Collects the jobs the policy decides over on the tick at `tick_ms`, on a
/// market of `procs` processors (an array's queued tasks within its
/// [`crate::arrays::Window`]).
pub fn collect(q: &Queue, clock: Clock, tick_ms: i64, procs: u32) -> Jobs {
    let mut window = crate::arrays::Window::of(q, procs);
    let mut waiting = Vec::new();
    let mut running = Vec::new();
    for j in q.in_order() {
        let entry = || Entry {
            job: sim_job(q.epoch_ms, clock, j),
            since: secs(q.epoch_ms, j.rec.started_ms.unwrap_or(q.epoch_ms)),
            // Work is measured between decisions, which run a few ms after
            // their ticks: 999 ms between two ticks is one second, not zero.
            done: (j.rec.done_ms + 500).div_euclid(1000),
            preempted: j.preempted,
            id: j.rec.id,
        };
        match j.rec.state {
            JobState::Queued if clock.seen_at(j.rec.submitted_ms) > tick_ms => {}
            JobState::Queued if !window.admit(j.rec.array) => {}
            JobState::Queued | JobState::Suspended => waiting.push(entry()),
            JobState::Running => running.push(entry()),
            _ => {}
        }
    }
    Jobs { waiting, running }
}

impl Jobs {
    /// The snapshot at `now` for a machine of `procs` processors.
    pub fn snapshot(&self, now: i64, procs: u32) -> Snapshot<'_> {
        Snapshot {
            now,
            procs,
            queued: Cow::Owned(
                self.waiting
                    .iter()
                    .map(|e| Queued {
                        job: &e.job,
                        done: e.done,
                        preempted: e.preempted,
                    })
                    .collect(),
            ),
            running: self
                .running
                .iter()
                .map(|e| Running {
                    job: &e.job,
                    since: e.since,
                    done_before: e.done,
                    preempted: e.preempted,
                })
                .collect(),
        }
    }

    /// The queue id of policy job `seq`.
    pub fn id_of(&self, seq: u64) -> Option<u64> {
        self.waiting
            .iter()
            .chain(&self.running)
            .find(|e| e.job.id == seq)
            .map(|e| e.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(width: u32, length_s: u64, worth: Worth) -> JobSpec {
        JobSpec {
            id: proto::node::JobId(1),
            user: "alice".into(),
            argv: vec!["true".into()],
            env: vec![],
            cwd: None,
            width,
            length_s,
            worth,
            priority: 0,
            max_attempts: 1,
            signed_at: 0,
            expires_at: 1,
            array: None,
            after: Vec::new(),
            options: Default::default(),
        }
    }

    #[test]
    fn a_rate_is_its_value_over_the_job_and_back() {
        // 3 credits per CPU-minute, 4 CPUs, 10 minutes: 120 credits.
        let s = spec(4, 600, Worth::Rate(3_000_000));
        let u = utility(&s);
        assert_eq!(u.value_at(0), 120_000_000);
        assert_eq!(u.value_at(1_000_000), 120_000_000);
        assert_eq!(crate::queue::cost_estimate(&s), 120_000_000);
        assert_eq!(crate::queue::bid_rate(&s), 3_000_000);
        // The policy's bid (per processor-hour) for it is the same rate × 60.
        let job = batch::job::Job {
            id: 0,
            submit: 0,
            width: 4,
            runtime: 600,
            estimate: 600,
            utility: u,
            queue: 0,
            class: 0,
        };
        assert_eq!(job.bid_at(0, 600), crate::sched::apply::per_hour(3_000_000));
    }

    #[test]
    fn a_utility_is_taken_as_given_and_bids_its_top_value() {
        let s = spec(2, 60, Worth::Utility(vec![(60, 10_000_000), (120, 0)]));
        let u = utility(&s);
        assert_eq!(
            (u.value_at(60), u.value_at(90), u.value_at(200)),
            (10_000_000, 5_000_000, 0)
        );
        assert_eq!(crate::queue::cost_estimate(&s), 10_000_000);
        // 10 credits over 2 CPU-minutes.
        assert_eq!(crate::queue::bid_rate(&s), 5_000_000);
    }

    #[test]
    fn work_done_is_rounded_to_the_nearest_second() {
        let mut q = Queue::default();
        let spec = spec(1, 10, Worth::Rate(1));
        let mut rec = crate::store::JobRecord::queued(
            0,
            1,
            "alice".into(),
            std::sync::Arc::new(proto::batch::SignedJob {
                spec: vec![],
                signature: vec![],
                cert: vec![],
            }),
            0,
        );
        rec.state = JobState::Suspended;
        rec.done_ms = 999;
        q.insert(Job::new(rec, spec));
        let jobs = collect(
            &q,
            Clock::new(0, std::time::Duration::from_secs(1)),
            5_000,
            4,
        );
        assert_eq!(jobs.waiting[0].done, 1);
    }

    #[test]
    fn times_are_whole_seconds_since_the_epoch_rounded_down() {
        assert_eq!(secs(1_000, 1_999), 0);
        assert_eq!(secs(1_000, 2_000), 1);
        assert_eq!(secs(1_000, 999), -1);
    }
}
