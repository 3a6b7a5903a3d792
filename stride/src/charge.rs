//! Contention and charging: who pays what for an interval of node time.
//!
//! A node is contended while the runnable demand exceeds its CPUs. Under the default policy,
//! [`Policy::Contention`], every runnable job pays its bid, pro rata, while the node is
//! contended by two or more runnable jobs; otherwise everyone runs free (a job alone is never
//! charged, however many threads it runs). [`Policy::Paper`] charges every present job
//! whenever more than one job is present, as the REXEC paper does. Amounts are exact: a
//! [`Meter`] carries the part of a micro-credit not yet charged, so many short intervals add
//! up to exactly what one long interval would cost.

use std::fmt;
use std::str::FromStr;

use money::{Bid, MicroCredits, NANOS_PER_MINUTE};

/// A charge does not fit in 64 bits of micro-credits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("charge overflows 64 bits of micro-credits; settle the meter more often or bid less")]
pub struct Overflow;

/// Which rule decides when jobs pay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Pay only while the node is contended (runnable demand exceeds its CPUs) by two or
    /// more runnable jobs; every runnable job then pays its bid. The default.
    #[default]
    Contention,
    /// The paper's rule: whenever more than one job is present, every job pays its bid.
    Paper,
}

/// A charging policy name that is neither `contention` nor `paper`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown charging policy {0:?}; use contention or paper")]
pub struct UnknownPolicy(pub String);

/// `contention` or `paper`, any case.
impl FromStr for Policy {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Policy, UnknownPolicy> {
        match s.trim().to_ascii_lowercase().as_str() {
            "contention" => Ok(Policy::Contention),
            "paper" => Ok(Policy::Paper),
            _ => Err(UnknownPolicy(s.to_owned())),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Policy::Contention => "contention",
            Policy::Paper => "paper",
        })
    }
}

/// A job on a node, as the market sees it: its bid and its demand (runnable threads).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Job {
    /// What the job is willing to pay per minute.
    pub bid: Bid,
    /// CPUs it can use at once right now; zero when it is blocked.
    pub demand: u32,
}

/// The contention predicate: the runnable demand exceeds the CPUs.
///
/// ```
/// assert!(!stride::is_contended(2, [1, 1]));
/// assert!(stride::is_contended(2, [1, 1, 1]));
/// ```
pub fn is_contended(cpus: u32, demands: impl IntoIterator<Item = u32>) -> bool {
    demands.into_iter().map(u64::from).sum::<u64>() > u64::from(cpus)
}

/// Whether `policy` charges anyone on a node of `cpus` CPUs holding `jobs` right now.
pub fn charging_applies(policy: Policy, cpus: u32, jobs: &[Job]) -> bool {
    match policy {
        Policy::Contention => {
            let runnable = jobs.iter().filter(|j| j.demand > 0).count();
            runnable >= 2 && is_contended(cpus, jobs.iter().map(|j| j.demand))
        }
        Policy::Paper => jobs.len() > 1,
    }
}

/// The rate each job pays right now (its bid, or zero), in order.
///
/// ```
/// use money::Bid;
/// use stride::{charge_rates, Job, Policy};
/// let jobs = [40, 30].map(|c| Job { bid: Bid::from_credits(c), demand: 1 });
/// // Two single-threaded jobs on two CPUs do not compete: free, unless the paper's rule.
/// assert_eq!(charge_rates(Policy::Contention, 2, &jobs), vec![Bid::ZERO; 2]);
/// assert_eq!(charge_rates(Policy::Paper, 2, &jobs), vec![Bid::from_credits(40), Bid::from_credits(30)]);
/// ```
pub fn charge_rates(policy: Policy, cpus: u32, jobs: &[Job]) -> Vec<Bid> {
    let applies = charging_applies(policy, cpus, jobs);
    jobs.iter()
        .map(|j| {
            let pays = applies && (policy == Policy::Paper || j.demand > 0);
            if pays { j.bid } else { Bid::ZERO }
        })
        .collect()
}

/// What `rate` costs over `nanos` nanoseconds, rounded down to whole micro-credits.
pub fn charge_for(rate: Bid, nanos: u64) -> Result<MicroCredits, Overflow> {
    let exact = u128::from(rate.unsigned()) * u128::from(nanos) / u128::from(NANOS_PER_MINUTE);
    i64::try_from(exact).map_err(|_| Overflow)
}

