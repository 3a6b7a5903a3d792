//! The market on a saturated node, measured: how close the CPU shares jobs really get
//! come to the model's (`stride::water_fill` over `stride::tickets_for_bids`), for
//! `nice` levels in one cgroup, open-loop weights, closed-loop weights alone and
//! closed loop (weights and bandwidth caps); how fast shares converge after a job
//! arrives; rexecd's own CPU while metering 100 jobs; and the debits it sends per
//! minute.
//!
//! Drives the real `rexecd` binary (built by `cargo bench`), with jobs launched over a
//! raw node-protocol client (real mutual TLS, a throwaway test PKI) and shares read
//! from the job cgroups' CPU usage. Needs root and a cpu controller; says why and exits
//! otherwise.
//!
//! `cargo bench -p rexecd --bench market` (about 8 minutes), or with `-- --quick`
//! (about 4 minutes, shorter windows, fewer cases).
//!
//! Share errors are in points of one CPU (1 point = 0.01 CPU). Where other
//! work on the machine takes CPU from the jobs, each job's measured share is taken
//! relative to the CPU all the jobs together received (scaled to what the model hands
//! out), so outside load does not count as error; the CPU the jobs received is shown.

mod node;
mod shares;

use node::{Rexecd, Session, ensure_user};
use shares::{convergence, index_at, measured_cpus, round2, summarize, window_errors};

use std::time::{Duration, Instant};

use certs::testing::TestPki;
use money::Bid;
use nix::sys::signal::Signal;
use rexecd::cgroup::{JobCgroups, ParentName};
use rexecd::spawn::{JobChild, JobCommand, JobStdio, JobUser, SpawnPolicy};
use rexecd::sys::{ProcessId, send_signal};
use tokio::runtime::Runtime;

/// The unprivileged user rexecd's jobs run as.
const USER: &str = "rexectest";
/// The test node's name.
const NODE: &str = "n1";
/// How often usage is sampled.
const SAMPLE: Duration = Duration::from_millis(200);
/// The window for the convergence time: shares over the last second.
const CONVERGE_WINDOW: Duration = Duration::from_secs(1);
/// "Converged" means every job within this many points of one CPU.
const CONVERGED_POINTS: f64 = 1.0;
/// The convergence target: windows ending this long after an event should all be
/// within [`CONVERGED_POINTS`].
const CONVERGE_TARGET: Duration = Duration::from_secs(3);

/// Run lengths.
struct Plan {
    /// Two-thread job counts.
    counts: Vec<usize>,
    /// Time before a two-thread window starts.
    settle: Duration,
    /// A two-thread window.
    window: Duration,
    /// One Figure 4 interval where demand exceeds the CPUs.
    interval: Duration,
    /// One Figure 4 interval where it does not (not scored).
    uncontended: Duration,
    /// Measured part of an interval starts this long after its event.
    interval_skip: Duration,
    /// rexecd CPU measurement while metering 100 jobs.
    meter_window: Duration,
}

impl Plan {
    fn full() -> Plan {
        Plan {
            counts: vec![2, 4, 8, 16],
            settle: Duration::from_secs(3),
            window: Duration::from_secs(10),
            interval: Duration::from_secs(10),
            uncontended: Duration::from_secs(5),
            interval_skip: Duration::from_secs(2),
            meter_window: Duration::from_secs(20),
        }
    }

    fn quick() -> Plan {
        Plan {
            counts: vec![2, 16],
            settle: Duration::from_secs(2),
            window: Duration::from_secs(4),
            interval: Duration::from_secs(5),
            uncontended: Duration::from_secs(4),
            interval_skip: Duration::from_secs(2),
            meter_window: Duration::from_secs(10),
        }
    }
}

