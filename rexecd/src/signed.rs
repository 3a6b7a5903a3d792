//! Signed batch launches (`ToNode::LaunchSigned`): what rexecd checks before a
//! queue may start a rank of a user's signed job, and what it remembers afterwards.
//!
//! [`admit`] decides everything that needs no other party: the sender is a queue
//! (a `service` certificate named in `[batch] queues`), the job verifies against
//! the cluster CA and CRL as they are on disk now (`certs::jobsign`: a user's
//! signature over exactly this spec, unexpired), the attempt is below the job's
//! `max_attempts` and the rank below its width, and the queue's bid is within the
//! signed rate. The session then checks the user and the bid as for a `Launch`,
//! claims the rank at accountd (once across the cluster), and records it here.
//!
//! [`StartedRanks`] is that record: one marker file per `(user, job, attempt,
//! rank)` this node started, created with `O_EXCL` and synced before the program
//! starts. accountd answers a node's repeated claim `Claimed` (a retry after a lost
//! reply must not strand the rank), so it cannot tell a replay to the same node from
//! a retry; the marker can, even after the rank ended or rexecd restarted. Markers
//! of jobs whose signature expired over an hour ago are removed at start-up.
//!
//! [`ends`]: when a claimed rank exits, its end is kept beside its marker and sent
//! to accountd, so that a job that ran to its end is never claimed again.
//!
//! [`script`]: a job that carries its script runs a private copy of it.
//!
//! [`fence`]: the highest lease epoch seen from each queue; launches and kills
//! carrying a lower one are refused.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use certs::jobsign::{self, JobSignError, JobTrust, VerifiedJob};
use certs::{PeerIdentity, Role};
use proto::batch::{SignedLaunch, Worth};
use proto::node::{ErrorCode, ErrorReply, Launch};

use crate::config::Config;

/// How long past a job's expiry its markers are kept (clock steps back are covered).
const KEEP_PAST_EXPIRY_S: u64 = 3600;

/// A signed launch that passed [`admit`]: the verified job and the rank to start.
#[derive(Debug, Clone)]
pub struct Admitted {
    /// The verified job.
    pub job: VerifiedJob,
    /// The rank as a plain launch of `job.spec.user` (no terminal).
    pub launch: Launch,
    /// Which start of the job this is.
    pub attempt: u32,
}

impl Admitted {
    /// The record of this rank's end, for accountd ([`ends`]).
    pub fn end(&self) -> proto::account::RankEnd {
        proto::account::RankEnd {
            claim: self.claim(),
            width: self.job.spec.width,
        }
    }

    /// The claim that makes this rank run once in the cluster.
    pub fn claim(&self) -> proto::account::Claim {
        proto::account::Claim {
            user: self.job.user.clone(),
            job: self.launch.job,
            attempt: self.attempt,
            rank: self.launch.rank,
            digest: self.job.digest,
        }
    }
}

fn refuse(code: ErrorCode, node: &str, text: impl std::fmt::Display) -> ErrorReply {
    ErrorReply::new(code, format!("node {node}: {text}"))
}

