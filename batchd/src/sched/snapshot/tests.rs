//! The snapshot against the queue it is collected from: the jobs shown, their
//! policy entries kept up through the queue's changes, and the decisions made
//! over them.

use super::*;
use crate::queue::Job;
use crate::queue::fixture::{spec, unsigned};
use crate::sched::clock::Clock;
use crate::terms::utility;
use proto::batch::{JobSpec, Worth};

#[test]
fn a_rate_is_its_value_over_the_job_and_back() {
    // 3 credits per CPU-minute, 4 CPUs, 10 minutes: 120 credits.
    let s = spec(4, 600, Worth::Rate(3_000_000));
    let u = utility(&s);
    assert_eq!(u.value_at(0), 120_000_000);
    assert_eq!(u.value_at(1_000_000), 120_000_000);
    assert_eq!(crate::queue::cost_estimate(&s), 120_000_000);
    assert_eq!(crate::queue::bid_rate(&s), 3_000_000);
    // The policy's bid (per processor-hour) for it is the same rate × 60.
    let job = batch::job::Job {
        id: 0,
        submit: 0,
        width: 4,
        runtime: 600,
        estimate: 600,
        utility: u,
        queue: 0,
        class: 0,
    };
    assert_eq!(job.bid_at(0, 600), crate::sched::apply::per_hour(3_000_000));
}

#[test]
fn a_utility_is_taken_as_given_and_bids_its_top_value() {
    let s = spec(2, 60, Worth::Utility(vec![(60, 10_000_000), (120, 0)]));
    let u = utility(&s);
    assert_eq!(
        (u.value_at(60), u.value_at(90), u.value_at(200)),
        (10_000_000, 5_000_000, 0)
    );
    assert_eq!(crate::queue::cost_estimate(&s), 10_000_000);
    // 10 credits over 2 CPU-minutes.
    assert_eq!(crate::queue::bid_rate(&s), 5_000_000);
}

#[test]
fn work_done_is_rounded_to_the_nearest_second() {
    let mut q = Queue::default();
    let spec = spec(1, 10, Worth::Rate(1));
    let mut rec = crate::store::JobRecord::queued(0, 1, "alice".into(), unsigned(), 0);
    rec.state = JobState::Suspended;
    rec.done_ms = 999;
    q.insert(Job::new(rec, spec));
    let jobs = collect(&q, 5_000, 4);
    assert_eq!(jobs.waiting[0].done, 1);
}

/// The snapshot as it was built before the queue kept its index: every
/// job walked in arrival order.
fn collect_by_walking(q: &Queue, clock: Clock, tick_ms: i64, procs: u32) -> Vec<Vec<u64>> {
    let mut window = crate::arrays::Window::of(q, procs);
    let (mut waiting, mut running) = (Vec::new(), Vec::new());
    for j in q.in_order() {
        let mut e = vec![
            j.rec.id,
            j.rec.seq as u64,
            secs(q.epoch_ms, clock.seen_at(j.rec.submitted_ms)) as u64,
            (j.rec.done_ms + 500).div_euclid(1000) as u64,
            j.preempted as u64,
        ];
        match j.rec.state {
            JobState::Queued if clock.seen_at(j.rec.submitted_ms) > tick_ms => {}
            JobState::Queued if !window.admit(j.rec.array) => {}
            JobState::Queued | JobState::Suspended => waiting.push(e),
            JobState::Running => {
                e.push(secs(q.epoch_ms, j.rec.started_ms.unwrap_or(q.epoch_ms)) as u64);
                running.push(e)
            }
            _ => {}
        }
    }
    waiting.push(vec![u64::MAX]);
    waiting.extend(running);
    waiting
}

fn flat(jobs: &Jobs) -> Vec<Vec<u64>> {
    let w = |(q, id): (&Queued, &u64)| {
        vec![
            *id,
            q.job.id,
            q.job.submit as u64,
            q.done as u64,
            q.preempted as u64,
        ]
    };
    let r = |(r, id): (&Running, &u64)| {
        vec![
            *id,
            r.job.id,
            r.job.submit as u64,
            r.done_before as u64,
            r.preempted as u64,
            r.since as u64,
        ]
    };
    let mut out: Vec<Vec<u64>> = jobs.waiting.iter().zip(&jobs.waiting_ids).map(w).collect();
    out.push(vec![u64::MAX]);
    out.extend(jobs.running.iter().zip(&jobs.running_ids).map(r));
    out
}

