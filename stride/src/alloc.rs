//! Expected allocation: how many CPUs each job gets on a node, by water filling.
//!
//! Job i holding t_i tickets and wanting d_i CPUs (its runnable threads) gets
//! a_i = min(d_i, share of what is left in proportion to tickets); what a saturated job cannot
//! use flows to the others, again in proportion to their tickets, until no job is saturated.
//! This is what stride scheduling on k CPUs converges to, and what the kernel's CPU weights
//! give. Results are exact rationals ([`Ratio`]) and milli-CPUs that sum exactly.

use std::cmp::Ordering;

/// Milli-CPUs in one CPU.
pub const MILLI: u64 = 1000;

/// One job's claim on a node: its tickets and its demand (runnable threads).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Claim {
    /// Tickets held; zero is treated as [`crate::MIN_TICKETS`].
    pub tickets: u64,
    /// CPUs the job can use at once (runnable threads); zero means it is not runnable.
    pub demand: u32,
}

/// An exact non-negative fraction `num / den` (`den > 0`), compared by value.
///
/// Comparison cross-multiplies in `u128`, exact while numerators and denominators stay below
/// 2^64 (true for any node: CPUs times tickets).
#[derive(Clone, Copy, Debug)]
pub struct Ratio {
    /// Numerator.
    pub num: u128,
    /// Denominator, never zero.
    pub den: u128,
}

impl Ratio {
    /// The whole number `n`.
    pub const fn whole(n: u128) -> Ratio {
        Ratio { num: n, den: 1 }
    }
}

impl PartialEq for Ratio {
    fn eq(&self, other: &Ratio) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Ratio {}
impl PartialOrd for Ratio {
    fn partial_cmp(&self, other: &Ratio) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ratio {
    fn cmp(&self, other: &Ratio) -> Ordering {
        (self.num * other.den).cmp(&(other.num * self.den))
    }
}

/// The water-filled allocation of a node's CPUs among claims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    shares: Vec<Ratio>,
    milli: Vec<u64>,
    saturated: Vec<bool>,
    free_cpus: u64,
    free_tickets: u128,
}

impl Allocation {
    /// Exact CPUs of claim `i` (panics if `i` is out of range, like slice indexing).
    pub fn share(&self, i: usize) -> Ratio {
        self.shares[i]
    }

    /// Milli-CPUs per claim, in order; they sum to exactly `1000 * min(C, total demand)`.
    pub fn milli_cpus(&self) -> &[u64] {
        &self.milli
    }

    /// Whether claim `i` gets all it demands (its demand is at or below its fair level).
    pub fn is_saturated(&self, i: usize) -> bool {
        self.saturated[i]
    }

