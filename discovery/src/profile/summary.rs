//! The compact summary of a node's availability profile, small enough for
//! an announcement: the node's speed and, for each of the [`SLOTS`]
//! ten-minute slots, its idle fraction in fifteenths
//! (4 bits, levels 0..=15). 507 bytes on the wire.
//!
//! A selector ranks thousands of nodes per request, so the summary keeps a
//! running sum of idle capacity per hour; a prediction is a binary search
//! over the hours plus at most six slots, in exact integer units
//! (one unit is 40 idle CPU-seconds: a fifteenth of a ten-minute slot).

use super::{SLOT_SECS, SLOTS};
use crate::clock::WEEK_SECS;

/// Version byte of the summary layout.
pub const SUMMARY_VERSION: u8 = 1;

/// Encoded length: version, speed (u16 LE, thousandths), packed levels.
pub const SUMMARY_LEN: usize = 3 + SLOTS / 2;

/// Idle levels per slot (a level of 15 is a fully idle slot).
pub const LEVELS: u8 = 15;

const HOURS: usize = SLOTS / 6;
const UNIT_SECS: f64 = SLOT_SECS as f64 / LEVELS as f64;

/// Why a summary cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SummaryError {
    /// Wrong length.
    #[error("availability summary is {len} bytes, expected {SUMMARY_LEN}")]
    Length {
        /// The length received.
        len: usize,
    },
    /// Unknown layout.
    #[error(
        "availability summary version {got} is not supported (this build reads {SUMMARY_VERSION})"
    )]
    Version {
        /// The version byte received.
        got: u8,
    },
    /// Speed 0.
    #[error("availability summary gives speed 0; a node's speed is positive")]
    ZeroSpeed,
}

/// A node's announced availability: speed and weekly idle levels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    speed_milli: u16,
    packed: [u8; SLOTS / 2],
    /// `cum[h]`: idle units in hours `0..h` of the week.
    cum: [u16; HOURS + 1],
}

impl Summary {
    /// Summarise a profile of busy fractions (one per slot; missing slots
    /// count as idle) for a node of relative `speed` (clamped to
    /// 0.001..=65.535).
    pub fn from_busy(busy: &[f64], speed: f64) -> Summary {
        let mut packed = [0u8; SLOTS / 2];
        for slot in 0..SLOTS {
            let b = busy.get(slot).copied().unwrap_or(0.0);
            let b = if b.is_nan() { 0.0 } else { b.clamp(0.0, 1.0) };
            let level = ((1.0 - b) * LEVELS as f64).round() as u8;
            packed[slot / 2] |= level << (4 * (slot % 2));
        }
        let speed_milli = (speed * 1000.0).round().clamp(1.0, u16::MAX as f64) as u16;
        Summary::from_parts(speed_milli, packed)
    }

    fn from_parts(speed_milli: u16, packed: [u8; SLOTS / 2]) -> Summary {
        let mut cum = [0u16; HOURS + 1];
        for h in 0..HOURS {
            let hour: u16 = (6 * h..6 * h + 6)
                .map(|s| ((packed[s / 2] >> (4 * (s % 2))) & 0xf) as u16)
                .sum();
            cum[h + 1] = cum[h] + hour;
        }
        Summary {
            speed_milli,
            packed,
            cum,
        }
    }

