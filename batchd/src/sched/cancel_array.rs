//! Cancelling a whole array (`rexec cancel ARRAY`): its running tasks are
//! killed and ended one by one, as any job; its waiting tasks, which may be
//! thousands, are cancelled in one write.

use proto::batch::{BatchError, BatchErrorCode, JobState, QueueEntry};
use proto::node::{JobId, Signal};

use super::Sched;
use crate::store::Write;

impl Sched {
    /// Cancels every task of array `id` that has not ended; the array's entry.
    pub(super) async fn cancel_array(
        &mut self,
        id: u64,
        tasks: Vec<u64>,
    ) -> Result<QueueEntry, BatchError> {
        let now_ms = crate::unix_now_ms();
        let (running, waiting): (Vec<u64>, Vec<crate::store::JobRecord>) = {
            let q = self.shared.lock_queue();
            let live: Vec<&crate::queue::Job> = tasks
                .iter()
                .filter_map(|t| q.jobs.get(t))
                .filter(|j| !j.ended())
                .collect();
            let running = live
                .iter()
                .filter(|j| self.runs.contains_key(&j.rec.id))
                .map(|j| j.rec.id)
                .collect();
            let waiting = live
                .iter()
                .filter(|j| !self.runs.contains_key(&j.rec.id))
                .map(|j| {
                    let mut r = j.rec.clone();
                    r.state = JobState::Cancelled;
                    r.ended_ms = Some(now_ms);
                    r.reason = Some("cancelled".into());
                    r
                })
                .collect();
            (running, waiting)
        };
        for t in running {
            if let Some(run) = self.runs.get(&t) {
                if run.suspended {
                    run.signal(Signal::Cont);
                }
                run.signal(Signal::Kill);
            }
            self.recovering.forget(t);
            self.end(
                t,
                JobState::Cancelled,
                None,
                Some("cancelled".into()),
                now_ms,
            )
            .await;
        }
        for r in &waiting {
            self.recovering.forget(r.id);
        }
        let n = waiting.len();
        if let Err(e) = self
            .shared
            .store
            .write(Write::UpdateMany(waiting.clone()))
            .await
        {
            tracing::error!(job = %JobId(id), error = %e, "cannot record the array's cancel");
        }
        {
            let mut q = self.shared.lock_queue();
            for r in waiting {
                if let Some(j) = q.jobs.get_mut(&r.id) {
                    j.rec.state = r.state;
                    j.rec.ended_ms = r.ended_ms;
                    j.rec.reason = r.reason;
                    q.touched(r.id);
                }
            }
        }
        tracing::info!(job = %JobId(id), waiting = n, "array cancelled");
        let q = self.shared.lock_queue();
        q.entry(id).ok_or_else(|| {
            BatchError::new(BatchErrorCode::NoSuchJob, format!("no job {}", JobId(id)))
        })
    }
}
