//! The queue as a `batch::policy::Snapshot`: what the simulator's policies
//! see, built from the live queue at a decision (a tick of its [`Clock`], or a
//! job's end). Times are whole seconds since the queue's epoch, rounded down;
//! a job's `submit` is the first tick at or after its submission (when the
//! queue first saw it), and a job submitted after the instant being decided
//! waits for the next tick; `estimate` and (unknown to
//! the queue) `runtime` its owner's length; its utility is its `Worth`: a rate
//! `r` per CPU-minute is the constant utility `r × width × length` in minutes,
//! a utility function is taken as given (`Utility::new`). Its `queue` is its
//! PRIOFIFO priority. The policy's job ids are the queue's arrival numbers
//! (`seq`), so ties break by arrival as in the simulator.

use std::borrow::Cow;

use batch::job::Job as SimJob;
use batch::policy::{Queued, Running, Snapshot};
use batch::utility::Utility;
use proto::batch::{JobSpec, JobState};

use super::clock::Clock;
use crate::queue::{Job, Queue};
use crate::terms::secs;

/// The simulator's view of one queued or running job.
pub fn sim_job(epoch_ms: i64, clock: Clock, j: &Job) -> SimJob {
    sim_job_of(
        epoch_ms,
        clock,
        j.rec.seq,
        j.rec.submitted_ms,
        &j.spec,
        &j.utility,
    )
}

/// The simulator's view of job `seq` of `spec`, submitted at `submitted_ms`,
/// worth `utility` (the job's, shared: no allocation).
fn sim_job_of(
    epoch_ms: i64,
    clock: Clock,
    seq: i64,
    submitted_ms: i64,
    spec: &JobSpec,
    utility: &Utility,
) -> SimJob {
    let estimate = spec.length_s.clamp(1, i64::MAX as u64) as i64;
    SimJob {
        id: seq as u64,
        submit: secs(epoch_ms, clock.seen_at(submitted_ms)),
        width: spec.width,
        runtime: estimate,
        estimate,
        utility: utility.clone(),
        queue: spec.priority,
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

/// Collects the jobs the policy decides over at `tick_ms` (a tick or an end), on a
/// market of `procs` processors (an array's queued tasks within its
/// [`crate::arrays::Window`]). It visits the jobs holding processors and the
/// queued ones from the queue's [`crate::queue::index::Index`], and jumps past
/// an array's remaining tasks once its window is full, so its cost follows
/// what the policy is shown, not how many jobs the queue keeps.
pub fn collect(q: &Queue, clock: Clock, tick_ms: i64, procs: u32) -> Jobs {
    let mut window = crate::arrays::Window::of(q, procs);
    let entry = |j: &Job| Entry {
        job: sim_job(q.epoch_ms, clock, j),
        since: secs(q.epoch_ms, j.rec.started_ms.unwrap_or(q.epoch_ms)),
        // Work is measured between decisions, which run a few ms after
        // their ticks: 999 ms between two ticks is one second, not zero.
        done: (j.rec.done_ms + 500).div_euclid(1000),
        preempted: j.preempted,
        id: j.rec.id,
    };
    let (mut suspended, mut running) = (Vec::new(), Vec::new());
    for j in q.index.holding.values().filter_map(|id| q.jobs.get(id)) {
        match j.rec.state {
            JobState::Suspended => suspended.push(entry(j)),
            JobState::Running => running.push(entry(j)),
            _ => {}
        }
    }
    // Waiting in arrival order, as the policy's ties break: the queued jobs
    // (in arrival order) with the suspended ones (so too) merged in as the
    // walk passes them, each entry written once.
    let mut waiting = Vec::with_capacity(q.index.queued.len() + suspended.len());
    let mut suspended = suspended.into_iter().peekable();
    let mut from = i64::MIN;
    'walk: loop {
        for (&seq, w) in q.index.queued.range(from..) {
            debug_assert!(
                q.jobs
                    .get(&w.id)
                    .is_some_and(|j| j.rec.state == JobState::Queued
                        && j.rec.submitted_ms == w.submitted_ms
                        && j.rec.done_ms == w.done_ms
                        && j.preempted == w.preempted),
                "the queue's index is out of date for job {}",
                w.id
            );
            if clock.seen_at(w.submitted_ms) > tick_ms {
                continue;
            }
            if window.admit(w.array) {
                while let Some(s) = suspended.next_if(|s| s.job.id < seq as u64) {
                    waiting.push(s);
                }
                waiting.push(Entry {
                    job: sim_job_of(q.epoch_ms, clock, seq, w.submitted_ms, &w.spec, &w.utility),
                    since: secs(q.epoch_ms, w.started_ms.unwrap_or(q.epoch_ms)),
                    done: (w.done_ms + 500).div_euclid(1000),
                    preempted: w.preempted,
                    id: w.id,
                });
            } else if let Some(end) = window.end(w.array)
                && end > seq
            {
                // None of the array's other queued tasks can be shown.
                from = end + 1;
                continue 'walk;
            }
        }
        break;
    }
    waiting.extend(suspended);
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
        self.waiting_id_of(seq).or_else(|| find(&self.running, seq))
    }

    /// The queue id of waiting policy job `seq`.
    pub fn waiting_id_of(&self, seq: u64) -> Option<u64> {
        find(&self.waiting, seq)
    }
}

