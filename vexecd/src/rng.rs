//! The random source of the `random` policy, the placement simulation and the
//! tests: `rand_xoshiro`'s SplitMix64 (not for secrets), and [`RandomSource`],
//! the two draws the policies and the simulation make from any `rand_core`
//! generator. The daemon seeds from the operating system ([`from_os`]);
//! simulations and tests seed from a number
//! (`SeedableRng::seed_from_u64`), and the stream for a seed is the one this
//! crate's hand-written SplitMix64 gave, so printed seeds (the placement
//! simulation's, `docs/BENCHMARKS.md`) still reproduce their numbers.

pub use rand_xoshiro::SplitMix64;
pub use rand_xoshiro::rand_core::{Rng, SeedableRng};

/// Uniform draws from a generator, as the policies and the simulation use them.
pub trait RandomSource: Rng {
    /// Uniform in `0..n` (`n > 0`), by Lemire's multiply-shift (bias under
    /// `n / 2^64`, negligible here).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl<R: Rng + ?Sized> RandomSource for R {}

/// A generator seeded from the operating system (for a daemon that wants
/// different picks from its replicas; nothing asks to reproduce them).
pub fn from_os() -> Result<SplitMix64, getrandom::Error> {
    Ok(SplitMix64::seed_from_u64(getrandom::u64()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_sequences_repeat_spread_and_keep_their_stream() {
        let draw = |seed| {
            let mut r = SplitMix64::seed_from_u64(seed);
            (0..4).map(|_| r.next_u64()).collect::<Vec<u64>>()
        };
        assert_eq!(draw(1), draw(1));
        // SplitMix64's reference stream (Vigna's splitmix64.c) for seed 0: what the
        // simulation's printed seeds were drawn from before the crate took over.
        assert_eq!(draw(0)[..2], [0xe220_a839_7b1d_cdaf, 0x6e78_9e6a_a1b9_65f4]);
        let mut r = SplitMix64::seed_from_u64(9);
        let mut hits = [0u32; 10];
        for _ in 0..10_000 {
            hits[r.below(10)] += 1;
        }
        assert!(hits.iter().all(|&h| (800..1200).contains(&h)), "{hits:?}");
        assert!((0..1000).all(|_| (0.0..1.0).contains(&r.unit())));
    }

    #[test]
    fn os_seeded_generators_differ() {
        let a = from_os().unwrap().next_u64();
        let b = from_os().unwrap().next_u64();
        assert_ne!(a, b);
    }
}
