//! The batch queue: what a user signs when submitting a job ([`JobSpec`],
//! [`SignedJob`]), how a queue starts one rank of a signed job on a node
//! ([`SignedLaunch`], carried by [`crate::node::ToNode::LaunchSigned`]), and the
//! request/response protocol between clients and the queue daemon (batchd):
//! [`BatchRequest`] carrying a [`BatchOp`], answered by a [`BatchResponse`]
//! holding a [`BatchReply`] or a [`BatchError`].
//!
//! # Signed jobs
//!
//! The client encodes a [`JobSpec`] with postcard and signs
//! [`SIGNING_CONTEXT`] followed by those exact bytes with the user's own key
//! (ECDSA P-256 with SHA-256, ASN.1 signature). [`SignedJob`] carries the
//! bytes as signed, the signature and the user's certificate (DER): a verifier
//! checks the certificate against the cluster CA, the signature against the
//! certificate's key, that the spec's `user` is the certificate's user, and the
//! expiry; it decodes the spec only from the signed bytes, so nothing outside
//! the signature can change what runs. A node runs each `(user, job, attempt,
//! rank)` at most once across the cluster (claimed at accountd with
//! [`crate::account::Claim`]), and `attempt` must be below `max_attempts`.
//!
//! Tags and codes follow [`crate::tagged`]: append-only.

use serde::{Deserialize, Serialize};

// From the defining modules, not through `crate::node`, whose `ToNode` carries
// this module's `SignedLaunch`.
use crate::job::JobId;
use crate::node::exit::ExitStatus;

pub mod after;
pub mod array;

pub use crate::job::JobState;
pub use after::After;
pub use array::ArraySpec;

/// Version of the batch protocol spoken by this build.
pub const BATCH_PROTOCOL_VERSION: u16 = 1;

/// Bytes prepended to the encoded [`JobSpec`] before signing, so that a
/// signature over a job can never be mistaken for a signature over anything else.
pub const SIGNING_CONTEXT: &[u8] = b"rexec-market signed batch job v1\0";

/// Most breakpoints a utility function may have.
pub const MAX_UTILITY_POINTS: usize = 64;

/// What a job is worth to its owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Worth {
    /// A bid: micro-credits per CPU-minute, like `rexec -r`.
    Rate(i64),
    /// Lee's piecewise-linear utility: `(seconds from submission to completion,
    /// micro-credits)` breakpoints with strictly increasing, non-negative times
    /// (at most [`MAX_UTILITY_POINTS`]). The batch paper's shape
    /// (`--value V --deadline D --length L`) is `[(L, V), (D, 0)]`.
    Utility(Vec<(i64, i64)>),
}

/// Everything that decides what a batch job runs, as whom, how wide and for how
/// much: the content of the user's signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpec {
    /// Chosen at random by the client; with `user`, unique for ever. It is also the
    /// job id the nodes use for the job's ranks (`rexec jobs` shows it).
    pub id: JobId,
    /// The Unix user the ranks run as; must be the signer's certificate user.
    pub user: String,
    /// The program and its arguments; `argv[0]` is looked up in the node's `PATH`.
    #[serde(deserialize_with = "crate::limits::args")]
    pub argv: Vec<String>,
    /// The complete environment for the program.
    #[serde(deserialize_with = "crate::limits::env")]
    pub env: Vec<(String, String)>,
    /// Absolute working directory; `None` means the user's home directory.
    pub cwd: Option<String>,
    /// Ranks, one per processor, all started at once (rigid).
    pub width: u32,
    /// The owner's estimate of the run time, seconds (what policies plan with; the
    /// queue may stop a job that runs past it by a documented margin).
    pub length_s: u64,
    /// What the job is worth.
    pub worth: Worth,
    /// Priority queue for PRIOFIFO (0 highest).
    pub priority: u8,
    /// How many times the job may be started in all (1 = never requeued).
    pub max_attempts: u32,
    /// When it was signed, UTC seconds since the epoch.
    pub signed_at: u64,
    /// After this (UTC seconds since the epoch) no node starts a rank of it.
    pub expires_at: u64,
    /// A job array: one task per index, each a job of its own with the id
    /// [`array::task_id`] gives it; `None` for a single job.
    /// Appended after the first release: a spec signed before reads as `None`.
    #[serde(default, deserialize_with = "crate::limits::trailing")]
    pub array: Option<ArraySpec>,
    /// Start only once each of these jobs ended as it says (at most
    /// [`after::MAX_AFTER`]); the job waits as [`JobState::Dependent`] until then.
    /// Appended after the first release: a spec signed before reads as empty.
    #[serde(default, deserialize_with = "crate::limits::trailing")]
    pub after: Vec<After>,
    /// Memory per rank and output files (appended after the first release: a spec
    /// signed before reads as the defaults).
    #[serde(default, deserialize_with = "crate::limits::trailing")]
    pub options: JobOptions,
}

