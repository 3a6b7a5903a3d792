//! The shared engine: start queued jobs in a policy's order, with no backfilling, EASY
//! backfilling (only the most eligible waiting job holds a reservation, and nothing that
//! would delay it may start), or conservative backfilling (every waiting job holds a
//! reservation in order, and a job starts now only if its reservation is now).

use std::collections::HashMap;

use super::{Decision, Snapshot};
use crate::job::JobId;

/// How to fill processors the most eligible job cannot use yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backfill {
    /// Stop at the first job that does not fit.
    None,
    /// EASY: one reservation, for the first job that does not fit.
    Easy,
    /// Conservative: a reservation for every job, in order.
    Conservative,
}

/// Free processors over time: `(from, free)` steps, sorted, the last one lasting forever.
///
/// Free counts only fall while a decision reserves, so for each width the time of the
/// first step with that many processors free only moves later: [`Profile::earliest`]
/// remembers it per width and starts there, instead of at the profile's origin.
#[derive(Debug, Clone)]
pub struct Profile {
    steps: Vec<(i64, i64)>,
    /// Per width: no step before this time has that many processors free.
    first_fit: HashMap<u32, i64>,
}

impl Profile {
    /// The profile of `snap`'s machine given the running jobs' estimated ends.
    pub fn from_snapshot(snap: &Snapshot<'_>) -> Self {
        let mut p = Profile {
            steps: vec![(snap.now, snap.procs as i64)],
            first_fit: HashMap::new(),
        };
        for r in &snap.running {
            p.reserve(snap.now, r.estimated_end(snap.now) - snap.now, r.job.width);
        }
        p
    }

    fn split(&mut self, t: i64) -> usize {
        match self.steps.binary_search_by_key(&t, |s| s.0) {
            Ok(i) => i,
            Err(i) => {
                let free = self.steps[i - 1].1;
                self.steps.insert(i, (t, free));
                i
            }
        }
    }

    /// Earliest start at or after the profile's origin where `width` processors are free
    /// for `dur` seconds.
    pub fn earliest(&mut self, width: u32, dur: i64) -> i64 {
        let w = width as i64;
        let from = match self.first_fit.get(&width) {
            Some(&t) => self.steps.partition_point(|s| s.0 < t),
            None => 0,
        };
        let mut first = None;
        // Start of the current run of steps with `w` free, if in one.
        let mut run: Option<i64> = None;
        for &(t, free) in &self.steps[from..] {
            if let Some(c) = run
                && t >= c + dur
            {
                self.first_fit.insert(width, first.unwrap_or(c));
                return c;
            }
            if free < w {
                run = None;
            } else {
                first.get_or_insert(t);
                run.get_or_insert(t);
            }
        }
        if let Some(f) = first {
            self.first_fit.insert(width, f);
        }
        // The last step lasts forever; for width <= procs it has them all free.
        run.or_else(|| self.steps.last().map(|s| s.0)).unwrap_or(0)
    }

    /// Processors free at the profile's origin (now).
    pub fn free_at_origin(&self) -> i64 {
        self.steps.first().map_or(0, |s| s.1)
    }

    /// Takes `width` processors over `[t, t + dur)`.
    pub fn reserve(&mut self, t: i64, dur: i64, width: u32) {
        let a = self.split(t);
        let b = self.split(t + dur.max(1));
        for s in &mut self.steps[a..b] {
            s.1 -= width as i64;
        }
    }
}

/// Starts jobs from `snap.queued` in `order` (indices into `snap.queued`) under `mode`.
pub fn schedule(snap: &Snapshot<'_>, order: &[usize], mode: Backfill) -> Decision {
    schedule_at(snap, order, mode).0
}

/// As [`schedule`], with the positions in `snap.queued` of the jobs it starts (in the
/// order of `Decision::start`), so a policy pricing them need not look them up.
pub fn schedule_at(snap: &Snapshot<'_>, order: &[usize], mode: Backfill) -> (Decision, Vec<usize>) {
    let mut started = Vec::new();
    let d = match mode {
        Backfill::Conservative => conservative(snap, order, &mut started),
        _ => easy(snap, order, mode == Backfill::Easy, &mut started),
    };
    (d, started)
}

