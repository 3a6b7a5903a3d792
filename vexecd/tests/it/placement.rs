//! The placement simulation: history beats random and lowest-load-now.

use vexecd::policy::PolicyName;
use vexecd::sim::{SimConfig, simulate, table};

#[test]
fn history_beats_random_and_lowest_load_now_on_a_fixed_seed() {
    let config = SimConfig {
        runs: 4,
        ..SimConfig::default()
    };
    let outcomes = simulate(&config);
    let printed = table(&config, &outcomes);
    println!("{printed}");
    let ratio = |p| outcomes.iter().find(|o| o.policy == p).unwrap().mean_ratio;
    let (random, least, history) = (
        ratio(PolicyName::Random),
        ratio(PolicyName::LeastLoaded),
        ratio(PolicyName::History),
    );
    assert!(outcomes.iter().all(|o| o.jobs > 500), "{printed}");
    // Every ratio is at least 1 / fastest speed, and finite.
    assert!(
        outcomes
            .iter()
            .all(|o| o.mean_ratio > 0.7 && o.mean_ratio.is_finite()),
        "{printed}"
    );
    assert!(
        history < least * 0.97,
        "history does not beat lowest-load-now\n{printed}"
    );
    assert!(
        history < random * 0.9,
        "history does not beat random\n{printed}"
    );
    assert!(
        least < random,
        "lowest-load-now does not beat random\n{printed}"
    );
}
