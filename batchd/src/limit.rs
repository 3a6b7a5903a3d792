//! A job's limits as the queue sees them: its length is its time limit, enforced by
//! the node that runs each rank (the clock lives there: the node knows when the rank
//! started, enforces the length its owner signed, and keeps doing so while the queue
//! is down; the queue gives it only the grace, `kill_wait`). A node tells the queue a
//! limit struck with a notice ([`proto::node::NoticeKind::TimeLimit`] at SIGTERM,
//! [`proto::node::NoticeKind::OutOfMemory`] just before the rank's exit); the job then
//! ends `TIMEOUT` or `OUT_OF_MEMORY` with the node's words as its reason, charged for
//! the time it ran as any ended job.

use proto::batch::JobState;
use proto::node::NoticeKind;

/// The state a job ends in when one of its ranks' nodes sends a notice of this kind;
/// `None` for notices that are news only.
///
/// ```
/// use proto::batch::JobState;
/// use proto::node::NoticeKind;
/// assert_eq!(batchd::limit::state_of(NoticeKind::TimeLimit), Some(JobState::Timeout));
/// assert_eq!(batchd::limit::state_of(NoticeKind::OutOfMemory), Some(JobState::OutOfMemory));
/// assert_eq!(batchd::limit::state_of(NoticeKind::Info), None);
/// ```
pub fn state_of(kind: NoticeKind) -> Option<JobState> {
    match kind {
        NoticeKind::TimeLimit => Some(JobState::Timeout),
        NoticeKind::OutOfMemory => Some(JobState::OutOfMemory),
        _ => None,
    }
}
