//! Job arrays at scale, the server's side of it: (1) one `--array 0-9999`
//! submission taken in, from the signed job to every task committed
//! (`synchronous = FULL`) and in the live queue (what `ops` does after checking
//! the signature once), median of 5; (2) one decision with 100,000 queued
//! tasks (ten arrays of 10,000) over 1,000 nodes of 4 CPUs, 5% of it free: the
//! snapshot the loop builds from the live queue (`sched::snapshot::collect`)
//! and each policy's decision and order over it, median of 5. Targets: the
//! array in at most 0.5 s, the decision within 10 ms for every policy but the
//! GA, and the GA's within its budget (50 ms) and the snapshot.
//!
//! (3) The same decision over 100,000 queued single jobs.
//!
//! `cargo run --release -p batchd --example array_bench [submit] [arrays] [singles]`
//! (every part without arguments; one part alone, e.g. under
//! `valgrind --tool=callgrind`, to count its instructions; `BENCH_POLICIES=fifo,easy`
//! decides with those policies only; `BENCH_REPS=21` repeats each measure 21
//! times, for a median that holds on a busy machine).

use std::sync::Arc;
use std::time::{Duration, Instant};

use batch::policy::{self, NAMES, ga::GaConfig};
use batchd::queue::{Job, Queue};
use batchd::sched::snapshot;
use batchd::store::{Store, Write};
use proto::batch::{ArraySpec, JobSpec, JobState, SignedJob, Worth};
use proto::node::JobId;

