//! A drain through the batch queue: an array of `DRAIN_TASKS` (400) one-second
//! tasks (`sleep 1`) on `DRAIN_NODES` × `DRAIN_CPUS` (2 × 2) processors, one
//! submission, under FIFO with a 1 s tick. The queue gives a processor out at the
//! end that frees it (`batchd::sched::clock`), so the drain should take about
//! tasks × 1 s / processors, the ideal (100 s); a queue deciding only on its ticks
//! would lose up to a tick per task. Prints one line:
//!
//! `drain: N tasks on P processors: W s wall, ideal I s, ratio R`
//!
//! with the wall time from the submission to the last task's end as the queue
//! heard it, and checks every task finished. `deploy/bench-drain` builds and runs
//! it: `cargo bench -p rexec-tests --bench batch_drain` (the daemons built in the
//! same profile, or in `REXEC_E2E_BIN_DIR`).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use proto::batch::{BatchReply, JobState, Worth};
use proto::node::JobId;
use rexec_tests::batch::{BatchMarket, BatchOptions, log_field};
use rexec_tests::cluster::bin_dir;

fn env_number(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn main() {
    for b in ["batchd", "rexecd", "accountd", "vexecd"] {
        if !bin_dir().join(b).exists() {
            println!(
                "drain: {b} is not built in {}; run `cargo build --release --bins` first",
                bin_dir().display()
            );
            std::process::exit(1);
        }
    }
    if !testhost::is_root() {
        println!("drain: needs root (real cgroups and a test user); skipped");
        std::process::exit(1);
    }
    let tasks = env_number("DRAIN_TASKS", 400).max(1);
    let nodes = env_number("DRAIN_NODES", 2).max(1);
    let cpus = env_number("DRAIN_CPUS", 2).max(1);
    let procs = nodes * cpus;
    let m = BatchMarket::start(BatchOptions {
        nodes: nodes as usize,
        cpus,
        policy: "fifo",
        tick: "1s",
        ..BatchOptions::default()
    });
    let array = JobId(0x4000_0000);
    let mut spec = m.spec(array.0, &["sleep", "1"], 1, 10, Worth::Rate(1_000));
    spec.array = Some(format!("0-{}", tasks - 1).parse().expect("an array range"));
    let submitted = now_ms();
    let began = Instant::now();
    match m.submit(&spec) {
        Ok(BatchReply::Submitted(_)) => {}
        other => panic!("drain: the array was not taken: {other:?}"),
    }
    // Wait for every task's end in the queue's log (each logged once committed).
    let ended = |log: &str| {
        log.lines()
            .filter(|l| l.contains("batchd::sched::apply: ") && l.contains(": ended "))
            .filter_map(|l| log_field(l, "at_ms"))
            .collect::<Vec<i64>>()
    };
    let limit = Duration::from_secs(60 + 5 * u64::from(tasks) / u64::from(procs));
    let log = loop {
        let log = m.batchd.log();
        if ended(&log).len() >= tasks as usize {
            break log;
        }
        assert!(
            began.elapsed() < limit,
            "drain: {} of {tasks} tasks ended in {limit:?}",
            ended(&log).len()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let last = ended(&log).into_iter().max().unwrap_or(submitted);
    let failed: Vec<u32> = (0..tasks)
        .filter(|&i| m.status(proto::batch::array::task_id(array, i).0).state != JobState::Finished)
        .collect();
    assert!(failed.is_empty(), "drain: tasks did not finish: {failed:?}");
    let wall = (last - submitted) as f64 / 1000.0;
    let ideal = f64::from(tasks) / f64::from(procs);
    println!(
        "drain: {tasks} tasks on {procs} processors: {wall:.1} s wall, ideal {ideal:.0} s, ratio {:.3}",
        wall / ideal
    );
}