    /// CPUs per ticket for the unsaturated claims, or `None` when every claim is saturated
    /// (the node has CPU to spare for everyone).
    pub fn level(&self) -> Option<Ratio> {
        (self.free_tickets > 0).then(|| Ratio {
            num: u128::from(self.free_cpus),
            den: self.free_tickets,
        })
    }
}

/// Water-fills `cpus` CPUs among `claims`.
///
/// ```
/// use stride::{water_fill, Claim};
/// // Two CPUs, single-threaded jobs bidding 30:20:10 (Figure 4 after A leaves).
/// let claims = [30, 20, 10].map(|t| Claim { tickets: t, demand: 1 });
/// let a = water_fill(2, &claims);
/// assert_eq!(a.milli_cpus(), &[1000, 667, 333]);
/// assert!(a.is_saturated(0) && !a.is_saturated(1));
/// ```
pub fn water_fill(cpus: u32, claims: &[Claim]) -> Allocation {
    let n = claims.len();
    let Fill {
        order,
        rest,
        free_cpus,
        free_tickets,
    } = fill(cpus, claims);
    let mut saturated = vec![false; n];
    let mut shares = vec![Ratio::whole(0); n];
    for &i in &order[..rest] {
        saturated[i] = true;
        shares[i] = Ratio::whole(u128::from(claims[i].demand));
    }
    // Every ticket of a saturated claim was taken out, so free_tickets is 0 exactly when
    // nobody is unsaturated.
    let unsaturated = &order[rest..];
    for &i in unsaturated {
        shares[i] = Ratio {
            num: free_cpus * tickets_of(&claims[i]),
            den: free_tickets,
        };
    }

    // Milli-CPUs: saturated ones exact; the rest floor, then largest remainders get the
    // leftover milli-CPUs (ties by index) so the total is exact.
    let mut milli: Vec<u64> = shares
        .iter()
        .map(|s| (s.num * u128::from(MILLI) / s.den) as u64)
        .collect();
    let exact_total = free_cpus * u128::from(MILLI);
    let floors: u128 = unsaturated.iter().map(|&i| u128::from(milli[i])).sum();
    let mut by_remainder: Vec<usize> = unsaturated.to_vec();
    // All unsaturated shares have the same denominator, so remainders compare directly.
    let rem = |i: usize| shares[i].num * u128::from(MILLI) % shares[i].den;
    by_remainder.sort_by(|&i, &j| rem(j).cmp(&rem(i)).then(i.cmp(&j)));
    let leftover = if unsaturated.is_empty() {
        0
    } else {
        exact_total - floors
    };
    for &i in by_remainder.iter().take(leftover as usize) {
        milli[i] += 1;
    }

    Allocation {
        shares,
        milli,
        saturated,
        free_cpus: free_cpus as u64,
        free_tickets,
    }
}

/// CPUs per ticket for the claims that do not get their whole demand (the water level), or
/// `None` when every claim is satisfied. Cheaper than [`water_fill`]: no per-claim results.
///
/// ```
/// use stride::{water_level, Claim, Ratio};
/// let claims = [Claim { tickets: 3, demand: 1 }, Claim { tickets: 1, demand: 4 }];
/// // The 3-ticket job is capped at one CPU; the other gets the 2 left for its 1 ticket.
/// assert_eq!(water_level(3, &claims), Some(Ratio { num: 2, den: 1 }));
/// assert_eq!(water_level(8, &claims), None);
/// ```
pub fn water_level(cpus: u32, claims: &[Claim]) -> Option<Ratio> {
    let f = fill(cpus, claims);
    (f.rest < claims.len()).then_some(Ratio {
        num: f.free_cpus,
        den: f.free_tickets,
    })
}

fn tickets_of(c: &Claim) -> u128 {
    u128::from(c.tickets.max(crate::MIN_TICKETS))
}

/// The saturation pass shared by [`water_fill`] and [`water_level`].
struct Fill {
    /// Claims by demand per ticket, lowest first; ties by index.
    order: Vec<usize>,
    /// `order[..rest]` are saturated.
    rest: usize,
    /// CPUs left after the saturated claims.
    free_cpus: u128,
    /// Tickets of the unsaturated claims.
    free_tickets: u128,
}

fn fill(cpus: u32, claims: &[Claim]) -> Fill {
    let tickets = |i: usize| tickets_of(&claims[i]);
    let demand = |i: usize| u128::from(claims[i].demand);
    // Lowest demand per ticket saturates first; ties by index keep the result deterministic.
    let mut order: Vec<usize> = (0..claims.len()).collect();
    order.sort_unstable_by(|&i, &j| {
        (demand(i) * tickets(j))
            .cmp(&(demand(j) * tickets(i)))
            .then(i.cmp(&j))
    });
    let mut free_cpus = u128::from(cpus);
    let mut free_tickets: u128 = (0..claims.len()).map(tickets).sum();
    let mut rest = order.len();
    for (pos, &i) in order.iter().enumerate() {
        // Saturated when d_i <= free_cpus * t_i / free_tickets.
        if demand(i) * free_tickets <= free_cpus * tickets(i) {
            free_cpus -= demand(i);
            free_tickets -= tickets(i);
        } else {
            rest = pos;
            break;
        }
    }
    Fill {
        order,
        rest,
        free_cpus,
        free_tickets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(v: &[(u64, u32)]) -> Vec<Claim> {
        v.iter()
            .map(|&(tickets, demand)| Claim { tickets, demand })
            .collect()
    }

    #[test]
    fn idle_node_gives_everyone_their_demand() {
        let a = water_fill(4, &claims(&[(1, 1), (100, 2)]));
        assert_eq!(a.milli_cpus(), &[1000, 2000]);
        assert_eq!(a.level(), None);
    }

    #[test]
    fn leftovers_flow_to_the_unsaturated() {
        // 3 CPUs: a big bidder with one thread, two small ones with many threads.
        let a = water_fill(3, &claims(&[(100, 1), (1, 4), (2, 4)]));
        assert_eq!(a.milli_cpus(), &[1000, 667, 1333]);
        assert_eq!(a.share(2), Ratio { num: 4, den: 3 });
        assert_eq!(a.level(), Some(Ratio { num: 2, den: 3 }));
    }

    #[test]
    fn zero_cpus_and_zero_demand() {
        let a = water_fill(0, &claims(&[(5, 1), (5, 0)]));
        assert_eq!(a.milli_cpus(), &[0, 0]);
        let a = water_fill(2, &claims(&[(5, 0), (0, 3)]));
        assert_eq!(a.milli_cpus(), &[0, 2000]);
    }
}