/// Repetitions of each measure (`BENCH_REPS`, 5 unless set).
fn reps() -> usize {
    std::env::var("BENCH_REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5)
}

fn spec(id: u64, array: &str) -> JobSpec {
    JobSpec {
        id: JobId(id),
        user: "alice".into(),
        argv: vec!["./sweep".into(), "--point".into()],
        // About a login shell's environment.
        env: (0..40)
            .map(|i| (format!("VAR{i}"), "x".repeat(40)))
            .collect(),
        cwd: Some("/home/alice".into()),
        width: 1,
        length_s: 600,
        worth: Worth::Rate(1_000_000),
        priority: 1,
        max_attempts: 3,
        signed_at: 0,
        expires_at: u64::MAX,
        array: Some(array.parse::<ArraySpec>().expect("a range")),
        after: Vec::new(),
        options: Default::default(),
    }
}

fn signed(spec: &JobSpec) -> SignedJob {
    // A real signature and certificate are about this size.
    SignedJob {
        spec: postcard::to_allocvec(spec).expect("encodes"),
        signature: vec![1; 72],
        cert: vec![2; 600],
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let dir =
        tempfile::tempdir_in(std::env::var("BENCH_DIR").unwrap_or_else(|_| "/var/tmp".into()))
            .expect("temp dir");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let parts: Vec<String> = std::env::args().skip(1).collect();
    let run = |part: &str| parts.is_empty() || parts.iter().any(|p| p == part);

    if run("submit") {
        submit(&dir, &rt);
    }
    let procs = 4000;
    if run("arrays") {
        // (2) One decision with 100,000 queued tasks: ten arrays of 10,000.
        let mut q = Queue::default();
        let mut seq = 0;
        for a in 0..10u64 {
            let s = spec(0x10_0000 * (a + 1), "0-9999");
            let signed = Arc::new(signed(&s));
            let mut array = batchd::arrays::tasks(&s, signed, seq, 0);
            seq += 10_000;
            let s = Arc::new(s);
            for task in array.tasks.drain(..) {
                q.insert(Job::new(task, s.clone()));
            }
        }
        decisions(&mut q, procs, "tasks (10 arrays)");
    }
    if run("singles") {
        // (3) The same with 100,000 single jobs (no array window to bound it).
        // Their specs alike, shared to spare the machine's memory.
        let mut q = Queue::default();
        let mut s = spec(0x1000_0000, "0-0");
        s.array = None;
        let signed = Arc::new(signed(&s));
        let s = Arc::new(s);
        for n in 0..100_000u64 {
            let rec = batchd::store::JobRecord::queued(
                n as i64,
                0x1000_0000 + n,
                "alice".into(),
                signed.clone(),
                0,
            );
            q.insert(Job::new(rec, s.clone()));
        }
        decisions(&mut q, procs, "single jobs");
    }
}

/// (1) A 10,000-task array, taken in: stored, committed and queued.
fn submit(dir: &tempfile::TempDir, rt: &tokio::runtime::Runtime) {
    let mut times = Vec::new();
    for rep in 0..reps() {
        let (store, _) =
            Store::open(&dir.path().join(format!("q{rep}.db")), 1024, 0).expect("store");
        let s = spec(0x1000, "0-9999%4");
        let signed = Arc::new(signed(&s));
        let mut q = Queue::default();
        let t = Instant::now();
        let mut array = batchd::arrays::tasks(&s, signed, 0, 1);
        rt.block_on(store.write(Write::InsertArray(Box::new(array.clone()))))
            .expect("committed");
        let s = Arc::new(s);
        for task in array.tasks.drain(..) {
            q.insert(Job::new(task, s.clone()));
        }
        times.push(t.elapsed());
        assert_eq!(q.jobs.len(), 10_000);
        store.close();
    }
    let m = median(times);
    println!(
        "array of 10,000 tasks submitted (stored, committed, queued): median {:.1} ms of {}; target 500 ms: {}",
        m.as_secs_f64() * 1e3,
        reps(),
        if m <= Duration::from_millis(500) {
            "met"
        } else {
            "MISSED"
        }
    );
}

/// One decision of every policy over `q` with 95% of `procs` busy with its
/// first jobs: the snapshot (`sched::snapshot::collect`), the policy's
/// decision and order (`decide_and_order`, as the loop asks), and what the
/// loop does with them besides starting
/// jobs (each start's queue id, the order kept for `rexec queue`).
fn decisions(q: &mut Queue, procs: u32, what: &str) {
    let mut busy = 0;
    for id in q.order.values().copied().collect::<Vec<_>>() {
        if busy == procs - procs / 20 {
            break;
        }
        let j = q.jobs.get_mut(&id).expect("a job");
        j.rec.state = JobState::Running;
        j.rec.started_ms = Some(0);
        q.touched(id);
        busy += 1;
    }
    println!(
        "\nOne decision with {} queued {what} and {busy} running, {procs} processors; median of {}:\n",
        q.jobs.len() - busy as usize,
        reps()
    );
    println!("| policy | snapshot (ms) | decision (ms) | total (ms) | started | verdict |");
    println!("|---|---|---|---|---|---|");
    let only = std::env::var("BENCH_POLICIES").ok();
    let chosen = |name: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|p| p == name))
    };
    for name in NAMES.iter().filter(|n| chosen(n)) {
        let (mut snaps, mut decs, mut totals) = (Vec::new(), Vec::new(), Vec::new());
        let mut started = 0;
        for rep in 0..reps() {
            let mut p = policy::by_name(name, 1, GaConfig::default()).expect("a policy");
            let t = Instant::now();
            let jobs = snapshot::collect(q, 60_000 + rep as i64 * 1000, procs);
            let snap = jobs.snapshot(60 + rep as i64, procs);
            let t1 = Instant::now();
            let (d, order) = p.decide_and_order(&snap);
            let ids: Vec<u64> = d.start.iter().filter_map(|s| jobs.id_of(*s)).collect();
            let kept: Vec<u64> = jobs.waiting_ids_at(&order);
            let t2 = Instant::now();
            assert_eq!(ids.len(), d.start.len());
            std::hint::black_box(kept);
            started = d.start.len();
            snaps.push(t1 - t);
            decs.push(t2 - t1);
            totals.push(t2 - t);
        }
        let total = median(totals);
        // Every policy within 10 ms; the GA, which searches until its budget is
        // spent, within its budget and the snapshot.
        let target = if *name == "ga" {
            GaConfig::default().budget + median(snaps.clone())
        } else {
            Duration::from_millis(10)
        };
        let verdict = match (total <= target, *name == "ga") {
            (true, false) => "met",
            (true, true) => "met (its budget)",
            (false, false) => "MISSED",
            (false, true) => "MISSED (over its budget)",
        };
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} | {started} | {verdict} |",
            median(snaps).as_secs_f64() * 1e3,
            median(decs).as_secs_f64() * 1e3,
            total.as_secs_f64() * 1e3,
        );
    }
}
