//! The client/node protocol: what `rexec` (and admin tools) and `rexecd`
//! say to each other over one mutually authenticated TLS connection.
//!
//! Every frame body is a [`ToNode`] (client to node) or a [`FromNode`]
//! (node to client), tagged as described in [`crate::tagged`].
//!
//! A session goes:
//! 1. The client sends [`ToNode::Hello`] with the range of protocol versions
//!    it speaks. The node answers [`FromNode::Welcome`] with the version
//!    chosen by [`negotiate`], or [`FromNode::Error`] with
//!    [`ErrorCode::IncompatibleVersion`] and a message saying what to upgrade,
//!    then closes. `Hello` (tag 1), `Welcome` (tag 1) and `Error` (tag 8) keep
//!    their layout in every version so that this refusal is always readable.
//! 2. Either a job: [`ToNode::Launch`], answered by [`FromNode::Started`] or
//!    [`FromNode::Error`]; then stdin, signals and window sizes flow to the
//!    node, stdout, stderr and notices flow back, heartbeats both ways, and the
//!    node ends with [`FromNode::Exit`]. Stdin is flow-controlled: the node
//!    counts what it passed on to the job in [`FromNode::StdinTaken`], and the
//!    client keeps at most [`STDIN_WINDOW`] bytes sent but not yet counted, so the
//!    node can always read on to the signals and heartbeats behind the stdin.
//!    An MPI rank is started with [`ToNode::LaunchPmi`] instead: the same request,
//!    plus a PMI channel between the rank and the client, carried as
//!    [`ToNode::Pmi`] and [`FromNode::Pmi`] bytes (ended by [`FromNode::PmiEnd`]).
//!    A node that predates these tags refuses `LaunchPmi` as unsupported.
//! 3. Or an admin request: [`ToNode::ListJobs`] (answered by
//!    [`FromNode::Jobs`]), [`ToNode::Kill`] (answered by [`FromNode::Killed`])
//!    or [`ToNode::Rebid`] (answered by [`FromNode::Rebidded`]).
//!
//! ```
//! use proto::node::*;
//! let hello = ToNode::Hello(Hello::new("rexec 0.1"));
//! let frame = proto::encode_frame(&hello, proto::DEFAULT_MAX_FRAME).unwrap();
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let mut reader = proto::FrameReader::new(&frame[..], proto::DEFAULT_MAX_FRAME);
//! let Some(ToNode::Hello(got)) = reader.recv::<ToNode>().await.unwrap() else { panic!() };
//! assert_eq!(negotiate(&got), Ok(PROTOCOL_VERSION));
//! # });
//! ```

mod admin;
pub(crate) mod exit;
pub(crate) mod launch;
mod options;
mod signal;
mod status;
mod usage;

pub use admin::{JobInfo, JobList, Kill, Killed, Rebid, Rebidded};
pub use exit::{Exit, ExitStatus};
pub use launch::{CappedLaunch, Launch, LaunchError, Started, WindowSize, rank_share};
pub use options::{RankOptions, TimeLimit};
pub use signal::{ParseSignalError, Signal};
pub use status::{ErrorCode, ErrorReply, Heartbeat, Notice, NoticeKind, STDIN_WINDOW, StdinTaken};
pub use usage::RankUsage;

pub use crate::chunk::{CHUNK_SIZE, Chunk};
pub use crate::job::{JobId, ParseJobIdError};
pub use money::Bid;

use serde::{Deserialize, Serialize};

/// Newest node protocol version this build speaks. Version 2 added stdin flow
/// control ([`FromNode::StdinTaken`], [`STDIN_WINDOW`]), the market fields of
/// [`JobInfo`] and [`JobList`], and the `Rebid` request.
pub const PROTOCOL_VERSION: u16 = 2;

/// Oldest node protocol version this build still speaks: a version 1 client
/// sends stdin without limit, which a node can only stop by no longer reading
/// the session (and then it misses the client's signals and its going away);
/// and version 1's job list has another layout.
pub const MIN_PROTOCOL_VERSION: u16 = 2;

crate::tagged::tagged_enum! {
    /// A message from a client (rexec, or an admin tool) to a node (rexecd).
    pub enum ToNode {
        /// Opens the session: protocol versions and software of the client.
        1 => Hello(Hello),
        /// Start one rank of a job.
        2 => Launch(Launch),
        /// Bytes for the job's standard input.
        3 => Stdin(Chunk),
        /// The client's standard input reached its end.
        4 => StdinEnd,
        /// Deliver a signal to the job.
        5 => Signal(Signal),
        /// The client's terminal changed size (the node resizes the job's
        /// terminal, which sends the job SIGWINCH).
        6 => Resize(WindowSize),
        /// The client is alive.
        7 => Heartbeat(Heartbeat),
        /// List the jobs on this node (the caller's own; all of them for an admin).
        8 => ListJobs,
        /// Signal every rank of a job on this node.
        9 => Kill(Kill),
        /// Change the bid of every rank of a job on this node.
        10 => Rebid(Rebid),
        /// Start one rank of a user's signed batch job (a queue to a node; answered
        /// like `Launch`). See [`crate::batch`].
        11 => LaunchSigned(crate::batch::SignedLaunch),
        /// Start one rank of an MPI job (`rexec --mpi`): as `Launch`, and the node also
        /// opens a PMI channel to the rank (a socket named by `PMI_FD`, with `PMI_RANK`
        /// and `PMI_SIZE` from the request). Answered like `Launch`.
        12 => LaunchPmi(Launch),
        /// Bytes for the rank's PMI channel: the client's PMI server answering it.
        13 => Pmi(Chunk),
        /// Start one rank of a job under a spending ceiling (`rexec --max-cost`),
        /// or charged to a project (`rexec -A`): as `Launch` (or `LaunchPmi`), and
        /// the node drops the rank to bid 0 once its charges reach its share of the
        /// ceiling, and charges the project named. Answered like `Launch`; a
        /// node that predates this tag refuses it as unsupported.
        14 => LaunchCapped(Box<CappedLaunch>),
    }
}

