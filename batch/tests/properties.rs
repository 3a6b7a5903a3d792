//! Properties every policy must keep on random workloads, checked by the independent
//! schedule checker: capacity, no start before arrival, every job run to completion
//! exactly once (suspensions and preemptions included), and for FIFO-ordered backfilling
//! the head of the queue never delayed.

use std::time::Duration;

use batch::check::{check_head_not_delayed, check_schedule};
use batch::job::Job;
use batch::policy::{self, ga::GaConfig};
use batch::sim::simulate;
use batch::workload::synth::{SynthConfig, generate};
use proptest::prelude::*;

/// A policy as a live queue asks it, deciding and ordering at once, checked at
/// every decision against the same policy asked as the simulator asks (the
/// decision alone) and then for its order.
struct AsLive {
    live: Box<dyn policy::Policy>,
    plain: Box<dyn policy::Policy>,
    decisions: usize,
}

impl policy::Policy for AsLive {
    fn name(&self) -> String {
        self.live.name()
    }

    fn decide(&mut self, snap: &policy::Snapshot<'_>) -> policy::Decision {
        let (d, order) = self.live.decide_and_order(snap);
        let plain = self.plain.decide(snap);
        assert_eq!(d, plain, "{} at {}", self.name(), snap.now);
        assert_eq!(
            order,
            self.plain.order_at(snap),
            "{} at {}",
            self.name(),
            snap.now
        );
        self.decisions += 1;
        d
    }
}

fn small_ga() -> GaConfig {
    GaConfig {
        population: 6,
        generations: 4,
        genes: 8,
        budget: Duration::from_secs(5),
        ..GaConfig::default()
    }
}

