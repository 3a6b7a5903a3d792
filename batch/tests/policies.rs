//! Each policy's rule on small hand-built snapshots and workloads: the order it picks,
//! the price it sets, when it suspends or preempts, and what the simulator refuses.

use batch::job::Job;
use batch::policy::backfill::Backfill;
use batch::policy::fifo::Fifo;
use batch::policy::firstprice::FirstPrice;
use batch::policy::priofifo::PrioFifo;
use batch::policy::sjf::Sjf;
use batch::policy::vickrey::Vickrey;
use batch::policy::{Decision, Policy, Queued, Running, Snapshot};
use batch::sim::{SimError, simulate};
use batch::utility::{MICROS_PER_CREDIT, Utility};

/// A job worth `credits` if done by slowdown 1, decaying to zero over `tol` lengths.
fn job(id: u64, submit: i64, width: u32, runtime: i64, credits: i64, tol: f64) -> Job {
    Job {
        id,
        submit,
        width,
        runtime,
        estimate: runtime,
        utility: Utility::batch(runtime, credits * MICROS_PER_CREDIT, tol),
        queue: 0,
        class: 0,
    }
}

fn queued(j: &Job) -> Queued<'_> {
    Queued {
        job: j,
        done: 0,
        preempted: 0,
    }
}

/// A snapshot at `now` of `procs` processors with `queued` waiting and nothing running.
fn waiting(now: i64, procs: u32, queued: Vec<Queued<'_>>) -> Snapshot<'_> {
    Snapshot {
        now,
        procs,
        queued: queued.into(),
        running: vec![],
    }
}

fn running(j: &Job, since: i64) -> Running<'_> {
    Running {
        job: j,
        since,
        done_before: 0,
        preempted: 0,
    }
}

#[test]
fn firstprice_starts_the_highest_bid_per_processor_hour_and_charges_it() {
    // Same length; job 2 is worth more per processor-hour despite being wider.
    let a = job(1, 0, 1, 3600, 10, 1.0);
    let b = job(2, 0, 2, 3600, 40, 1.0);
    let snap = waiting(0, 2, vec![queued(&a), queued(&b)]);
    let d = FirstPrice { preempt: false }.decide(&snap);
    assert_eq!(d.start, vec![2]);
    assert_eq!(d.rates, vec![(2, 20 * MICROS_PER_CREDIT)]);
    assert_eq!(d.reserved.map(|r| r.0), Some(1));
}

#[test]
fn firstprice_bids_fall_as_jobs_wait() {
    let a = job(1, 0, 1, 100, 100, 1.0);
    assert_eq!(a.bid_at(0, 100), 100 * MICROS_PER_CREDIT * 36);
    assert_eq!(a.bid_at(50, 100), 50 * MICROS_PER_CREDIT * 36);
    assert_eq!(a.bid_at(100, 100), 0);
}

#[test]
fn sjf_and_priofifo_orders() {
    let mut a = job(1, 0, 1, 500, 1, 1.0);
    let mut b = job(2, 5, 1, 100, 1, 1.0);
    a.queue = 2;
    b.queue = 0;
    let snap = waiting(10, 1, vec![queued(&a), queued(&b)]);
    assert_eq!(Sjf.decide(&snap).start, vec![2]);
    let d = PrioFifo::default().decide(&snap);
    assert_eq!(d.start, vec![2]);
    assert_eq!(d.rates, vec![(2, 4 * MICROS_PER_CREDIT)]);
    assert_eq!(Fifo::new(Backfill::Easy).decide(&snap).start, vec![1]);
}

#[test]
fn fifo_serves_by_submission_time_when_the_numbers_disagree() {
    // A queue shared by two batchd: job 7 was taken at t=4 through one instance and
    // numbered after job 8, taken at t=5 through the other. One processor: FIFO starts
    // the one submitted first, under each backfilling mode.
    let late = job(8, 5, 1, 100, 1, 1.0);
    let early = job(7, 4, 1, 100, 1, 1.0);
    let snap = waiting(10, 1, vec![queued(&late), queued(&early)]);
    for backfill in [Backfill::None, Backfill::Easy, Backfill::Conservative] {
        assert_eq!(Fifo::new(backfill).decide(&snap).start, vec![7]);
    }
}

