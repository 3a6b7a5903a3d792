//! What a signed batch rank may use and where its output goes, from its signed spec:
//! its time limit (the job's `length_s`, with the queue's `kill_wait` grace), its
//! memory (`--mem`) and its output files (`-o`/`-e` patterns expanded for this rank
//! and node).
//!
//! The clock of the time limit lives here, on the node, not in the queue: the node
//! knows when the rank really started, it enforces the length its owner signed (a
//! queue can neither stretch nor shorten it), and the limit still holds while the
//! queue is down or restarting, or cut off from the node. The queue only chooses the
//! grace between SIGTERM and SIGKILL, bounded by [`MAX_KILL_WAIT`].
//!
//! SIGTERM comes [`OVER_TIME`] after the length: the length is the owner's estimate in
//! whole seconds, planned on the queue's ticks, and a job that runs exactly its length
//! (`sleep 5` for `--length 5s`) must not lose a race with its own exit.

use std::time::Duration;

use proto::batch::{JobSpec, SignedLaunch};
use proto::node::{RankOptions, TimeLimit};
use proto::output::{PatternVars, expand};

/// How long past its length a rank may run before SIGTERM.
pub const OVER_TIME: Duration = Duration::from_secs(1);

/// The grace between SIGTERM and SIGKILL when the queue names none (Slurm's default).
pub const DEFAULT_KILL_WAIT: Duration = Duration::from_secs(30);

/// The longest grace a queue may ask for; a longer one is cut to this.
pub const MAX_KILL_WAIT: Duration = Duration::from_secs(3600);

/// The rank's options: its signed length as its time limit, the queue's grace, the
/// signed memory, and the signed output patterns expanded for `rank` on `node`.
/// A pattern that does not expand (the spec check refuses those first) is an error.
pub fn rank_options(
    spec: &JobSpec,
    req: &SignedLaunch,
    node: &str,
) -> Result<RankOptions, proto::output::PatternError> {
    let grace = req
        .kill_wait_ms
        .map_or(DEFAULT_KILL_WAIT, Duration::from_millis)
        .min(MAX_KILL_WAIT);
    let vars = PatternVars {
        job: spec.id,
        array_index: req.array_index.map(u64::from),
        rank: req.rank,
        node,
    };
    let file = |p: &Option<String>| p.as_deref().map(|p| expand(p, &vars)).transpose();
    Ok(RankOptions {
        mem_bytes: spec.options.mem_bytes,
        time_limit: Some(TimeLimit {
            length_ms: spec
                .length_s
                .saturating_mul(1000)
                .saturating_add(OVER_TIME.as_millis() as u64),
            kill_wait_ms: u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
        }),
        stdout: file(&spec.options.stdout)?,
        stderr: file(&spec.options.stderr)?,
    })
}