/// Checks the sender, the signature and the rank (see the module doc); blocking
/// (it reads the CA and CRL).
pub fn admit(
    config: &Config,
    peer: &PeerIdentity,
    req: &SignedLaunch,
    now: SystemTime,
) -> Result<Admitted, ErrorReply> {
    let node = config.name.as_str();
    let queues = &config.batch.queues;
    if peer.role != Role::Service || !queues.contains(&peer.name) {
        return Err(refuse(
            ErrorCode::NotAuthorized,
            node,
            format_args!(
                "not a queue: only the batch queue ({}) may start signed jobs; this is {peer}",
                if queues.is_empty() {
                    "none configured in [batch] queues".to_string()
                } else {
                    format!("service {}", queues.join(", service "))
                }
            ),
        ));
    }
    let trust = JobTrust::from_tls_paths(&config.tls).map_err(|e| {
        refuse(
            ErrorCode::Internal,
            node,
            format_args!("cannot load the CA to check signed jobs: {e}"),
        )
    })?;
    let job = jobsign::verify(&req.job, &trust, now).map_err(|e| {
        let code = match e {
            JobSignError::Invalid(_) | JobSignError::Malformed(_) => ErrorCode::BadRequest,
            _ => ErrorCode::NotAuthorized,
        };
        refuse(code, node, format_args!("signed job refused: {e}"))
    })?;
    let spec = &job.spec;
    let out_of_range = if req.attempt >= spec.max_attempts {
        Some(format!(
            "attempt {} of job {} is not below its signed max_attempts {}; it may not start again",
            req.attempt, spec.id, spec.max_attempts
        ))
    } else if req.rank >= spec.width {
        Some(format!(
            "rank {} is out of range for job {} of width {}",
            req.rank, spec.id, spec.width
        ))
    } else {
        None
    };
    let out_of_range = out_of_range.or_else(|| {
        (req.nodes.len() != spec.width as usize).then(|| {
            format!(
                "the queue named {} nodes for job {} of width {}; it must name one per rank",
                req.nodes.len(),
                spec.id,
                spec.width
            )
        })
    });
    if let Some(text) = out_of_range {
        return Err(refuse(ErrorCode::BadRequest, node, text));
    }
    let job_id = task(spec, req.array_index).map_err(|t| refuse(ErrorCode::BadRequest, node, t))?;
    if let Worth::Rate(rate) = spec.worth
        && req.bid.micros_per_minute() > rate
    {
        return Err(refuse(
            ErrorCode::BadBid,
            node,
            format_args!(
                "the queue's bid of {} credits per minute is above the {} the owner signed for job {}",
                req.bid,
                money::format_credits(rate),
                spec.id
            ),
        ));
    }
    let mut env = rank_env(
        &spec.env,
        job_id,
        req.rank,
        spec.width,
        &req.nodes,
        req.started_ms,
    );
    if let Some(index) = req.array_index {
        env.retain(|(k, _)| !ARRAY_VARS.contains(&k.as_str()));
        env.push(("REXEC_ARRAY_INDEX".into(), index.to_string()));
        env.push(("REXEC_ARRAY_JOB".into(), spec.id.to_string()));
    }
    let options = limits::rank_options(spec, req, node).map_err(|e| {
        refuse(
            ErrorCode::BadRequest,
            node,
            format_args!("signed job refused: {e}"),
        )
    })?;
    let launch = Launch {
        job: job_id,
        rank: req.rank,
        nranks: spec.width,
        bid: req.bid,
        argv: spec.argv.clone(),
        env,
        cwd: spec.cwd.clone(),
        terminal: None,
        options,
    };
    Ok(Admitted {
        job,
        launch,
        attempt: req.attempt,
    })
}

/// The variables a task of an array gets, replacing any the owner's environment held.
const ARRAY_VARS: [&str; 2] = ["REXEC_ARRAY_INDEX", "REXEC_ARRAY_JOB"];

/// The job id a launch runs as: the spec's id for a single job, the task's
/// for an array, whose index must be one the user signed (an index outside
/// the signed range, or a launch that names none for an array, is refused).
fn task(spec: &proto::batch::JobSpec, index: Option<u32>) -> Result<proto::node::JobId, String> {
    match (&spec.array, index) {
        (None, None) => Ok(spec.id),
        (Some(a), Some(i)) if a.contains(i) => Ok(proto::batch::array::task_id(spec.id, i)),
        (Some(a), Some(i)) => Err(format!(
            "task {i} is not in array {} as its owner signed it (indices {}-{} step {}); refused",
            spec.id, a.first, a.last, a.step
        )),
        (Some(_), None) => Err(format!(
            "job {} is an array; the queue must name the task to start",
            spec.id
        )),
        (None, Some(i)) => Err(format!(
            "job {} is not an array; there is no task {i} to start",
            spec.id
        )),
    }
}

/// Why a started rank could not be recorded (or the record read).
#[derive(Debug, thiserror::Error)]
#[error("started-rank marker {path}: {source}")]
pub struct MarkerError {
    /// The file or directory.
    pub path: PathBuf,
    /// The I/O error.
    pub source: std::io::Error,
}