#[test]
fn easy_backfills_only_what_does_not_delay_the_head() {
    // 4 processors, 3 busy until t=100. Head needs 2 (reserved at 100), with 1 spare then.
    let r = job(9, 0, 3, 100, 1, 1.0);
    let head = job(1, 0, 2, 50, 1, 1.0);
    let short = job(2, 0, 1, 100, 1, 1.0); // ends at 100: fits before the reservation
    let long = job(3, 0, 1, 500, 1, 1.0); // would still be running at 100 but uses the spare
    let snap = Snapshot {
        now: 0,
        procs: 4,
        queued: vec![queued(&head), queued(&short), queued(&long)].into(),
        running: vec![running(&r, 0)],
    };
    let d = Fifo::new(Backfill::Easy).decide(&snap);
    assert_eq!(d.start, vec![2]);
    assert_eq!(d.reserved, Some((1, 100)));
    let snap2 = Snapshot {
        queued: vec![queued(&head), queued(&long)].into(),
        ..snap.clone()
    };
    // The long job uses the one processor the head does not need at t=100.
    assert_eq!(Fifo::new(Backfill::Easy).decide(&snap2).start, vec![3]);
    assert_eq!(
        Fifo::new(Backfill::None).decide(&snap2).start,
        Vec::<u64>::new()
    );
}

#[test]
fn conservative_reserves_for_every_job() {
    // 2 processors, 1 busy until 100. Queue: wide (2, reserved at 100), then a long
    // narrow job that would break the wide job's reservation: EASY starts it (it only
    // protects the head)... no: it would delay the head in both. Then a short job fits.
    let r = job(9, 0, 1, 100, 1, 1.0);
    let wide = job(1, 0, 2, 100, 1, 1.0);
    let mid = job(2, 0, 1, 150, 1, 1.0); // reserved at 200 under conservative
    let short = job(3, 0, 1, 100, 1, 1.0);
    let snap = Snapshot {
        now: 0,
        procs: 2,
        queued: vec![queued(&wide), queued(&mid), queued(&short)].into(),
        running: vec![running(&r, 0)],
    };
    let d = Fifo::new(Backfill::Conservative).decide(&snap);
    assert_eq!(d.start, vec![3]);
    assert_eq!(d.reserved, Some((1, 100)));
}

#[test]
fn vickrey_prices_at_the_first_bid_that_does_not_fit_and_suspends_outbid_jobs() {
    // 2 processors. Running: a low bidder. Queued: a high bidder (width 1) and a medium
    // bidder (width 2).
    let low = job(1, 0, 1, 3600, 1, 10.0);
    let high = job(2, 0, 1, 3600, 50, 10.0);
    let mid = job(3, 0, 2, 3600, 20, 10.0);
    let snap = Snapshot {
        now: 0,
        procs: 2,
        queued: vec![queued(&high), queued(&mid)].into(),
        running: vec![running(&low, 0)],
    };
    let d = Vickrey::new(false).decide(&snap);
    // Ranking: high (50/h), mid (10/h per processor), low (1/h). high fits; mid (2 procs)
    // does not fit in the 1 left: the descent stops, price = mid's bid, low is suspended.
    assert_eq!(d.start, vec![2]);
    assert_eq!(d.suspend, vec![1]);
    assert_eq!(d.price, Some(10 * MICROS_PER_CREDIT));
    // Run what fits: the descent goes on and low keeps the processor mid cannot use; the
    // price is still the bid of the highest bidder that cannot run.
    let d = Vickrey::new(true).decide(&snap);
    assert_eq!(d.start, vec![2]);
    assert!(d.suspend.is_empty());
    assert_eq!(d.price, Some(10 * MICROS_PER_CREDIT));
}

#[test]
fn vickrey_runs_suspend_and_resume_to_completion() {
    // A long low bidder is suspended when a high bidder arrives and resumes after it.
    let jobs = vec![job(1, 0, 1, 1000, 1, 10.0), job(2, 100, 1, 100, 100, 1.0)];
    let res = simulate(&jobs, 1, &mut Vickrey::new(true)).unwrap();
    batch::check::check_schedule(&jobs, &res).unwrap();
    assert_eq!(res.outcomes[0].preempted, 1);
    assert_eq!(res.outcomes[1].start, 100);
    assert_eq!(res.outcomes[0].end, 1100);
    assert!(res.prices.iter().any(|p| p.1 > 0), "{:?}", res.prices);
}

