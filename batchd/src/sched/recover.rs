//! After a restart: the jobs the store says were running (or suspended) had
//! their sessions cut when the old batchd died, and a node kills a rank whose
//! client is gone within its heartbeat timeout. The queue asks each node of the
//! job for the ranks it started there (`ToNode::ListJobs`, through
//! [`clients::node`]; rexecd lets a configured queue list and kill its own signed
//! ranks), kills any still listed, and waits until no node lists a rank of the
//! job — or, for nodes it cannot ask, until [`RECOVER_WAIT`] has passed; then the job is requeued with its
//! attempt already counted (the same attempt never starts twice: a node claims
//! each attempt's ranks once), or failed when its attempts are used up.

use std::collections::HashMap;
use std::time::Duration;

use clients::node::{Session, SessionError};
use proto::batch::JobState;
use proto::node::{ErrorCode, JobId, Signal};
use tokio::time::Instant;

use super::Sched;
use crate::Shared;
use crate::rank::AGENT;

/// How long to wait for a node that cannot be asked to have killed the ranks.
pub const RECOVER_WAIT: Duration = Duration::from_secs(12);
/// How long asking one node for its list may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// Jobs running when the queue last stopped, and when each may be given up on.
#[derive(Debug, Default)]
pub struct Recovering {
    jobs: HashMap<u64, Instant>,
}

impl Recovering {
    /// The jobs the store says are running or suspended.
    pub fn from_queue(shared: &Shared) -> Recovering {
        let q = shared.lock_queue();
        let until = Instant::now() + RECOVER_WAIT;
        Recovering {
            jobs: q
                .jobs
                .values()
                .filter(|j| matches!(j.rec.state, JobState::Running | JobState::Suspended))
                .map(|j| (j.rec.id, until))
                .collect(),
        }
    }

    /// Stops waiting for job `id` (cancelled).
    pub fn forget(&mut self, id: u64) {
        self.jobs.remove(&id);
    }

    /// Whether any job is still being settled.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The jobs whose ranks are gone now.
    async fn ready(&mut self, shared: &Shared, epoch: u64) -> Vec<u64> {
        let mut ready = Vec::new();
        let ids: Vec<(u64, Instant)> = self.jobs.iter().map(|(k, v)| (*k, *v)).collect();
        for (id, until) in ids {
            let nodes: Vec<String> = {
                let q = shared.lock_queue();
                q.jobs
                    .get(&id)
                    .map(|j| j.rec.nodes.clone())
                    .unwrap_or_default()
            };
            let mut gone = true;
            let mut unsure = false;
            for name in dedup(nodes) {
                match ranks_on(shared, &name, id, epoch).await {
                    Some(0) => {}
                    Some(_) => gone = false,
                    None => unsure = true,
                }
            }
            if gone && (!unsure || Instant::now() >= until) {
                self.jobs.remove(&id);
                ready.push(id);
            }
        }
        ready
    }
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

/// How many ranks of job `id` node `name` lists; `None` when it cannot be asked
/// (unreachable, or a rexecd that does not let this queue list its ranks).
/// The kill carries the lease's `epoch`, and one is sent before the list
/// (refused with `NoSuchJob` when nothing runs): the node then refuses any
/// later launch of a replaced leader (fencing).
async fn ranks_on(shared: &Shared, name: &str, id: u64, epoch: u64) -> Option<usize> {
    let addr = {
        let m = shared.lock_market();
        m.nodes.iter().find(|n| n.name == name).map(|n| n.addr)?
    };
    let ask = async {
        let addr = addr.to_string();
        let mut session = Session::open(&AGENT, &shared.connector, name, &addr, ASK_TIMEOUT).await;
        let s = session.as_mut().ok()?;
        if epoch > 0 {
            match s.kill_fenced(JobId(id), Signal::Kill, epoch).await {
                Ok(_) => {}
                Err(SessionError::Refused(r)) if r.code == ErrorCode::NoSuchJob => {}
                Err(e) => {
                    tracing::info!(node = name, "cannot fence the node: {e}");
                    return None;
                }
            }
        }
        let list = s.list_jobs().await;
        match list {
            Ok(list) => {
                let left = list.jobs.iter().filter(|j| j.job == JobId(id)).count();
                if left > 0 {
                    // Ranks of the last run the node has not yet ended itself: end
                    // them now (a queue may kill the ranks it started, and only those).
                    let session = session.as_mut().ok()?;
                    if let Err(e) = session.kill_fenced(JobId(id), Signal::Kill, epoch).await {
                        tracing::info!(node = name, "cannot kill the last run's ranks: {e}");
                    }
                }
                Some(left)
            }
            Err(e) => {
                tracing::info!(node = name, "cannot list the queue's ranks: {e}");
                None
            }
        }
    };
    tokio::time::timeout(ASK_TIMEOUT, ask).await.ok().flatten()
}

impl Sched {
    /// Settles the jobs of the last run whose ranks are gone.
    pub(super) async fn recover(&mut self) {
        if self.recovering.is_empty() {
            return;
        }
        let shared = self.shared.clone();
        for id in self.recovering.ready(&shared, self.epoch).await {
            tracing::info!(job = %JobId(id), "ranks of the last run are gone");
            self.lost(id, "the queue restarted while it ran".into())
                .await;
        }
    }
}
