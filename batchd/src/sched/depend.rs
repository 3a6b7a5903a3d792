//! Dependencies (`--after`): on each tick, before the decision, every job
//! waiting as `Dependent` is looked at against its parents. Once each parent
//! ended as asked the job is queued, seen by the policy at this very tick;
//! once one never can (under `ok` a parent that failed, was cancelled, exited
//! non-zero or ended at a limit, TIMEOUT, OUT_OF_MEMORY or COST_LIMIT; under
//! `notok` one that finished with status 0; or one not in the queue at all) the job fails, saying which parent
//! and why. A parent that is an array has ended when all its tasks have, and
//! ended well when all of them finished with status 0 (under `ok` the first
//! task that did not fails the child at once). The changes of one tick go to
//! the store in one write (a dependent array's tasks are released together).

use std::collections::HashMap;

use proto::batch::after::When;
use proto::batch::{After, JobState};
use proto::node::{ExitStatus, JobId};

use super::Sched;
use crate::queue::{Job, Queue};
use crate::store::{JobRecord, Write};

/// How a parent stands now.
#[derive(Debug, Clone)]
struct Parent {
    /// Every task (or the job) ended.
    ended: bool,
    /// Some task (or the job) ended without finishing with status 0: how, in words.
    bad: Option<String>,
}

/// A job's (or task's) bad end, in words; `None` when it finished with status 0
/// or has not ended.
fn bad_end(j: &Job) -> Option<String> {
    let how = |s: &str| {
        let exit = match j.rec.exit {
            Some(ExitStatus::Code(c)) => format!(" with status {c}"),
            Some(ExitStatus::Signaled { signal, .. }) => format!(" killed by {signal}"),
            None => String::new(),
        };
        Some(format!("{} {s}{exit}", JobId(j.rec.id)))
    };
    match j.rec.state {
        JobState::Finished if j.rec.exit == Some(ExitStatus::Code(0)) => None,
        JobState::Finished => how("finished"),
        JobState::Failed => how("failed"),
        JobState::Cancelled => how("was cancelled"),
        // Ended by a limit: whatever its ranks' status, it did not finish.
        JobState::Timeout => Some(format!("{} ended TIMEOUT", JobId(j.rec.id))),
        JobState::OutOfMemory => Some(format!("{} ended OUT_OF_MEMORY", JobId(j.rec.id))),
        JobState::CostLimit => Some(format!("{} ended COST_LIMIT", JobId(j.rec.id))),
        _ => None,
    }
}

/// Parent `id` (a job, an array or a task) in `q`; `None` when there is none.
fn parent(q: &Queue, id: u64) -> Option<Parent> {
    let tasks: Vec<&Job> = match q.arrays.get(&id) {
        Some(t) => t.iter().filter_map(|t| q.jobs.get(t)).collect(),
        None => vec![q.jobs.get(&id)?],
    };
    Some(Parent {
        ended: tasks.iter().all(|j| j.ended()),
        bad: tasks.iter().find_map(|j| bad_end(j)),
    })
}

/// What one dependency says now.
enum Verdict {
    Wait,
    Met,
    Never(String),
}

fn verdict(a: &After, p: Option<&Parent>) -> Verdict {
    let Some(p) = p else {
        return Verdict::Never(format!("job {} is not in the queue", a.job));
    };
    match (a.when, p.ended, &p.bad) {
        (When::Ok, _, Some(bad)) => Verdict::Never(format!(
            "{bad}, and --after {}:ok needs it to finish with status 0",
            a.job
        )),
        (When::NotOk, true, None) => Verdict::Never(format!(
            "{} finished with status 0, and --after {}:notok needs it not to",
            a.job, a.job
        )),
        (_, false, _) => Verdict::Wait,
        (When::Ok | When::Any, true, _) | (When::NotOk, true, Some(_)) => Verdict::Met,
    }
}

/// The reason a dependent job shows while it waits.
pub fn waiting_reason(after: &[After]) -> String {
    let parents: Vec<String> = after
        .iter()
        .map(|a| format!("{}:{}", a.job, a.when.word()))
        .collect();
    format!("waiting for {}", parents.join(", "))
}

impl Sched {
    /// Queues the dependent jobs whose parents all ended as asked and fails
    /// those that never can start (see the module doc).
    pub(super) async fn resolve_dependencies(&mut self) {
        let now_ms = crate::unix_now_ms();
        let changed: Vec<JobRecord> = {
            let q = self.shared.lock_queue();
            let mut parents: HashMap<u64, Option<Parent>> = HashMap::new();
            let mut changed = Vec::new();
            for j in q
                .index
                .dependent
                .values()
                .filter_map(|id| q.jobs.get(id))
                .filter(|j| j.rec.state == JobState::Dependent)
            {
                let mut all_met = true;
                let mut never = None;
                for a in &j.spec.after {
                    let p = parents
                        .entry(a.job.0)
                        .or_insert_with(|| parent(&q, a.job.0));
                    match verdict(a, p.as_ref()) {
                        Verdict::Met => {}
                        Verdict::Wait => all_met = false,
                        Verdict::Never(why) => {
                            never = Some(why);
                            break;
                        }
                    }
                }
                let mut r = j.rec.clone();
                if let Some(why) = never {
                    r.state = JobState::Failed;
                    r.ended_ms = Some(now_ms);
                    r.reason = Some(format!("dependency never satisfied: {why}"));
                } else if all_met {
                    r.state = JobState::Queued;
                    r.reason = None;
                } else {
                    continue;
                }
                changed.push(r);
            }
            changed
        };
        if changed.is_empty() {
            return;
        }
        if let Err(e) = self
            .shared
            .store
            .write(Write::UpdateMany(changed.clone()))
            .await
        {
            tracing::error!(error = %e, "cannot record dependencies resolved");
        }
        let mut q = self.shared.lock_queue();
        for r in changed {
            tracing::info!(job = %JobId(r.id), state = ?r.state, reason = ?r.reason, "dependency resolved");
            if let Some(j) = q.jobs.get_mut(&r.id) {
                j.rec.state = r.state;
                j.rec.ended_ms = r.ended_ms;
                j.rec.reason = r.reason;
                q.touched(r.id);
            }
        }
    }
}

/// Checks at submission that every parent of `spec` is in the queue and its
/// owner's (a user may not wait on, and so learn about, another's jobs).
pub fn check_parents(
    q: &Queue,
    spec: &proto::batch::JobSpec,
) -> Result<(), proto::batch::BatchError> {
    for a in &spec.after {
        let owner = q
            .jobs
            .get(&a.job.0)
            .or_else(|| q.jobs.get(q.arrays.get(&a.job.0)?.first()?))
            .map(|j| j.rec.user.as_str());
        if owner != Some(spec.user.as_str()) {
            return Err(crate::queue::no_such(a.job));
        }
    }
    Ok(())
}