/// How the weights are set.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Every job's processes in one cgroup, bids mapped to nice levels.
    Nice,
    /// rexecd, `share_control = "open"`.
    Open,
    /// rexecd, `share_control = "weights"` (the controller on weights, no caps).
    Weights,
    /// rexecd, `share_control = "caps"` (the controller with caps, no placement).
    Caps,
    /// rexecd, `share_control = "closed"`.
    Closed,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Nice => "nice",
            Mode::Open => "open",
            Mode::Weights => "weights",
            Mode::Caps => "caps",
            Mode::Closed => "closed",
        }
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    if !rexecd::sys::effective_user().is_root() {
        println!("market: skipped (needs root)");
        return;
    }
    if let Err(e) = rexecd::cgroup::detect::detect() {
        println!("market: skipped ({e})");
        return;
    }
    ensure_user();
    let plan = if quick { Plan::quick() } else { Plan::full() };
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get() as u32);
    let began = Instant::now();
    println!(
        "market benchmark{} on {cpus} CPUs; load average at start: {}",
        if quick { " (--quick)" } else { "" },
        loadavg()
    );
    println!(
        "errors in points of one CPU (1 point = 0.01 CPU), measured shares relative to \
         the CPU the jobs together received"
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let pki = TestPki::new();
    let mut summary = Vec::new();
    for mode in [
        Mode::Nice,
        Mode::Open,
        Mode::Weights,
        Mode::Caps,
        Mode::Closed,
    ] {
        let mut bench = Bench::new(mode, &pki, cpus);
        println!("\n== {}", bench.describe());
        for &n in &plan.counts {
            let r = bench.two_thread(&rt, n, &plan);
            summary.push((mode, format!("{n:>2} two-thread jobs"), r));
        }
        let r = bench.figure4(&rt, &plan);
        println!("(* uncontended: demand at most the CPUs; shown, not scored)");
        summary.push((mode, "Figure 4 (contended)".to_string(), r));
    }
    println!(
        "\n== summary: share error, points of one CPU (targets for closed loop: mean <= 0.5, worst <= 1, every 1 s window from 2 s <= 3)\n\
         first: longest time from an event to the first 1 s window with every job within 1 point;\n\
         held: share of the 1 s windows ending 3 s or more after an event with every job within 1 point;\n\
         window: worst error in those windows"
    );
    println!(
        "{:<7} {:<26} {:>6} {:>6} {:>8} {:>6} {:>6}",
        "mode", "case", "mean", "worst", "first", "held", "window"
    );
    for (mode, case, r) in &summary {
        println!(
            "{:<7} {:<26} {:>6.2} {:>6.2} {:>8} {:>5.0}% {:>6.2}",
            mode.name(),
            case,
            r.mean,
            r.worst,
            r.converged_text(),
            r.held_percent(),
            r.converged.worst_window
        );
    }
    metering(&rt, &pki, &plan);
    println!(
        "\nload average at end: {}; whole run {:.0} s",
        loadavg(),
        began.elapsed().as_secs_f64()
    );
}

/// The result of one case.
#[derive(Clone, Copy)]
struct CaseResult {
    mean: f64,
    worst: f64,
    /// How shares converged after the case's events.
    converged: Convergence,
}

/// How shares converged after events, over one-second windows.
#[derive(Clone, Copy)]
struct Convergence {
    /// Longest time from an event to the first window with every job within
    /// [`CONVERGED_POINTS`]; `None` if after some event no window was.
    first: Option<Duration>,
    /// Windows ending [`CONVERGE_TARGET`] or more after their event ...
    windows: usize,
    /// ... and how many of them had every job within [`CONVERGED_POINTS`].
    within: usize,
    /// Worst error of any job in those windows, points of one CPU.
    worst_window: f64,
}

impl Convergence {
    const NONE: Convergence = Convergence {
        first: Some(Duration::ZERO),
        windows: 0,
        within: 0,
        worst_window: 0.0,
    };

    /// Both events' convergence together.
    fn and(self, other: Convergence) -> Convergence {
        Convergence {
            first: self.first.zip(other.first).map(|(a, b)| a.max(b)),
            windows: self.windows + other.windows,
            within: self.within + other.within,
            worst_window: self.worst_window.max(other.worst_window),
        }
    }

    fn first_text(&self) -> String {
        match self.first {
            Some(d) => format!("{:.1} s", d.as_secs_f64()),
            None => "never".to_string(),
        }
    }

    fn held_percent(&self) -> f64 {
        self.within as f64 / self.windows.max(1) as f64 * 100.0
    }
}

impl CaseResult {
    fn converged_text(&self) -> String {
        self.converged.first_text()
    }

    fn held_percent(&self) -> f64 {
        self.converged.held_percent()
    }
}

/// One job under test.
struct Job {
    bid: Bid,
    threads: u32,
    runner: Runner,
}

enum Runner {
    /// A rank of rexecd: its session and its cgroup id.
    Rexecd { session: Box<Session>, cgroup: u64 },
    /// Processes in the shared nice cgroup.
    Nice { children: Vec<JobChild> },
}

/// A mode's node: a running rexecd, or the one cgroup of the nice mode.
struct Bench<'a> {
    mode: Mode,
    cpus: u32,
    cgroups: JobCgroups,
    rexecd: Option<Rexecd>,
    pki: &'a TestPki,
    root: JobUser,
    /// The bid that maps to nice 0 in the nice mode (the case's highest).
    nice_top: i64,
}

