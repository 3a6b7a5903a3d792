//! The paper's Figure 4, interval by interval: shares by the model and by the scheduler, and
//! charges under both policies.

use money::MICROS_PER_CREDIT;
use stride::scenario::figure4;

/// (from, to, [(job, model milli-CPUs, contention credits, paper credits)])
type Expected = (
    &'static str,
    &'static str,
    &'static [(usize, u64, i64, i64)],
);

const A: usize = 0;
const B: usize = 1;
const C: usize = 2;
const D: usize = 3;

const EXPECTED: &[Expected] = &[
    // A alone: all it can use (one CPU), free under both policies.
    ("A1", "B1", &[(A, 1000, 0, 0)]),
    // Two single-threaded jobs on two CPUs: one CPU each; only the paper's rule charges.
    ("B1", "C1", &[(A, 1000, 0, 40), (B, 1000, 0, 30)]),
    // 40:30:20 of two CPUs; contended, everyone pays its bid.
    (
        "C1",
        "D1",
        &[(A, 889, 40, 40), (B, 667, 30, 30), (C, 444, 20, 20)],
    ),
    (
        "D1",
        "A2",
        &[
            (A, 800, 40, 40),
            (B, 600, 30, 30),
            (C, 400, 20, 20),
            (D, 200, 10, 10),
        ],
    ),
    // B's 30/60 of two CPUs is exactly its one thread.
    (
        "A2",
        "B2",
        &[(B, 1000, 30, 30), (C, 667, 20, 20), (D, 333, 10, 10)],
    ),
    ("B2", "C2", &[(C, 1000, 0, 20), (D, 1000, 0, 10)]),
    // D alone: free.
    ("C2", "D2", &[(D, 1000, 0, 0)]),
];

#[test]
fn figure4_interval_by_interval() {
    let scenario = figure4();
    assert_eq!(scenario.cpus, 2);
    let report = scenario.replay().expect("Figure 4 replays");
    assert_eq!(report.len(), EXPECTED.len());
    for (got, (from, to, jobs)) in report.iter().zip(EXPECTED) {
        assert_eq!((got.from.as_str(), got.to.as_str()), (*from, *to));
        assert_eq!(got.quanta, 6000, "one minute of 10 ms quanta");
        assert_eq!(got.jobs.len(), jobs.len(), "{from}-{to}: jobs present");
        for (g, &(job, milli, contention, paper)) in got.jobs.iter().zip(*jobs) {
            let name = &scenario.jobs[job].name;
            assert_eq!(g.job, job, "{from}-{to}");
            assert_eq!(g.model_milli_cpus, milli, "{from}-{to} {name} model share");
            assert!(
                g.measured_milli_cpus.abs_diff(milli) <= 1,
                "{from}-{to} {name}: stride measured {} milli-CPUs, model {milli}",
                g.measured_milli_cpus
            );
            assert_eq!(
                g.contention_charge,
                contention * MICROS_PER_CREDIT,
                "{from}-{to} {name}"
            );
            assert_eq!(
                g.paper_charge,
                paper * MICROS_PER_CREDIT,
                "{from}-{to} {name}"
            );
        }
    }
}

#[test]
fn figure4_ratios_hold_while_contended() {
    // "The relative CPU allocation of any two jobs is given by the ratio of their rates."
    let scenario = figure4();
    for r in scenario
        .replay()
        .unwrap()
        .iter()
        .filter(|r| r.jobs.len() == 4)
    {
        let quanta: Vec<u64> = r.jobs.iter().map(|j| j.measured_milli_cpus).collect();
        assert_eq!(quanta, vec![800, 600, 400, 200]);
    }
}