fn easy(
    snap: &Snapshot<'_>,
    order: &[usize],
    backfill: bool,
    started: &mut Vec<usize>,
) -> Decision {
    let now = snap.now;
    let mut free = snap.free() as i64;
    let mut ends: Vec<(i64, i64)> = snap
        .running
        .iter()
        .map(|r| (r.estimated_end(now), r.job.width as i64))
        .collect();
    let mut d = Decision::default();
    let mut k = 0;
    while k < order.len() {
        let q = &snap.queued[order[k]];
        let w = q.job.width as i64;
        if w > free {
            break;
        }
        free -= w;
        ends.push((now + q.remaining_estimate(), w));
        d.start.push(q.job.id);
        started.push(order[k]);
        k += 1;
    }
    if k == order.len() {
        return d;
    }
    let head = &snap.queued[order[k]];
    ends.sort_unstable();
    let need = head.job.width as i64;
    let mut avail = free;
    let mut shadow = now;
    for &(t, w) in &ends {
        if avail >= need {
            break;
        }
        avail += w;
        shadow = t;
    }
    d.reserved = Some((head.job.id, shadow));
    if !backfill {
        return d;
    }
    let mut extra = avail - need;
    for &i in &order[k + 1..] {
        let q = &snap.queued[i];
        let w = q.job.width as i64;
        if w > free {
            continue;
        }
        let ends_in_time = now + q.remaining_estimate() <= shadow;
        if ends_in_time || w <= extra {
            free -= w;
            if !ends_in_time {
                extra -= w;
            }
            d.start.push(q.job.id);
            started.push(i);
        }
    }
    d
}

fn conservative(snap: &Snapshot<'_>, order: &[usize], started: &mut Vec<usize>) -> Decision {
    let mut profile = Profile::from_snapshot(snap);
    let mut d = Decision::default();
    // The narrowest job from each position on: once fewer processors are free now,
    // nothing further can start now.
    let mut narrowest = vec![u32::MAX; order.len() + 1];
    for (k, &i) in order.iter().enumerate().rev() {
        narrowest[k] = narrowest[k + 1].min(snap.queued[i].job.width);
    }
    for (k, &i) in order.iter().enumerate() {
        if d.reserved.is_some() && profile.free_at_origin() < i64::from(narrowest[k]) {
            // The reservations still to be made would change nothing this decision
            // reports (what starts now, and the first reservation).
            break;
        }
        let q = &snap.queued[i];
        let dur = q.remaining_estimate();
        let t = profile.earliest(q.job.width, dur);
        profile.reserve(t, dur, q.job.width);
        if t == snap.now {
            d.start.push(q.job.id);
            started.push(i);
        } else if d.reserved.is_none() {
            d.reserved = Some((q.job.id, t));
        }
    }
    d
}

/// Indices of `snap.queued` sorted by `key` (ties by arrival, then id). Each job's key
/// and arrival are gathered once, side by side, so the sort compares neighbours in
/// memory instead of visiting the jobs; a queue already in that order (a sweep's tasks,
/// all alike) sorts in one pass.
pub fn order_by<K: PartialOrd>(snap: &Snapshot<'_>, key: impl Fn(usize) -> K) -> Vec<usize> {
    let mut keyed: Vec<(K, i64, JobId, usize)> = snap
        .queued
        .iter()
        .enumerate()
        .map(|(i, q)| (key(i), q.job.submit, q.job.id, i))
        .collect();
    keyed.sort_by(|a, b| {
        a.0.partial_cmp(&b.0)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.1.cmp(&b.1))
            .then(a.2.cmp(&b.2))
    });
    keyed.into_iter().map(|k| k.3).collect()
}

/// The id of `snap.queued[i]`.
pub fn id_of(snap: &Snapshot<'_>, i: usize) -> JobId {
    snap.queued[i].job.id
}
