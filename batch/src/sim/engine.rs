//! The simulator's state and its events: jobs completing, jobs arriving, and a policy's
//! decision checked and applied (suspensions, starts, the market price, reservations).
//! The queue is kept in arrival order incrementally (a suspended job goes back to its
//! place by binary search), so policies that want arrival order never sort.
//!
//! Time runs in milliseconds: arrivals fall on whole seconds (a job's `submit`), ends
//! fall wherever a job's run time puts them (whole seconds for a trace's `runtime`,
//! any millisecond for runs measured on the live queue). The policy sees whole seconds,
//! as the live queue shows it: `now` and a run's `since` rounded down, work done
//! rounded to the nearest second (`batchd::sched::snapshot`).

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::{Outcome, Segment, SimError, SimResult};
use crate::job::{Job, JobId};
use crate::policy::{Decision, Queued, Running, Snapshot};
use crate::utility::Micros;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Future,
    Queued,
    Running,
    Done,
}

/// Milliseconds to the whole seconds a policy sees, rounded down.
fn secs(ms: i64) -> i64 {
    ms.div_euclid(1000)
}

/// Work done in milliseconds to the policy's seconds, rounded to the nearest.
fn done_secs(ms: i64) -> i64 {
    (ms + 500).div_euclid(1000)
}

/// One job's bookkeeping (times and work in milliseconds).
#[derive(Clone, Copy)]
struct Js {
    state: State,
    done: i64,
    since: i64,
    preempted: u32,
    epoch: u32,
    rate: Micros,
    rate_since: i64,
    charge: i128,
    start: Option<i64>,
    end: i64,
}

impl Js {
    const NEW: Js = Js {
        state: State::Future,
        done: 0,
        since: 0,
        preempted: 0,
        epoch: 0,
        rate: 0,
        rate_since: 0,
        charge: 0,
        start: None,
        end: 0,
    };

    /// Charges what the job owes at its current rate up to `now` (micro-credits × 3 600 000).
    fn accrue(&mut self, width: u32, now: i64) {
        self.charge += self.rate as i128 * width as i128 * (now - self.rate_since) as i128;
        self.rate_since = now;
    }
}

/// A simulation in progress.
pub(super) struct Sim<'a> {
    jobs: &'a [Job],
    /// Each job's run time, ms.
    runtime_ms: Vec<i64>,
    /// Milliseconds per unit of the result's times (1000: seconds).
    unit: i64,
    procs: u32,
    name: String,
    /// Job indices in arrival order, and each job's position in it.
    order: Vec<usize>,
    rank: Vec<usize>,
    index: HashMap<JobId, usize>,
    st: Vec<Js>,
    /// Waiting jobs in arrival order, as indices and as the policy sees them.
    queue: Vec<usize>,
    queued: Vec<Queued<'a>>,
    running: Vec<usize>,
    /// `(end, job, epoch)`: an entry is stale once the job's epoch moved on.
    ends: BinaryHeap<Reverse<(i64, usize, u32)>>,
    next: usize,
    free: u32,
    res: SimResult,
}