fn workload() -> impl Strategy<Value = (Vec<Job>, u32)> {
    (
        5usize..50,
        2u32..17,
        0.3f64..1.5,
        1u32..12,
        0.0f64..1.0,
        0.1f64..4.0,
        1.0f64..3.0,
        any::<u64>(),
    )
        .prop_map(|(jobs, procs, load, burst, wide, tol, pad, seed)| {
            let cfg = SynthConfig {
                jobs,
                procs,
                load,
                burst,
                max_width: ((procs as f64 * wide) as u32).max(1),
                mean_runtime: 600.0,
                tolerance: tol,
                pad,
                seed,
                ..SynthConfig::default()
            };
            (generate(&cfg), procs)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_policy_respects_capacity_arrival_and_runs_each_job_once((jobs, procs) in workload()) {
        for name in policy::NAMES {
            let mut p = policy::by_name(name, 7, small_ga()).unwrap();
            let res = simulate(&jobs, procs, p.as_mut()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            if let Err(e) = check_schedule(&jobs, &res) {
                return Err(TestCaseError::fail(format!("{name}: {e}")));
            }
            if !matches!(*name, "vickrey" | "vickrey-strict" | "firstprice-preempt") {
                prop_assert!(res.outcomes.iter().all(|o| o.preempted == 0), "{name} preempted");
            }
        }
    }

    #[test]
    fn backfilling_never_delays_the_head_job((mut jobs, procs) in workload()) {
        for j in &mut jobs {
            j.estimate = j.runtime;
        }
        for name in ["fifo", "easy", "conservative"] {
            let mut p = policy::by_name(name, 0, small_ga()).unwrap();
            let res = simulate(&jobs, procs, p.as_mut()).unwrap();
            if let Err(e) = check_head_not_delayed(&jobs, &res) {
                return Err(TestCaseError::fail(format!("{name}: {e}")));
            }
        }
    }

    #[test]
    fn vickrey_ranks_lazily_exactly_as_it_ranks_everything((jobs, procs) in workload()) {
        use batch::policy::vickrey::Vickrey;
        for fill in [false, true] {
            let lazy = simulate(&jobs, procs, &mut Vickrey::ranking(fill, true)).unwrap();
            let all = simulate(&jobs, procs, &mut Vickrey::ranking(fill, false)).unwrap();
            prop_assert_eq!(&lazy.outcomes, &all.outcomes);
            prop_assert_eq!(&lazy.segments, &all.segments);
            prop_assert_eq!(&lazy.prices, &all.prices);
        }
    }

    #[test]
    fn deciding_and_ordering_at_once_is_deciding_then_ordering((jobs, procs) in workload()) {
        for name in policy::NAMES.iter().filter(|n| **n != "ga") {
            let mut live = AsLive {
                live: policy::by_name(name, 7, small_ga()).unwrap(),
                plain: policy::by_name(name, 7, small_ga()).unwrap(),
                decisions: 0,
            };
            simulate(&jobs, procs, &mut live).unwrap();
            prop_assert!(live.decisions > 0, "{name} never decided");
        }
    }

    #[test]
    fn conservative_schedules_exactly_as_the_plain_reservation_scan((jobs, procs) in workload()) {
        let mut fast = policy::by_name("conservative", 0, small_ga()).unwrap();
        let fast = simulate(&jobs, procs, fast.as_mut()).unwrap();
        let plain = simulate(&jobs, procs, &mut PlainConservative).unwrap();
        prop_assert_eq!(&fast.outcomes, &plain.outcomes);
        prop_assert_eq!(&fast.segments, &plain.segments);
    }

    #[test]
    fn firstprice_preempts_each_job_at_most_once((jobs, procs) in workload()) {
        let mut p = policy::by_name("firstprice-preempt", 0, small_ga()).unwrap();
        let res = simulate(&jobs, procs, p.as_mut()).unwrap();
        prop_assert!(res.outcomes.iter().all(|o| o.preempted <= 1));
    }
}

#[test]
fn the_head_checker_catches_a_delayed_head() {
    use batch::utility::Utility;
    // Two processors. Job 1 (width 1, 100 s), job 2 (width 2, 10 s) and job 3 (width 1,
    // 200 s) arrive at 0. Job 2 is the head at 0 and can start at 100, when job 1 ends;
    // backfilling job 3 at 0 would delay it to 200, so EASY does not.
    let mk = |id, submit, width, runtime| Job {
        id,
        submit,
        width,
        runtime,
        estimate: runtime,
        utility: Utility::constant(1),
        queue: 0,
        class: 0,
    };
    let jobs = vec![mk(1, 0, 1, 100), mk(2, 0, 2, 10), mk(3, 0, 1, 200)];
    let mut res = simulate(
        &jobs,
        2,
        &mut policy::fifo::Fifo::new(policy::backfill::Backfill::Easy),
    )
    .unwrap();
    check_schedule(&jobs, &res).unwrap();
    check_head_not_delayed(&jobs, &res).unwrap();
    assert_eq!(res.outcomes[1].start, 100);
    // Rewrite the schedule as if job 3 had been backfilled at 0, delaying job 2 to 200.
    res.outcomes[2].start = 0;
    res.outcomes[2].end = 200;
    res.outcomes[1].start = 200;
    res.outcomes[1].end = 210;
    let err = check_head_not_delayed(&jobs, &res).unwrap_err();
    assert!(err.contains("job 2"), "{err}");
}

#[test]
fn the_schedule_checker_catches_overcommit_early_start_and_short_runs() {
    use batch::sim::Segment;
    let jobs = generate(&SynthConfig {
        jobs: 20,
        procs: 4,
        max_width: 4,
        ..SynthConfig::default()
    });
    let good = simulate(
        &jobs,
        4,
        policy::by_name("easy", 0, small_ga()).unwrap().as_mut(),
    )
    .unwrap();
    check_schedule(&jobs, &good).unwrap();

    let mut over = good.clone();
    over.procs = 1;
    assert!(
        check_schedule(&jobs, &over)
            .unwrap_err()
            .contains("processors in use")
    );

    let mut early = good.clone();
    let first = jobs.iter().position(|j| j.submit > 0).unwrap();
    let id = jobs[first].id;
    for s in early.segments.iter_mut().filter(|s| s.job == id) {
        s.start -= jobs[first].submit + 1;
        s.end -= jobs[first].submit + 1;
    }
    assert!(check_schedule(&jobs, &early).is_err());

    let mut short = good.clone();
    short.segments.push(Segment {
        job: jobs[0].id,
        start: 0,
        end: 1,
        width: 1,
    });
    assert!(check_schedule(&jobs, &short).is_err());
}

/// Conservative backfilling as the textbook states it, for comparison: free processors
/// as a sorted list of steps, every queued job (in arrival order) reserved at the first
/// step where it fits for its whole estimate, scanning from the start every time.
struct PlainConservative;

impl policy::Policy for PlainConservative {
    fn name(&self) -> String {
        "conservative".into()
    }

    fn decide(&mut self, snap: &policy::Snapshot<'_>) -> policy::Decision {
        let mut steps: Vec<(i64, i64)> = vec![(snap.now, snap.procs as i64)];
        let split =
            |steps: &mut Vec<(i64, i64)>, t: i64| match steps.binary_search_by_key(&t, |s| s.0) {
                Ok(i) => i,
                Err(i) => {
                    let free = steps[i - 1].1;
                    steps.insert(i, (t, free));
                    i
                }
            };
        let reserve = |steps: &mut Vec<(i64, i64)>, t: i64, dur: i64, w: u32| {
            let a = split(steps, t);
            let b = split(steps, t + dur.max(1));
            for s in &mut steps[a..b] {
                s.1 -= w as i64;
            }
        };
        for r in &snap.running {
            reserve(
                &mut steps,
                snap.now,
                r.estimated_end(snap.now) - snap.now,
                r.job.width,
            );
        }
        let mut d = policy::Decision::default();
        let mut order: Vec<usize> = (0..snap.queued.len()).collect();
        order.sort_by_key(|&i| (snap.queued[i].job.submit, snap.queued[i].job.id));
        for i in order {
            let q = &snap.queued[i];
            let (w, dur) = (q.job.width as i64, q.remaining_estimate());
            let t = (0..steps.len())
                .find(|&a| {
                    let t = steps[a].0;
                    steps[a..]
                        .iter()
                        .take_while(|s| s.0 < t + dur)
                        .all(|s| s.1 >= w)
                })
                .map_or(steps.last().unwrap().0, |a| steps[a].0);
            reserve(&mut steps, t, dur, q.job.width);
            if t == snap.now {
                d.start.push(q.job.id);
            } else if d.reserved.is_none() {
                d.reserved = Some((q.job.id, t));
            }
        }
        d
    }
}
