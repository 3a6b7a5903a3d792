//! The random source of the `random` policy and of the simulation:
//! a small trait so tests and daemons can inject and seed it, and
//! SplitMix64, a fast, well-mixed, seedable generator (not for secrets).

/// A source of uniformly random 64-bit words.
pub trait RandomSource {
    /// The next word.
    fn next_u64(&mut self) -> u64;

    /// Uniform in `0..n` (`n > 0`), by Lemire's multiply-shift (bias under
    /// `n / 2^64`, negligible here).
    fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014).
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// A generator seeded from the system clock and the process id (for a
    /// daemon that wants different picks from its replicas).
    pub fn from_entropy() -> SplitMix64 {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        SplitMix64::new(t ^ ((std::process::id() as u64) << 32))
    }
}

impl RandomSource for SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_sequences_repeat_and_spread() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = SplitMix64::new(1);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..4)
            .map({
                let mut r = SplitMix64::new(1);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        let mut r = SplitMix64::new(9);
        let mut hits = [0u32; 10];
        for _ in 0..10_000 {
            hits[r.below(10)] += 1;
        }
        assert!(hits.iter().all(|&h| (800..1200).contains(&h)), "{hits:?}");
        assert!((0..1000).all(|_| (0.0..1.0).contains(&r.unit())));
    }
}
