//! The event-driven simulator: arrivals and completions are events; after each batch of
//! events at one instant the policy sees a [`Snapshot`] and its [`Decision`] is checked and
//! applied. It records every run segment (so an independent checker can audit the
//! schedule), per-job outcomes, charges, the market price over time and reservations.
//! A policy that breaks the rules (starts an unknown job, overcommits the machine) or
//! leaves work waiting forever is an error, never a panic.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use thiserror::Error;

use crate::job::{Job, JobId};
use crate::policy::{Decision, Policy, Queued, Running, Snapshot};
use crate::utility::Micros;

/// Why a simulation could not finish.
#[derive(Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SimError {
    /// A job the machine can never run, or with impossible times.
    #[error("job {id}: {why}")]
    InvalidJob {
        /// The job.
        id: JobId,
        /// What is wrong.
        why: String,
    },
    /// The policy broke a rule.
    #[error("policy {policy} at t={now}: {why}")]
    Policy {
        /// Policy name.
        policy: String,
        /// When.
        now: i64,
        /// What it did.
        why: String,
    },
    /// Jobs wait, nothing runs, nothing will arrive, and the policy starts nothing.
    #[error("policy {policy} stalled at t={now} with {waiting} jobs waiting")]
    Stalled {
        /// Policy name.
        policy: String,
        /// When.
        now: i64,
        /// Jobs left waiting.
        waiting: usize,
    },
}

/// One stretch of a job holding its processors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// The job.
    pub job: JobId,
    /// Start (seconds).
    pub start: i64,
    /// End (seconds).
    pub end: i64,
    /// Processors held.
    pub width: u32,
}

/// What happened to one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// First start.
    pub start: i64,
    /// Completion.
    pub end: i64,
    /// Times suspended or preempted.
    pub preempted: u32,
    /// What the job paid (micro-credits).
    pub charge: Micros,
}

/// A finished simulation.
#[derive(Debug, Clone)]
pub struct SimResult {
    /// Policy name.
    pub policy: String,
    /// Processors.
    pub procs: u32,
    /// Outcomes in the order of the input jobs.
    pub outcomes: Vec<Outcome>,
    /// Every run segment, in the order they ended.
    pub segments: Vec<Segment>,
    /// `(time, price)` whenever a market policy set its price.
    pub prices: Vec<(i64, Micros)>,
    /// `(time, job, promised start)` for every reservation a policy reported.
    pub reservations: Vec<(i64, JobId, i64)>,
    /// Policy calls.
    pub decisions: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Future,
    Queued,
    Running,
    Done,
}

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

/// Checks that `jobs` can be simulated on `procs` processors.
pub fn validate(jobs: &[Job], procs: u32) -> Result<(), SimError> {
    let mut seen = HashMap::new();
    for j in jobs {
        let bad = |why: &str| SimError::InvalidJob {
            id: j.id,
            why: why.to_string(),
        };
        if seen.insert(j.id, ()).is_some() {
            return Err(bad("duplicate id"));
        }
        if j.width == 0 || j.width > procs {
            return Err(bad(&format!("width {} not in 1..={procs}", j.width)));
        }
        if j.runtime < 1 || j.estimate < j.runtime {
            return Err(bad("runtime must be >= 1 and estimate >= runtime"));
        }
        if j.submit < 0 {
            return Err(bad("negative submit time"));
        }
    }
    Ok(())
}

