//! A burst of launches on one node: 50 clients at once, each a new `rexec -n 1
//! /bin/true` process run again as soon as the last one ends, 2,000 launches in
//! all. Prints launches per second, the latency spread, rexecd's peak resident
//! memory and open descriptors (sampled from /proc every few milliseconds), and
//! checks that every launch succeeded and that no job cgroup is left.
//!
//! `cargo build --release -p rexec -p rexecd && cargo bench -p rexec-tests --bench launch_burst`
//!
//! `BURST_CLIENTS` and `BURST_LAUNCHES` change the two numbers (`BURST_CLIENTS=1`
//! gives serial launches). Also printed: rexecd's CPU per launch with its reaped jobs
//! (utime, stime, cutime and cstime from /proc/PID/stat, before and after), the
//! figure a vfork-style spawn is meant to cut.

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use rexec_tests::cluster::{Cluster, bin, bin_dir};

const CLIENTS: usize = 50;
const LAUNCHES: usize = 2000;
const TARGET_PER_SECOND: f64 = 500.0;

fn main() {
    for b in ["rexec", "rexecd"] {
        if !bin_dir().join(b).exists() {
            println!(
                "launch_burst: {b} is not built in {}; run `cargo build --release -p rexec -p rexecd` first",
                bin_dir().display()
            );
            return;
        }
    }
    if !testhost::is_root() {
        println!("launch_burst: needs root (real cgroups); skipped");
        return;
    }
    let clients = env_number("BURST_CLIENTS", CLIENTS);
    let launches = env_number("BURST_LAUNCHES", LAUNCHES);
    let cluster = Cluster::start(1);
    let pid = cluster.nodes[0].pid().expect("rexecd runs");
    let rexec = bin("rexec");

    let left = AtomicUsize::new(launches);
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let latencies: Mutex<Vec<f64>> = Mutex::new(Vec::with_capacity(launches));
    let done = AtomicBool::new(false);
    let mut peak = Peak::default();
    let cpu_before = cpu_ticks(pid);
    let start = Instant::now();
    thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut peak = Peak::default();
            while !done.load(Ordering::Relaxed) {
                peak.sample(pid);
                thread::sleep(Duration::from_millis(5));
            }
            peak.sample(pid);
            peak
        });
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                s.spawn(|| {
                    while left
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                        .is_ok()
                    {
                        let began = Instant::now();
                        let out = Command::new(&rexec)
                            .args(["-n", "1", "/bin/true"])
                            .env("REXEC_CONFIG", &cluster.config)
                            .stdin(Stdio::null())
                            .stdout(Stdio::null())
                            .stderr(Stdio::piped())
                            .output();
                        let ms = began.elapsed().as_secs_f64() * 1e3;
                        match out {
                            Ok(o) if o.status.success() => {
                                latencies.lock().expect("latencies").push(ms)
                            }
                            Ok(o) => failures.lock().expect("failures").push(format!(
                                "{}: {}",
                                o.status,
                                String::from_utf8_lossy(&o.stderr).trim()
                            )),
                            Err(e) => failures
                                .lock()
                                .expect("failures")
                                .push(format!("cannot run rexec: {e}")),
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().expect("a client thread panicked");
        }
        done.store(true, Ordering::Relaxed);
        peak = sampler.join().expect("the sampler panicked");
    });
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_ticks(pid)
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    let failures = failures.into_inner().expect("failures");
    let mut ms = latencies.into_inner().expect("latencies");
    ms.sort_by(f64::total_cmp);
    let rate = ms.len() as f64 / elapsed;
    let at = |q: f64| ms.get(((ms.len() as f64 * q) as usize).min(ms.len().saturating_sub(1)));

    // Every job cgroup goes before its `Exit` is sent; give a slow machine a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cluster.job_cgroups().is_empty() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    let left_behind = cluster.job_cgroups();

    println!("burst of {launches} launches of /bin/true by {clients} concurrent clients, one node");
    println!(
        "  {:.0} launches/s ({} ok in {:.2} s), latency median {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        rate,
        ms.len(),
        elapsed,
        at(0.5).copied().unwrap_or(f64::NAN),
        at(0.9).copied().unwrap_or(f64::NAN),
        at(0.99).copied().unwrap_or(f64::NAN),
        ms.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "  rexecd: peak RSS {} KiB (VmHWM {} KiB), peak open files {}, threads at most {}",
        peak.rss_kib, peak.hwm_kib, peak.fds, peak.threads
    );
    if let Some(ticks) = cpu {
        // USER_HZ is 100 on every Linux build this runs on.
        let ms = ticks as f64 * 10.0 / ms.len().max(1) as f64;
        println!("  rexecd + its jobs: {ms:.2} ms CPU per launch");
    }
    println!(
        "  failures: {}; job cgroups left: {}",
        failures.len(),
        left_behind.len()
    );
    for f in failures.iter().take(5) {
        println!("    {f}");
    }
    println!(
        "  target >= {TARGET_PER_SECOND:.0}/s: {}",
        if rate >= TARGET_PER_SECOND {
            "met"
        } else {
            "NOT met"
        }
    );
    assert!(failures.is_empty(), "{} launches failed", failures.len());
    assert!(left_behind.is_empty(), "job cgroups left: {left_behind:?}");
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

/// utime + stime + cutime + cstime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name (which may hold spaces) start at field 3.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    Some(fields.iter().sum())
}

/// The largest values seen in /proc/PID.
#[derive(Debug, Default, Clone, Copy)]
struct Peak {
    rss_kib: u64,
    hwm_kib: u64,
    fds: usize,
    threads: u64,
}

impl Peak {
    fn sample(&mut self, pid: u32) {
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            for line in status.lines() {
                let value = |prefix: &str| {
                    line.strip_prefix(prefix)
                        .and_then(|v| v.split_whitespace().next())
                        .and_then(|v| v.parse::<u64>().ok())
                };
                if let Some(v) = value("VmRSS:") {
                    self.rss_kib = self.rss_kib.max(v);
                }
                if let Some(v) = value("VmHWM:") {
                    self.hwm_kib = self.hwm_kib.max(v);
                }
                if let Some(v) = value("Threads:") {
                    self.threads = self.threads.max(v);
                }
            }
        }
        if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
            self.fds = self.fds.max(dir.count());
        }
    }
}