/// Queues a job of `spec` (a task of `array`, if given) submitted at
/// `submitted_ms`, arriving last; its id.
fn add(
    q: &mut Queue,
    spec: std::sync::Arc<JobSpec>,
    array: Option<(u64, u32)>,
    submitted_ms: i64,
) -> u64 {
    let seq = q.take_seq();
    let id = 101 + seq as u64;
    let mut rec =
        crate::store::JobRecord::queued(seq, id, "alice".into(), unsigned(), submitted_ms);
    rec.array = array;
    q.insert(Job::new(rec, spec));
    id
}

#[test]
fn the_index_shows_the_policy_what_walking_every_job_did() {
    let mut q = Queue::default();
    let single = std::sync::Arc::new(spec(2, 60, Worth::Rate(5)));
    let mut swept = spec(1, 30, Worth::Rate(1));
    swept.array = Some("0-39%3".parse().expect("a range"));
    let swept = std::sync::Arc::new(swept);
    let mut wide = spec(3, 30, Worth::Rate(2));
    wide.array = Some("0-19".parse().expect("a range"));
    let wide = std::sync::Arc::new(wide);
    let mut ids = Vec::new();
    for n in 0..10 {
        ids.push(add(&mut q, single.clone(), None, n * 700));
    }
    for i in 0..40 {
        ids.push(add(&mut q, swept.clone(), Some((7, i)), 1_000));
    }
    for n in 0..5 {
        ids.push(add(&mut q, single.clone(), None, 2_000 + n));
    }
    for i in 0..20 {
        // Submitted after some of the ticks decided below.
        ids.push(add(&mut q, wide.clone(), Some((8, i)), 6_500));
    }
    // Every state, in both arrays and between them.
    let states = [
        JobState::Running,
        JobState::Queued,
        JobState::Suspended,
        JobState::Held,
        JobState::Finished,
        JobState::Dependent,
        JobState::Queued,
        JobState::Cancelled,
    ];
    for (n, id) in ids.iter().enumerate() {
        if n % 3 == 0 {
            continue;
        }
        let j = q.jobs.get_mut(id).expect("a job");
        j.rec.state = states[(n * 7) % states.len()];
        if j.rec.state != JobState::Queued {
            j.rec.started_ms = Some(n as i64 * 100);
            j.rec.done_ms = n as i64 * 333;
            j.preempted = (n % 2) as u32;
        }
        q.touched(*id);
    }
    let clock = Clock::new(0, std::time::Duration::from_secs(1));
    for tick_ms in [0, 3_000, 5_000, 7_000, 60_000] {
        for procs in [1, 4, 9, 100] {
            let walked = collect_by_walking(&q, clock, tick_ms, procs);
            let jobs = collect(&q, tick_ms, procs);
            assert_eq!(flat(&jobs), walked, "tick {tick_ms} on {procs} processors");
            for w in &walked {
                if w.len() > 1 {
                    assert_eq!(jobs.id_of(w[1]), Some(w[0]));
                }
            }
        }
    }
}

#[test]
fn the_snapshot_shares_each_jobs_utility_and_shows_its_value() {
    let mut q = Queue::default();
    let signed = unsigned();
    let worths = [
        Worth::Rate(3_000_000),
        Worth::Utility(vec![(60, 10_000_000), (120, 0)]),
        Worth::Utility(vec![(30, 5_000_000), (90, -1_000_000)]),
    ];
    let states = [JobState::Queued, JobState::Suspended, JobState::Running];
    for (n, (worth, state)) in worths.iter().zip(states).enumerate() {
        let seq = q.take_seq();
        let mut rec =
            crate::store::JobRecord::queued(seq, 10 + n as u64, "alice".into(), signed.clone(), 0);
        rec.state = state;
        q.insert(Job::new(rec, spec(2, 60, worth.clone())));
    }
    let jobs = collect(&q, 5_000, 8);
    assert_eq!((jobs.waiting.len(), jobs.running.len()), (2, 1));
    let waiting = jobs.waiting.iter().map(|q| q.job).zip(&jobs.waiting_ids);
    let running = jobs.running.iter().map(|r| r.job).zip(&jobs.running_ids);
    for (e, id) in waiting.chain(running) {
        let j = &q.jobs[id];
        // The policy sees the utility the spec stands for...
        assert_eq!(e.utility, utility(&j.spec), "job {id}");
        // ...without a copy of it made for the decision.
        assert!(e.utility.shares(&j.utility), "job {id} copied");
    }
}

