//! CPU shares on the real kernel match the market model: CPU-bound jobs launched through
//! the real rexecd, measured from their cgroups' CPU usage, compared with
//! `stride::water_fill` over the bids.
//!
//! Shares are compared as fractions of the CPU the jobs received together, scaled to the
//! node: other work on this shared machine takes CPU from all of them, which is not the
//! market's to divide, and without it the two measures are the same.
//!
//! A test binary of its own, so that no other test runs beside these (they measure CPU),
//! and they run one at a time. It shares the daemon tests' helpers.

#[allow(dead_code)]
#[path = "../daemon/util/mod.rs"]
mod util;

mod background;
mod beside;
mod driving;
mod measure;
mod one_cpu;
mod pinned;
mod placed;

use std::time::{Duration, Instant};

use money::Bid;
use proto::node::{FromNode, Signal, ToNode};

use crate::measure::{errors, model};
use crate::util::{Client, Daemon, can_run, cpu_dir, launch};

/// Worst error of a job over the measured part of a Figure 4 interval, points of one
/// CPU, beside at most modest other work (the benchmark's target is 1).
const MAX_POINTS: f64 = 3.0;
/// Worst error of a job over any judged second of it, points of one CPU: a guard
/// against a controller that swings the weights (a starved or doubled job is 20 to
/// 40 points off, open-loop single threads 9 to 13 in some seconds), not the target.
/// The target (3) is the benchmark's: with caps alone, single seconds were up to 7.3
/// points off on a quiet machine and 8.7 beside the load recipe; with every contended
/// layout of single threads placed and turned (the packed ones capped), 1.1 to 1.7 in
/// ten quiet runs and 1.4 to 3.6 in ten beside the load recipe, 1.5 to 2.9 with the
/// caps' headroom at 1% (docs/BENCHMARKS.md).
/// The guard stays loose: this test also runs beside whatever else the machine does.
const MAX_SECOND_POINTS: f64 = 12.0;

/// Other work, CPUs, above which a contended Figure 4 interval is printed but not
/// judged: the jobs then receive less than one of the node's two CPUs together, and
/// the kernel divides that by how rexecd's group weight falls on each CPU beside the
/// other work's (autogrouped compiles weigh as much as rexecd's whole parent), which
/// neither caps (far above what the jobs receive) nor weights hold to a point.
/// Measured beside 1.4 to 1.7 CPU of other work: 0.5 to 3.3 points over an interval,
/// closed loop and weights alone alike (docs/BENCHMARKS.md).
const MAX_OUTSIDE: f64 = 1.0;

/// Other work, CPUs, above which an uncontended Figure 4 interval is not judged (see
/// the test: then how the jobs fare is how other work falls on the two CPUs).
const MAX_OUTSIDE_UNCONTENDED: f64 = 0.1;

/// Contended Figure 4 intervals (three jobs, four, three again: the market's part)
/// that must be judged for the test to pass. A burst of other work through one of
/// them is excused; a run that judged fewer has not shown Figure 4, and fails rather
/// than passes having judged next to nothing.
const MIN_JUDGED_CONTENDED: usize = 2;

/// Whether a Figure 4 interval is judged, given whether it was contended and the
/// other work (CPUs) beside it: see [`MAX_OUTSIDE`] and [`MAX_OUTSIDE_UNCONTENDED`].
fn judged(contended: bool, outside: f64) -> bool {
    if contended {
        outside <= MAX_OUTSIDE
    } else {
        outside <= MAX_OUTSIDE_UNCONTENDED
    }
}

/// Why a Figure 4 run judged too few of its contended intervals, given each
/// contended interval's other work (CPUs); `None` when it judged enough.
fn too_few_judged(contended_outside: &[f64]) -> Option<String> {
    let n = contended_outside
        .iter()
        .filter(|o| judged(true, **o))
        .count();
    (n < MIN_JUDGED_CONTENDED).then(|| {
        format!(
            "judged {n} of {} contended intervals (at least {MIN_JUDGED_CONTENDED}): other \
             work took {contended_outside:.2?} CPU beside them (at most {MAX_OUTSIDE} judged)",
            contended_outside.len()
        )
    })
}

#[test]
fn figure_4_fails_when_too_few_contended_intervals_were_judged() {
    assert!(judged(true, MAX_OUTSIDE) && !judged(true, MAX_OUTSIDE + 0.01));
    assert!(judged(false, 0.05) && !judged(false, 0.2));
    assert_eq!(too_few_judged(&[0.2, 0.5, 0.9]), None);
    assert_eq!(too_few_judged(&[1.4, 0.5, 0.9]), None);
    let loaded = too_few_judged(&[1.4, 0.5, 1.2]).expect("one of three judged fails");
    assert!(
        loaded.starts_with("judged 1 of 3 contended intervals"),
        "{loaded}"
    );
    assert!(too_few_judged(&[1.4, 1.5, 1.2]).is_some());
    assert!(
        too_few_judged(&[]).is_some(),
        "nothing measured is nothing judged"
    );
}

