//! The per-job schedule as CSV, so anyone can check a run outside the program: one row
//! per run segment, `policy,job,submit,start,stop,width,charged`, times in seconds and
//! the charge in micro-credits on the row of the segment that completes the job (0 on
//! the rows of earlier, suspended segments, so the column sums to the revenue). The
//! reader rebuilds what [`crate::check::check_schedule`] needs from the rows alone.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use thiserror::Error;

use crate::job::{Job, JobId};
use crate::sim::{Outcome, Segment, SimResult};

/// The header line.
pub const HEADER: &str = "policy,job,submit,start,stop,width,charged";

/// A schedule file that cannot be read.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("line {line}: {why}")]
pub struct ScheduleError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub why: String,
}

/// The rows of one run (without the header).
pub fn rows(jobs: &[Job], res: &SimResult) -> String {
    // job -> (submit, completion, charge)
    let known: HashMap<JobId, (i64, i64, i64)> = jobs
        .iter()
        .zip(&res.outcomes)
        .map(|(j, o)| (j.id, (j.submit, o.end, o.charge)))
        .collect();
    let mut out = String::new();
    for s in &res.segments {
        let (sub, end, charge) = known.get(&s.job).copied().unwrap_or((0, 0, 0));
        let charged = if s.end == end { charge } else { 0 };
        let _ = writeln!(
            out,
            "{},{},{sub},{},{},{},{charged}",
            res.policy, s.job, s.start, s.end, s.width
        );
    }
    out
}

/// The runs of a schedule file, one per policy in order of appearance, rebuilt from the
/// rows: segments as written, each job's outcome from its segments (first start, last
/// stop, suspensions = segments - 1, charges summed), outcomes in the order of `jobs`.
pub fn read(text: &str, jobs: &[Job], procs: u32) -> Result<Vec<SimResult>, ScheduleError> {
    let mut runs: Vec<SimResult> = Vec::new();
    let mut charges: Vec<BTreeMap<JobId, i64>> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let bad = |why: String| ScheduleError { line: n + 1, why };
        if n == 0 {
            if line.trim() != HEADER {
                return Err(bad(format!("expected the header {HEADER:?}")));
            }
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != 7 {
            return Err(bad(format!("expected 7 fields, found {}", f.len())));
        }
        let num = |k: usize| {
            f[k].trim()
                .parse::<i64>()
                .map_err(|_| bad(format!("field {} is not an integer: {:?}", k + 1, f[k])))
        };
        let (job, start, end, width, charged) = (num(1)?, num(3)?, num(4)?, num(5)?, num(6)?);
        let k = match runs.iter().position(|r| r.policy == f[0]) {
            Some(k) => k,
            None => {
                runs.push(SimResult::empty(f[0], procs));
                charges.push(BTreeMap::new());
                runs.len() - 1
            }
        };
        let job = JobId::try_from(job).map_err(|_| bad(format!("negative job {job}")))?;
        let width = u32::try_from(width).map_err(|_| bad(format!("bad width {width}")))?;
        runs[k].segments.push(Segment {
            job,
            start,
            end,
            width,
        });
        *charges[k].entry(job).or_default() += charged;
    }
    for (run, charge) in runs.iter_mut().zip(&charges) {
        run.outcomes = jobs
            .iter()
            .map(|j| outcome(&run.segments, j.id, charge.get(&j.id).copied()))
            .collect();
    }
    Ok(runs)
}

fn outcome(segments: &[Segment], job: JobId, charge: Option<i64>) -> Outcome {
    let mine = segments.iter().filter(|s| s.job == job);
    let (mut start, mut end, mut n) = (i64::MAX, i64::MIN, 0u32);
    for s in mine {
        start = start.min(s.start);
        end = end.max(s.end);
        n += 1;
    }
    Outcome {
        start: if n == 0 { 0 } else { start },
        end: if n == 0 { 0 } else { end },
        preempted: n.saturating_sub(1),
        charge: charge.unwrap_or(0),
    }
}
