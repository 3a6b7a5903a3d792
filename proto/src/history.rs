//! The queue's record of ended jobs (`rexec history`, as Slurm's `sacct`): asked with
//! [`crate::batch::BatchOp::History`] carrying a [`HistoryQuery`], answered by
//! [`crate::batch::BatchReply::History`] with one [`HistoryEntry`] per ended job.

use serde::{Deserialize, Serialize};

use crate::job::{JobId, JobState};
use crate::node::exit::ExitStatus;

/// Which ended jobs to list.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HistoryQuery {
    /// Only this user's jobs (an admin may name anyone; a user only herself).
    /// `None`: the caller's own, or every user's for an admin.
    pub user: Option<String>,
    /// Only jobs that ended at or after this time, UTC ms.
    pub since_ms: Option<i64>,
}

/// Most entries one history answer holds (the most recently ended); fewer when
/// more would not fit one frame (long reasons): `since_ms` reaches further back.
pub const MAX_HISTORY_LIST: usize = 10_000;

/// One ended job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// The job.
    pub job: JobId,
    /// Its owner.
    pub user: String,
    /// The program (argv\[0\]).
    pub program: String,
    /// Ranks.
    pub width: u32,
    /// How it ended: finished, cancelled or failed.
    pub state: JobState,
    /// Submitted, UTC ms.
    pub submitted_ms: i64,
    /// Its last start (or resume), UTC ms; `None` if it never ran.
    pub started_ms: Option<i64>,
    /// Ended, UTC ms.
    pub ended_ms: i64,
    /// Time its ranks ran in the attempt that ended it (suspensions excluded), ms.
    pub elapsed_ms: i64,
    /// CPU time of every rank (user plus system) as the nodes counted it, ns; `None`
    /// when no rank's end was reported (it never ran, or its ranks were lost).
    pub cpu_nanos: Option<u64>,
    /// The largest peak memory of any rank, bytes; `None` unless every rank's node
    /// counted it.
    pub peak_memory: Option<u64>,
    /// Its exit status (the first failing rank's, else rank 0's), when every rank exited.
    pub exit: Option<ExitStatus>,
    /// Why it failed, in words.
    pub reason: Option<String>,
    /// Micro-credits charged.
    pub charged: i64,
    /// The utility it achieved, micro-credits: its utility function's value at its
    /// completion (seconds after submission) for a finished job, 0 for any other.
    pub utility: i64,
    /// Starts.
    pub attempts: u32,
    /// The nodes of its last run, rank order.
    pub nodes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{BatchOp, BatchReply};

    #[test]
    fn a_history_request_and_its_answer_round_trip() {
        let op = BatchOp::History(HistoryQuery {
            user: Some("alice".into()),
            since_ms: Some(1_764_000_000_000),
        });
        let bytes = postcard::to_allocvec(&op).unwrap();
        assert_eq!(postcard::from_bytes::<BatchOp>(&bytes).unwrap(), op);
        let entry = HistoryEntry {
            job: JobId(7),
            user: "alice".into(),
            program: "sim".into(),
            width: 2,
            state: JobState::Failed,
            submitted_ms: 1,
            started_ms: None,
            ended_ms: 3,
            elapsed_ms: 0,
            cpu_nanos: Some(5),
            peak_memory: None,
            exit: Some(ExitStatus::Code(1)),
            reason: Some("why".into()),
            charged: -1,
            utility: -2,
            attempts: 3,
            nodes: vec!["n1".into()],
        };
        let reply = BatchReply::History(vec![entry]);
        let bytes = postcard::to_allocvec(&reply).unwrap();
        assert_eq!(postcard::from_bytes::<BatchReply>(&bytes).unwrap(), reply);
    }
}