#[test]
fn times_are_whole_seconds_since_the_epoch_rounded_down() {
    assert_eq!(secs(1_000, 1_999), 0);
    assert_eq!(secs(1_000, 2_000), 1);
    assert_eq!(secs(1_000, 999), -1);
}

/// What the policy is shown of `q` at `tick_ms` on `procs` processors, each
/// entry built afresh from its job by walking the whole queue, as every
/// decision did before the index kept the entries: waiting (job, done,
/// preempted) and running (job, since, done, preempted).
type Fresh = (
    Vec<(batch::job::Job, i64, u32)>,
    Vec<(batch::job::Job, i64, i64, u32)>,
);

fn fresh(q: &Queue, tick_ms: i64, procs: u32) -> Fresh {
    let clock = q.clock();
    let mut window = crate::arrays::Window::of(q, procs);
    let (mut waiting, mut running) = (Vec::new(), Vec::new());
    for j in q.in_order() {
        let estimate = j.spec.length_s.max(1) as i64;
        let job = batch::job::Job {
            id: j.rec.seq as u64,
            submit: secs(q.epoch_ms, clock.seen_at(j.rec.submitted_ms)),
            width: j.spec.width,
            runtime: estimate,
            estimate,
            utility: utility(&j.spec),
            queue: j.spec.priority,
            class: 0,
        };
        let done = (j.rec.done_ms + 500).div_euclid(1000);
        match j.rec.state {
            JobState::Queued if clock.seen_at(j.rec.submitted_ms) > tick_ms => {}
            JobState::Queued if !window.admit(j.rec.array) => {}
            JobState::Queued | JobState::Suspended => waiting.push((job, done, j.preempted)),
            JobState::Running => {
                let since = secs(q.epoch_ms, j.rec.started_ms.unwrap_or(q.epoch_ms));
                running.push((job, since, done, j.preempted));
            }
            _ => {}
        }
    }
    (waiting, running)
}

/// Every policy but the GA (whose search is bounded by time).
fn policies() -> Vec<Box<dyn batch::policy::Policy>> {
    batch::policy::NAMES
        .iter()
        .filter(|n| **n != "ga")
        .filter_map(|n| batch::policy::by_name(n, 7, Default::default()))
        .collect()
}

/// Every policy deciding over the queue's kept entries, as the loop keeps them
/// from decision to decision; each decision is checked against a new one's
/// over fresh entries (the queue here does not follow the decisions, and
/// `vickrey-strict` keeps bounds only on a queue that does).
struct Pairs {
    kept: Vec<Box<dyn batch::policy::Policy>>,
}

impl Pairs {
    fn new() -> Pairs {
        Pairs { kept: policies() }
    }

    /// Every policy decides over `q` at `tick_ms` both ways, the kept side as the
    /// live queue asks (decision and order at once), the fresh side as the
    /// simulator does (the decision alone, then the order): the same decision and
    /// order, and the same jobs shown.
    fn agree(&mut self, q: &Queue, tick_ms: i64, procs: u32, step: &str) -> Vec<Decision> {
        let now = secs(q.epoch_ms, tick_ms);
        let jobs = collect(q, tick_ms, procs);
        let snap = jobs.snapshot(now, procs);
        let (waiting, running) = fresh(q, tick_ms, procs);
        let fresh = Snapshot {
            now,
            procs,
            queued: Cow::Owned(
                waiting
                    .iter()
                    .map(|(job, done, preempted)| Queued {
                        job,
                        done: *done,
                        preempted: *preempted,
                    })
                    .collect(),
            ),
            running: running
                .iter()
                .map(|(job, since, done, preempted)| Running {
                    job,
                    since: *since,
                    done_before: *done,
                    preempted: *preempted,
                })
                .collect(),
        };
        assert_eq!(
            format!("{:?}", snap),
            format!("{:?}", fresh),
            "shown at {step}"
        );
        let mut out = Vec::new();
        for (k, mut f) in self.kept.iter_mut().zip(policies()) {
            let (d, order) = k.decide_and_order(&snap);
            let order: Vec<u64> = order.iter().map(|&i| snap.queued[i].job.id).collect();
            let fd = f.decide(&fresh);
            assert_eq!(d, fd, "{} decided otherwise at {step}", k.name());
            assert_eq!(
                order,
                f.order(&fresh),
                "{} ordered otherwise at {step}",
                k.name()
            );
            out.push(d);
        }
        out
    }
}

