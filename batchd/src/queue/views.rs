//! The clients' views of a job array in the live queue: one entry for all
//! its tasks ([`summary`]) and a listing's tasks folded into one entry per
//! array and state ([`fold`]).

use std::collections::HashMap;

use proto::batch::array::runs_of;
use proto::batch::{ArrayTasks, JobState, QueueEntry};
use proto::node::{ExitStatus, JobId};

use super::{Job, Queue};

/// How bad an ended task's outcome is, for the array's: failed over cancelled
/// over a non-zero exit over success.
fn badness(state: JobState, exit: Option<ExitStatus>) -> (u8, i32) {
    let code = exit.map_or(0, ExitStatus::shell_code);
    match state {
        JobState::Failed => (3, code),
        JobState::Cancelled => (2, code),
        _ if code != 0 => (1, code),
        _ => (0, 0),
    }
}

/// Array `id` as one entry: running while any task runs, else waiting while
/// any waits; once every task ended, the worst task's state, exit and reason
/// (failed, then cancelled, then the highest exit status); charges summed.
pub fn summary(q: &Queue, id: u64, tasks: &[u64]) -> Option<QueueEntry> {
    let all: Vec<&Job> = tasks.iter().filter_map(|t| q.jobs.get(t)).collect();
    let first = all.first()?;
    let mut e = q.entry_of(first, None);
    let any = |s: JobState| all.iter().any(|j| j.rec.state == s);
    let worst = all
        .iter()
        .max_by_key(|j| badness(j.rec.state, j.rec.exit))
        .copied()
        .unwrap_or(first);
    e.state = [
        JobState::Running,
        JobState::Suspended,
        JobState::Queued,
        JobState::Held,
    ]
    .into_iter()
    .find(|s| any(*s))
    .unwrap_or(worst.rec.state);
    let ended = all.iter().all(|j| j.ended());
    e.exit = if ended { worst.rec.exit } else { None };
    e.reason = if ended {
        worst.rec.reason.clone()
    } else {
        None
    };
    e.position = None;
    e.job = JobId(id);
    e.charged = all.iter().map(|j| j.rec.charged).sum();
    e.attempts = all.iter().map(|j| j.rec.attempts).sum();
    e.started_at = all
        .iter()
        .filter_map(|j| j.rec.started_ms)
        .min()
        .map(|ms| (ms.max(0) / 1000) as u64);
    e.ended_at = if ended {
        all.iter()
            .filter_map(|j| j.rec.ended_ms)
            .max()
            .map(|ms| (ms.max(0) / 1000) as u64)
    } else {
        None
    };
    e.nodes = Vec::new();
    let mut indices: Vec<u32> = all
        .iter()
        .filter_map(|j| j.rec.array.map(|a| a.1))
        .collect();
    indices.sort_unstable();
    e.array = Some(ArrayTasks {
        array: JobId(id),
        runs: runs_of(&indices),
    });
    Some(e)
}

/// A listing with each array's tasks of one state folded into the entry of the
/// first of them (its position, times and nodes are that task's; charges summed).
pub fn fold(entries: Vec<QueueEntry>) -> Vec<QueueEntry> {
    let mut out: Vec<QueueEntry> = Vec::with_capacity(entries.len());
    let mut groups: HashMap<(JobId, u16), (usize, Vec<u32>)> = HashMap::new();
    for e in entries {
        let Some(a) = &e.array else {
            out.push(e);
            continue;
        };
        let index = a.runs.first().map_or(0, |r| r.0);
        match groups.entry((a.array, e.state.code())) {
            std::collections::hash_map::Entry::Occupied(mut g) => {
                let (at, indices) = g.get_mut();
                indices.push(index);
                out[*at].charged += e.charged;
                out[*at].attempts += e.attempts;
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert((out.len(), vec![index]));
                out.push(e);
            }
        }
    }
    for (_, (at, mut indices)) in groups {
        indices.sort_unstable();
        if let Some(a) = &mut out[at].array {
            a.runs = runs_of(&indices);
        }
        if indices.len() > 1 {
            out[at].nodes.clear();
        }
    }
    out
}
