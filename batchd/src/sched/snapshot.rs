//! The queue as a `batch::policy::Snapshot`: what the simulator's policies
//! see, borrowed from the live queue at a decision (a tick of its clock, or a
//! job's end). Each queued or holding job's policy entry is built once, when
//! the queue's index files it ([`crate::queue::index::Index::policy_job`] says
//! what the policy sees of a job); a decision collects references to them and
//! the work each job did, so the policy decides with the queue locked. Times
//! are whole seconds since the queue's epoch, rounded down; a job submitted
//! after the instant being decided waits for the next tick. The policy's job
//! ids are the queue's arrival numbers (`seq`), so ties break by arrival as in
//! the simulator.

use std::borrow::Cow;

use batch::policy::{Queued, Running, Snapshot};
use proto::batch::JobState;

use crate::queue::Queue;
use crate::terms::secs;

/// The jobs a decision is made over, borrowed from the queue: waiting (queued
/// or suspended, not held) in arrival order, and running, each beside its
/// queue id.
pub struct Jobs<'q> {
    /// Waiting jobs, with their work done.
    pub waiting: Vec<Queued<'q>>,
    /// The queue id of each waiting job.
    pub waiting_ids: Vec<u64>,
    /// Running jobs, with when they started and their work done before.
    pub running: Vec<Running<'q>>,
    /// The queue id of each running job.
    pub running_ids: Vec<u64>,
}

/// Work done in seconds: work is measured between decisions, which run a few
/// ms after their ticks, so 999 ms between two ticks is one second, not zero.
fn done_secs(done_ms: i64) -> i64 {
    (done_ms + 500).div_euclid(1000)
}

/// Collects the jobs the policy decides over at `tick_ms` (a tick or an end), on a
/// market of `procs` processors (an array's queued tasks within its
/// [`crate::arrays::Window`]). It visits the jobs holding processors and the
/// queued ones from the queue's [`crate::queue::index::Index`], and jumps past
/// an array's remaining tasks once its window is full, so its cost follows
/// what the policy is shown, not how many jobs the queue keeps.
pub fn collect(q: &Queue, tick_ms: i64, procs: u32) -> Jobs<'_> {
    // A job is seen at the first tick at or after its submission, so it is seen
    // by `tick_ms` if it was submitted by the last tick at or before it.
    let seen_by = q.clock().tick_at(tick_ms);
    let mut window = crate::arrays::Window::of(q, procs);
    let mut suspended = Vec::new();
    let (mut running, mut running_ids) = (Vec::new(), Vec::new());
    for h in q.index.holding.values() {
        let Some(j) = q.jobs.get(&h.id) else { continue };
        debug_assert_eq!(h.job, q.index.policy_job(j), "job {}'s policy entry", h.id);
        let done = done_secs(j.rec.done_ms);
        match j.rec.state {
            JobState::Suspended => suspended.push((
                Queued {
                    job: &h.job,
                    done,
                    preempted: j.preempted,
                },
                h.id,
            )),
            JobState::Running => {
                running.push(Running {
                    job: &h.job,
                    since: secs(q.epoch_ms, j.rec.started_ms.unwrap_or(q.epoch_ms)),
                    done_before: done,
                    preempted: j.preempted,
                });
                running_ids.push(h.id);
            }
            _ => {}
        }
    }
    // Waiting in arrival order, as the policy's ties break: the queued jobs
    // (in arrival order) with the suspended ones (so too) merged in as the
    // walk passes them, each entry written once.
    let capacity = q.index.queued.len() + suspended.len();
    let (mut waiting, mut waiting_ids) =
        (Vec::with_capacity(capacity), Vec::with_capacity(capacity));
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
                        && j.preempted == w.preempted
                        && w.job == q.index.policy_job(j)),
                "the queue's index is out of date for job {}",
                w.id
            );
            if w.submitted_ms > seen_by {
                continue;
            }
            if window.admit(w.array) {
                while let Some((s, id)) = suspended.next_if(|s| s.0.job.id < seq as u64) {
                    waiting.push(s);
                    waiting_ids.push(id);
                }
                waiting.push(Queued {
                    job: &w.job,
                    done: done_secs(w.done_ms),
                    preempted: w.preempted,
                });
                waiting_ids.push(w.id);
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
    for (s, id) in suspended {
        waiting.push(s);
        waiting_ids.push(id);
    }
    Jobs {
        waiting,
        waiting_ids,
        running,
        running_ids,
    }
}

impl Jobs<'_> {
    /// The snapshot at `now` for a machine of `procs` processors; its waiting
    /// jobs are these, borrowed.
    pub fn snapshot(&self, now: i64, procs: u32) -> Snapshot<'_> {
        Snapshot {
            now,
            procs,
            queued: Cow::Borrowed(&self.waiting),
            running: self.running.clone(),
        }
    }

    /// The queue id of policy job `seq`.
    pub fn id_of(&self, seq: u64) -> Option<u64> {
        self.waiting_id_of(seq).or_else(|| {
            let i = self.running.binary_search_by_key(&seq, |r| r.job.id).ok()?;
            self.running_ids.get(i).copied()
        })
    }

    /// The queue id of waiting policy job `seq`.
    pub fn waiting_id_of(&self, seq: u64) -> Option<u64> {
        let i = self.waiting.binary_search_by_key(&seq, |q| q.job.id).ok()?;
        self.waiting_ids.get(i).copied()
    }

    /// The queue ids of the waiting jobs at `positions` (a policy's order).
    pub fn waiting_ids_at(&self, positions: &[usize]) -> Vec<u64> {
        positions
            .iter()
            .filter_map(|&i| self.waiting_ids.get(i).copied())
            .collect()
    }
}

#[cfg(test)]
mod tests;