/// What a signed job asks of each rank beyond its program: memory and output files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobOptions {
    /// Memory per rank, bytes (`--mem`); `None`: each node's default.
    pub mem_bytes: Option<u64>,
    /// Where each rank's standard output goes (`-o`), a pattern of [`crate::output`];
    /// `None`: the queue keeps it.
    pub stdout: Option<String>,
    /// Where each rank's standard error goes (`-e`), as `stdout`.
    pub stderr: Option<String>,
}

/// Terms a user may sign after the [`JobSpec`]: the signed bytes are the spec's
/// postcard encoding followed, when any term is set, by this struct's. A job
/// without terms is signed byte for byte as before terms existed (so a node or a
/// queue that predates them still takes it); one with terms is refused by them
/// ("bytes after the spec"), never run without its terms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobTerms {
    /// The most the whole job may be charged, micro-credits (`rexec submit
    /// --max-cost`): the queue refuses the job when its worst case (rate × width ×
    /// length) is above it, and stops it, in state [`JobState::CostLimit`], when
    /// its charges reach it.
    pub max_cost: Option<i64>,
    /// The project account charged (`rexec submit -A`); `None` for the user's
    /// default project, or its personal account where it has none.
    pub account: Option<String>,
    /// A batch script's bytes (`rexec submit script.sh`), at most
    /// [`MAX_SCRIPT_BYTES`]: the node writes them to a file only the job's user can
    /// read and runs that file with `argv[1..]` as its arguments (`argv[0]` is the
    /// script's name as submitted, never looked up), so what runs is what was
    /// signed, whatever happens to the script on disk afterwards.
    pub script: Option<Vec<u8>>,
}

/// Most bytes a batch script may have ([`JobTerms::script`]): half a frame
/// ([`crate::DEFAULT_MAX_FRAME`]), leaving the rest to the spec, its environment,
/// the certificate and the signature.
pub const MAX_SCRIPT_BYTES: usize = crate::DEFAULT_MAX_FRAME / 2;

impl JobTerms {
    /// True when no term is set (nothing follows the spec).
    pub fn is_empty(&self) -> bool {
        self.max_cost.is_none() && self.account.is_none() && self.script.is_none()
    }

    /// The bytes to sign for `spec` under these terms.
    ///
    /// ```
    /// use proto::batch::*;
    /// use proto::node::JobId;
    /// let spec = JobSpec { id: JobId(1), user: "ann".into(), argv: vec!["p".into()],
    ///     env: vec![], cwd: None, width: 2, length_s: 60, worth: Worth::Rate(1),
    ///     priority: 1, max_attempts: 1, signed_at: 0, expires_at: 9,
    ///     array: None, after: vec![], options: JobOptions::default() };
    /// let none = JobTerms::default();
    /// assert_eq!(none.encode(&spec).unwrap(), postcard::to_stdvec(&spec).unwrap());
    /// let capped = JobTerms { max_cost: Some(5), account: Some("chem".into()), script: None };
    /// let bytes = capped.encode(&spec).unwrap();
    /// assert_eq!(JobTerms::decode(&bytes).unwrap(), (spec.clone(), capped));
    /// let script = JobTerms { max_cost: None, account: None, script: Some(b"#!/bin/sh\ntrue\n".to_vec()) };
    /// assert!(!script.is_empty());
    /// let bytes = script.encode(&spec).unwrap();
    /// assert_eq!(JobTerms::decode(&bytes).unwrap(), (spec.clone(), script));
    /// let huge = JobTerms { max_cost: None, account: None, script: Some(vec![b'#'; MAX_SCRIPT_BYTES + 1]) };
    /// let e = JobTerms::decode(&huge.encode(&spec).unwrap()).unwrap_err();
    /// assert!(e.contains("script of"), "{e}");
    /// ```
    pub fn encode(&self, spec: &JobSpec) -> Result<Vec<u8>, postcard::Error> {
        let mut bytes = postcard::to_stdvec(spec)?;
        if !self.is_empty() {
            bytes.extend(postcard::to_stdvec(self)?);
        }
        Ok(bytes)
    }