/// What each job owes for an interval of `nanos` nanoseconds in one state, rounded down.
/// Use a [`Meter`] per job when intervals are short, so the fractions are not lost.
///
/// ```
/// use money::Bid;
/// use stride::{interval_charges, Job, Policy};
/// let jobs = [40, 30, 20].map(|c| Job { bid: Bid::from_credits(c), demand: 1 });
/// let half_minute = 30_000_000_000;
/// let owed = interval_charges(Policy::Contention, 2, &jobs, half_minute)?;
/// assert_eq!(owed, vec![20_000_000, 15_000_000, 10_000_000]);
/// # Ok::<(), stride::Overflow>(())
/// ```
pub fn interval_charges(
    policy: Policy,
    cpus: u32,
    jobs: &[Job],
    nanos: u64,
) -> Result<Vec<MicroCredits>, Overflow> {
    charge_rates(policy, cpus, jobs)
        .into_iter()
        .map(|rate| charge_for(rate, nanos))
        .collect()
}

/// A per-job charge accumulator that never loses a fraction of a micro-credit.
///
/// It charges `floor(sum(rate_k * nanos_k) / one minute)` in total, so splitting an interval
/// into any number of pieces charges exactly what the whole interval would.
///
/// ```
/// use money::Bid;
/// use stride::Meter;
/// let rate = Bid::from_credits(1); // 1 credit per minute
/// let mut m = Meter::new();
/// for _ in 0..60_000 {
///     m.accrue(rate, 1_000_000)?; // one millisecond at a time
/// }
/// assert_eq!(m.total(), 1_000_000); // exactly one credit for the minute
/// # Ok::<(), stride::Overflow>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Meter {
    total: MicroCredits,
    carry: u64,
}

impl Meter {
    /// A meter at zero.
    pub const fn new() -> Meter {
        Meter { total: 0, carry: 0 }
    }

    /// Adds `nanos` nanoseconds at `rate`; returns the whole micro-credits this added.
    /// On overflow the meter is left unchanged.
    pub fn accrue(&mut self, rate: Bid, nanos: u64) -> Result<MicroCredits, Overflow> {
        let sum = u128::from(rate.unsigned()) * u128::from(nanos) + u128::from(self.carry);
        let minute = u128::from(NANOS_PER_MINUTE);
        let whole = i64::try_from(sum / minute).map_err(|_| Overflow)?;
        let total = self.total.checked_add(whole).ok_or(Overflow)?;
        self.total = total;
        self.carry = (sum % minute) as u64;
        Ok(whole)
    }

    /// Whole micro-credits charged so far.
    pub const fn total(&self) -> MicroCredits {
        self.total
    }

    /// The fraction not yet charged, in micro-credit-nanoseconds per minute (below one
    /// minute's worth of nanoseconds, so below one micro-credit).
    pub const fn carry(&self) -> u64 {
        self.carry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(credits: u32, demand: u32) -> Job {
        Job {
            bid: Bid::from_credits(credits),
            demand,
        }
    }

    #[test]
    fn a_lone_job_with_many_threads_is_free_under_contention_only() {
        let jobs = [job(5, 8)];
        assert!(is_contended(2, [8]));
        assert_eq!(charge_rates(Policy::Contention, 2, &jobs), vec![Bid::ZERO]);
        assert_eq!(charge_rates(Policy::Paper, 2, &jobs), vec![Bid::ZERO]);
    }

    #[test]
    fn blocked_jobs_do_not_pay_under_contention_but_do_under_paper() {
        let jobs = [job(5, 2), job(3, 1), job(7, 0)];
        let c = charge_rates(Policy::Contention, 2, &jobs);
        assert_eq!(
            c,
            vec![Bid::from_credits(5), Bid::from_credits(3), Bid::ZERO]
        );
        let p = charge_rates(Policy::Paper, 2, &jobs);
        assert_eq!(p[2], Bid::from_credits(7));
    }

    #[test]
    fn overflow_is_reported_and_leaves_the_meter_alone() {
        let big = Bid::new(i64::MAX).unwrap();
        let mut m = Meter::new();
        assert_eq!(m.accrue(big, NANOS_PER_MINUTE), Ok(i64::MAX));
        assert_eq!(m.accrue(big, NANOS_PER_MINUTE), Err(Overflow));
        assert_eq!(m.total(), i64::MAX);
        assert_eq!(charge_for(big, 2 * NANOS_PER_MINUTE), Err(Overflow));
    }

    #[test]
    fn policy_names() {
        assert_eq!("Paper".parse::<Policy>(), Ok(Policy::Paper));
        assert_eq!(Policy::default().to_string(), "contention");
        let err = "fair".parse::<Policy>().unwrap_err();
        assert!(err.to_string().contains("use contention or paper"));
    }
}
