//! Admin and bookkeeping requests: listing the jobs on a node
//! ([`JobInfo`]), killing one ([`Kill`], [`Killed`]) and changing a running
//! job's bid ([`Rebid`], [`Rebidded`]).

use serde::{Deserialize, Serialize};

use money::Bid;

use super::{JobId, Signal};

/// One rank of a job running on a node, as listed by `ListJobs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobInfo {
    /// The job.
    pub job: JobId,
    /// This rank.
    pub rank: u32,
    /// Ranks in the whole job.
    pub nranks: u32,
    /// The Unix user it runs as.
    pub user: String,
    /// The program (`argv[0]`).
    pub program: String,
    /// The bid asked for, micro-credits per minute.
    pub bid: Bid,
    /// The bid in force (0 while the owner is out of credit).
    pub effective_bid: Bid,
    /// Runnable threads at the last measurement.
    pub runnable: u32,
    /// CPU the market model gives it now (water filling over the measured
    /// demand), in thousandths of a CPU.
    pub model_milli_cpus: u32,
    /// CPU it really used over the last metering window, thousandths of a CPU.
    pub measured_milli_cpus: u32,
    /// CPU time used so far, nanoseconds.
    pub cpu_nanos: u64,
    /// Charged so far, micro-credits.
    pub charged: i64,
    /// Time since it started, milliseconds.
    pub age_millis: u64,
}

/// The jobs on a node (answer to `ListJobs`); at most
/// [`MAX_JOBS`](crate::limits::MAX_JOBS) entries.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct JobList {
    /// One entry per rank, in no particular order.
    #[serde(deserialize_with = "crate::limits::jobs")]
    pub jobs: Vec<JobInfo>,
    /// True when the node had more ranks than one list may hold.
    pub truncated: bool,
    /// CPUs the node sells.
    pub cpus: u32,
    /// The node's price: the sum of the bids competing on it, micro-credits per minute.
    pub price: i64,
    /// Whether the node is contended right now (runnable demand above its CPUs).
    pub contended: bool,
}

/// Deliver `signal` to every rank of `job` on this node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kill {
    /// The job.
    pub job: JobId,
    /// The signal (usually `Term` or `Kill`).
    pub signal: Signal,
    /// A queue's lease epoch, fenced as [`crate::batch::SignedLaunch::epoch`] is
    /// (0 from anyone else, and from a sender older than the field). Appended
    /// after the first release.
    #[serde(default, deserialize_with = "crate::limits::trailing")]
    pub epoch: u64,
}

/// Answer to [`Kill`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Killed {
    /// The job.
    pub job: JobId,
    /// How many ranks on this node were signalled.
    pub ranks: u32,
}

/// Change the bid of every rank of `job` on this node that the caller owns
/// (the same checks as a launch: the node's `max_rate` and the owner's balance).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rebid {
    /// The job.
    pub job: JobId,
    /// The new bid, micro-credits per minute (0 or more).
    pub bid: Bid,
}

/// Answer to [`Rebid`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rebidded {
    /// The job.
    pub job: JobId,
    /// How many ranks on this node now bid `bid`.
    pub ranks: u32,
    /// The bid now in force.
    pub bid: Bid,
}