    /// The spec and terms of signed bytes: nothing after the spec is no terms;
    /// anything after the terms, or a script over [`MAX_SCRIPT_BYTES`], is an error.
    pub fn decode(bytes: &[u8]) -> Result<(JobSpec, JobTerms), String> {
        let (spec, rest) =
            postcard::take_from_bytes::<JobSpec>(bytes).map_err(|e| e.to_string())?;
        if rest.is_empty() {
            return Ok((spec, JobTerms::default()));
        }
        match postcard::take_from_bytes::<JobTerms>(rest) {
            Ok((terms, [])) => match &terms.script {
                Some(script) if script.len() > MAX_SCRIPT_BYTES => Err(format!(
                    "the job's script of {} bytes is over the {MAX_SCRIPT_BYTES} allowed",
                    script.len()
                )),
                _ => Ok((spec, terms)),
            },
            Ok((_, after)) => Err(format!("{} bytes after the spec's terms", after.len())),
            Err(e) => Err(format!("the spec's terms cannot be decoded: {e}")),
        }
    }
}

/// A [`JobSpec`] as the user signed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedJob {
    /// The postcard encoding of the [`JobSpec`], exactly as signed.
    pub spec: Vec<u8>,
    /// ECDSA P-256 SHA-256 (ASN.1) signature over [`SIGNING_CONTEXT`] ++ `spec`.
    pub signature: Vec<u8>,
    /// The signer's certificate, DER.
    pub cert: Vec<u8>,
}

/// Start one rank of a signed job (queue to node). The node runs it as the
/// spec's user with the bid the queue gives, only if the signature verifies and
/// `(user, job, attempt, rank)` was never claimed before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedLaunch {
    /// The signed job.
    pub job: SignedJob,
    /// Which start of the job this is, `0..max_attempts`.
    pub attempt: u32,
    /// This rank's number, `0..width`.
    pub rank: u32,
    /// Weight bid on the node, micro-credits per CPU-minute (the policy's rate for
    /// the job now). The queue charges the job; the node does not debit batch ranks.
    pub bid: money::Bid,
    /// The node of every rank, in rank order, as the queue placed them (one per
    /// rank): the rank sees them in `REXEC_NODES`, as an interactive rank does.
    #[serde(deserialize_with = "crate::limits::args")]
    pub nodes: Vec<String>,
    /// When the queue started this attempt (UTC milliseconds since the Unix
    /// epoch): the rank sees it in `REXEC_JOB_START_MS`, so a job can pace
    /// itself by the queue's clock (0: not given).
    pub started_ms: i64,
    /// The task's index when the job is an array (one the signed range holds):
    /// the rank runs as job [`array::task_id`] and sees `REXEC_ARRAY_INDEX` and
    /// `REXEC_ARRAY_JOB`. `None` for a single job.
    /// Appended after the first release: a launch from before reads as `None`.
    #[serde(default, deserialize_with = "crate::limits::trailing")]
    pub array_index: Option<u32>,
    /// The grace between SIGTERM and SIGKILL when the rank reaches the job's length,
    /// milliseconds (the queue's `kill_wait`); `None`: the node's default. Appended
    /// after the first release.
    #[serde(default, deserialize_with = "crate::limits::trailing")]
    pub kill_wait_ms: Option<u64>,
    /// The sending queue's lease epoch (fencing): a node refuses a launch from a
    /// queue whose epoch is below the highest it has seen from that queue
    /// ([`crate::node::ErrorCode::Fenced`]). 0 from a queue without a lease (one
    /// SQLite file) and from a sender older than the field. Appended after the
    /// first release.
    #[serde(default, deserialize_with = "crate::limits::trailing")]
    pub epoch: u64,
}

