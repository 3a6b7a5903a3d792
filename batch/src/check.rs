//! An independent checker of finished schedules. It reads only the jobs and the recorded
//! run segments, never the policy's own bookkeeping: capacity is never exceeded, no job
//! runs before it arrives, every job runs exactly its runtime and completes exactly once,
//! and (for FIFO-ordered backfilling with exact estimates) the job at the head of the queue
//! starts no later than the earliest time the jobs already running when it became the head
//! would have left room for it, i.e. backfilling never delayed it.

use std::collections::HashMap;

use crate::job::{Job, JobId};
use crate::sim::SimResult;

/// Checks capacity, arrival, exactly-once completion and outcome consistency.
pub fn check_schedule(jobs: &[Job], res: &SimResult) -> Result<(), String> {
    let mut per_job: HashMap<JobId, Vec<(i64, i64)>> = HashMap::new();
    for s in &res.segments {
        if s.end <= s.start {
            return Err(format!("job {}: empty or reversed segment {s:?}", s.job));
        }
        per_job.entry(s.job).or_default().push((s.start, s.end));
    }
    if per_job.len() != jobs.len() || res.outcomes.len() != jobs.len() {
        return Err(format!(
            "{} jobs, {} with segments, {} outcomes",
            jobs.len(),
            per_job.len(),
            res.outcomes.len()
        ));
    }
    for (j, o) in jobs.iter().zip(&res.outcomes) {
        let Some(segs) = per_job.get_mut(&j.id) else {
            return Err(format!("job {} never ran", j.id));
        };
        segs.sort_unstable();
        let ran: i64 = segs.iter().map(|s| s.1 - s.0).sum();
        if ran != j.runtime {
            return Err(format!("job {} ran {ran}s of {}s", j.id, j.runtime));
        }
        if segs[0].0 < j.submit {
            return Err(format!(
                "job {} started at {} before arriving at {}",
                j.id, segs[0].0, j.submit
            ));
        }
        if segs.windows(2).any(|w| w[1].0 < w[0].1) {
            return Err(format!("job {} ran twice at once", j.id));
        }
        if o.start != segs[0].0 || o.end != segs[segs.len() - 1].1 {
            return Err(format!(
                "job {}: outcome {o:?} disagrees with segments",
                j.id
            ));
        }
        if segs.len() as u32 != o.preempted + 1 {
            return Err(format!(
                "job {}: {} segments, {} preemptions",
                j.id,
                segs.len(),
                o.preempted
            ));
        }
    }
    let mut ev: Vec<(i64, i64)> = Vec::new();
    for s in &res.segments {
        ev.push((s.start, s.width as i64));
        ev.push((s.end, -(s.width as i64)));
    }
    ev.sort_unstable(); // at equal times releases (negative) come first
    let mut used = 0;
    for (t, dw) in ev {
        used += dw;
        if used > res.procs as i64 {
            return Err(format!(
                "{used} processors in use at t={t}, machine has {}",
                res.procs
            ));
        }
    }
    Ok(())
}

/// For a FIFO-ordered backfilling run with estimates equal to runtimes and no
/// suspensions: each job, once at the head of the queue, starts no later than the
/// earliest time the jobs running then leave enough processors for it.
pub fn check_head_not_delayed(jobs: &[Job], res: &SimResult) -> Result<(), String> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| (jobs[i].submit, jobs[i].id));
    let mut rank = vec![0; jobs.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r;
    }
    let mut latest_start_before = i64::MIN;
    for &j in &order {
        let job = &jobs[j];
        let start = res.outcomes[j].start;
        let head_at = job.submit.max(latest_start_before);
        latest_start_before = latest_start_before.max(start);
        if start <= head_at {
            continue;
        }
        // Running when j became head: started before, or at that instant ahead of j.
        let mut ends: Vec<(i64, i64)> = Vec::new();
        let mut used = 0;
        for (i, (other, o)) in jobs.iter().zip(&res.outcomes).enumerate() {
            let ahead = rank[i] < rank[j];
            if (o.start < head_at || (o.start == head_at && ahead)) && o.end > head_at {
                ends.push((o.end, other.width as i64));
                used += other.width as i64;
            }
        }
        ends.sort_unstable();
        let mut free = res.procs as i64 - used;
        let mut shadow = head_at;
        for (t, w) in ends {
            if free >= job.width as i64 {
                break;
            }
            free += w;
            shadow = t;
        }
        if start > shadow {
            return Err(format!(
                "job {} became head at {head_at}, could start by {shadow}, started at {start}",
                job.id
            ));
        }
    }
    Ok(())
}
