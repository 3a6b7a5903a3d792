//! The messages to and from a running rank ([`crate::rank`]): [`Control`], queued for its
//! writer by the coordinator and the PMI server ([`crate::mpi`]), and [`RankEvent`], how
//! it ended, told to the coordinator by its reader or the PMI server. Kept apart from
//! both so that the rank and the PMI server each use them without using the other's.

use proto::node::{Exit, ToNode};
use tokio::sync::oneshot;

/// A control message for a rank's writer.
#[derive(Debug)]
pub enum Control {
    /// Send this message.
    Send(ToNode),
    /// Answer once everything queued before it has been written.
    Flush(oneshot::Sender<()>),
}

/// How a rank ended, as told to the coordinator.
#[derive(Debug)]
pub enum RankEvent {
    /// The node reported the exit.
    Exited {
        /// The rank.
        rank: u32,
        /// The report.
        exit: Exit,
    },
    /// The session failed before an exit was reported.
    Failed {
        /// The rank.
        rank: u32,
        /// One line: why.
        why: String,
    },
    /// The node killed this rank for going over its memory (`--mem`); its `Exit`
    /// follows. The text is the node's one line, naming the rank, node and limit.
    OutOfMemory {
        /// The rank.
        rank: u32,
        /// The node's words.
        text: String,
    },
    /// The job must end because of this rank, which may still run: it called
    /// MPI_Abort, or its PMI channel failed (see [`crate::mpi`]).
    Aborted {
        /// The rank.
        rank: u32,
        /// One line: why.
        why: String,
        /// The job's exit status (MPI_Abort's), or `None` to leave it to the ranks'.
        code: Option<i32>,
    },
}
