//! Selection: each policy's ranking, the request's filters, and errors.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vexecd::policy::PolicyName;
use vexecd::profile::SLOTS;
use vexecd::profile::summary::Summary;
use vexecd::rng::{SeedableRng, SplitMix64};
use vexecd::select::{SelectError, SelectRequest};
use vexecd::table::{NodeTable, TableConfig};

use crate::common::*;

/// name, cpus, price, load (thousandths), runnable
fn table_of(nodes: &[(&str, u32, i64, u32, u32)]) -> (NodeTable, Instant) {
    let t0 = Instant::now();
    let mut table = NodeTable::new(TableConfig::default());
    for &(name, cpus, price, load, runnable) in nodes {
        let mut s = status(cpus, price, load);
        s.runnable = runnable;
        table
            .ingest(&datagram(&node(name, 0, s)), None, t0)
            .unwrap();
    }
    (table, t0)
}

fn names(table: &NodeTable, req: &SelectRequest, t0: Instant) -> Vec<String> {
    let picked = table
        .select(req, now(t0), &mut SplitMix64::seed_from_u64(1))
        .unwrap();
    picked.into_iter().map(|s| s.name).collect()
}

#[test]
fn lowest_price_takes_the_cheapest_with_ties_by_idle_cpus() {
    let (table, t0) = table_of(&[
        ("dear", 4, 9_000_000, 0, 0),
        ("cheap-busy", 4, 1_000_000, 4000, 4),
        ("cheap-idle", 4, 1_000_000, 1000, 1),
        ("free", 2, 0, 0, 0),
        ("mid", 8, 5_000_000, 0, 0),
    ]);
    let req = SelectRequest::new(3, PolicyName::LowestPrice);
    assert_eq!(
        names(&table, &req, t0),
        ["free", "cheap-idle", "cheap-busy"]
    );
    let mut capped = SelectRequest::new(4, PolicyName::LowestPrice);
    capped.max_price = Some(5_000_000);
    capped.exclude = vec!["free".into()];
    let err = table
        .select(&capped, now(t0), &mut SplitMix64::seed_from_u64(1))
        .unwrap_err();
    capped.count = 3;
    assert_eq!(
        names(&table, &capped, t0),
        ["cheap-idle", "cheap-busy", "mid"]
    );
    assert_eq!(
        err,
        SelectError::NotEnoughNodes {
            wanted: 4,
            eligible: 3,
            known: 5,
            priced_out: 1,
            excluded: 1
        }
    );
    assert!(
        err.to_string()
            .contains("1 cost more than the price cap, 1 excluded"),
        "{err}"
    );
}

#[test]
fn least_loaded_compares_load_per_cpu() {
    let (table, t0) = table_of(&[
        ("eight-half", 8, 0, 4000, 0), // 0.5 per CPU
        ("one-idle", 1, 0, 0, 0),
        ("two-busy", 2, 0, 1900, 0), // 0.95 per CPU
        ("four-quarter", 4, 0, 1000, 0),
    ]);
    let req = SelectRequest::new(4, PolicyName::LeastLoaded);
    assert_eq!(
        names(&table, &req, t0),
        ["one-idle", "four-quarter", "eight-half", "two-busy"]
    );
}

#[test]
fn random_is_seeded_and_covers_every_node() {
    let (table, t0) = table_of(&[
        ("a", 1, 0, 0, 0),
        ("b", 1, 0, 0, 0),
        ("c", 1, 0, 0, 0),
        ("d", 1, 0, 0, 0),
    ]);
    let req = SelectRequest::new(2, PolicyName::Random);
    let pick = |seed| -> Vec<String> {
        table
            .select(&req, now(t0), &mut SplitMix64::seed_from_u64(seed))
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect()
    };
    assert_eq!(pick(42), pick(42));
    let mut seen = HashSet::new();
    for seed in 0..200 {
        let p = pick(seed);
        assert_eq!(p.len(), 2);
        assert_ne!(p[0], p[1]);
        seen.extend(p);
    }
    assert_eq!(seen.len(), 4);
}

