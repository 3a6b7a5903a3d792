//! The admin requests of a session, each with its typed answer: list the jobs on
//! a node (`ListJobs` → `Jobs`), signal a job's ranks (`Kill` → `Killed`) and
//! change a job's bid (`Rebid` → `Rebidded`). A node refuses with an `Error`
//! ([`SessionError::Refused`]), such as `NoSuchJob` or `NotAuthorized`.

use money::Bid;
use proto::node::{FromNode, JobId, JobList, Kill, Killed, Rebid, Rebidded, Signal, ToNode};

use super::{Session, SessionError};

impl Session {
    /// The jobs on the node the caller may see (a user's own, an admin's all, a
    /// queue's the ranks it started).
    pub async fn list_jobs(&mut self) -> Result<JobList, SessionError> {
        match self.request(&ToNode::ListJobs).await? {
            FromNode::Jobs(list) => Ok(list),
            other => Err(SessionError::unexpected("Jobs", &other)),
        }
    }

    /// Sends `signal` to every rank of `job` on the node the caller may see.
    pub async fn kill(&mut self, job: JobId, signal: Signal) -> Result<Killed, SessionError> {
        self.kill_fenced(job, signal, 0).await
    }

    /// [`Session::kill`] from a queue holding lease `epoch`: the node first
    /// remembers the epoch (so that a replaced leader's later launches are
    /// refused), and refuses the kill when it has seen a higher one.
    pub async fn kill_fenced(
        &mut self,
        job: JobId,
        signal: Signal,
        epoch: u64,
    ) -> Result<Killed, SessionError> {
        let kill = Kill { job, signal, epoch };
        match self.request(&ToNode::Kill(kill)).await? {
            FromNode::Killed(k) => Ok(k),
            other => Err(SessionError::unexpected("Killed", &other)),
        }
    }

    /// Changes the bid of every rank of `job` on the node the caller owns (a
    /// [`Bid`] is never negative; the node may still refuse it, over its
    /// `max_rate` or without credit).
    pub async fn rebid(&mut self, job: JobId, bid: Bid) -> Result<Rebidded, SessionError> {
        match self.request(&ToNode::Rebid(Rebid { job, bid })).await? {
            FromNode::Rebidded(r) => Ok(r),
            other => Err(SessionError::unexpected("Rebidded", &other)),
        }
    }
}