#[test]
fn firstprice_preemption_swaps_when_it_raises_utility_and_only_once() {
    // One processor. A long, low-value job runs; a short, urgent, valuable one arrives.
    let jobs = vec![job(1, 0, 1, 10_000, 1, 10.0), job(2, 10, 1, 100, 1000, 0.5)];
    let res = simulate(&jobs, 1, &mut FirstPrice { preempt: true }).unwrap();
    batch::check::check_schedule(&jobs, &res).unwrap();
    assert_eq!(res.outcomes[1].start, 10, "the urgent job starts at once");
    assert_eq!(res.outcomes[0].preempted, 1);
    let plain = simulate(&jobs, 1, &mut FirstPrice { preempt: false }).unwrap();
    let u = |r: &batch::sim::SimResult| batch::metrics::measure(&jobs, r).utility;
    assert!(u(&res) > u(&plain));
    // A second urgent arrival cannot preempt job 1 again.
    let jobs3 = vec![
        jobs[0].clone(),
        jobs[1].clone(),
        job(3, 200, 1, 100, 1000, 0.5),
    ];
    let res3 = simulate(&jobs3, 1, &mut FirstPrice { preempt: true }).unwrap();
    assert_eq!(res3.outcomes[0].preempted, 1);
}

struct Greedy;
impl Policy for Greedy {
    fn name(&self) -> String {
        "greedy".into()
    }
    fn decide(&mut self, snap: &Snapshot<'_>) -> Decision {
        Decision {
            start: snap.queued.iter().map(|q| q.job.id).collect(),
            ..Decision::default()
        }
    }
}

struct Idle;
impl Policy for Idle {
    fn name(&self) -> String {
        "idle".into()
    }
    fn decide(&mut self, _: &Snapshot<'_>) -> Decision {
        Decision::default()
    }
}

#[test]
fn the_simulator_refuses_rule_breaking_policies_and_bad_jobs() {
    let jobs = vec![job(1, 0, 1, 10, 1, 1.0), job(2, 0, 1, 10, 1, 1.0)];
    let e = simulate(&jobs, 1, &mut Greedy).unwrap_err();
    assert!(matches!(e, SimError::Policy { .. }), "{e}");
    assert!(e.to_string().contains("processors free"), "{e}");
    let e = simulate(&jobs, 1, &mut Idle).unwrap_err();
    assert!(matches!(e, SimError::Stalled { waiting: 2, .. }), "{e}");
    let wide = vec![job(1, 0, 3, 10, 1, 1.0)];
    assert!(matches!(
        simulate(&wide, 2, &mut Sjf),
        Err(SimError::InvalidJob { id: 1, .. })
    ));
}

#[test]
fn ga_is_deterministic_for_a_seed_and_beats_or_matches_easy_on_a_congested_queue() {
    use batch::policy::ga::{Ga, GaConfig};
    use batch::workload::synth::{SynthConfig, generate};
    let jobs = generate(&SynthConfig {
        jobs: 150,
        procs: 8,
        burst: 16,
        tolerance: 0.5,
        max_width: 4,
        seed: 5,
        ..SynthConfig::default()
    });
    let cfg = GaConfig {
        population: 10,
        generations: 10,
        budget: std::time::Duration::from_secs(10),
        ..GaConfig::default()
    };
    let a = simulate(&jobs, 8, &mut Ga::new(cfg, 9)).unwrap();
    let b = simulate(&jobs, 8, &mut Ga::new(cfg, 9)).unwrap();
    assert_eq!(a.outcomes, b.outcomes);
    let easy = simulate(&jobs, 8, &mut Fifo::new(Backfill::Easy)).unwrap();
    let u = |r| batch::metrics::measure(&jobs, r).utility;
    assert!(u(&a) > u(&easy), "ga {} easy {}", u(&a), u(&easy));
}

#[test]
fn every_policy_reports_the_name_it_was_asked_by() {
    for name in batch::policy::NAMES {
        let p = batch::policy::by_name(name, 1, Default::default()).unwrap();
        assert_eq!(p.name(), *name);
    }
}

#[test]
fn each_policy_shows_its_queue_in_the_order_it_considers_it() {
    // Arrival order 1, 2, 3; job 2 bids most per processor-hour, job 3 is shortest,
    // job 1 has the best PRIOFIFO priority after job 3.
    let a = job(1, 0, 1, 3600, 10, 1.0);
    let b = job(2, 1, 1, 3600, 40, 1.0);
    let mut c = job(3, 2, 1, 600, 1, 1.0);
    c.queue = 0;
    let mut a2 = a.clone();
    a2.queue = 1;
    let mut b2 = b.clone();
    b2.queue = 2;
    let snap = waiting(5, 1, vec![queued(&a2), queued(&b2), queued(&c)]);
    assert_eq!(Fifo::new(Backfill::Easy).order(&snap), vec![1, 2, 3]);
    assert_eq!(FirstPrice { preempt: false }.order(&snap), vec![2, 1, 3]);
    assert_eq!(Vickrey::new(true).order(&snap), vec![2, 1, 3]);
    assert_eq!(Sjf.order(&snap), vec![3, 1, 2]);
    assert_eq!(PrioFifo::default().order(&snap), vec![3, 1, 2]);
}
