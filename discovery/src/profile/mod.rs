//! The availability history, after HP's Ring Leader: the week is cut into
//! [`SLOTS`] ten-minute slots, and each slot holds the fraction of samples in
//! which the node's CPUs were busy (with market jobs or anything else).
//! Samples of the same slot in past weeks are merged, over a sliding window
//! of the last few weeks, so a Monday 8:40 meeting shows in the Monday 8:40
//! slot. From the profile and the node's speed, [`predict`] gives the
//! completion time of a job of a given CPU length starting now.
//!
//! - [`History`] (here): the per-week sample counts and the merged profile.
//! - [`file`]: the small file that survives restarts (atomic save, validated load).
//! - [`summary`]: the compact summary a node puts in its announcement, with
//!   a fast prediction for selectors ranking thousands of nodes.
//! - [`predict`]: the Ring Leader rule, slot by slot (the reference).

pub mod file;
pub mod predict;
pub mod summary;

use std::collections::VecDeque;

use crate::clock::{WEEK_SECS, week_index, week_secs};

/// Ten-minute slots in a week.
pub const SLOTS: usize = 1008;

/// Length of a slot in seconds.
pub const SLOT_SECS: u64 = 600;

/// Weeks merged by default (the current one and three before it).
pub const DEFAULT_WINDOW_WEEKS: usize = 4;

/// Most weeks a history may keep.
pub const MAX_WINDOW_WEEKS: usize = 52;

/// Samples seen in one slot of one week.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlotCount {
    /// Samples taken.
    pub samples: u32,
    /// Sum of the busy fractions of those samples, in thousandths
    /// (a sample with every CPU busy adds 1000).
    pub busy_milli: u32,
}

/// One week of samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Week {
    /// Which week (see [`crate::clock::week_index`]).
    pub index: u64,
    /// [`SLOTS`] counts.
    pub slots: Vec<SlotCount>,
}

impl Week {
    fn new(index: u64) -> Week {
        Week {
            index,
            slots: vec![SlotCount::default(); SLOTS],
        }
    }
}

/// A node's availability history: the last `window` weeks of samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History {
    window: usize,
    weeks: VecDeque<Week>,
}

impl History {
    /// An empty history merging the last `window` weeks (clamped to
    /// `1..=MAX_WINDOW_WEEKS`).
    pub fn new(window: usize) -> History {
        History {
            window: window.clamp(1, MAX_WINDOW_WEEKS),
            weeks: VecDeque::new(),
        }
    }

    /// Weeks merged.
    pub fn window(&self) -> usize {
        self.window
    }

    /// The weeks kept, oldest first.
    pub fn weeks(&self) -> impl Iterator<Item = &Week> {
        self.weeks.iter()
    }

    /// Rebuild from weeks (as read from a file); the caller has checked
    /// they are in increasing order and at most `window` of them.
    pub(crate) fn from_parts(window: usize, weeks: Vec<Week>) -> History {
        History {
            window,
            weeks: weeks.into(),
        }
    }

    /// Record one sample taken at `unix_secs`: `busy` is the fraction of
    /// the node's CPUs busy (clamped to 0..=1). A new week pushes the oldest
    /// out of the window. A sample older than every kept week (the clock
    /// stepped back) is ignored; returns whether it was recorded.
    pub fn record(&mut self, unix_secs: u64, busy: f64) -> bool {
        let index = week_index(unix_secs);
        let slot = (week_secs(unix_secs) / SLOT_SECS) as usize;
        let busy_milli = (busy.clamp(0.0, 1.0) * 1000.0).round() as u32;
        let newest = self.weeks.back().map(|w| w.index);
        if newest.is_none_or(|n| index > n) {
            self.weeks.push_back(Week::new(index));
            while self.weeks.len() > self.window {
                self.weeks.pop_front();
            }
        }
        let Some(week) = self.weeks.iter_mut().find(|w| w.index == index) else {
            return false;
        };
        let s = &mut week.slots[slot];
        s.samples = s.samples.saturating_add(1);
        s.busy_milli = s.busy_milli.saturating_add(busy_milli);
        true
    }