#[test]
fn history_prefers_the_earliest_predicted_completion() {
    // now() is Monday 9:00. "busy-mornings" is busy every weekday 9-12;
    // "slow" is never busy but half speed; "steady" is always 20% busy.
    let (mut table, t0) = table_of(&[
        ("busy-mornings", 1, 0, 0, 0),
        ("slow", 1, 0, 0, 0),
        ("steady", 1, 0, 0, 0),
        ("unknown", 1, 0, 0, 0),
    ]);
    let mornings: Vec<f64> = (0..SLOTS)
        .map(|s| {
            if s / 144 < 5 && (54..72).contains(&(s % 144)) {
                1.0
            } else {
                0.0
            }
        })
        .collect();
    table.set_summary(
        "busy-mornings",
        Arc::new(Summary::from_busy(&mornings, 1.0)),
    );
    table.set_summary("slow", Arc::new(Summary::from_busy(&[0.0; SLOTS], 0.5)));
    table.set_summary("steady", Arc::new(Summary::from_busy(&[0.2; SLOTS], 1.0)));
    let mut req = SelectRequest::new(4, PolicyName::History);
    assert_eq!(
        table
            .select(&req, now(t0), &mut SplitMix64::seed_from_u64(1))
            .unwrap_err(),
        SelectError::NeedsLength {
            policy: PolicyName::History
        }
    );
    // One CPU hour: steady 1.25 h (0.8 idle, quantised to 12/15), slow 2 h,
    // busy-mornings 4 h (3 h busy first); unknown last.
    req.expected_cpu = Some(Duration::from_secs(3600));
    let picked = table
        .select(&req, now(t0), &mut SplitMix64::seed_from_u64(1))
        .unwrap();
    let order: Vec<&str> = picked.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(order, ["steady", "slow", "busy-mornings", "unknown"]);
    let hours: Vec<Option<f64>> = picked
        .iter()
        .map(|s| s.predicted.map(|d| d.as_secs_f64() / 3600.0))
        .collect();
    assert!((hours[0].unwrap() - 1.25).abs() < 1e-6, "{hours:?}");
    assert!((hours[1].unwrap() - 2.0).abs() < 1e-6, "{hours:?}");
    assert!((hours[2].unwrap() - 4.0).abs() < 1e-6, "{hours:?}");
    assert_eq!(hours[3], None);
    // Ten CPU hours: the mornings matter less than the slow node's speed.
    req.expected_cpu = Some(Duration::from_secs(10 * 3600));
    req.count = 3;
    assert_eq!(names(&table, &req, t0), ["steady", "busy-mornings", "slow"]);
}

#[test]
fn bad_requests_are_clear_errors() {
    let (table, t0) = table_of(&[("a", 1, 0, 0, 0)]);
    let mut rng = SplitMix64::seed_from_u64(1);
    let e = table
        .select(
            &SelectRequest::new(0, PolicyName::Random),
            now(t0),
            &mut rng,
        )
        .unwrap_err();
    assert_eq!(e, SelectError::ZeroCount);
    let e = table
        .select(
            &SelectRequest::new(1_000_000, PolicyName::Random),
            now(t0),
            &mut rng,
        )
        .unwrap_err();
    assert!(matches!(e, SelectError::TooMany { .. }));
    let e = table
        .select(
            &SelectRequest::new(2, PolicyName::Random),
            now(t0),
            &mut rng,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "asked for 2 nodes but only 1 of the 1 known nodes qualify"
    );
    assert!(
        "cheapest"
            .parse::<PolicyName>()
            .unwrap_err()
            .to_string()
            .contains("lowest-price")
    );
    for p in PolicyName::ALL {
        assert_eq!(p.as_str().parse::<PolicyName>(), Ok(p));
    }
    // Nodes past their window are not offered.
    let later = now(t0 + Duration::from_secs(7));
    let e = table
        .select(&SelectRequest::new(1, PolicyName::Random), later, &mut rng)
        .unwrap_err();
    assert!(matches!(e, SelectError::NotEnoughNodes { known: 0, .. }));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

    /// `history` passes over nodes by a bound; its picks must still be the
    /// nodes with the earliest predictions (compared by predicted times, as
    /// equal predictions may be ordered either way).
    #[test]
    fn history_picks_the_earliest_predictions_despite_pruning(
        seed in 0u64..1000,
        nodes in 20usize..300,
        count in 1usize..12,
        hours in 1u64..48,
    ) {
        use vexecd::rng::RandomSource;
        let t0 = Instant::now();
        let mut rng = SplitMix64::seed_from_u64(seed);
        let mut table = NodeTable::new(TableConfig::default());
        let mut summaries = Vec::new();
        for i in 0..nodes {
            let name = format!("n{i}");
            table.ingest(&datagram(&node(&name, 0, status(1, 0, 0))), None, t0).unwrap();
            if rng.below(10) == 0 {
                continue; // no summary
            }
            let base = rng.unit();
            let busy: Vec<f64> = (0..SLOTS).map(|_| (base + 0.3 * rng.unit()).min(1.0)).collect();
            let s = Arc::new(Summary::from_busy(&busy, 0.5 + rng.unit()));
            table.set_summary(&name, s.clone());
            summaries.push(s);
        }
        let mut req = SelectRequest::new(count, PolicyName::History);
        let cpu = hours as f64 * 3600.0;
        req.expected_cpu = Some(Duration::from_secs_f64(cpu));
        let at = now(t0);
        let picked = table.select(&req, at, &mut SplitMix64::seed_from_u64(1)).unwrap();
        let mut brute: Vec<f64> =
            summaries.iter().filter_map(|s| s.predict(at.week_secs() as f64, cpu)).collect();
        brute.sort_by(f64::total_cmp);
        let got: Vec<f64> = picked.iter().filter_map(|p| p.predicted.map(|d| d.as_secs_f64())).collect();
        for (g, b) in got.iter().zip(&brute) {
            proptest::prop_assert!((g - b).abs() <= 1e-6 * b.max(1.0), "picked {got:?}, best {brute:?}");
        }
        proptest::prop_assert_eq!(got.len(), count.min(brute.len()));
    }
}