    /// The wire form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(SUMMARY_LEN);
        out.push(SUMMARY_VERSION);
        out.extend_from_slice(&self.speed_milli.to_le_bytes());
        out.extend_from_slice(&self.packed);
        out
    }

    /// Read the wire form; never panics.
    pub fn decode(bytes: &[u8]) -> Result<Summary, SummaryError> {
        if bytes.len() != SUMMARY_LEN {
            return Err(SummaryError::Length { len: bytes.len() });
        }
        if bytes[0] != SUMMARY_VERSION {
            return Err(SummaryError::Version { got: bytes[0] });
        }
        let speed_milli = u16::from_le_bytes([bytes[1], bytes[2]]);
        if speed_milli == 0 {
            return Err(SummaryError::ZeroSpeed);
        }
        let mut packed = [0u8; SLOTS / 2];
        packed.copy_from_slice(&bytes[3..]);
        // Every nibble is a level 0..=15, so any bytes are valid levels.
        Ok(Summary::from_parts(speed_milli, packed))
    }

    /// The node's speed relative to the reference machine.
    pub fn speed(&self) -> f64 {
        self.speed_milli as f64 / 1000.0
    }

    fn level(&self, slot: usize) -> u16 {
        ((self.packed[slot / 2] >> (4 * (slot % 2))) & 0xf) as u16
    }

    /// Busy fraction of `slot` as summarised.
    pub fn busy(&self, slot: usize) -> f64 {
        1.0 - self.level(slot % SLOTS) as f64 / LEVELS as f64
    }

    /// All busy fractions (for the reference walk and for display).
    pub fn busy_fractions(&self) -> Vec<f64> {
        (0..SLOTS).map(|s| self.busy(s)).collect()
    }

    /// Idle units from the start of the week to the start of `slot` (0..=SLOTS).
    fn units_before(&self, slot: usize) -> u32 {
        let h = slot / 6;
        let mut acc = self.cum[h] as u32;
        for s in 6 * h..slot {
            acc += self.level(s) as u32;
        }
        acc
    }

    /// Seconds into the week at which `y` idle units (0 < y <= week total)
    /// have accumulated since the week's start, searching from hour `from`
    /// (where fewer than `y` have accumulated) by galloping, so a job ending
    /// soon reads only the sums near now.
    fn time_of(&self, y: f64, from: usize) -> f64 {
        let done_by = |h: usize| self.cum[h + 1] as f64 >= y;
        let mut lo = from.min(HOURS - 1);
        let h = if done_by(lo) {
            lo
        } else {
            let mut step = 1;
            let mut hi = loop {
                let probe = lo + step;
                if probe >= HOURS - 1 {
                    break HOURS - 1;
                }
                if done_by(probe) {
                    break probe;
                }
                lo = probe;
                step *= 2;
            };
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                if done_by(mid) {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            hi
        };
        let mut acc = self.cum[h] as f64;
        for s in 6 * h..6 * h + 6 {
            let q = self.level(s) as f64;
            if q > 0.0 && acc + q >= y {
                return s as f64 * SLOT_SECS as f64 + (y - acc) / q * SLOT_SECS as f64;
            }
            acc += q;
        }
        (6 * h + 6) as f64 * SLOT_SECS as f64
    }

    /// Predicted seconds to complete a job of `cpu_secs` (on a speed-1.0
    /// machine) started `week_secs` into the week on this node: the Ring
    /// Leader rule over the summarised profile, same result as
    /// [`super::predict::walk`] over [`Summary::busy_fractions`]. `None`
    /// when the summary has no idle time at all.
    pub fn predict(&self, week_secs: f64, cpu_secs: f64) -> Option<f64> {
        if cpu_secs <= 0.0 {
            return Some(0.0);
        }
        let total = self.cum[HOURS] as f64;
        if total == 0.0 || !cpu_secs.is_finite() {
            return None;
        }
        let week = WEEK_SECS as f64;
        let t = week_secs.rem_euclid(week);
        let units = cpu_secs / self.speed() / UNIT_SECS;
        let s0 = ((t / SLOT_SECS as f64) as usize).min(SLOTS - 1);
        let q0 = self.level(s0) as f64;
        let left = ((s0 + 1) as f64 * SLOT_SECS as f64 - t) / SLOT_SECS as f64;
        let c0 = q0 * left;
        if q0 > 0.0 && units <= c0 {
            return Some(units / q0 * SLOT_SECS as f64);
        }
        let target = self.units_before(s0 + 1) as f64 + (units - c0);
        if target <= total {
            return Some(self.time_of(target, (s0 + 1) / 6) - t);
        }
        let beyond = target - total;
        let extra = ((beyond / total).ceil() - 1.0).max(0.0);
        let rem = (beyond - extra * total).clamp(f64::MIN_POSITIVE, total);
        Some(week - t + extra * week + self.time_of(rem, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::super::predict::walk;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trips_and_rejects_bad_bytes() {
        let busy: Vec<f64> = (0..SLOTS).map(|s| (s % 16) as f64 / 15.0).collect();
        let s = Summary::from_busy(&busy, 1.25);
        let bytes = s.encode();
        assert_eq!(bytes.len(), SUMMARY_LEN);
        assert_eq!(Summary::decode(&bytes), Ok(s.clone()));
        assert_eq!(s.speed(), 1.25);
        assert_eq!(
            Summary::decode(&bytes[1..]),
            Err(SummaryError::Length {
                len: SUMMARY_LEN - 1
            })
        );
        let mut v = bytes.clone();
        v[0] = 9;
        assert_eq!(Summary::decode(&v), Err(SummaryError::Version { got: 9 }));
        let mut v = bytes;
        v[1] = 0;
        v[2] = 0;
        assert_eq!(Summary::decode(&v), Err(SummaryError::ZeroSpeed));
    }

    #[test]
    fn always_busy_predicts_never() {
        let s = Summary::from_busy(&[1.0; SLOTS], 1.0);
        assert_eq!(s.predict(0.0, 60.0), None);
        assert_eq!(s.predict(0.0, 0.0), Some(0.0));
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = Summary::decode(&bytes);
        }

        #[test]
        fn fast_prediction_matches_the_walk_for_short_jobs(
            levels in proptest::collection::vec(0u8..=15, SLOTS),
            start in 0.0..(WEEK_SECS as f64),
            cpu in 1.0..30_000.0f64,
        ) {
            let busy: Vec<f64> = levels.iter().map(|&l| 1.0 - l as f64 / 15.0).collect();
            let s = Summary::from_busy(&busy, 1.0);
            let fast = s.predict(start, cpu);
            let slow = walk(&s.busy_fractions(), SLOT_SECS as f64, start, cpu, 1.0);
            match (fast, slow) {
                (Some(f), Some(w)) => prop_assert!((f - w).abs() <= 1e-6 * w.max(1.0), "fast {f} walk {w}"),
                (f, w) => prop_assert_eq!(f.is_some(), w.is_some()),
            }
        }

        #[test]
        fn fast_prediction_matches_the_walk(
            levels in proptest::collection::vec(prop_oneof![Just(0u8), Just(15u8), 0u8..=15], SLOTS),
            speed_milli in 100u16..3000,
            start in 0.0..(WEEK_SECS as f64),
            cpu in 1.0..(3.0 * WEEK_SECS as f64),
        ) {
            let busy: Vec<f64> = levels.iter().map(|&l| 1.0 - l as f64 / 15.0).collect();
            let s = Summary::from_busy(&busy, speed_milli as f64 / 1000.0);
            let fast = s.predict(start, cpu);
            let slow = walk(&s.busy_fractions(), SLOT_SECS as f64, start, cpu, s.speed());
            match (fast, slow) {
                (Some(f), Some(w)) => prop_assert!((f - w).abs() <= 1e-6 * w.max(1.0), "fast {f} walk {w}"),
                (f, w) => prop_assert_eq!(f.is_some(), w.is_some()),
            }
        }
    }
}
