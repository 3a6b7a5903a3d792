//! The dispatch queue: a 4-ary min-heap of (pass, id) entries.
//!
//! Four children per node halve the depth of a binary heap and keep siblings in one or two
//! cache lines, which matters once the queue outgrows the caches (100,000 clients). The top is
//! replaced in place when the client it names stays runnable in the same quantum.

use super::client::Entry;

const ARITY: usize = 4;

#[derive(Clone, Debug, Default)]
pub(super) struct Heap {
    v: Vec<Entry>,
}

impl Heap {
    /// A heap of `entries`, built in O(n).
    pub(super) fn from_vec(entries: Vec<Entry>) -> Heap {
        let mut h = Heap { v: entries };
        if h.v.len() > 1 {
            for i in (0..=(h.v.len() - 2) / ARITY).rev() {
                h.sift_down(i);
            }
        }
        h
    }

    pub(super) fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    /// The lowest entry.
    pub(super) fn peek(&self) -> Option<&Entry> {
        self.v.first()
    }

    /// Replaces the lowest entry with `e` (which must exist) and restores the order.
    pub(super) fn replace_top(&mut self, e: Entry) {
        self.v[0] = e;
        self.sift_down(0);
    }

    /// Removes the lowest entry.
    pub(super) fn pop(&mut self) -> Option<Entry> {
        let last = self.v.pop()?;
        if self.v.is_empty() {
            return Some(last);
        }
        let top = std::mem::replace(&mut self.v[0], last);
        self.sift_down(0);
        Some(top)
    }

    pub(super) fn push(&mut self, e: Entry) {
        self.v.push(e);
        let mut i = self.v.len() - 1;
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if !e.before(&self.v[parent]) {
                break;
            }
            self.v[i] = self.v[parent];
            i = parent;
        }
        self.v[i] = e;
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.v.len();
        let e = self.v[i];
        loop {
            let first = ARITY * i + 1;
            if first >= n {
                break;
            }
            let mut best = first;
            for c in first + 1..(first + ARITY).min(n) {
                if self.v[c].before(&self.v[best]) {
                    best = c;
                }
            }
            if !self.v[best].before(&e) {
                break;
            }
            self.v[i] = self.v[best];
            i = best;
        }
        self.v[i] = e;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(pass: i128, id: u64) -> Entry {
        Entry {
            pass,
            id,
            slot: id as u32,
        }
    }

    #[test]
    fn pops_in_pass_then_id_order() {
        let mut x: u64 = 7;
        let mut entries = Vec::new();
        for id in 0..500u64 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            entries.push(e(i128::from((x >> 40) % 50), id));
        }
        let mut want = entries.clone();
        want.sort_by_key(|e| (e.pass, e.id));
        let mut h = Heap::from_vec(entries[..250].to_vec());
        for &en in &entries[250..] {
            h.push(en);
        }
        let mut got = Vec::new();
        while let Some(top) = h.pop() {
            got.push(top);
        }
        assert_eq!(got, want);
    }

    #[test]
    fn replace_top_keeps_order() {
        let mut h = Heap::from_vec((0..20).map(|i| e(i, i as u64)).collect());
        h.replace_top(e(100, 0));
        assert_eq!(h.peek().map(|t| t.id), Some(1));
        let mut last = (i128::MIN, 0);
        while let Some(t) = h.pop() {
            assert!((t.pass, t.id) > last);
            last = (t.pass, t.id);
        }
        assert!(h.is_empty());
    }
}
