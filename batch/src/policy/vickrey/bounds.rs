//! Upper bounds on waiting jobs' bids, kept between decisions so the Vickrey scheduler
//! computes a bid only when it could matter.
//!
//! A waiting job's remaining estimate does not change while it waits, so its bid moves
//! only with its utility: if the utility never rises, today's bid bounds every later one.
//! For a utility that can rise, the bound is its highest value spread over the remaining
//! work. Bounds live in a max-heap keyed like the ranking (bid, earlier arrival, lower
//! id). A snapshot's queue is in arrival order, so a job is found in it by binary search,
//! new arrivals are the queue's tail past the newest job seen, and a job that comes back
//! from running was in the last snapshot's running list. An entry whose job is no longer
//! waiting is dropped when it surfaces. Snapshots must follow one another in time; a
//! snapshot from the past starts the bounds afresh.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::job::{JobId, rate_per_proc_hour};
use crate::policy::{Queued, Snapshot};
use crate::utility::Micros;

/// Arrival key: submission time, then id (the queue's order).
type Key = (i64, JobId);

/// A ranking key: bid, running, earlier arrival, lower id (highest ranks first).
pub(super) type Line = (Micros, bool, Reverse<i64>, Reverse<JobId>);

/// The bounds and what was seen of the queue.
#[derive(Debug, Clone, Default)]
pub(super) struct Bounds {
    heap: BinaryHeap<(Micros, Reverse<i64>, Reverse<JobId>)>,
    /// When the last snapshot was taken.
    now: i64,
    /// The newest arrival seen waiting.
    newest: Option<Key>,
    /// Jobs running at the last decision (they may be waiting now).
    was_running: Vec<Key>,
    /// Queue positions whose bids this decision computed, with their new bounds.
    computed: Vec<(usize, Micros)>,
    /// The same positions as a bitset, one bit per queue position.
    seen: Vec<u64>,
}

fn key(q: &Queued<'_>) -> Key {
    (q.job.submit, q.job.id)
}

fn find(snap: &Snapshot<'_>, k: Key) -> Option<usize> {
    snap.queued.binary_search_by_key(&k, key).ok()
}

/// The bid of a waiting job now, and a bound on its bid from now on.
fn bid_and_bound(q: &Queued<'_>, now: i64) -> (Micros, Micros) {
    let rem = q.remaining_estimate();
    let bid = q.job.bid_at(now, rem);
    let pts = q.job.utility.points();
    let never_rises = pts.windows(2).all(|w| w[1].1 <= w[0].1);
    if never_rises {
        (bid, bid)
    } else {
        let top = rate_per_proc_hour(q.job.utility.max_value(), q.job.width, rem);
        (bid, top.max(bid))
    }
}

impl Bounds {
    fn push(&mut self, q: &Queued<'_>, bound: Micros) {
        self.heap
            .push((bound, Reverse(q.job.submit), Reverse(q.job.id)));
    }

    /// Takes in what changed since the last snapshot: new arrivals and jobs back from
    /// running get a bound.
    pub(super) fn sync(&mut self, snap: &Snapshot<'_>) {
        if snap.now < self.now {
            *self = Bounds::default();
        }
        self.now = snap.now;
        self.computed.clear();
        self.seen.clear();
        self.seen.resize(snap.queued.len().div_ceil(64), 0);
        let from = match self.newest {
            Some(n) => snap.queued.partition_point(|q| key(q) <= n),
            None => 0,
        };
        let mut fresh: Vec<usize> = (from..snap.queued.len()).collect();
        for &k in &self.was_running {
            if let Some(i) = find(snap, k) {
                fresh.push(i);
            }
        }
        for i in fresh {
            let q = &snap.queued[i];
            let (_, bound) = bid_and_bound(q, snap.now);
            self.push(q, bound);
        }
        if let Some(last) = snap.queued.last() {
            self.newest = self.newest.max(Some(key(last)));
        }
        self.was_running = snap
            .running
            .iter()
            .map(|r| (r.job.submit, r.job.id))
            .collect();
    }

    /// Computes the bids of every waiting job that could outrank `line` (the best key
    /// ranked so far; `None`: nothing ranked yet, so take the best bound), handing each
    /// to `rank` with its queue position. A job's key never exceeds its bound's key (same
    /// arrival, a bid at most the bound), so the others cannot outrank the line.
    pub(super) fn pull(
        &mut self,
        snap: &Snapshot<'_>,
        line: Option<Line>,
        rank: &mut dyn FnMut(Micros, usize),
    ) {
        let mut line = line;
        while let Some(&(bound, Reverse(submit), Reverse(id))) = self.heap.peek() {
            let reach = (bound, false, Reverse(submit), Reverse(id));
            if line.is_some_and(|l| reach < l) {
                break;
            }
            self.heap.pop();
            let Some(i) = find(snap, (submit, id)) else {
                continue; // no longer waiting
            };
            let (word, bit) = (i / 64, 1u64 << (i % 64));
            if self.seen[word] & bit != 0 {
                continue; // an older bound of a job already ranked
            }
            self.seen[word] |= bit;
            let (bid, bound) = bid_and_bound(&snap.queued[i], snap.now);
            self.computed.push((i, bound));
            rank(bid, i);
            let k = (bid, false, Reverse(submit), Reverse(id));
            line = Some(line.map_or(k, |l| l.max(k)));
        }
    }

    /// After a decision: every job whose bid was computed and that still waits keeps its
    /// new bound (`started` holds the queue positions started, sorted).
    pub(super) fn keep(&mut self, snap: &Snapshot<'_>, started: &[usize]) {
        let computed = std::mem::take(&mut self.computed);
        for &(i, bound) in &computed {
            if started.binary_search(&i).is_err() {
                self.push(&snap.queued[i], bound);
            }
        }
        self.computed = computed;
    }
}
