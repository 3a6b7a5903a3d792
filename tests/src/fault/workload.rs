//! The users' side of the fault test: [`Workload`] keeps interactive jobs, batch
//! submissions and an array going from the client host and records what was
//! acknowledged and when each job's program started; [`Recovery`] turns those
//! records into the time each service took to come back after a fault.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::*;

/// One batch submission of the workload.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The tag its program appends to `ran`.
    pub tag: String,
    /// The job id the queue acknowledged with.
    pub job: Option<String>,
    /// Acknowledged (`rexec submit` exited 0).
    pub acked: bool,
    /// An array of four tasks.
    pub array: bool,
}

/// One interactive run of the workload.
#[derive(Debug, Clone)]
pub struct Interactive {
    /// It exited 0.
    pub ok: bool,
    /// Its job id, as its ranks saw it.
    pub job: Option<String>,
    /// When its program started on a node (ns since the epoch).
    pub started_ns: Option<u128>,
    /// What `rexec -v` billed, micro-credits.
    pub billed: i64,
}

/// Users at work from the client host; see the module docs.
#[derive(Default)]
pub struct Workload {
    prefix: String,
    stop: AtomicBool,
    next: AtomicU64,
    subs: Mutex<Vec<Submission>>,
    runs: Mutex<Vec<Interactive>>,
}

impl Workload {
    /// A workload whose batch tags start with `prefix` (letters and digits), so
    /// that the workloads of successive faults never share a tag.
    pub fn named(prefix: &str) -> Workload {
        Workload {
            prefix: prefix.into(),
            ..Workload::default()
        }
    }

    /// Runs interactive jobs on this thread until [`Workload::stop`].
    pub fn interactive_loop(&self, f: &FaultCluster) {
        while !self.stop.load(Ordering::SeqCst) {
            let out = f
                .rexec()
                .args([
                    "-v",
                    "-r",
                    "6",
                    "-n",
                    "2",
                    "sh",
                    "-c",
                    "echo START $REXEC_JOB $(date +%s%N); sleep 1",
                ])
                .run();
            let text = out.out();
            let first = text.lines().find(|l| l.starts_with("START "));
            let mut fields = first
                .map(|l| l.split_whitespace().skip(1))
                .into_iter()
                .flatten();
            let job = fields.next().map(str::to_string);
            let started_ns = fields.next().and_then(|s| s.parse().ok());
            let billed = crate::market::parse_bills(&out.stderr)
                .iter()
                .map(|b| b.charged)
                .sum();
            self.runs.lock().expect("runs").push(Interactive {
                ok: out.code == Some(0),
                job,
                started_ns,
                billed,
            });
            if out.code != Some(0) {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// Submits batch jobs (one array first) on this thread until [`Workload::stop`].
    pub fn batch_loop(&self, f: &FaultCluster) {
        let ran = f.shared.path().join("ran");
        let mut first = true;
        while !self.stop.load(Ordering::SeqCst) {
            let tag = format!(
                "{}t{}",
                self.prefix,
                self.next.fetch_add(1, Ordering::SeqCst)
            );
            let script = if first {
                format!(
                    "echo {tag}-$REXEC_ARRAY_INDEX $(date +%s%N) >> {}; sleep 1",
                    ran.display()
                )
            } else {
                format!("echo {tag} $(date +%s%N) >> {}; sleep 1", ran.display())
            };
            let mut args = vec!["submit", "--length", "1m", "-r", "1"];
            if first {
                args.extend(["--array", "0-3"]);
            }
            args.extend(["sh", "-c", &script]);
            let out = f.rexec().args(&args).run();
            let acked = out.code == Some(0);
            self.subs.lock().expect("subs").push(Submission {
                tag,
                job: acked.then(|| out.out().trim().to_string()),
                acked,
                array: first,
            });
            first = false;
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Asks the loops to end after their current run.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// The batch submissions so far.
    pub fn submissions(&self) -> Vec<Submission> {
        self.subs.lock().expect("subs").clone()
    }

    /// The interactive runs so far.
    pub fn interactive(&self) -> Vec<Interactive> {
        self.runs.lock().expect("runs").clone()
    }
}

/// How long each service took to come back after a fault at `at` (ns since the
/// epoch); `None`: not within the wait.
#[derive(Debug, Clone, Copy, Default)]
pub struct Recovery {
    /// To the next batch job's start.
    pub batch: Option<Duration>,
    /// To the next successful interactive job's start.
    pub interactive: Option<Duration>,
    /// To the next debit landing in the ledger.
    pub debit: Option<Duration>,
}

impl Recovery {
    /// Waits up to `limit` for each service to show life after the fault at
    /// `at_ns` (with `debits` in the ledger then).
    pub fn measure(
        f: &FaultCluster,
        work: &Workload,
        at_ns: u128,
        debits: u64,
        limit: Duration,
    ) -> Recovery {
        let since = |ns: u128| Duration::from_nanos((ns - at_ns) as u64);
        let start = Instant::now();
        let mut r = Recovery::default();
        while start.elapsed() < limit
            && (r.batch.is_none() || r.interactive.is_none() || r.debit.is_none())
        {
            if r.debit.is_none() && f.debit_count() > debits {
                r.debit = Some(since(now_ns()));
            }
            if r.batch.is_none() {
                r.batch = f
                    .runs()
                    .values()
                    .flatten()
                    .filter(|&&t| t > at_ns)
                    .min()
                    .map(|&t| since(t));
            }
            if r.interactive.is_none() {
                r.interactive = work
                    .interactive()
                    .iter()
                    .filter(|i| i.ok)
                    .filter_map(|i| i.started_ns)
                    .filter(|&t| t > at_ns)
                    .min()
                    .map(since);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        r
    }
}

/// Prints `values` (seconds) as min/median/max.
pub fn summary(values: &[Duration]) -> String {
    if values.is_empty() {
        return "no value".into();
    }
    let mut v = values.to_vec();
    v.sort();
    format!(
        "min {:.2}s median {:.2}s max {:.2}s (n={})",
        v[0].as_secs_f64(),
        v[v.len() / 2].as_secs_f64(),
        v[v.len() - 1].as_secs_f64(),
        v.len()
    )
}