/// Share tests measure CPU: one at a time (see [`serial`]).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The file every share test binary on the machine locks while it measures.
const MACHINE_LOCK: &str = "rexec-shares-tests.lock";
/// How long a share test waits for another process's share test to finish.
const MACHINE_WAIT: Duration = Duration::from_secs(600);

/// One share test's turn: this binary's other share tests wait on [`SERIAL`], and
/// share test binaries of other checkouts on the machine on [`MACHINE_LOCK`] in the
/// temporary directory (two binaries measuring at once take each other's CPU, and
/// SERIAL holds only within one: seen on 2026-12-06, a figure 4 test of another
/// checkout beside this one's beside-a-loop test).
struct Turn {
    _machine: std::fs::File,
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

/// Waits for this test's turn (see [`Turn`]); fails after [`MACHINE_WAIT`] of
/// another process's share tests, saying so.
async fn serial() -> Turn {
    let serial = SERIAL.lock().await;
    let path = std::env::temp_dir().join(MACHINE_LOCK);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let until = Instant::now() + MACHINE_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!(
                "{}: another process's share tests held it for {MACHINE_WAIT:?}, or: {e}",
                path.display()
            ),
        }
    }
    Turn {
        _machine: file,
        _serial: serial,
    }
}

/// A running CPU-bound job of `threads` busy processes.
struct Busy {
    client: Client,
    cgroup: std::path::PathBuf,
    bid: Bid,
    threads: u32,
}

/// The metering tick, the controller's step: `REXEC_SHARE_TICK` (e.g. `250ms`), else
/// 500 ms.
fn share_tick() -> Duration {
    std::env::var("REXEC_SHARE_TICK")
        .ok()
        .and_then(|t| timespan::parse_duration(&t).ok())
        .unwrap_or(Duration::from_millis(500))
}

fn node_config(parent: &str, control: &str) -> String {
    let pki = crate::util::pki();
    let tls = pki.tls_paths(certs::Role::Node, crate::util::NODE);
    format!(
        r#"name = "{node}"
cert = "{cert}"
key = "{key}"
ca = "{ca}"
cgroup_parent = "{parent}"
# The test's clients do not send heartbeats while they measure.
heartbeat_timeout = "60m"

[market]
share_control = "{control}"
meter_interval = "{tick}ms"
cpus = 2
"#,
        node = crate::util::NODE,
        cert = tls.cert.display(),
        key = tls.key.display(),
        ca = tls.ca.display(),
        // The tick under test (the controller's step); another can be measured the same way.
        tick = share_tick().as_millis(),
    )
}

async fn start_busy(daemon: &Daemon, credits: u32, threads: u32) -> Busy {
    let mut client = daemon.user().await;
    let loops = vec!["while :; do :; done"; threads as usize].join(" & ");
    let script = format!("{loops}; wait");
    let mut req = launch(&["/bin/sh", "-c", &script]);
    let bid = Bid::from_credits(credits);
    req.bid = bid;
    client.start(req).await;
    // The rank's cgroup is the newest job-* directory.
    let dir = cpu_dir(&daemon.parent).unwrap();
    let newest = crate::util::job_dirs(&daemon.parent)
        .into_iter()
        .max_by_key(|n| n.trim_start_matches("job-").parse::<u64>().unwrap_or(0))
        .unwrap();
    Busy {
        client,
        cgroup: dir.join(newest),
        bid,
        threads,
    }
}

