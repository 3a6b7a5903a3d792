//! The synthetic generator is reproducible and hits its knobs; the trace study's job
//! preparation compresses to the asked load and the doc says what the trace offered and
//! offers; a small sweep shows the market's edge.

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

/// `n` jobs of 4 processors for 100 s, one every 10 s on 16 processors: an offered load
/// of 40n / (16 (n - 1)), 2.5 and more.
fn trace_offering_more_than_asked(n: usize) -> batch::workload::swf::Swf {
    use batch::workload::swf::{Record, Swf};
    let records = (0..n)
        .map(|k| {
            let mut f = [-1.0; 18];
            f[0] = (k + 1) as f64;
            f[1] = (k * 10) as f64;
            f[3] = 100.0;
            f[4] = 4.0;
            f[14] = 0.0;
            Record { f }
        })
        .collect();
    Swf {
        header: vec!["; MaxProcs: 16".into()],
        records,
        lines: Vec::new(),
    }
}

#[test]
fn a_trace_offering_more_than_asked_is_stretched_to_the_asked_load() {
    use batch::experiments::trace::{TraceStudy, offered_load, trace_jobs};
    let trace = trace_offering_more_than_asked(400);
    let (jobs, procs, compress) = trace_jobs(&trace, &TraceStudy::default()).unwrap();
    assert!(compress < 1.0, "arrivals stretched: divided by {compress}");
    let load = offered_load(&jobs, procs);
    assert!((load - 0.85).abs() < 0.01, "offered load {load}");
}

#[test]
fn the_doc_says_what_a_trace_offering_more_than_asked_offers_before_and_after() {
    use batch::report::{prose, study};
    // 40 jobs: 40 * 400 / (16 * 390) = 2.56.
    let run = study::run_lee(&trace_offering_more_than_asked(40), true, &mut |_| {}).unwrap();
    let doc = prose::lee(&run, "t.swf", "marketsim doc");
    let trace = doc
        .lines()
        .find(|l| l.starts_with("Trace `t.swf`"))
        .unwrap_or_else(|| panic!("no trace line in\n{doc}"));
    assert!(
        trace.contains("40 jobs on 16 processors, arrivals stretched 3.0 times: offered load 0.85 (the trace's own 2.56)."),
        "{trace}"
    );
    assert!(!trace.contains("4%"), "{trace}");
}

#[test]
fn the_doc_says_what_generated_workloads_offer_beside_the_asked_load() {
    use batch::report::{prose, study};
    use batch::workload::synth::generate;
    let (base, seeds) = study::chun_base(false);
    let text = prose::chun_intro(&base, seeds);
    // Seed 3's workload offers more than the asked 0.9.
    let third = batch::experiments::trace::offered_load(
        &generate(&SynthConfig { seed: 3, ..base }),
        base.procs,
    );
    assert!(third > 0.95, "seed 3 offers {third}");
    assert!(
        text.contains("offered load 0.9 asked (the generated workloads offer 0.85, 0.87, 0.98: bursts arrive with random gaps)"),
        "{text}"
    );
}
