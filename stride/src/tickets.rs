//! Bids to tickets: the proportional translation from what jobs pay to what they are entitled to.
//!
//! Tickets are what the stride scheduler (and the kernel's CPU weights) understand. The
//! translation keeps the ratios between positive bids exact whenever it can, gives every job
//! the same tickets when nobody bids, and gives a zero bid among paying jobs the smallest
//! nonzero weight, [`MIN_TICKETS`]. [`weights_for_bids`] applies the same rules to the
//! kernel's CPU weight ranges, for the node daemon's cgroups.

use money::Bid;

/// Tickets held by the highest bidder (and by everyone when all bids are zero): 2^20.
pub const MAX_TICKETS: u64 = 1 << 20;

/// Tickets held by a job that bids zero while other jobs bid more: one, the smallest
/// nonzero weight.
pub const MIN_TICKETS: u64 = 1;

/// The bid rules in one paragraph, for a command's `--help` (kept here so the text and the
/// code cannot drift apart).
pub const BID_HELP: &str = "Bids are credits per minute (up to 6 decimals). A node shares its \
CPUs in proportion to the bids of the jobs that want them; a job pays its bid only while the \
node is contended (more runnable threads than CPUs, and at least one other job), so a job \
alone never pays. A zero bid among paying jobs gets the smallest weight: it runs only on CPU \
time the paying jobs leave idle, and pays nothing. When every bid is zero, jobs share equally \
and nobody pays.";

/// Translates bids into tickets, in order.
///
/// Rules, in the words the `rexec --help` text quotes:
///
/// - Tickets are proportional to bids. The highest bid gets (close to) 1,048,576 tickets;
///   when every bid is a whole multiple of a common unit small enough, the ratios between
///   positive bids are kept exactly (bids of 40, 30, 20 and 10 get tickets in exactly the
///   ratio 4:3:2:1).
/// - When every bid is zero, every job gets the same tickets: a fair share, and nobody pays.
/// - A zero bid among positive bids gets one ticket, the smallest nonzero weight: the job
///   still runs, but only on CPU time the paying jobs leave idle (about one part in a
///   million of a CPU when a top bidder wants it all).
/// - A positive bid never gets fewer tickets than a zero bid (tiny bids far below the
///   highest round up to one ticket).
///
/// ```
/// use money::Bid;
/// use stride::{tickets_for_bids, MAX_TICKETS, MIN_TICKETS};
/// let bids = [40, 30, 20, 10, 0].map(Bid::from_credits);
/// let t = tickets_for_bids(&bids);
/// assert_eq!(t, vec![1_048_576, 786_432, 524_288, 262_144, MIN_TICKETS]);
/// assert_eq!(tickets_for_bids(&[Bid::ZERO, Bid::ZERO]), vec![MAX_TICKETS, MAX_TICKETS]);
/// ```
pub fn tickets_for_bids(bids: &[Bid]) -> Vec<u64> {
    let Some(max) = bids.iter().map(|b| b.unsigned()).max().filter(|&m| m > 0) else {
        return vec![MAX_TICKETS; bids.len()];
    };
    let unit = bids
        .iter()
        .map(|b| b.unsigned())
        .filter(|&b| b > 0)
        .fold(0, gcd);
    let top = max / unit;
    bids.iter()
        .map(|b| {
            let b = b.unsigned();
            if b == 0 {
                MIN_TICKETS
            } else if top <= MAX_TICKETS {
                // Exact ratios: scale the reduced bids by the largest factor that fits.
                (b / unit) * (MAX_TICKETS / top)
            } else {
                // Rounded ratios: the top bid maps to MAX_TICKETS, nobody positive below one.
                let scaled = (u128::from(b) * u128::from(MAX_TICKETS) + u128::from(max) / 2)
                    / u128::from(max);
                (scaled as u64).max(MIN_TICKETS)
            }
        })
        .collect()
}