/// Kills a job; returns what it was charged (its `Exit`).
async fn stop(mut job: Busy) -> i64 {
    job.client.send(ToNode::Signal(Signal::Kill)).await;
    loop {
        match job.client.recv().await {
            Some(FromNode::Exit(exit)) => return exit.charged,
            None => panic!("the node closed the session without Exit"),
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn three_two_thread_jobs_bidding_1_2_3_get_a_sixth_two_sixths_and_three_sixths() {
    if !can_run("shares") {
        return;
    }
    let _serial = serial().await;
    let parent = format!("rexecd-test-{}-shares123", std::process::id());
    let daemon = Daemon::start_with_config(parent.clone(), &node_config(&parent, "closed"));
    let mut jobs = Vec::new();
    for credits in [1, 2, 3] {
        jobs.push(start_busy(&daemon, credits, 2).await);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let refs: Vec<&Busy> = jobs.iter().collect();
    let m = tokio::task::block_in_place(|| errors(&refs, 2, Duration::from_secs(10)));
    let (points, got, outside) = (m.points, m.got, m.outside);
    eprintln!(
        "shares 1:2:3 measured {got:?}, error {points:?} points of one CPU (other work: \
         {outside:.2} CPU)"
    );
    for (i, p) in points.iter().enumerate() {
        assert!(*p <= 2.0, "job {i} is {p:.2} points off its share: {got:?}");
    }
    for j in jobs {
        stop(j).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn figure_4_live_with_closed_loop_control() {
    if !can_run("shares") {
        return;
    }
    let _serial = serial().await;
    let parent = format!("rexecd-test-{}-figure4", std::process::id());
    // The mode under test; another (`weights`, `open`) can be measured the same way.
    let control = std::env::var("REXEC_SHARE_CONTROL").unwrap_or_else(|_| "closed".into());
    let daemon = Daemon::start_with_config(parent.clone(), &node_config(&parent, &control));
    let interval = Duration::from_secs(
        std::env::var("REXEC_FIGURE4_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10),
    );
    let settle = Duration::from_secs(2);
    let mut present: Vec<Option<Busy>> = Vec::new();
    let mut worst: f64 = 0.0;
    let mut failures = Vec::new();
    let bids = [40, 30, 20, 10];
    // When each job arrived and left, and what its Exit said it was charged.
    let mut arrived = [None::<Instant>; 4];
    let mut left = [None::<Instant>; 4];
    let mut charged = [0i64; 4];
    // Other work beside each contended interval, judged or not.
    let mut contended_outside = Vec::new();
    // A1..D1: arrivals; then A2..D2: departures in the same order.
    for step in 0..8 {
        if step < 4 {
            present.push(Some(start_busy(&daemon, bids[step], 1).await));
            arrived[step] = Some(Instant::now());
        } else if let Some(job) = present[step - 4].take() {
            left[step - 4] = Some(Instant::now());
            charged[step - 4] = stop(job).await;
        }
        if step == 0 {
            // A alone runs free: nothing to divide.
            tokio::time::sleep(Duration::from_secs(2)).await;
            continue;
        }
        if step == 7 {
            break;
        }
        tokio::time::sleep(settle).await;
        let live: Vec<&Busy> = present.iter().flatten().collect();
        let m = tokio::task::block_in_place(|| errors(&live, 2, interval - settle));
        let (points, got, outside) = (m.points, m.got, m.outside);
        let want = model(2, &live);
        let per_second: Vec<String> = m
            .seconds
            .iter()
            .map(|(p, o)| format!("{p:.1}/{o:.2}"))
            .collect();
        eprintln!(
            "interval {step}: model {want:?} measured {got:?} error {points:?} points of one \
             CPU (other work: {outside:.2} CPU); worst per second/other work: {per_second:?}"
        );
        // Without contention each job has a CPU of its own, and the market has nothing to
        // divide: how they fare then is how other work on the machine falls on the two
        // CPUs. That is judged only when there was next to no other work. With
        // contention, an interval is judged unless other work took more than
        // MAX_OUTSIDE (see there).
        let contended = live.len() > 2;
        if contended {
            contended_outside.push(outside);
        }
        if !judged(contended, outside) {
            eprintln!("interval {step}: not judged, other work took {outside:.2} CPU");
            continue;
        }
        for p in &points {
            worst = worst.max(*p);
        }
        if points.iter().any(|p| *p > MAX_POINTS) {
            failures.push(format!("interval {step}: model {want:?} measured {got:?}"));
        }
        // Second by second (see MAX_SECOND_POINTS). A second in which
        // other work took half a CPU or more is not judged (the load balancer then
        // moves the jobs' threads for reasons of its own).
        for (k, (p, o)) in m.seconds.iter().enumerate() {
            if *o < 0.5 && *p > MAX_SECOND_POINTS {
                failures.push(format!(
                    "interval {step}, second {k}: {p:.1} points off (other work {o:.2} CPU)"
                ));
            }
        }
    }
    // The ledger side: under `contention` a job pays its bid while three or more of the
    // single-threaded jobs compete for the two CPUs, and nothing otherwise.
    let mut events: Vec<Instant> = arrived.iter().chain(&left).flatten().copied().collect();
    events.sort();
    let tick = share_tick();
    for j in 0..4 {
        let (a, l) = (arrived[j].unwrap(), left[j].unwrap());
        let mut owed = 0.0;
        for w in events.windows(2) {
            let (from, to) = (w[0], w[1]);
            let here = |k: usize| arrived[k].unwrap() <= from && left[k].unwrap() >= to;
            if from >= a && to <= l && (0..4).filter(|&k| here(k)).count() >= 3 {
                owed += f64::from(bids[j]) * 1e6 * to.duration_since(from).as_secs_f64() / 60.0;
            }
        }
        // One metering tick at each end of the paid stretch, and the test's own view of
        // when a job started or stopped (a launch or kill takes a moment).
        let slack = f64::from(bids[j]) * 1e6 * (2.0 * tick.as_secs_f64() + 0.5) / 60.0;
        eprintln!(
            "job {j}: charged {} predicted {owed:.0} (slack {slack:.0})",
            charged[j]
        );
        assert!(
            (charged[j] as f64 - owed).abs() <= slack,
            "job {j} bidding {} was charged {} micro-credits; the model says {owed:.0}",
            bids[j],
            charged[j]
        );
    }
    failures.extend(too_few_judged(&contended_outside));
    if let Ok(path) = std::env::var("REXEC_SHARES_KEEP_LOG") {
        std::fs::write(path, daemon.log()).unwrap();
    }
    if !failures.is_empty() {
        let log = daemon.log();
        let steps: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("share control"))
            .collect();
        let tail = &steps[steps.len().saturating_sub(30)..];
        panic!(
            "worst {worst:.2} points: {failures:#?}\nlast controller steps:\n{}",
            tail.join("\n")
        );
    }
}
