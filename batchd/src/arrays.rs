//! Job arrays in the live queue: an array's tasks built from its one signed
//! job ([`tasks`]) and the `%MAX` bound on how many of its tasks the policy
//! may see at once ([`Window`]). The clients' views of an array are the
//! queue's ([`crate::queue::views`]).
//!
//! Each task is a job of its own to the policy, the nodes and the charges:
//! its own record (state, attempts, output, charge), with the array's spec
//! shared, the id [`proto::batch::array::task_id`] and the array's arrival
//! number range.

use std::collections::HashMap;
use std::sync::Arc;

use proto::batch::array::task_id;
use proto::batch::{JobSpec, JobState, SignedJob};

use crate::queue::Queue;
use crate::store::{ArrayRecord, JobRecord};

/// The stored form of array `spec` (which must be one), its tasks queued with
/// arrival numbers from `first_seq`, submitted at `now_ms`.
pub fn tasks(spec: &JobSpec, signed: Arc<SignedJob>, first_seq: i64, now_ms: i64) -> ArrayRecord {
    let tasks = spec
        .array
        .iter()
        .flat_map(|a| a.indices())
        .enumerate()
        .map(|(n, index)| {
            let mut rec = JobRecord::queued(
                first_seq + n as i64,
                task_id(spec.id, index).0,
                spec.user.clone(),
                signed.clone(),
                now_ms,
            );
            rec.array = Some((spec.id.0, index));
            rec
        })
        .collect();
    ArrayRecord {
        id: spec.id.0,
        user: spec.user.clone(),
        signed,
        submitted_ms: now_ms,
        tasks,
    }
}

/// How many queued tasks of each array the policy is shown at one decision:
/// its `%MAX` less its tasks running or suspended (which hold their
/// processors), and never more than could start at once on `procs`
/// processors (`procs / width`), as Slurm's backfill plans a bounded number
/// of an array's tasks: the tasks of one array are alike, so those not shown
/// could not have started at this decision either, and the policy decides over
/// a few thousand entries, not every queued task.
#[derive(Debug, Default)]
pub struct Window {
    room: HashMap<u64, u32>,
    /// The last arrival number of each array whose tasks' numbers are
    /// consecutive (no other job's between them).
    end: HashMap<u64, i64>,
}

impl Window {
    /// The room of every array in `q` on a market of `procs` processors.
    pub fn of(q: &Queue, procs: u32) -> Window {
        let mut busy: HashMap<u64, u32> = HashMap::new();
        for j in q.index.holding.values().filter_map(|h| q.jobs.get(&h.id)) {
            if let Some((a, _)) = j.rec.array
                && matches!(j.rec.state, JobState::Running | JobState::Suspended)
            {
                *busy.entry(a).or_default() += 1;
            }
        }
        let mut window = Window::default();
        for (id, tasks) in &q.arrays {
            let Some(spec) = tasks.first().and_then(|t| q.jobs.get(t)).map(|j| &j.spec) else {
                continue;
            };
            let fit = (procs / spec.width.max(1)).max(1);
            let max = spec.array.map_or(0, |a| a.max_running);
            let room_now = if max == 0 {
                fit
            } else {
                let busy = busy.get(id).copied().unwrap_or(0);
                max.saturating_sub(busy).min(fit)
            };
            window.room.insert(*id, room_now);
            if let Some(&(low, high)) = q.index.spans.get(id)
                && high - low + 1 == tasks.len() as i64
            {
                window.end.insert(*id, high);
            }
        }
        window
    }

    /// The last arrival number of `array`'s tasks, when nothing else arrived
    /// between its first and last (so a walk in arrival order may jump past it).
    pub fn end(&self, array: Option<(u64, u32)>) -> Option<i64> {
        self.end.get(&array?.0).copied()
    }

    /// Whether a waiting task of `array` may be shown to the policy (taking a
    /// place if so); any other job may.
    pub fn admit(&mut self, array: Option<(u64, u32)>) -> bool {
        let Some((id, _)) = array else { return true };
        match self.room.get_mut(&id) {
            None => true,
            Some(0) => false,
            Some(r) => {
                *r -= 1;
                true
            }
        }
    }
}