/// Runs `jobs` on `procs` processors under `policy`.
pub fn simulate(jobs: &[Job], procs: u32, policy: &mut dyn Policy) -> Result<SimResult, SimError> {
    validate(jobs, procs)?;
    let name = policy.name();
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| (jobs[i].submit, jobs[i].id));
    // rank[i]: position of job i in arrival order, for keeping the queue in arrival order.
    let mut rank = vec![0usize; jobs.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r;
    }
    let index: HashMap<JobId, usize> = jobs.iter().enumerate().map(|(i, j)| (j.id, i)).collect();
    let init = Js {
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
    let mut st = vec![init; jobs.len()];
    let mut queue: Vec<usize> = Vec::new();
    let mut running: Vec<usize> = Vec::new();
    let mut heap: BinaryHeap<Reverse<(i64, usize, u32)>> = BinaryHeap::new();
    let mut next = 0;
    let mut free = procs;
    let mut res = SimResult {
        policy: name.clone(),
        procs,
        outcomes: Vec::new(),
        segments: Vec::new(),
        prices: Vec::new(),
        reservations: Vec::new(),
        decisions: 0,
    };
    let accrue = |s: &mut Js, w: u32, now: i64| {
        s.charge += s.rate as i128 * w as i128 * (now - s.rate_since) as i128;
        s.rate_since = now;
    };
    loop {
        while let Some(&Reverse((_, i, e))) = heap.peek() {
            if st[i].state == State::Running && st[i].epoch == e {
                break;
            }
            heap.pop();
        }
        let t_arr = order.get(next).map(|&i| jobs[i].submit);
        let t_end = heap.peek().map(|r| r.0.0);
        let now = match (t_arr, t_end) {
            (None, None) => break,
            (Some(a), None) => a,
            (None, Some(e)) => e,
            (Some(a), Some(e)) => a.min(e),
        };
        while let Some(&Reverse((t, i, e))) = heap.peek() {
            if t > now {
                break;
            }
            heap.pop();
            let s = &mut st[i];
            if s.state != State::Running || s.epoch != e {
                continue;
            }
            accrue(s, jobs[i].width, now);
            s.state = State::Done;
            s.end = now;
            s.done = jobs[i].runtime;
            free += jobs[i].width;
            running.retain(|&r| r != i);
            res.segments.push(Segment {
                job: jobs[i].id,
                start: s.since,
                end: now,
                width: jobs[i].width,
            });
        }
        while next < order.len() && jobs[order[next]].submit <= now {
            let i = order[next];
            st[i].state = State::Queued;
            queue.push(i);
            next += 1;
        }
        let d = {
            let snap = Snapshot {
                now,
                procs,
                queued: queue
                    .iter()
                    .map(|&i| Queued {
                        job: &jobs[i],
                        done: st[i].done,
                        preempted: st[i].preempted,
                    })
                    .collect(),
                running: running
                    .iter()
                    .map(|&i| Running {
                        job: &jobs[i],
                        since: st[i].since,
                        done_before: st[i].done,
                        preempted: st[i].preempted,
                    })
                    .collect(),
            };
            policy.decide(&snap)
        };
        res.decisions += 1;
        let err = |why: String| SimError::Policy {
            policy: name.clone(),
            now,
            why,
        };
        let Decision {
            start,
            suspend,
            rates,
            price,
            reserved,
        } = d;
        for id in suspend {
            let &i = index
                .get(&id)
                .ok_or_else(|| err(format!("suspends unknown job {id}")))?;
            if st[i].state != State::Running {
                return Err(err(format!("suspends job {id}, which is not running")));
            }
            let s = &mut st[i];
            accrue(s, jobs[i].width, now);
            res.segments.push(Segment {
                job: id,
                start: s.since,
                end: now,
                width: jobs[i].width,
            });
            s.done += now - s.since;
            s.state = State::Queued;
            s.preempted += 1;
            s.epoch += 1;
            free += jobs[i].width;
            running.retain(|&r| r != i);
            let pos = queue.partition_point(|&q| rank[q] < rank[i]);
            queue.insert(pos, i);
        }
        for id in start {
            let &i = index
                .get(&id)
                .ok_or_else(|| err(format!("starts unknown job {id}")))?;
            if st[i].state != State::Queued {
                return Err(err(format!("starts job {id}, which is not waiting")));
            }
            if jobs[i].width > free {
                return Err(err(format!(
                    "starts job {id} of width {} with {free} processors free",
                    jobs[i].width
                )));
            }
            free -= jobs[i].width;
            let s = &mut st[i];
            s.state = State::Running;
            s.since = now;
            s.rate_since = now;
            s.rate = rates.iter().find(|r| r.0 == id).map(|r| r.1).unwrap_or(0);
            s.start.get_or_insert(now);
            heap.push(Reverse((now + jobs[i].runtime - s.done, i, s.epoch)));
            running.push(i);
        }
        queue.retain(|&i| st[i].state == State::Queued);
        if let Some(p) = price {
            for &i in &running {
                accrue(&mut st[i], jobs[i].width, now);
                st[i].rate = p;
            }
            if res.prices.last().is_none_or(|l| l.1 != p) {
                res.prices.push((now, p));
            }
        }
        if let Some((id, t)) = reserved {
            res.reservations.push((now, id, t));
        }
        if running.is_empty() && next == order.len() && !queue.is_empty() {
            return Err(SimError::Stalled {
                policy: name,
                now,
                waiting: queue.len(),
            });
        }
    }
    res.outcomes = st
        .iter()
        .map(|s| Outcome {
            start: s.start.unwrap_or(0),
            end: s.end,
            preempted: s.preempted,
            charge: (s.charge / 3600) as Micros,
        })
        .collect();
    Ok(res)
}