/// The queue id of policy job `seq` among `entries` (in arrival order).
fn find(entries: &[Entry], seq: u64) -> Option<u64> {
    entries
        .binary_search_by_key(&(seq as i64), |e| e.job.id as i64)
        .ok()
        .map(|i| entries[i].id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terms::utility;
    use proto::batch::Worth;

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

    /// A signed job with nothing in it (the tests give the spec decoded).
    fn unsigned() -> std::sync::Arc<proto::batch::SignedJob> {
        std::sync::Arc::new(proto::batch::SignedJob {
            spec: vec![],
            signature: vec![],
            cert: vec![],
        })
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
        let mut rec = crate::store::JobRecord::queued(0, 1, "alice".into(), unsigned(), 0);
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

    /// The snapshot as it was built before the queue kept its index: every
    /// job walked in arrival order.
    fn collect_by_walking(q: &Queue, clock: Clock, tick_ms: i64, procs: u32) -> Vec<Vec<u64>> {
        let mut window = crate::arrays::Window::of(q, procs);
        let (mut waiting, mut running) = (Vec::new(), Vec::new());
        for j in q.in_order() {
            let e = vec![
                j.rec.id,
                j.rec.seq as u64,
                sim_job(q.epoch_ms, clock, j).submit as u64,
                secs(q.epoch_ms, j.rec.started_ms.unwrap_or(q.epoch_ms)) as u64,
                (j.rec.done_ms + 500).div_euclid(1000) as u64,
                j.preempted as u64,
            ];
            match j.rec.state {
                JobState::Queued if clock.seen_at(j.rec.submitted_ms) > tick_ms => {}
                JobState::Queued if !window.admit(j.rec.array) => {}
                JobState::Queued | JobState::Suspended => waiting.push(e),
                JobState::Running => running.push(e),
                _ => {}
            }
        }
        waiting.push(vec![u64::MAX]);
        waiting.extend(running);
        waiting
    }

    fn flat(jobs: &Jobs) -> Vec<Vec<u64>> {
        let e = |e: &Entry| {
            vec![
                e.id,
                e.job.id,
                e.job.submit as u64,
                e.since as u64,
                e.done as u64,
                e.preempted as u64,
            ]
        };
        let mut out: Vec<Vec<u64>> = jobs.waiting.iter().map(e).collect();
        out.push(vec![u64::MAX]);
        out.extend(jobs.running.iter().map(e));
        out
    }

    #[test]
    fn the_index_shows_the_policy_what_walking_every_job_did() {
        let mut q = Queue::default();
        let signed = unsigned();
        let mut next_id = 100;
        let mut add = |q: &mut Queue, spec: std::sync::Arc<JobSpec>, array, submitted_ms| {
            next_id += 1;
            let seq = q.take_seq();
            let mut rec = crate::store::JobRecord::queued(
                seq,
                next_id,
                "alice".into(),
                signed.clone(),
                submitted_ms,
            );
            rec.array = array;
            q.insert(Job::new(rec, spec));
            next_id
        };
        let single = std::sync::Arc::new(spec(2, 60, Worth::Rate(5)));
        let mut swept = spec(1, 30, Worth::Rate(1));
        swept.array = Some("0-39%3".parse().expect("a range"));
        let swept = std::sync::Arc::new(swept);
        let mut wide = spec(3, 30, Worth::Rate(2));
        wide.array = Some("0-19".parse().expect("a range"));
        let wide = std::sync::Arc::new(wide);
        let mut ids = Vec::new();
        for n in 0..10 {
            ids.push(add(&mut q, single.clone(), None, n * 700));
        }
        for i in 0..40 {
            ids.push(add(&mut q, swept.clone(), Some((7, i)), 1_000));
        }
        for n in 0..5 {
            ids.push(add(&mut q, single.clone(), None, 2_000 + n));
        }
        for i in 0..20 {
            // Submitted after some of the ticks decided below.
            ids.push(add(&mut q, wide.clone(), Some((8, i)), 6_500));
        }
        // Every state, in both arrays and between them.
        let states = [
            JobState::Running,
            JobState::Queued,
            JobState::Suspended,
            JobState::Held,
            JobState::Finished,
            JobState::Dependent,
            JobState::Queued,
            JobState::Cancelled,
        ];
        for (n, id) in ids.iter().enumerate() {
            if n % 3 == 0 {
                continue;
            }
            let j = q.jobs.get_mut(id).expect("a job");
            j.rec.state = states[(n * 7) % states.len()];
            if j.rec.state != JobState::Queued {
                j.rec.started_ms = Some(n as i64 * 100);
                j.rec.done_ms = n as i64 * 333;
                j.preempted = (n % 2) as u32;
            }
            q.touched(*id);
        }
        let clock = Clock::new(0, std::time::Duration::from_secs(1));
        for tick_ms in [0, 3_000, 5_000, 7_000, 60_000] {
            for procs in [1, 4, 9, 100] {
                let walked = collect_by_walking(&q, clock, tick_ms, procs);
                let jobs = collect(&q, clock, tick_ms, procs);
                assert_eq!(flat(&jobs), walked, "tick {tick_ms} on {procs} processors");
                for w in &walked {
                    if w.len() > 1 {
                        assert_eq!(jobs.id_of(w[1]), Some(w[0]));
                    }
                }
            }
        }
    }

    #[test]
    fn the_snapshot_shares_each_jobs_utility_and_shows_its_value() {
        let mut q = Queue::default();
        let signed = unsigned();
        let worths = [
            Worth::Rate(3_000_000),
            Worth::Utility(vec![(60, 10_000_000), (120, 0)]),
            Worth::Utility(vec![(30, 5_000_000), (90, -1_000_000)]),
        ];
        let states = [JobState::Queued, JobState::Suspended, JobState::Running];
        for (n, (worth, state)) in worths.iter().zip(states).enumerate() {
            let seq = q.take_seq();
            let mut rec = crate::store::JobRecord::queued(
                seq,
                10 + n as u64,
                "alice".into(),
                signed.clone(),
                0,
            );
            rec.state = state;
            q.insert(Job::new(rec, spec(2, 60, worth.clone())));
        }
        let jobs = collect(
            &q,
            Clock::new(0, std::time::Duration::from_secs(1)),
            5_000,
            8,
        );
        assert_eq!((jobs.waiting.len(), jobs.running.len()), (2, 1));
        for e in jobs.waiting.iter().chain(&jobs.running) {
            let j = &q.jobs[&e.id];
            // The policy sees the utility the spec stands for...
            assert_eq!(e.job.utility, utility(&j.spec), "job {}", e.id);
            // ...without a copy of it made for the decision.
            assert!(e.job.utility.shares(&j.utility), "job {} copied", e.id);
        }
    }

    #[test]
    fn times_are_whole_seconds_since_the_epoch_rounded_down() {
        assert_eq!(secs(1_000, 1_999), 0);
        assert_eq!(secs(1_000, 2_000), 1);
        assert_eq!(secs(1_000, 999), -1);
    }
}