impl<'a> Sim<'a> {
    /// A simulation of `jobs` whose runs last `runtime_ms`, reporting times in units
    /// of `unit` ms.
    pub(super) fn new(
        jobs: &'a [Job],
        runtime_ms: Vec<i64>,
        unit: i64,
        procs: u32,
        name: String,
    ) -> Self {
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by_key(|&i| (jobs[i].submit, jobs[i].id));
        let mut rank = vec![0usize; jobs.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i] = r;
        }
        Sim {
            jobs,
            runtime_ms,
            unit,
            procs,
            order,
            rank,
            index: jobs.iter().enumerate().map(|(i, j)| (j.id, i)).collect(),
            st: vec![Js::NEW; jobs.len()],
            queue: Vec::new(),
            queued: Vec::new(),
            running: Vec::new(),
            ends: BinaryHeap::new(),
            next: 0,
            free: procs,
            res: SimResult::empty(&name, procs),
            name,
        }
    }

    fn live(&self, i: usize, epoch: u32) -> bool {
        self.st[i].state == State::Running && self.st[i].epoch == epoch
    }

    /// When job `i` arrives, ms.
    fn arrival(&self, i: usize) -> i64 {
        self.jobs[i].submit.saturating_mul(1000)
    }

    /// The next instant (ms) something happens (an arrival or a completion), if any.
    pub(super) fn next_instant(&mut self) -> Option<i64> {
        while let Some(&Reverse((_, i, e))) = self.ends.peek() {
            if self.live(i, e) {
                break;
            }
            self.ends.pop();
        }
        let t_arr = self.order.get(self.next).map(|&i| self.arrival(i));
        let t_end = self.ends.peek().map(|r| r.0.0);
        match (t_arr, t_end) {
            (Some(a), Some(e)) => Some(a.min(e)),
            (a, e) => a.or(e),
        }
    }

    /// Records the segment job `i` ran since it last started, ending `now`.
    fn close_segment(&mut self, i: usize, now: i64) {
        let (job, s) = (&self.jobs[i], &mut self.st[i]);
        s.accrue(job.width, now);
        self.res.segments.push(Segment {
            job: job.id,
            start: s.since,
            end: now,
            width: job.width,
        });
        self.free += job.width;
        self.running.retain(|&r| r != i);
    }

    /// Finishes every job whose run ends at or before `now`.
    pub(super) fn complete_due(&mut self, now: i64) {
        while let Some(&Reverse((t, i, e))) = self.ends.peek() {
            if t > now {
                break;
            }
            self.ends.pop();
            if !self.live(i, e) {
                continue;
            }
            self.close_segment(i, now);
            let s = &mut self.st[i];
            s.state = State::Done;
            s.end = now;
            s.done = self.runtime_ms[i];
        }
    }

    /// Queues every job submitted at or before `now`.
    pub(super) fn admit_arrivals(&mut self, now: i64) {
        while let Some(&i) = self.order.get(self.next) {
            if self.arrival(i) > now {
                break;
            }
            self.st[i].state = State::Queued;
            self.queue.push(i);
            self.queued.push(self.as_queued(i));
            self.next += 1;
        }
    }

    fn as_queued(&self, i: usize) -> Queued<'a> {
        Queued {
            job: &self.jobs[i],
            done: done_secs(self.st[i].done),
            preempted: self.st[i].preempted,
        }
    }

    /// What the policy sees at `now`; the queue is lent, not copied.
    pub(super) fn snapshot(&self, now: i64) -> Snapshot<'_> {
        let (jobs, st) = (self.jobs, &self.st);
        Snapshot {
            now: secs(now),
            procs: self.procs,
            queued: Cow::Borrowed(&self.queued),
            running: self
                .running
                .iter()
                .map(|&i| Running {
                    job: &jobs[i],
                    since: secs(st[i].since),
                    done_before: done_secs(st[i].done),
                    preempted: st[i].preempted,
                })
                .collect(),
        }
    }

    fn policy_error(&self, now: i64, why: String) -> SimError {
        SimError::Policy {
            policy: self.name.clone(),
            now: secs(now),
            why,
        }
    }

    fn lookup(&self, now: i64, id: JobId, verb: &str) -> Result<usize, SimError> {
        self.index
            .get(&id)
            .copied()
            .ok_or_else(|| self.policy_error(now, format!("{verb} unknown job {id}")))
    }

    /// Checks and applies a decision taken at `now`.
    pub(super) fn apply(&mut self, now: i64, d: Decision) -> Result<(), SimError> {
        self.res.decisions += 1;
        for id in d.suspend {
            self.suspend(now, id)?;
        }
        for id in d.start {
            let rate = d.rates.iter().find(|r| r.0 == id).map(|r| r.1).unwrap_or(0);
            self.start(now, id, rate)?;
        }
        if let Some(p) = d.price {
            self.set_price(now, p);
        }
        if let Some((id, t)) = d.reserved {
            self.res.reservations.push((now, id, t));
        }
        Ok(())
    }

    /// Where job `i` is, or belongs, in the queue (which is in arrival order).
    fn queue_pos(&self, i: usize) -> usize {
        let rank = &self.rank;
        self.queue.partition_point(|&q| rank[q] < rank[i])
    }

    /// Suspends running job `id`: it keeps its work and returns to its place in the queue.
    fn suspend(&mut self, now: i64, id: JobId) -> Result<(), SimError> {
        let i = self.lookup(now, id, "suspends")?;
        if self.st[i].state != State::Running {
            let why = format!("suspends job {id}, which is not running");
            return Err(self.policy_error(now, why));
        }
        self.close_segment(i, now);
        let s = &mut self.st[i];
        s.done += now - s.since;
        s.state = State::Queued;
        s.preempted += 1;
        s.epoch += 1;
        let pos = self.queue_pos(i);
        self.queue.insert(pos, i);
        self.queued.insert(pos, self.as_queued(i));
        Ok(())
    }

    /// Starts (or resumes) queued job `id`, charged `rate` per processor-hour.
    fn start(&mut self, now: i64, id: JobId, rate: Micros) -> Result<(), SimError> {
        let i = self.lookup(now, id, "starts")?;
        if self.st[i].state != State::Queued {
            let why = format!("starts job {id}, which is not waiting");
            return Err(self.policy_error(now, why));
        }
        let width = self.jobs[i].width;
        if width > self.free {
            let why = format!(
                "starts job {id} of width {width} with {} processors free",
                self.free
            );
            return Err(self.policy_error(now, why));
        }
        self.free -= width;
        let pos = self.queue_pos(i);
        self.queue.remove(pos);
        self.queued.remove(pos);
        let s = &mut self.st[i];
        s.state = State::Running;
        s.since = now;
        s.rate_since = now;
        s.rate = rate;
        s.start.get_or_insert(now);
        let end = now + self.runtime_ms[i] - s.done;
        self.ends.push(Reverse((end, i, s.epoch)));
        self.running.push(i);
        Ok(())
    }

    /// Every running job pays the market price `p` from `now` on.
    fn set_price(&mut self, now: i64, p: Micros) {
        for &i in &self.running {
            self.st[i].accrue(self.jobs[i].width, now);
            self.st[i].rate = p;
        }
        if self.res.prices.last().is_none_or(|l| l.1 != p) {
            self.res.prices.push((now, p));
        }
    }

    /// An error if jobs wait, nothing runs and nothing will arrive.
    pub(super) fn check_progress(&self, now: i64) -> Result<(), SimError> {
        if self.running.is_empty() && self.next == self.order.len() && !self.queue.is_empty() {
            return Err(SimError::Stalled {
                policy: self.name.clone(),
                now: secs(now),
                waiting: self.queue.len(),
            });
        }
        Ok(())
    }

    /// The result, with every job's outcome, its times in units of `unit` ms.
    pub(super) fn finish(mut self) -> SimResult {
        let u = self.unit;
        self.res.outcomes = self
            .st
            .iter()
            .map(|s| Outcome {
                start: s.start.unwrap_or(0).div_euclid(u),
                end: s.end.div_euclid(u),
                preempted: s.preempted,
                charge: (s.charge / 3_600_000) as Micros,
            })
            .collect();
        for s in &mut self.res.segments {
            s.start = s.start.div_euclid(u);
            s.end = s.end.div_euclid(u);
        }
        for p in &mut self.res.prices {
            p.0 = p.0.div_euclid(u);
        }
        for r in &mut self.res.reservations {
            r.0 = r.0.div_euclid(u);
        }
        self.res
    }
}