/// The envelope of every request to the queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchRequest {
    /// Protocol version the sender speaks ([`BATCH_PROTOCOL_VERSION`]).
    pub version: u16,
    /// Chosen by the sender, echoed in the response.
    pub id: u64,
    /// What to do.
    pub op: BatchOp,
}

impl BatchRequest {
    /// A request at the current protocol version.
    pub fn new(id: u64, op: BatchOp) -> Self {
        BatchRequest {
            version: BATCH_PROTOCOL_VERSION,
            id,
            op,
        }
    }
}

/// The envelope of every response from the queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchResponse {
    /// The id of the request this answers (0 when the request could not be read).
    pub id: u64,
    /// The outcome.
    pub result: Result<BatchReply, BatchError>,
}

crate::tagged::tagged_enum! {
    /// An operation on the queue.
    pub enum BatchOp {
        /// Queue a signed job (the caller must be its user).
        1 => Submit(SignedJob),
        /// List jobs: the caller's own, or everyone's for an admin.
        2 => Queue(QueueQuery),
        /// Cancel a job (its owner or an admin): dequeued, or its ranks killed.
        3 => Cancel(JobId),
        /// Read a job's kept output from the given offsets.
        4 => Output(OutputQuery),
        /// One job's state (its owner or an admin); `rexec wait` polls this.
        5 => Status(JobId),
        /// Ended jobs with what they used, cost and achieved (`rexec history`): the
        /// caller's own, or anyone's for an admin.
        20 => History(crate::history::HistoryQuery),
    }
}

crate::tagged::tagged_enum! {
    /// What the queue answers to a successful operation.
    pub enum BatchReply {
        /// The job is queued.
        1 => Submitted(Submitted),
        /// The jobs asked for, in queue order (running first, then by policy order).
        2 => Queue(Vec<QueueEntry>),
        /// The job was cancelled (or had already ended: its entry says how).
        3 => Cancelled(QueueEntry),
        /// Output bytes.
        4 => Output(OutputChunk),
        /// One job.
        5 => Status(QueueEntry),
        /// Ended jobs, most recently ended first (at most
        /// [`crate::history::MAX_HISTORY_LIST`]).
        20 => History(Vec<crate::history::HistoryEntry>),
    }
}

/// Answer to a submission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submitted {
    /// The job's id (the spec's).
    pub job: JobId,
    /// Its place among the waiting jobs (1 = next), in the policy's order.
    pub position: u32,
}

/// Which jobs to list.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QueueQuery {
    /// Only this user's jobs (an admin may name anyone; a user only herself).
    /// `None`: the caller's own, or every job for an admin.
    pub user: Option<String>,
    /// Include jobs that ended (most recent first, at most [`MAX_QUEUE_LIST`] in all).
    pub ended: bool,
    /// List every task of an array on its own line; otherwise the tasks of one
    /// array in one state are one entry ([`QueueEntry::array`] holds their indices).
    pub expand: bool,
}

/// Most entries one queue listing holds.
pub const MAX_QUEUE_LIST: usize = 10_000;

