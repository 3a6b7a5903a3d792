//! The record of ended jobs (`rexec history`, as Slurm's `sacct`): for each job that
//! finished, failed or was cancelled, its times, what its ranks used (from
//! [`crate::store::usage`]), what it was charged, and the utility it achieved, the
//! batch papers' measure: its utility function's value at its completion, counted
//! in seconds after its submission, for a job that ran to its end (state
//! `Finished`, whatever its exit code), and 0 for a cancelled or failed one, which
//! delivered nothing. A rate bid is the constant utility it stands for
//! ([`crate::terms::utility`], built once as the job enters the queue). Users
//! see their own jobs, admins anyone's.

use certs::PeerIdentity;
use proto::batch::{BatchError, BatchErrorCode, BatchReply, JobState};
use proto::history::{HistoryEntry, HistoryQuery, MAX_HISTORY_LIST};
use proto::node::JobId;

use crate::Shared;
use crate::queue::Job;

/// The utility job `j` achieved, micro-credits (see the module doc); 0 until it ends.
pub fn achieved(j: &Job) -> i64 {
    match (j.rec.state, j.rec.ended_ms) {
        (JobState::Finished, Some(end)) => j
            .utility
            .value_at(crate::terms::secs(j.rec.submitted_ms, end)),
        _ => 0,
    }
}

/// The most utility job `j` could achieve (completing at once), micro-credits.
pub fn most(j: &Job) -> i64 {
    j.utility.max_value()
}

fn entry(j: &Job) -> HistoryEntry {
    HistoryEntry {
        job: JobId(j.rec.id),
        user: j.rec.user.clone(),
        program: j.spec.argv.first().cloned().unwrap_or_default(),
        width: j.spec.width,
        state: j.rec.state,
        submitted_ms: j.rec.submitted_ms,
        started_ms: j.rec.started_ms,
        ended_ms: j.rec.ended_ms.unwrap_or(j.rec.submitted_ms),
        elapsed_ms: if j.rec.started_ms.is_some() {
            j.rec.done_ms
        } else {
            0
        },
        cpu_nanos: None,
        peak_memory: None,
        exit: j.rec.exit,
        reason: j.rec.reason.clone(),
        charged: j.rec.charged,
        utility: achieved(j),
        attempts: j.rec.attempts,
        nodes: j.rec.nodes.clone(),
    }
}

/// Most bytes of entries in one answer: a frame ([`proto::DEFAULT_MAX_FRAME`]) less
/// room for the envelope and the usage filled in after [`fit`].
pub const REPLY_BYTES: usize = proto::DEFAULT_MAX_FRAME - 128 * 1024;

/// Keeps the first entries of `list` (the most recently ended) that encode in
/// `max` bytes, so that a long history (long reasons, many nodes) still fits one
/// answer; `--since` reaches further back.
pub fn fit(list: &mut Vec<HistoryEntry>, max: usize) {
    let mut used = 0;
    let keep = list
        .iter()
        .take_while(|e| {
            used += postcard::to_allocvec(e).map_or(max, |b| b.len() + 32);
            used <= max
        })
        .count();
    list.truncate(keep);
}

/// Answers `History`: the ended jobs `peer` may see, most recently ended first.
pub fn list(
    shared: &Shared,
    peer: &PeerIdentity,
    q: HistoryQuery,
) -> Result<BatchReply, BatchError> {
    let user = crate::ops::access::whose(peer, q.user.as_ref())?;
    let since = q.since_ms.unwrap_or(i64::MIN);
    let mut list: Vec<HistoryEntry> = {
        let queue = shared.lock_queue();
        queue
            .jobs
            .values()
            .filter(|j| j.ended() && j.rec.ended_ms.unwrap_or(i64::MIN) >= since)
            .filter(|j| user.as_ref().is_none_or(|u| *u == j.rec.user))
            .map(entry)
            .collect()
    };
    list.sort_by(|a, b| b.ended_ms.cmp(&a.ended_ms).then(b.job.0.cmp(&a.job.0)));
    list.truncate(MAX_HISTORY_LIST);
    fit(&mut list, REPLY_BYTES);
    let ids: Vec<u64> = list.iter().map(|e| e.job.0).collect();
    let used = shared.reader.jobs_usage(&ids).map_err(|e| {
        BatchError::new(
            BatchErrorCode::Storage,
            format!("cannot read the jobs' usage: {e}; retry"),
        )
    })?;
    for e in &mut list {
        let u = used.get(&e.job.0).copied().unwrap_or_default();
        e.cpu_nanos = u.cpu_nanos;
        e.peak_memory = u.peak_memory;
    }
    Ok(BatchReply::History(list))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::fixture::{spec, unsigned};
    use proto::batch::Worth;

    fn job(worth: Worth, state: JobState, submitted_ms: i64, ended_ms: i64) -> Job {
        let mut rec =
            crate::store::JobRecord::queued(0, 1, "alice".into(), unsigned(), submitted_ms);
        rec.state = state;
        rec.ended_ms = Some(ended_ms);
        Job::new(rec, spec(2, 60, worth))
    }

    #[test]
    fn a_long_history_is_cut_to_what_fits_one_answer_most_recent_first() {
        let mut j = job(Worth::Rate(1), JobState::Failed, 0, 0);
        j.rec.reason = Some("x".repeat(1000));
        let mut list: Vec<HistoryEntry> = (0..2000)
            .map(|i| {
                let mut e = entry(&j);
                e.ended_ms = 2000 - i;
                e
            })
            .collect();
        fit(&mut list, REPLY_BYTES);
        assert!(list.len() > 500 && list.len() < 1000, "{}", list.len());
        assert_eq!(list[0].ended_ms, 2000);
        let reply = BatchReply::History(list);
        let bytes = postcard::to_allocvec(&reply).unwrap();
        assert!(bytes.len() < proto::DEFAULT_MAX_FRAME, "{}", bytes.len());
    }

    #[test]
    fn a_finished_job_achieves_its_utility_at_its_completion_and_others_nothing() {
        // 10 credits up to 100 s after submission, falling to -2 at 400 s.
        let decay = || Worth::Utility(vec![(100, 10_000_000), (400, -2_000_000)]);
        let at = |end_s: i64| achieved(&job(decay(), JobState::Finished, 5_000, 5_000 + end_s));
        assert_eq!(at(60_000), 10_000_000);
        // 250 s: half way down the line from 10 to -2.
        assert_eq!(at(250_999), 4_000_000);
        assert_eq!(at(900_000), -2_000_000);
        for state in [JobState::Cancelled, JobState::Failed, JobState::Running] {
            assert_eq!(achieved(&job(decay(), state, 0, 1_000)), 0, "{state:?}");
        }
        assert_eq!(most(&job(decay(), JobState::Failed, 0, 0)), 10_000_000);
        // A rate is the constant utility it stands for: 3 credits a CPU-minute on 2
        // CPUs for a minute, whenever it ends.
        let rate = job(Worth::Rate(3_000_000), JobState::Finished, 0, 3_600_000);
        assert_eq!(achieved(&rate), 6_000_000);
    }
}