crate::tagged::tagged_enum! {
    /// A message from a node (rexecd) to a client.
    pub enum FromNode {
        /// Accepts the session at the negotiated version.
        1 => Welcome(Welcome),
        /// The rank asked for by `Launch` is running.
        2 => Started(Started),
        /// Bytes the job wrote to standard output (or to its terminal).
        3 => Stdout(Chunk),
        /// Bytes the job wrote to standard error.
        4 => Stderr(Chunk),
        /// The job ended; the last message of a job session.
        5 => Exit(Exit),
        /// The node is alive.
        6 => Heartbeat(Heartbeat),
        /// Something the user should know, such as running out of credit.
        7 => Notice(Notice),
        /// A request was refused or failed.
        8 => Error(ErrorReply),
        /// Answer to `ListJobs`.
        9 => Jobs(JobList),
        /// Answer to `Kill`.
        10 => Killed(Killed),
        /// How much stdin the node has passed on to the job (flow control).
        11 => StdinTaken(StdinTaken),
        /// Answer to `Rebid`.
        12 => Rebidded(Rebidded),
        /// Bytes the rank wrote to its PMI channel (`LaunchPmi` only), passed on as
        /// they came: the client splits them into PMI command lines.
        13 => Pmi(Chunk),
        /// Every process of the rank closed its PMI channel.
        14 => PmiEnd,
        /// What a signed batch rank used (peak memory), just before its `Exit`; sent
        /// only to the queue (`LaunchSigned` sessions).
        20 => Usage(RankUsage),
    }
}

/// Opens a session (client to node). Its layout never changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// Oldest protocol version the client speaks.
    pub min_version: u16,
    /// Newest protocol version the client speaks.
    pub max_version: u16,
    /// Client software and version, for logs (for example "rexec 0.1.0").
    pub agent: String,
}

impl Hello {
    /// A hello offering every version this build speaks.
    pub fn new(agent: impl Into<String>) -> Self {
        Hello {
            min_version: MIN_PROTOCOL_VERSION,
            max_version: PROTOCOL_VERSION,
            agent: agent.into(),
        }
    }
}

/// Accepts a session (node to client). Its layout never changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    /// The protocol version both sides now speak.
    pub version: u16,
    /// The node's name (as in its certificate).
    pub node: String,
    /// Node software and version, for logs.
    pub agent: String,
}

/// The two sides share no protocol version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no common node protocol version: this side speaks {local_min}..={local_max}, the other side \
     {peer_min}..={peer_max}; upgrade {older} so that rexec and rexecd overlap"
)]
pub struct VersionMismatch {
    /// Oldest version this side speaks.
    pub local_min: u16,
    /// Newest version this side speaks.
    pub local_max: u16,
    /// Oldest version the other side speaks.
    pub peer_min: u16,
    /// Newest version the other side speaks.
    pub peer_max: u16,
    /// Which side is older: "this side" or "the other side".
    pub older: &'static str,
}

impl VersionMismatch {
    fn new(peer_min: u16, peer_max: u16) -> Self {
        let older = if peer_min > PROTOCOL_VERSION {
            "this side"
        } else {
            "the other side"
        };
        VersionMismatch {
            local_min: MIN_PROTOCOL_VERSION,
            local_max: PROTOCOL_VERSION,
            peer_min,
            peer_max,
            older,
        }
    }
}

/// Node side: pick the newest protocol version both this build and the
/// sender of `hello` speak, or explain why there is none.
pub fn negotiate(hello: &Hello) -> Result<u16, VersionMismatch> {
    let low = hello.min_version.max(MIN_PROTOCOL_VERSION);
    let high = hello.max_version.min(PROTOCOL_VERSION);
    if hello.min_version <= hello.max_version && low <= high {
        Ok(high)
    } else {
        Err(VersionMismatch::new(hello.min_version, hello.max_version))
    }
}

impl Welcome {
    /// Client side: check that the version the node chose is one this build speaks.
    pub fn check_version(&self) -> Result<u16, VersionMismatch> {
        if (MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&self.version) {
            Ok(self.version)
        } else {
            Err(VersionMismatch::new(self.version, self.version))
        }
    }
}

impl From<VersionMismatch> for ErrorReply {
    fn from(e: VersionMismatch) -> Self {
        ErrorReply {
            code: ErrorCode::IncompatibleVersion,
            message: e.to_string(),
        }
    }
}
