//! The synthetic generator is reproducible and hits its knobs; the trace study's job
//! preparation compresses to the asked load; a small sweep shows the market's edge.

use batch::experiments::{Param, sweep};
use batch::workload::synth::{SynthConfig, generate};

#[test]
fn same_seed_same_workload_and_load_as_asked() {
    let cfg = SynthConfig {
        jobs: 3000,
        load: 0.7,
        burst: 4,
        max_width: 8,
        ..SynthConfig::default()
    };
    let a = generate(&cfg);
    assert_eq!(a, generate(&cfg));
    assert_ne!(a, generate(&SynthConfig { seed: 2, ..cfg }));
    let work: f64 = a.iter().map(|j| j.work() as f64).sum();
    let span = a.last().unwrap().submit as f64;
    let load = work / (cfg.procs as f64 * span);
    assert!((0.6..0.8).contains(&load), "offered load {load}");
    assert!(a.iter().all(|j| (1..=8).contains(&j.width)));
    let high = a.iter().filter(|j| j.class == 0).count() as f64 / a.len() as f64;
    assert!((0.17..0.23).contains(&high), "{high}");
    // Bursts: jobs arrive four at a time.
    assert!(
        a.chunks(4)
            .all(|c| c.iter().all(|j| j.submit == c[0].submit))
    );
}

#[test]
fn firstprice_beats_sjf_on_a_bursty_valuable_workload() {
    let base = SynthConfig {
        jobs: 400,
        burst: 32,
        tolerance: 1.0,
        ..SynthConfig::default()
    };
    let pts = sweep(
        &base,
        Param::Spread,
        &[100.0],
        &["sjf", "firstprice"],
        1,
        &mut |_| {},
    )
    .unwrap();
    let (sjf, fp) = (pts[0].utility("sjf"), pts[0].utility("firstprice"));
    assert!(fp > 1.2 * sjf, "firstprice {fp} sjf {sjf}");
}