use batch::policy::Decision;

/// Sets job `id`'s state (with its start, work and suspensions) as the loop
/// would, and files it again.
fn set(q: &mut Queue, id: u64, state: JobState, at_ms: i64) {
    let j = q.jobs.get_mut(&id).expect("a job");
    match state {
        JobState::Running => j.rec.started_ms = Some(at_ms),
        JobState::Suspended => {
            j.rec.done_ms += at_ms - j.rec.started_ms.unwrap_or(at_ms);
            j.preempted += 1;
        }
        _ => {}
    }
    j.rec.state = state;
    q.touched(id);
}

#[test]
fn decisions_over_the_kept_entries_are_those_over_fresh_ones() {
    let mut q = Queue {
        epoch_ms: 1_000,
        ..Queue::default()
    };
    q.set_clock(Clock::new(1_000, std::time::Duration::from_millis(500)));
    // Singles of every width, length, priority and worth (bids that fall as
    // they wait, so the auctions' order moves), and a sweep of at most 3 at once.
    let mut singles = Vec::new();
    for n in 0..12u64 {
        let worth = if n % 2 == 0 {
            Worth::Rate(1_000_000 + 250_000 * (n as i64 % 5))
        } else {
            Worth::Utility(vec![
                (60 + 30 * n as i64, 9_000_000 - 500_000 * n as i64),
                (900, 0),
            ])
        };
        let mut s = spec(1 + (n as u32 * 5) % 4, 30 + 45 * (n % 4), worth);
        s.priority = (n % 3) as u8;
        singles.push(add(
            &mut q,
            std::sync::Arc::new(s),
            None,
            1_000 + 137 * n as i64,
        ));
    }
    let mut sweep = spec(1, 40, Worth::Rate(1_500_000));
    sweep.array = Some("0-11%3".parse().expect("a range"));
    let sweep = std::sync::Arc::new(sweep);
    let tasks: Vec<u64> = (0..12)
        .map(|i| add(&mut q, sweep.clone(), Some((99, i)), 2_600))
        .collect();
    let mut pairs = Pairs::new();
    let procs = 6;
    pairs.agree(&q, 2_000, procs, "the first tick, the sweep not seen yet");
    pairs.agree(&q, 3_000, procs, "the sweep seen");
    // Starts, the sweep's window among them.
    for &id in [singles[0], singles[3], tasks[0], tasks[1]].iter() {
        set(&mut q, id, JobState::Running, 3_000);
    }
    pairs.agree(&q, 3_500, procs, "starts");
    // A submission between ticks: not seen at the end decided before its tick.
    let late = add(
        &mut q,
        std::sync::Arc::new(spec(2, 20, Worth::Rate(9_000_000))),
        None,
        3_700,
    );
    pairs.agree(&q, 3_650, procs, "an end before the new job's tick");
    pairs.agree(&q, 4_000, procs, "the new job seen");
    // A suspension: the job waits again, with its work and its suspension.
    set(&mut q, singles[3], JobState::Suspended, 9_000);
    pairs.agree(&q, 9_000, procs, "a suspension");
    // Cancels: a queued single, a queued task, and the job just submitted.
    for id in [singles[5], tasks[4], late] {
        set(&mut q, id, JobState::Cancelled, 9_500);
    }
    pairs.agree(&q, 9_500, procs, "cancels");
    // The sweep's window moves: its running tasks end, two more start.
    for id in [tasks[0], tasks[1]] {
        set(&mut q, id, JobState::Finished, 12_000);
    }
    pairs.agree(&q, 12_000, procs, "the window open again");
    for id in [tasks[2], tasks[3]] {
        set(&mut q, id, JobState::Running, 12_000);
    }
    pairs.agree(&q, 12_500, procs, "the window moved");
    // The suspended job resumes; another clock files every job again.
    set(&mut q, singles[3], JobState::Running, 13_000);
    q.set_clock(Clock::new(1_000, std::time::Duration::from_secs(2)));
    let decided = pairs.agree(&q, 15_000, procs, "another clock");
    assert!(
        decided.iter().any(|d| !d.start.is_empty()),
        "the last decision starts something: {decided:?}"
    );
}