/// The ranks of signed jobs this node started (see the module doc).
#[derive(Debug, Clone)]
pub struct StartedRanks {
    dir: PathBuf,
    /// Wakes [`ends::deliver`] when an end is recorded.
    wake: std::sync::Arc<tokio::sync::Notify>,
}

impl StartedRanks {
    /// Opens the marker directory (created, mode 0700, with the first marker) and
    /// removes markers of jobs expired long ago; returns how many it removed.
    pub fn open(dir: &Path, now: SystemTime) -> Result<(StartedRanks, usize), MarkerError> {
        let err = |source| MarkerError {
            path: dir.to_path_buf(),
            source,
        };
        let started = StartedRanks {
            dir: dir.to_path_buf(),
            wake: Default::default(),
        };
        if !dir.exists() {
            return Ok((started, 0));
        }
        let now_s = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        let mut removed = 0;
        for entry in fs::read_dir(dir).map_err(err)? {
            let path = entry.map_err(err)?.path();
            let expires: Option<u64> = fs::read_to_string(&path)
                .ok()
                .and_then(|t| t.trim().parse().ok());
            if expires.is_some_and(|e| e.saturating_add(KEEP_PAST_EXPIRY_S) < now_s)
                && fs::remove_file(&path).is_ok()
            {
                removed += 1;
            }
        }
        Ok((started, removed))
    }

    fn path(&self, a: &Admitted) -> PathBuf {
        let c = a.claim();
        self.dir
            .join(format!("{}+{}+{}+{}", c.user, c.job, c.attempt, c.rank))
    }

    /// Whether this node started the rank before.
    pub fn contains(&self, a: &Admitted) -> bool {
        self.path(a).exists()
    }

    /// Records the rank as started; `Ok(false)` when it was already (a replay).
    /// The marker and its directory entry are on disk when this returns `Ok(true)`.
    pub fn record(&self, a: &Admitted) -> Result<bool, MarkerError> {
        self.write_once(&self.path(a), &format!("{}\n", a.job.spec.expires_at))
    }

    /// Creates `path` in the marker directory with `text`, synced with its directory
    /// entry; `Ok(false)` when it exists (nothing written). A write that fails part
    /// way leaves no file.
    fn write_once(&self, path: &Path, text: &str) -> Result<bool, MarkerError> {
        let err = |p: &Path| {
            let p = p.to_path_buf();
            move |source| MarkerError { path: p, source }
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(err(&self.dir))?;
        let mut file = match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(err(path)(e)),
        };
        if let Err(e) = file
            .write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
        {
            let _ = fs::remove_file(path);
            return Err(err(path)(e));
        }
        fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(err(&self.dir))?;
        Ok(true)
    }
}

pub mod ends;
pub mod fence;
pub mod limits;
pub mod script;
#[cfg(test)]
mod tests;

/// The signed environment with the rank's own variables, as `rexec` gives an
/// interactive rank: `REXEC_RANK`, `REXEC_NRANKS`, `REXEC_NODES` (names in rank
/// order, comma-separated) and `REXEC_JOB` (16 hex digits), and a batch rank's
/// `REXEC_JOB_START_MS` (when the queue started the job, UTC milliseconds),
/// replacing any the owner's environment held.
pub fn rank_env(
    signed: &[(String, String)],
    job: proto::node::JobId,
    rank: u32,
    width: u32,
    nodes: &[String],
    started_ms: i64,
) -> Vec<(String, String)> {
    const RANK_VARS: [&str; 5] = [
        "REXEC_RANK",
        "REXEC_NRANKS",
        "REXEC_NODES",
        "REXEC_JOB",
        "REXEC_JOB_START_MS",
    ];
    let mut env: Vec<(String, String)> = signed
        .iter()
        .filter(|(k, _)| !RANK_VARS.contains(&k.as_str()))
        .cloned()
        .collect();
    env.push(("REXEC_RANK".into(), rank.to_string()));
    env.push(("REXEC_NRANKS".into(), width.to_string()));
    env.push(("REXEC_NODES".into(), nodes.join(",")));
    env.push(("REXEC_JOB".into(), job.to_string()));
    if started_ms > 0 {
        env.push(("REXEC_JOB_START_MS".into(), started_ms.to_string()));
    }
    env
}
