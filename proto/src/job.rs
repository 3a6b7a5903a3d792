//! A job's identity and where it is in its life: the [`JobId`] every
//! protocol names a job by, and the [`JobState`] the queue reports. Both
//! the node protocol ([`crate::node`]) and the batch protocols
//! ([`crate::batch`], [`crate::history`], [`crate::output`]) use them, so they
//! live here, below all of those.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A job's id, chosen by the client and shared by all its ranks; written
/// as 16 lowercase hex digits.
///
/// ```
/// use proto::node::JobId;
/// let id: JobId = "00000000deadbeef".parse().unwrap();
/// assert_eq!(id, JobId(0xdead_beef));
/// assert_eq!(id.to_string(), "00000000deadbeef");
/// assert!("xyz".parse::<JobId>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct JobId(pub u64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// A job id that is not 1 to 16 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a job id; job ids are 1 to 16 hex digits, as printed by `rexec jobs`")]
pub struct ParseJobIdError(pub String);

impl FromStr for JobId {
    type Err = ParseJobIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = !s.is_empty() && s.len() <= 16 && s.bytes().all(|b| b.is_ascii_hexdigit());
        match ok.then(|| u64::from_str_radix(s, 16)) {
            Some(Ok(v)) => Ok(JobId(v)),
            _ => Err(ParseJobIdError(s.to_owned())),
        }
    }
}

crate::tagged::code_enum! {
    /// Where a job is in its life.
    pub enum JobState {
        /// Waiting for processors.
        1 => Queued,
        /// Its ranks are running.
        2 => Running,
        /// Preempted: its ranks are stopped and it waits to resume.
        3 => Suspended,
        /// Every rank exited; `exit` says how.
        4 => Finished,
        /// Cancelled by its owner or an admin.
        5 => Cancelled,
        /// Could not run (refused by every node, out of attempts, out of credit).
        6 => Failed,
        /// Waiting, but its owner's balance cannot pay for it; not started until it can.
        7 => Held,
        /// Stopped when its charges reached its spending ceiling (`--max-cost`).
        8 => CostLimit,
        /// Waiting for the jobs it depends on (`--after`) to end as it asks.
        9 => Dependent,
        /// It reached its length (time limit): its ranks got SIGTERM, then SIGKILL.
        10 => Timeout,
        /// A rank went over its memory (`--mem`) and the kernel killed it.
        11 => OutOfMemory,
    }
}

impl JobState {
    /// Whether a job in this state has ended (finished, cancelled, failed, timed out,
    /// out of memory or stopped at its spending ceiling): it will not run again.
    ///
    /// ```
    /// use proto::batch::JobState;
    /// assert!(JobState::Timeout.is_ended() && JobState::OutOfMemory.is_ended());
    /// assert!(!JobState::Running.is_ended() && !JobState::Held.is_ended());
    /// ```
    pub fn is_ended(self) -> bool {
        matches!(
            self,
            JobState::Finished
                | JobState::Cancelled
                | JobState::Failed
                | JobState::Timeout
                | JobState::OutOfMemory
                | JobState::CostLimit
        )
    }
}
