//! Node price and quotes: what a node announces, and what a newcomer can expect there.
//!
//! A node's price is the sum of the bids of the jobs competing on it (its runnable jobs),
//! whether or not they pay: a job alone on a node has the node's price, and pays nothing.
//! What the node's jobs pay right now is a separate figure, its charging rate, and whether
//! it is contended a third; [`node_market`] computes all three at once, and every place that
//! shows a node (its announcement and metrics, `rexec nodes`, `rexec stats`, the market
//! page) shows these, never a second "price".
//! A newcomer bidding r on a node of C CPUs at price P expects C * r / (P + r) CPUs, capped by
//! its demand (the paper's simple rule, used to rank nodes), and runs free when its arrival
//! leaves the node uncontended. The quote also carries the exact water-filled expectation,
//! which counts CPUs the others leave idle.

use crate::alloc::{Claim, MILLI, water_fill};
use crate::charge::{Job, Overflow, Policy, charge_rates, charging_applies, is_contended};
use crate::tickets::tickets_for_bids;
use money::Bid;

/// The sum of the bids of the runnable jobs (demand above zero) on a node.
///
/// ```
/// use money::Bid;
/// use stride::{node_price, Job};
/// let jobs = [(40, 1), (30, 0), (20, 2)].map(|(c, d)| Job { bid: Bid::from_credits(c), demand: d });
/// assert_eq!(node_price(&jobs)?, Bid::from_credits(60));
/// # Ok::<(), stride::Overflow>(())
/// ```
pub fn node_price(jobs: &[Job]) -> Result<Bid, Overflow> {
    let mut sum: i64 = 0;
    for j in jobs.iter().filter(|j| j.demand > 0) {
        sum = sum.checked_add(j.bid.micros_per_minute()).ok_or(Overflow)?;
    }
    Bid::new(sum).map_err(|_| Overflow)
}

/// A node's market at one instant: its price, what it charges, whether it is contended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeMarket {
    /// The sum of the bids of the runnable jobs ([`node_price`]).
    pub price: Bid,
    /// What the jobs pay together right now, per minute: the sum of [`NodeMarket::rates`].
    /// Zero while charging does not apply (a job alone, or idle CPUs under
    /// [`Policy::Contention`]).
    pub charging: Bid,
    /// The runnable demand exceeds the CPUs ([`is_contended`]).
    pub contended: bool,
    /// What each job pays right now, in the order given ([`charge_rates`]).
    pub rates: Vec<Bid>,
}

/// The market of a node of `cpus` CPUs charging under `policy` and running `jobs`.
///
/// ```
/// use money::Bid;
/// use stride::{node_market, Job, Policy};
/// // One job bidding 2 alone on two CPUs: the node's price is 2, it charges nothing.
/// let alone = [Job { bid: Bid::from_credits(2), demand: 1 }];
/// let m = node_market(Policy::Contention, 2, &alone)?;
/// assert_eq!((m.price, m.charging, m.contended), (Bid::from_credits(2), Bid::ZERO, false));
/// // Three single-threaded jobs on two CPUs compete: each pays its bid.
/// let three = [4, 2, 1].map(|c| Job { bid: Bid::from_credits(c), demand: 1 });
/// let m = node_market(Policy::Contention, 2, &three)?;
/// assert_eq!((m.price, m.charging, m.contended), (Bid::from_credits(7), Bid::from_credits(7), true));
/// # Ok::<(), stride::Overflow>(())
/// ```
pub fn node_market(policy: Policy, cpus: u32, jobs: &[Job]) -> Result<NodeMarket, Overflow> {
    let rates = charge_rates(policy, cpus, jobs);
    let mut charging: i64 = 0;
    for r in &rates {
        charging = charging
            .checked_add(r.micros_per_minute())
            .ok_or(Overflow)?;
    }
    Ok(NodeMarket {
        price: node_price(jobs)?,
        charging: Bid::new(charging).map_err(|_| Overflow)?,
        contended: is_contended(cpus, jobs.iter().map(|j| j.demand)),
        rates,
    })
}

/// What a newcomer can expect on a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quote {
    /// The node's price before the newcomer arrives.
    pub price: Bid,
    /// C * r / (price + r) CPUs in milli-CPUs, capped by the newcomer's demand; when both the
    /// price and r are zero, an equal share among the runnable jobs and the newcomer.
    pub expected_milli_cpus: u64,
    /// The newcomer's water-filled share in milli-CPUs once it has joined (counts CPUs the
    /// others leave idle, and the rounding of bids to tickets).
    pub water_filled_milli_cpus: u64,
    /// Whether the newcomer would run free under [`Policy::Contention`] after joining.
    pub runs_free: bool,
}

