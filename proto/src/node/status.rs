//! Session housekeeping both ways: [`Heartbeat`], [`Notice`] (news for the
//! user, such as running out of credit) and [`ErrorReply`] with its
//! [`ErrorCode`].

use serde::{Deserialize, Serialize};

use crate::tagged::code_enum;

/// "I am alive", sent by both sides while a session is idle; `seq` counts up
/// from 0 on each side so a log shows gaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// Sequence number of this heartbeat.
    pub seq: u64,
}

/// Stdin bytes in flight a client may have per rank: sent in `Stdin` chunks
/// but not yet counted by a [`StdinTaken`]. A node holds at most this much of
/// a job's stdin, and never has to stop reading a session for it.
pub const STDIN_WINDOW: usize = 1 << 20;

/// The node has passed `bytes` bytes of stdin on to the job since it started
/// (the sum of every `Stdin` chunk written). Sent at least every half
/// [`STDIN_WINDOW`] of progress, so a client that waits for it at a full
/// window is always answered while the job reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StdinTaken {
    /// Total bytes written to the job's stdin so far.
    pub bytes: u64,
}

code_enum! {
    /// What a [`Notice`] is about.
    pub enum NoticeKind {
        /// The job owner's balance ran out: the job keeps running at bid 0.
        1 => OutOfCredit,
        /// Credit is available again: the job runs at its bid again.
        2 => CreditRestored,
        /// The node is shutting down; the job will be stopped.
        3 => ShuttingDown,
        /// Anything else worth showing the user.
        4 => Info,
        /// The job's charges reached its spending ceiling (`--max-cost`): the job
        /// keeps running at bid 0, where it is free.
        5 => CostLimit,
        /// The rank went over its memory limit and the kernel killed it (sent just
        /// before its `Exit`; the text names the rank, the node and the limit).
        6 => OutOfMemory,
        /// The rank reached its time limit: it got SIGTERM (and SIGKILL after the
        /// grace if still running); sent when the limit strikes.
        7 => TimeLimit,
    }
}

/// Something the user should know (node to client); shown on the client's
/// standard error, the job keeps running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    /// What it is about.
    pub kind: NoticeKind,
    /// One line for the user.
    pub text: String,
}

code_enum! {
    /// Why a request was refused or failed.
    pub enum ErrorCode {
        /// No common protocol version (see [`crate::node::negotiate`]).
        1 => IncompatibleVersion,
        /// The message was malformed or out of order.
        2 => BadRequest,
        /// The peer sent a message this side does not know.
        3 => Unsupported,
        /// The certificate's role or name does not allow this.
        4 => NotAuthorized,
        /// The user named by the certificate does not exist here, or may not run jobs.
        5 => UnknownUser,
        /// A positive bid with a balance that is not positive.
        6 => NoCredit,
        /// The program could not be started (not found, not executable, ...).
        7 => SpawnFailed,
        /// No such job on this node.
        8 => NoSuchJob,
        /// The node refuses new jobs for now (full, draining).
        9 => Busy,
        /// The account service could not be reached.
        10 => AccountUnavailable,
        /// A fault inside the node.
        11 => Internal,
        /// The market refused the bid itself: negative, or above the node's `max_rate`
        /// (a client older than this code reads it as `Unknown(12)`).
        12 => BadBid,
        /// The request asks for more than the node allows one rank (such as memory
        /// above its `max_mem_per_rank`); the text names the node's limit.
        13 => OverLimit,
        /// A queue's launch or kill carried a lease epoch below the highest this
        /// node has seen from that queue: it comes from a leader that has been
        /// replaced (fencing). The text names both epochs.
        14 => Fenced,
    }
}

impl ErrorCode {
    /// Whether a launch refused with this code was refused for a reason that
    /// belongs to the job, not to the node: the program is missing or not
    /// executable ([`ErrorCode::SpawnFailed`]), or the job's Unix user is unknown
    /// there ([`ErrorCode::UnknownUser`]). The node is in order and serves other
    /// jobs; the same launch would only be refused again. A batch queue fails such
    /// a job at once, with the node's message as its reason, and keeps the node.
    ///
    /// ```
    /// use proto::node::ErrorCode;
    /// assert!(ErrorCode::SpawnFailed.belongs_to_the_job());
    /// assert!(ErrorCode::UnknownUser.belongs_to_the_job());
    /// assert!(!ErrorCode::Busy.belongs_to_the_job());
    /// assert!(!ErrorCode::Internal.belongs_to_the_job());
    /// ```
    pub fn belongs_to_the_job(self) -> bool {
        matches!(
            self,
            ErrorCode::SpawnFailed | ErrorCode::UnknownUser | ErrorCode::OverLimit
        )
    }
}

/// A request was refused or failed.
///
/// ```
/// use proto::node::{ErrorCode, ErrorReply};
/// let e = ErrorReply::new(ErrorCode::NoCredit, "balance is 0 credits; ask an admin for a grant");
/// assert_eq!(e.to_string(), "balance is 0 credits; ask an admin for a grant");
/// // An old peer reads a code it does not know as `Unknown`.
/// assert_eq!(ErrorCode::from(999), ErrorCode::Unknown(999));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ErrorReply {
    /// What kind of failure.
    pub code: ErrorCode,
    /// One line for the user saying what to do.
    pub message: String,
}

impl ErrorReply {
    /// An error with this code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorReply {
            code,
            message: message.into(),
        }
    }
}