    /// The merged profile: for each slot, the busy fraction over all
    /// samples of that slot in the window. A slot never sampled gets the
    /// mean of the sampled ones (0 when nothing was sampled at all).
    pub fn busy_fractions(&self) -> Vec<f64> {
        let mut busy = vec![f64::NAN; SLOTS];
        let (mut sum, mut known) = (0.0, 0usize);
        for (slot, b) in busy.iter_mut().enumerate() {
            let (samples, milli) = self.weeks.iter().fold((0u64, 0u64), |(n, m), w| {
                let c = w.slots[slot];
                (n + c.samples as u64, m + c.busy_milli as u64)
            });
            if samples > 0 {
                *b = (milli as f64 / (samples as f64 * 1000.0)).clamp(0.0, 1.0);
                sum += *b;
                known += 1;
            }
        }
        let fill = if known > 0 { sum / known as f64 } else { 0.0 };
        for b in busy.iter_mut().filter(|b| b.is_nan()) {
            *b = fill;
        }
        busy
    }

    /// Predicted seconds to complete a job needing `cpu_secs` of CPU on a
    /// speed-1.0 machine, started at `unix_secs` on this node of relative
    /// `speed`, by the Ring Leader rule over the merged profile. `None` when
    /// the node is never idle (or the speed is not positive).
    pub fn predict(&self, unix_secs: u64, cpu_secs: f64, speed: f64) -> Option<f64> {
        predict::walk(
            &self.busy_fractions(),
            SLOT_SECS as f64,
            week_secs(unix_secs) as f64,
            cpu_secs,
            speed,
        )
    }
}

const _: () = assert!(SLOTS as u64 * SLOT_SECS == WEEK_SECS);

#[cfg(test)]
mod tests {
    use super::*;

    const MONDAY: u64 = 1_704_067_200; // 2024-01-01 00:00 UTC

    #[test]
    fn merges_weeks_in_a_sliding_window() {
        let mut h = History::new(2);
        // Week 0: slot 0 busy; week 1: slot 0 idle; week 2: slot 0 idle.
        assert!(h.record(MONDAY, 1.0));
        assert!(h.record(MONDAY + WEEK_SECS, 0.0));
        assert_eq!(h.busy_fractions()[0], 0.5);
        assert!(h.record(MONDAY + 2 * WEEK_SECS + 5, 0.0));
        assert_eq!(h.busy_fractions()[0], 0.0, "week 0 left the window");
        assert_eq!(h.weeks().count(), 2);
        // A sample from a week already out of the window is ignored.
        assert!(!h.record(MONDAY, 1.0));
        // Unsampled slots take the mean of the sampled ones.
        h.record(MONDAY + 2 * WEEK_SECS + SLOT_SECS, 1.0);
        assert_eq!(h.busy_fractions()[500], 0.5);
    }

    #[test]
    fn predicts_around_a_busy_hour() {
        let mut h = History::new(4);
        // Monday 9:00-10:00 fully busy, everything else idle.
        for slot in 0..SLOTS as u64 {
            let busy = if (54..60).contains(&slot) { 1.0 } else { 0.0 };
            h.record(MONDAY + slot * SLOT_SECS, busy);
        }
        let at_850 = MONDAY + 8 * 3600 + 50 * 60;
        // 30 CPU-minutes from 8:50: 10 min, then an hour of nothing, then 20 min.
        let t = h.predict(at_850, 1800.0, 1.0).unwrap();
        assert!((t - 5400.0).abs() < 1e-6, "{t}");
        // A machine twice as fast needs half the CPU time: 10 + 60 + 5 min.
        let t = h.predict(at_850, 1800.0, 2.0).unwrap();
        assert!((t - 4500.0).abs() < 1e-6, "{t}");
    }
}
