//! The seeded generator behind every random choice in the crate (workload generation,
//! utility generation, the genetic algorithm): xoshiro256** from the well-kept
//! `rand_xoshiro` crate, seeded from a printed `u64` through SplitMix64, so any run can be
//! repeated exactly. The helpers here (uniform, normal, exponential, shuffle) are ours, so
//! the numbers in `docs/ECONOMICS.md` depend only on the xoshiro stream, which
//! `rand_xoshiro` documents as stable; a test pins its first outputs.

use rand_xoshiro::Xoshiro256StarStar;
use rand_xoshiro::rand_core::{Rng as _, SeedableRng};

/// A deterministic generator; the same seed always gives the same stream.
#[derive(Debug, Clone)]
pub struct Rng {
    inner: Xoshiro256StarStar,
}

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Rng {
            inner: Xoshiro256StarStar::seed_from_u64(seed),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[lo, hi)` (or `lo` when the range is empty).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        if hi <= lo {
            lo
        } else {
            lo + (hi - lo) * self.unit()
        }
    }

    /// Uniform integer in `lo..=hi` (or `lo` when `hi < lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next_u64() % (hi - lo + 1)
        }
    }

    /// Index uniform in `0..n` (`n` must be at least 1).
    pub fn index(&mut self, n: usize) -> usize {
        self.range(0, n.saturating_sub(1) as u64) as usize
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A normal deviate (Box-Muller).
    pub fn normal(&mut self, mean: f64, sd: f64) -> f64 {
        let u1 = 1.0 - self.unit();
        let u2 = self.unit();
        mean + sd * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// An exponential deviate with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }

    /// Shuffles `v` in place (Fisher-Yates).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.index(i + 1);
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_unit_in_range() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..1000 {
            let x = a.unit();
            assert_eq!(x, b.unit());
            assert!((0.0..1.0).contains(&x));
        }
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }

    #[test]
    fn streams_match_the_hand_written_generator_they_replace() {
        // First outputs of the xoshiro256** + SplitMix64 generator this crate used to carry,
        // so every seed printed before the switch still gives the same run.
        let golden: [(u64, [u64; 3]); 3] = [
            (
                0,
                [0x99ec5f36cb75f2b4, 0xbf6e1f784956452a, 0x1a5f849d4933e6e0],
            ),
            (
                1,
                [0xb3f2af6d0fc710c5, 0x853b559647364cea, 0x92f89756082a4514],
            ),
            (
                42,
                [0x15780b2e0c2ec716, 0x6104d9866d113a7e, 0xae17533239e499a1],
            ),
        ];
        for (seed, want) in golden {
            let mut r = Rng::new(seed);
            assert_eq!(
                [r.next_u64(), r.next_u64(), r.next_u64()],
                want,
                "seed {seed}"
            );
        }
    }
}