impl<'a> Bench<'a> {
    fn new(mode: Mode, pki: &'a TestPki, cpus: u32) -> Bench<'a> {
        let root = JobUser::resolve("root", SpawnPolicy { allow_root: true }).unwrap();
        let (cgroups, rexecd) = match mode {
            Mode::Nice => {
                let parent = format!("rexec-bench-nice-{}", std::process::id());
                let cg = JobCgroups::detect(&ParentName::new(&parent).unwrap()).unwrap();
                cg.create_job(1).unwrap();
                (cg, None)
            }
            Mode::Open | Mode::Weights | Mode::Caps | Mode::Closed => {
                let d = Rexecd::start(pki, mode.name(), mode.name(), "contention");
                let cg = JobCgroups::detect(&ParentName::new(&d.parent).unwrap()).unwrap();
                (cg, Some(d))
            }
        };
        Bench {
            mode,
            cpus,
            cgroups,
            rexecd,
            pki,
            root,
            nice_top: 100_000_000,
        }
    }

    fn describe(&self) -> String {
        match self.mode {
            Mode::Nice => "nice levels, every job in one cgroup (top bid nice 0)".to_string(),
            Mode::Open => "rexecd, share_control = \"open\"".to_string(),
            Mode::Weights => "rexecd, share_control = \"weights\"".to_string(),
            Mode::Caps => "rexecd, share_control = \"caps\"".to_string(),
            Mode::Closed => "rexecd, share_control = \"closed\"".to_string(),
        }
    }

    /// Starts a CPU-bound job of `threads` busy loops bidding `bid`.
    fn start(&self, rt: &Runtime, bid: Bid, threads: u32) -> Job {
        let runner = match &self.rexecd {
            None => {
                let nice = nice_for(bid.micros_per_minute(), self.nice_top);
                // rexecd's spawn registers the child's pidfd and pipes with `rt`.
                let _entered = rt.enter();
                let children = (0..threads)
                    .map(|_| {
                        let command = JobCommand::new("/usr/bin/nice").args([
                            "-n",
                            &nice.to_string(),
                            "/bin/sh",
                            "-c",
                            "while :; do :; done",
                        ]);
                        let (mut child, _report) = command
                            .spawn(&self.root, self.cgroups.join(1).unwrap(), JobStdio::Pipes)
                            .unwrap();
                        drop(child.stdin.take());
                        child
                    })
                    .collect();
                Runner::Nice { children }
            }
            Some(d) => {
                let script = vec!["while :; do :; done"; threads as usize].join(" & ");
                let (session, pid) = rt.block_on(async {
                    let mut s = Session::open(&d.addr, self.pki).await;
                    let pid = s.launch(&["/bin/sh", "-c", &script], bid).await;
                    (s, pid)
                });
                let cgroup = self
                    .cgroups
                    .jobs()
                    .unwrap()
                    .into_iter()
                    .find(|&id| {
                        self.cgroups
                            .procs(id)
                            .is_ok_and(|p| p.iter().any(|p| p.0 == pid))
                    })
                    .expect("the job's cgroup");
                Runner::Rexecd {
                    session: Box::new(session),
                    cgroup,
                }
            }
        };
        Job {
            bid,
            threads,
            runner,
        }
    }

    /// CPU a job has used, nanoseconds.
    fn usage(&self, job: &Job) -> u64 {
        match &job.runner {
            Runner::Rexecd { cgroup, .. } => self
                .cgroups
                .usage(*cgroup)
                .map_or(0, |d| d.as_nanos() as u64),
            Runner::Nice { children } => children
                .iter()
                .filter_map(JobChild::id)
                .map(schedstat_ns)
                .sum(),
        }
    }

    fn stop(&self, rt: &Runtime, job: Job) {
        match job.runner {
            Runner::Rexecd { mut session, .. } => rt.block_on(session.kill()),
            Runner::Nice { children } => {
                for mut c in children {
                    if let Some(pid) = c.id() {
                        let _ = send_signal(ProcessId(pid as i32), Signal::SIGKILL);
                    }
                    let _ = rt.block_on(c.wait());
                }
            }
        }
    }

    /// The model's CPUs for `jobs`.
    fn model(&self, jobs: &[&Job]) -> Vec<f64> {
        let jobs: Vec<(Bid, u32)> = jobs.iter().map(|j| (j.bid, j.threads)).collect();
        stride::model_cpus(self.cpus, &jobs)
    }

    /// Samples the usage of `jobs` every [`SAMPLE`] for `length`.
    fn record(&self, jobs: &[&Job], length: Duration) -> Vec<(Instant, Vec<u64>)> {
        let start = Instant::now();
        let mut out = Vec::new();
        loop {
            let now = Instant::now();
            out.push((now, jobs.iter().map(|j| self.usage(j)).collect()));
            if now >= start + length {
                return out;
            }
            std::thread::sleep(SAMPLE.min(start + length - now));
        }
    }

    /// `n` two-thread jobs with bids from 100 down to 1 credit (geometric).
    fn two_thread(&mut self, rt: &Runtime, n: usize, plan: &Plan) -> CaseResult {
        self.nice_top = 100_000_000;
        let jobs: Vec<Job> = (0..n)
            .map(|k| {
                let exp = if n == 1 {
                    0.0
                } else {
                    k as f64 / (n - 1) as f64
                };
                let micros = (1e6 * 100f64.powf(1.0 - exp)).round() as i64;
                self.start(rt, Bid::new(micros).expect("a positive rate"), 2)
            })
            .collect();
        let refs: Vec<&Job> = jobs.iter().collect();
        let model = self.model(&refs);
        let samples = self.record(&refs, plan.settle + plan.window);
        let arrival = samples[0].0;
        let from = index_at(&samples, arrival + plan.settle);
        let (errors, got) = window_errors(&samples[from..], &model, self.cpus);
        let converged = convergence(&samples, &model, self.cpus);
        let r = summarize(&errors, converged);
        println!(
            "{n:>2} two-thread jobs, bids 100..1: mean {:.2} worst {:.2} points, first within 1 \
             point after {}, held {:.0}%; jobs got {:.2} of {} CPUs",
            r.mean,
            r.worst,
            r.converged_text(),
            r.held_percent(),
            got,
            self.cpus
        );
        if n <= 4 {
            println!(
                "     bids {:?}  model CPUs {:?}  errors {:?}",
                refs.iter()
                    .map(|j| j.bid.micros_per_minute() as f64 / 1e6)
                    .collect::<Vec<_>>(),
                round2(&model),
                round2(&errors)
            );
        }
        for j in jobs {
            self.stop(rt, j);
        }
        self.wait_empty();
        r
    }

    /// The paper's Figure 4: A, B, C, D (single-threaded, bids 40, 30, 20, 10) arrive one
    /// interval apart, then leave in the same order.
    fn figure4(&mut self, rt: &Runtime, plan: &Plan) -> CaseResult {
        let scenario = stride::scenario::figure4();
        self.nice_top = scenario
            .jobs
            .iter()
            .map(|j| j.bid.micros_per_minute())
            .max()
            .unwrap_or(1);
        let mut live: Vec<Option<Job>> = scenario.jobs.iter().map(|_| None).collect();
        let mut all_errors = Vec::new();
        let mut worst_convergence = Convergence::NONE;
        for pair in scenario.events.windows(2) {
            let (event, next) = (&pair[0], &pair[1]);
            let sj = &scenario.jobs[event.job];
            match event.kind {
                stride::scenario::EventKind::Arrive => {
                    live[event.job] = Some(self.start(rt, sj.bid, sj.demand));
                }
                stride::scenario::EventKind::Depart => {
                    if let Some(j) = live[event.job].take() {
                        self.stop(rt, j);
                    }
                }
            }
            let present: Vec<usize> = (0..live.len()).filter(|&k| live[k].is_some()).collect();
            let refs: Vec<&Job> = present.iter().map(|&k| live[k].as_ref().unwrap()).collect();
            let model = self.model(&refs);
            // Where demand is at most the CPUs the market has nothing to divide: each
            // job should get all it can use, and what it gets depends on outside load
            // only. Those intervals are shown, not scored, and kept short.
            let contended = refs.iter().map(|j| j.threads).sum::<u32>() > self.cpus;
            let length = if contended {
                plan.interval
            } else {
                plan.uncontended
            };
            let samples = self.record(&refs, length);
            let from = index_at(&samples, samples[0].0 + plan.interval_skip);
            let (errors, got) = window_errors(&samples[from..], &model, self.cpus);
            let converged = convergence(&samples, &model, self.cpus);
            let names: Vec<&str> = present
                .iter()
                .map(|&k| scenario.jobs[k].name.as_str())
                .collect();
            println!(
                "Figure 4 {}-{}{} {:<8} model {:<24} measured {:<24} errors {:<24} max {:.2}, \
                 first within 1 point {}, held {:.0}%, worst 1 s window {:.2}; jobs got {:.2} CPUs",
                event.label,
                next.label,
                if contended { ' ' } else { '*' },
                names.join(","),
                format!("{:?}", round2(&model)),
                format!("{:?}", round2(&measured_cpus(&samples[from..], &model))),
                format!("{:?}", round2(&errors)),
                errors.iter().copied().fold(0.0, f64::max),
                converged.first_text(),
                converged.held_percent(),
                converged.worst_window,
                got
            );
            if contended {
                all_errors.extend(errors);
                worst_convergence = worst_convergence.and(converged);
            }
        }
        // The last event (D2) takes the last job away.
        for j in live.into_iter().flatten() {
            self.stop(rt, j);
        }
        self.wait_empty();
        summarize(&all_errors, worst_convergence)
    }

    /// Waits until rexecd has removed every job cgroup (the next case starts clean).
    fn wait_empty(&self) {
        if self.rexecd.is_none() {
            return;
        }
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end && !self.cgroups.jobs().unwrap_or_default().is_empty() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Bench<'_> {
    fn drop(&mut self) {
        if self.rexecd.is_none() {
            let _ = self.cgroups.destroy(1);
            let _ = self.cgroups.remove_parent();
        }
    }
}

/// The nice level whose kernel weight is nearest (in ratio) to `bid / top` of nice 0's.
fn nice_for(bid: i64, top: i64) -> i32 {
    // sched_prio_to_weight for nice 0..=19.
    const WEIGHTS: [f64; 20] = [
        1024.0, 820.0, 655.0, 526.0, 423.0, 335.0, 272.0, 215.0, 172.0, 137.0, 110.0, 87.0, 70.0,
        56.0, 45.0, 36.0, 29.0, 23.0, 18.0, 15.0,
    ];
    let want = 1024.0 * (bid.max(1) as f64 / top as f64);
    (0..20)
        .min_by(|&a, &b| {
            let da = (WEIGHTS[a] / want).ln().abs();
            let db = (WEIGHTS[b] / want).ln().abs();
            da.total_cmp(&db)
        })
        .unwrap_or(0) as i32
}

/// Nanoseconds `pid` has run (the first field of /proc/PID/schedstat).
fn schedstat_ns(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// User plus system CPU of `pid` (all its threads), from /proc/PID/stat.
fn process_cpu(pid: u32) -> Duration {
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rfind(')')
        .map(|i| stat[i + 1..].split_whitespace().collect())
        .unwrap_or_default();
    // After the command name: state is field 3; utime 14 and stime 15.
    let get = |n: usize| {
        fields
            .get(n - 3)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Duration::from_secs_f64((get(14) + get(15)) as f64 / ticks)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// rexecd's own CPU while it meters 100 sleeping jobs, and the debits it sends (the
/// `paper` policy makes every present job pay, so every rank owes every interval).
fn metering(rt: &Runtime, pki: &TestPki, plan: &Plan) {
    const JOBS: usize = 100;
    println!(
        "\n== metering {JOBS} sleeping jobs (rexecd closed loop, policy paper, meter_interval 1s, \
         debit_interval 10s, no heartbeats)"
    );
    let d = Rexecd::start(pki, "meter", "closed", "paper");
    let idle_from = process_cpu(d.pid());
    std::thread::sleep(Duration::from_secs(3));
    let idle = process_cpu(d.pid()) - idle_from;
    let mut sessions = Vec::new();
    rt.block_on(async {
        for k in 0..JOBS {
            let mut s = Session::open(&d.addr, pki).await;
            let bid = Bid::new(1_000_000 + k as i64).expect("a positive rate");
            s.launch(&["/bin/sleep", "3600"], bid).await;
            sessions.push(s);
        }
    });
    // Let every rank pass its first debit interval, so the count below is steady.
    std::thread::sleep(Duration::from_secs(11));
    let (cpu0, debits0, t0) = (process_cpu(d.pid()), d.debits_logged(), Instant::now());
    std::thread::sleep(plan.meter_window);
    let (cpu1, debits1, t1) = (process_cpu(d.pid()), d.debits_logged(), Instant::now());
    let secs = t1.duration_since(t0).as_secs_f64();
    let cpu = (cpu1 - cpu0).as_secs_f64() / secs * 100.0;
    let per_minute = (debits1 - debits0) as f64 / secs * 60.0 * (100.0 / JOBS as f64);
    println!(
        "rexecd CPU with no jobs: {:.2}% of one CPU (3 s)",
        idle.as_secs_f64() / 3.0 * 100.0
    );
    println!(
        "rexecd CPU metering {JOBS} jobs: {cpu:.2}% of one CPU over {secs:.0} s (target < 1%)"
    );
    println!(
        "debits per minute per 100 jobs: {per_minute:.0} ({} in {secs:.0} s)",
        debits1 - debits0
    );
    rt.block_on(async {
        for mut s in sessions {
            s.kill().await;
        }
    });
}
