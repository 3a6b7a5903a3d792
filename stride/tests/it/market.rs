//! Properties of the market rules: tickets, water filling, charging and the meter.

use money::{Bid, NANOS_PER_MINUTE};
use proptest::prelude::*;
use stride::{
    Claim, Job, MAX_TICKETS, MILLI, MIN_TICKETS, Meter, Policy, charge_for, charge_rates,
    interval_charges, quote, tickets_for_bids, water_fill, water_level, weights_for_bids,
};

fn claims() -> impl Strategy<Value = Vec<Claim>> {
    prop::collection::vec(
        (1u64..=MAX_TICKETS, 0u32..=6).prop_map(|(tickets, demand)| Claim { tickets, demand }),
        0..12,
    )
}

fn bid() -> impl Strategy<Value = Bid> {
    prop_oneof![
        Just(0i64),
        1i64..=100,
        (1i64..=1000).prop_map(|c| c * 1_000_000),
        0i64..=i64::MAX,
    ]
    .prop_map(|m| Bid::new(m).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn water_filling_respects_demand_capacity_and_ratios(cpus in 0u32..=8, claims in claims()) {
        let a = water_fill(cpus, &claims);
        prop_assert_eq!(water_level(cpus, &claims), a.level());
        let total_demand: u64 = claims.iter().map(|c| u64::from(c.demand)).sum();
        let served = total_demand.min(u64::from(cpus));
        prop_assert_eq!(a.milli_cpus().iter().sum::<u64>(), served * MILLI);

        // Exact shares sum to min(C, total demand) too.
        let den = a.level().map_or(1, |l| l.den);
        let mut exact_num: u128 = 0;
        for (i, c) in claims.iter().enumerate() {
            let s = a.share(i);
            let demand = u128::from(c.demand);
            prop_assert!(s.num <= demand * s.den, "share above demand");
            prop_assert!(u64::from(c.demand) * MILLI >= a.milli_cpus()[i]);
            // Milli-CPUs are the exact share rounded one way or the other.
            let scaled = s.num * u128::from(MILLI);
            let m = u128::from(a.milli_cpus()[i]) * s.den;
            prop_assert!(m + s.den > scaled && m < scaled + s.den);
            if a.is_saturated(i) {
                prop_assert_eq!(s.num, demand * s.den);
                // Water-filling order: a saturated job's demand per ticket is at most the level.
                if let Some(level) = a.level() {
                    prop_assert!(demand * level.den <= level.num * u128::from(c.tickets));
                }
                exact_num += demand * den;
            } else {
                prop_assert!(s.num < demand * s.den, "unsaturated job at its demand");
                prop_assert_eq!(s.den, den);
                exact_num += s.num;
            }
        }
        prop_assert_eq!(exact_num, u128::from(served) * den);

        // Ticket ratios hold exactly among the unsaturated.
        let unsat: Vec<usize> = (0..claims.len()).filter(|&i| !a.is_saturated(i)).collect();
        for &i in &unsat {
            for &j in &unsat {
                prop_assert_eq!(
                    a.share(i).num * u128::from(claims[j].tickets),
                    a.share(j).num * u128::from(claims[i].tickets)
                );
            }
        }
    }

    #[test]
    fn tickets_follow_bids(bids in prop::collection::vec(bid(), 0..10)) {
        let t = tickets_for_bids(&bids);
        prop_assert_eq!(t.len(), bids.len());
        let all_zero = bids.iter().all(|b| b.is_zero());
        for (&ti, bi) in t.iter().zip(&bids) {
            prop_assert!((MIN_TICKETS..=MAX_TICKETS).contains(&ti));
            if all_zero {
                prop_assert_eq!(ti, MAX_TICKETS);
            } else if bi.is_zero() {
                prop_assert_eq!(ti, MIN_TICKETS);
            }
            for (j, bj) in bids.iter().enumerate() {
                if bi > bj {
                    prop_assert!(ti >= t[j], "bid {} > {} but tickets {} < {}", bi, bj, ti, t[j]);
                }
                if bi == bj {
                    prop_assert_eq!(ti, t[j]);
                }
            }
        }
        // The top bidder gets more than half of MAX_TICKETS.
        if let Some(top) = bids.iter().zip(&t).max_by_key(|(b, _)| **b).map(|(_, &t)| t) {
            prop_assert!(top > MAX_TICKETS / 2);
        }
    }

    #[test]
    fn kernel_weights_follow_bids_within_range(
        bids in prop::collection::vec(bid(), 1..10),
        (lo, hi) in prop_oneof![Just((1u64, 10_000u64)), Just((2, 262_144))],
    ) {
        let w = weights_for_bids(&bids, lo, hi);
        let top = bids.iter().max().unwrap();
        for (i, (&wi, bi)) in w.iter().zip(&bids).enumerate() {
            prop_assert!((lo..=hi).contains(&wi));
            if bi == top {
                prop_assert_eq!(wi, hi);
            } else if bi.is_zero() {
                prop_assert_eq!(wi, lo);
            }
            for (j, bj) in bids.iter().enumerate() {
                if bi >= bj {
                    prop_assert!(wi >= w[j], "weights out of order at {} and {}", i, j);
                }
            }
        }
    }

    #[test]
    fn small_whole_credit_bids_keep_exact_ratios(credits in prop::collection::vec(1u32..=1000, 1..8)) {
        let bids: Vec<Bid> = credits.iter().map(|&c| Bid::from_credits(c)).collect();
        let t = tickets_for_bids(&bids);
        for i in 0..t.len() {
            for j in 0..t.len() {
                prop_assert_eq!(u64::from(credits[i]) * t[j], u64::from(credits[j]) * t[i]);
            }
        }
    }

    #[test]
    fn a_job_alone_is_never_charged_under_contention(
        cpus in 1u32..=64, bid in bid(), demand in 0u32..=1000, nanos in any::<u64>(),
    ) {
        let jobs = [Job { bid, demand }];
        prop_assert_eq!(charge_rates(Policy::Contention, cpus, &jobs), vec![Bid::ZERO]);
        prop_assert_eq!(interval_charges(Policy::Contention, cpus, &jobs, nanos).unwrap(), vec![0]);
        let mut meter = Meter::new();
        prop_assert_eq!(meter.accrue(charge_rates(Policy::Contention, cpus, &jobs)[0], nanos), Ok(0));
    }

    #[test]
    fn all_zero_bids_share_fairly_and_pay_nothing(
        cpus in 1u32..=16, demands in prop::collection::vec(0u32..=4, 1..10), nanos in any::<u64>(),
    ) {
        let jobs: Vec<Job> = demands.iter().map(|&demand| Job { bid: Bid::ZERO, demand }).collect();
        for policy in [Policy::Contention, Policy::Paper] {
            let owed = interval_charges(policy, cpus, &jobs, nanos).unwrap();
            prop_assert!(owed.iter().all(|&c| c == 0));
        }
        let tickets = tickets_for_bids(&jobs.iter().map(|j| j.bid).collect::<Vec<_>>());
        prop_assert!(tickets.iter().all(|&t| t == tickets[0]));
        let claims: Vec<Claim> = tickets.iter().zip(&demands)
            .map(|(&tickets, &demand)| Claim { tickets, demand })
            .collect();
        let a = water_fill(cpus, &claims);
        // Fair share: every job that does not get its whole demand gets the same share, and
        // no job gets more than that share.
        let unsat: Vec<usize> = (0..claims.len()).filter(|&i| !a.is_saturated(i)).collect();
        for &i in &unsat {
            prop_assert_eq!(a.share(i), a.share(unsat[0]));
        }
        if let Some(&u) = unsat.first() {
            for i in 0..claims.len() {
                prop_assert!(a.share(i) <= a.share(u));
            }
        }
    }

    #[test]
    fn meter_pieces_add_up_to_the_whole(
        rate in bid().prop_filter("fits a day", |b| b.micros_per_minute() < i64::MAX / 2000),
        pieces in prop::collection::vec(0u64..=5 * NANOS_PER_MINUTE, 1..40),
    ) {
        let mut meter = Meter::new();
        let mut returned = 0i64;
        for &p in &pieces {
            returned += meter.accrue(rate, p).unwrap();
        }
        let whole: u64 = pieces.iter().sum();
        prop_assert_eq!(meter.total(), charge_for(rate, whole).unwrap());
        prop_assert_eq!(returned, meter.total());
        prop_assert!(meter.carry() < NANOS_PER_MINUTE);
    }

    #[test]
    fn meter_with_changing_rates_is_exact(
        steps in prop::collection::vec((0i64..=1_000_000_000_000, 0u64..=NANOS_PER_MINUTE), 1..40),
    ) {
        let mut meter = Meter::new();
        let mut exact: u128 = 0;
        for &(micros, nanos) in &steps {
            meter.accrue(Bid::new(micros).unwrap(), nanos).unwrap();
            exact += micros as u128 * u128::from(nanos);
        }
        prop_assert_eq!(meter.total() as u128, exact / u128::from(NANOS_PER_MINUTE));
    }

    #[test]
    fn quotes_stay_within_demand_and_capacity(
        cpus in 1u32..=16,
        jobs in prop::collection::vec((bid(), 0u32..=4), 0..8),
        newcomer in bid(),
        demand in 0u32..=4,
    ) {
        let jobs: Vec<Job> = jobs.into_iter().map(|(bid, demand)| Job { bid, demand }).collect();
        let Ok(q) = quote(cpus, &jobs, newcomer, demand) else {
            // Only a price that overflows 64 bits may fail.
            let sum: i128 = jobs.iter().filter(|j| j.demand > 0)
                .map(|j| i128::from(j.bid.micros_per_minute())).sum();
            prop_assert!(sum > i128::from(i64::MAX));
            return Ok(());
        };
        let cap = u64::from(demand) * MILLI;
        prop_assert!(q.expected_milli_cpus <= cap.min(u64::from(cpus) * MILLI));
        prop_assert!(q.water_filled_milli_cpus <= cap.min(u64::from(cpus) * MILLI));
        let others: u64 = jobs.iter().map(|j| u64::from(j.demand)).sum();
        let runnable = jobs.iter().filter(|j| j.demand > 0).count() + usize::from(demand > 0);
        let fits = others + u64::from(demand) <= u64::from(cpus);
        prop_assert_eq!(q.runs_free, runnable < 2 || fits);
        if fits {
            // Uncontended: the newcomer gets its whole demand.
            prop_assert_eq!(q.water_filled_milli_cpus, cap);
        }
    }
}
