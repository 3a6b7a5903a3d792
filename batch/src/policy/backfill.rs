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
    match mode {
        Backfill::Conservative => conservative(snap, order),
        _ => easy(snap, order, mode == Backfill::Easy),
    }
}

fn easy(snap: &Snapshot<'_>, order: &[usize], backfill: bool) -> Decision {
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
        }
    }
    d
}

fn conservative(snap: &Snapshot<'_>, order: &[usize]) -> Decision {
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
        } else if d.reserved.is_none() {
            d.reserved = Some((q.job.id, t));
        }
    }
    d
}

/// Indices of `snap.queued` sorted by `key` (ties by arrival, then id).
pub fn order_by<K: PartialOrd>(snap: &Snapshot<'_>, key: impl Fn(usize) -> K) -> Vec<usize> {
    let keys: Vec<K> = (0..snap.queued.len()).map(&key).collect();
    let mut idx: Vec<usize> = (0..snap.queued.len()).collect();
    idx.sort_by(|&a, &b| {
        keys[a]
            .partial_cmp(&keys[b])
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(snap.queued[a].job.submit.cmp(&snap.queued[b].job.submit))
            .then(snap.queued[a].job.id.cmp(&snap.queued[b].job.id))
    });
    idx
}

/// The id of `snap.queued[i]`.
pub fn id_of(snap: &Snapshot<'_>, i: usize) -> JobId {
    snap.queued[i].job.id
}