/// One job as the queue sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueEntry {
    /// The job's id.
    pub job: JobId,
    /// Its owner.
    pub user: String,
    /// The program (argv\[0\]).
    pub program: String,
    /// Ranks.
    pub width: u32,
    /// The owner's run-time estimate, seconds.
    pub length_s: u64,
    /// State.
    pub state: JobState,
    /// Place among waiting jobs (1 = next) when queued, held or suspended.
    pub position: Option<u32>,
    /// What the job bids now or is charged now, micro-credits per CPU-minute.
    pub rate: i64,
    /// The policy's estimated start, UTC seconds since the epoch, when it promises one.
    pub estimated_start: Option<u64>,
    /// When it was submitted, UTC seconds.
    pub submitted_at: u64,
    /// When it last started, UTC seconds.
    pub started_at: Option<u64>,
    /// When it ended, UTC seconds.
    pub ended_at: Option<u64>,
    /// The nodes its ranks run on (rank order), while running.
    pub nodes: Vec<String>,
    /// How many times it was started.
    pub attempts: u32,
    /// Micro-credits charged so far.
    pub charged: i64,
    /// How it ended, once finished or failed.
    pub exit: Option<ExitStatus>,
    /// Why it is held or failed, in words.
    pub reason: Option<String>,
    /// For the tasks of an array: which array and which indices this entry
    /// stands for (one task, or every task of the array in this state).
    pub array: Option<ArrayTasks>,
}

/// The tasks of one array an entry stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayTasks {
    /// The array's id (what `rexec submit --array` printed).
    pub array: JobId,
    /// The tasks' indices, as inclusive runs in order ([`array::runs_of`]).
    pub runs: Vec<(u32, u32)>,
}

impl ArrayTasks {
    /// How many tasks.
    pub fn count(&self) -> u64 {
        self.runs
            .iter()
            .map(|&(a, b)| u64::from(b.saturating_sub(a)) + 1)
            .sum()
    }
}

impl std::fmt::Display for ArrayTasks {
    /// `ARRAY_7` for one task, `ARRAY_[12-999]` for several.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.runs.as_slice() {
            [(a, b)] if a == b => write!(f, "{}_{a}", self.array),
            runs => write!(f, "{}_[{}]", self.array, array::format_runs(runs)),
        }
    }
}

/// Read a job's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputQuery {
    /// The job.
    pub job: JobId,
    /// Bytes of stdout already read.
    pub stdout_from: u64,
    /// Bytes of stderr already read.
    pub stderr_from: u64,
}

/// Output bytes from the requested offsets (at most a frame's worth).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputChunk {
    /// Stdout bytes from `stdout_from`.
    pub stdout: crate::Chunk,
    /// Stderr bytes from `stderr_from`.
    pub stderr: crate::Chunk,
    /// Whether the job ended and this chunk reaches the end of both streams.
    pub complete: bool,
    /// Bytes dropped because the job wrote more than the queue keeps.
    pub truncated: u64,
}

/// A refusal or failure, with a machine-readable code and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchError {
    /// What kind of failure.
    pub code: BatchErrorCode,
    /// Complete, human-readable explanation.
    pub message: String,
}

impl BatchError {
    /// Builds an error.
    pub fn new(code: BatchErrorCode, message: impl Into<String>) -> Self {
        BatchError {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for BatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BatchError {}

crate::tagged::code_enum! {
    /// Machine-readable error classes (append only).
    pub enum BatchErrorCode {
        /// The request's protocol version is not spoken by the queue.
        1 => UnsupportedVersion,
        /// The caller may not do this (not the job's owner, not an admin).
        2 => Forbidden,
        /// The request or the signed job could not be decoded, or a field is out of range.
        3 => Malformed,
        /// The signature, certificate or expiry does not verify.
        4 => BadSignature,
        /// The owner's balance cannot pay for the job.
        5 => NoCredit,
        /// Wider than the processors the queue can ever have.
        6 => TooWide,
        /// No such job.
        7 => NoSuchJob,
        /// A job with this id was submitted before.
        8 => Duplicate,
        /// The queue's store failed; retry later.
        9 => Storage,
        /// The operation is not known to this queue (sent by a newer client).
        10 => Unsupported,
        /// The queue is full or shutting down; retry later.
        11 => Unavailable,
        /// The job's worst case is above its signed spending ceiling (`--max-cost`).
        12 => OverCeiling,
    }
}