/// Translates bids into kernel CPU weights in `lowest..=highest` (cgroup v2 `cpu.weight`:
/// 1 to 10000; cgroup v1 `cpu.shares`: 2 to 262144), the same rules as [`tickets_for_bids`]
/// on a narrower scale: the highest bid gets `highest`, other positive bids get their
/// proportion of it rounded to the nearest weight but at least `lowest`, a zero bid among
/// positive bids gets `lowest`, and when every bid is zero everyone gets `highest`.
///
/// `highest` is taken as at least 1 and `lowest` is kept within `1..=highest`.
///
/// ```
/// use money::Bid;
/// use stride::weights_for_bids;
/// let bids = [40, 30, 0, 1].map(Bid::from_credits);
/// assert_eq!(weights_for_bids(&bids, 1, 10_000), vec![10_000, 7_500, 1, 250]);
/// assert_eq!(weights_for_bids(&[Bid::ZERO; 2], 2, 262_144), vec![262_144, 262_144]);
/// ```
pub fn weights_for_bids(bids: &[Bid], lowest: u64, highest: u64) -> Vec<u64> {
    let hi = highest.max(1);
    let lo = lowest.clamp(1, hi);
    let Some(max) = bids.iter().map(|b| b.unsigned()).max().filter(|&m| m > 0) else {
        return vec![hi; bids.len()];
    };
    bids.iter()
        .map(|b| {
            let b = u128::from(b.unsigned());
            if b == 0 {
                lo
            } else {
                let scaled = (b * u128::from(hi) + u128::from(max) / 2) / u128::from(max);
                (scaled as u64).clamp(lo, hi)
            }
        })
        .collect()
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The model's allocation, in CPUs, of jobs given as (bid, runnable threads) on
/// `cpus` CPUs: tickets from the bids, then water filling. The one place the share
/// tests and the market benchmark take their target from.
///
/// ```
/// use money::Bid;
/// let c = |n| Bid::from_credits(n);
/// let a = stride::model_cpus(2, &[(c(40), 1), (c(30), 1), (c(20), 1)]);
/// assert!((a[0] - 0.889).abs() < 0.001 && (a[2] - 0.444).abs() < 0.001);
/// ```
pub fn model_cpus(cpus: u32, jobs: &[(Bid, u32)]) -> Vec<f64> {
    let bids: Vec<Bid> = jobs.iter().map(|(b, _)| *b).collect();
    let claims: Vec<crate::Claim> = tickets_for_bids(&bids)
        .into_iter()
        .zip(jobs)
        .map(|(tickets, (_, demand))| crate::Claim {
            tickets,
            demand: *demand,
        })
        .collect();
    crate::water_fill(cpus, &claims)
        .milli_cpus()
        .iter()
        .map(|m| *m as f64 / 1000.0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bids(micros: &[i64]) -> Vec<Bid> {
        micros.iter().map(|&m| Bid::new(m).unwrap()).collect()
    }

    #[test]
    fn empty_and_single() {
        assert!(tickets_for_bids(&[]).is_empty());
        assert_eq!(tickets_for_bids(&bids(&[7])), vec![MAX_TICKETS]);
        assert_eq!(tickets_for_bids(&bids(&[0])), vec![MAX_TICKETS]);
    }

    #[test]
    fn coprime_large_bids_are_rounded_with_the_top_at_max() {
        let t = tickets_for_bids(&bids(&[i64::MAX, 1, i64::MAX / 3, 0]));
        assert_eq!(t[0], MAX_TICKETS);
        assert_eq!(t[1], MIN_TICKETS);
        assert_eq!(t[2], MAX_TICKETS / 3);
        assert_eq!(t[3], MIN_TICKETS);
    }

    #[test]
    fn weights_stay_in_range() {
        let w = weights_for_bids(&bids(&[i64::MAX, 1, 0]), 2, 262_144);
        assert_eq!(w, vec![262_144, 2, 2]);
        assert_eq!(weights_for_bids(&bids(&[5]), 0, 0), vec![1]);
        assert_eq!(weights_for_bids(&bids(&[5, 0]), 50, 10), vec![10, 10]);
        assert!(weights_for_bids(&[], 1, 10_000).is_empty());
    }

    #[test]
    fn exact_ratios_when_they_fit() {
        let t = tickets_for_bids(&bids(&[3_000_001, 1_000_000]));
        // 3000001 / 1000000 cannot be reduced and does not fit: rounded.
        assert_eq!(t[0], MAX_TICKETS);
        assert_eq!(t[1], 349_525);
        let t = tickets_for_bids(&bids(&[6, 4]));
        assert_eq!(t[0] * 2, t[1] * 3);
    }
}