/// Quotes a newcomer bidding `bid` for `demand` CPUs on a node of `cpus` CPUs running `jobs`.
///
/// ```
/// use money::Bid;
/// use stride::{quote, Job};
/// let jobs = [Job { bid: Bid::from_credits(30), demand: 1 }];
/// let q = quote(2, &jobs, Bid::from_credits(10), 1)?;
/// assert_eq!(q.price, Bid::from_credits(30));
/// assert_eq!(q.expected_milli_cpus, 500); // 2 * 10 / (30 + 10)
/// assert_eq!(q.water_filled_milli_cpus, 1000); // a CPU is idle
/// assert!(q.runs_free);
/// # Ok::<(), stride::Overflow>(())
/// ```
pub fn quote(cpus: u32, jobs: &[Job], bid: Bid, demand: u32) -> Result<Quote, Overflow> {
    let price = node_price(jobs)?;
    let cap = u128::from(demand) * u128::from(MILLI);
    let total_cpus = u128::from(cpus) * u128::from(MILLI);
    let r = u128::from(bid.unsigned());
    let p = u128::from(price.unsigned());
    let proportional = (total_cpus * r).checked_div(p + r).unwrap_or_else(|| {
        // Nobody bids anything: an equal share among the runnable jobs and the newcomer.
        let runnable = jobs.iter().filter(|j| j.demand > 0).count() as u128;
        total_cpus / (runnable + 1)
    });

    let mut with_newcomer: Vec<Job> = jobs.iter().copied().filter(|j| j.demand > 0).collect();
    with_newcomer.push(Job { bid, demand });
    let bids: Vec<Bid> = with_newcomer.iter().map(|j| j.bid).collect();
    let claims: Vec<Claim> = tickets_for_bids(&bids)
        .into_iter()
        .zip(&with_newcomer)
        .map(|(tickets, j)| Claim {
            tickets,
            demand: j.demand,
        })
        .collect();
    let filled = water_fill(cpus, &claims);
    let water_filled = filled.milli_cpus().last().copied().unwrap_or(0);

    Ok(Quote {
        price,
        expected_milli_cpus: proportional.min(cap) as u64,
        water_filled_milli_cpus: water_filled,
        runs_free: !charging_applies(Policy::Contention, cpus, &with_newcomer),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_node_quotes_by_the_paper_rule() {
        let jobs = [40, 30, 20].map(|c| Job {
            bid: Bid::from_credits(c),
            demand: 1,
        });
        let q = quote(2, &jobs, Bid::from_credits(10), 1).unwrap();
        assert_eq!(q.price, Bid::from_credits(90));
        assert_eq!(q.expected_milli_cpus, 200);
        assert_eq!(q.water_filled_milli_cpus, 200);
        assert!(!q.runs_free);
    }

    #[test]
    fn empty_node_and_free_riders() {
        let q = quote(4, &[], Bid::ZERO, 2).unwrap();
        assert_eq!(
            (q.expected_milli_cpus, q.water_filled_milli_cpus),
            (2000, 2000)
        );
        assert!(q.runs_free);
        let jobs = [Job {
            bid: Bid::ZERO,
            demand: 3,
        }];
        let q = quote(2, &jobs, Bid::ZERO, 1).unwrap();
        assert_eq!(q.expected_milli_cpus, 1000);
        // Equal tickets: the newcomer's single thread is below its fair share of two CPUs.
        assert_eq!(q.water_filled_milli_cpus, 1000);
        assert!(!q.runs_free);
    }

    #[test]
    fn the_price_counts_every_runnable_bid_and_charging_only_what_is_paid() {
        let job = |c, demand| Job {
            bid: Bid::from_credits(c),
            demand,
        };
        // Idle: nothing.
        let m = node_market(Policy::Contention, 2, &[]).unwrap();
        assert_eq!(
            (m.price, m.charging, m.contended),
            (Bid::ZERO, Bid::ZERO, false)
        );
        // A lone job with more threads than CPUs contends, and still runs free.
        let m = node_market(Policy::Contention, 2, &[job(2, 3)]).unwrap();
        assert_eq!(
            (m.price, m.charging, m.contended),
            (Bid::from_credits(2), Bid::ZERO, true)
        );
        // Under the paper's rule a blocked job pays without competing.
        let m = node_market(Policy::Paper, 2, &[job(4, 1), job(2, 0)]).unwrap();
        assert_eq!(
            (m.price, m.charging, m.contended),
            (Bid::from_credits(4), Bid::from_credits(6), false)
        );
        assert_eq!(m.rates, [Bid::from_credits(4), Bid::from_credits(2)]);
    }

    #[test]
    fn price_overflow_is_an_error() {
        let big = Job {
            bid: Bid::new(i64::MAX).unwrap(),
            demand: 1,
        };
        assert_eq!(node_price(&[big, big]), Err(Overflow));
    }
}
