//! Measuring jobs' CPU: each job cgroup's usage over a window, second by second, the
//! CPU the rest of the machine used meanwhile, and the error against the model in
//! points of one CPU (1 point = 0.01 CPU), with shares taken relative to the CPU the
//! jobs received together (scaled to the model's total) so that outside work is not
//! counted as the market's error.

use std::time::{Duration, Instant};

use money::Bid;

use crate::Busy;

/// CPU used by a job cgroup so far, nanoseconds (read with rexecd's own cgroup code,
/// which knows where this host keeps usage: `cpuacct.usage` on v1, `cpu.stat` on v2).
fn usage(cgroup: &std::path::Path) -> u64 {
    let id: u64 = cgroup
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("job-"))
        .and_then(|n| n.parse().ok())
        .expect("a job cgroup");
    let parent = cgroup
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap();
    let cgroups =
        rexecd::cgroup::JobCgroups::detect(&rexecd::cgroup::ParentName::new(parent).unwrap())
            .unwrap();
    u64::try_from(cgroups.usage(id).unwrap().as_nanos()).unwrap()
}

/// The model's shares of `jobs` on `cpus` CPUs, in CPUs.
pub(crate) fn model(cpus: u32, jobs: &[&Busy]) -> Vec<f64> {
    let jobs: Vec<(Bid, u32)> = jobs.iter().map(|j| (j.bid, j.threads)).collect();
    stride::model_cpus(cpus, &jobs)
}

/// What [`errors`] measured over a window.
pub(crate) struct Measured {
    /// Each job's error over the whole window, points of one CPU.
    pub points: Vec<f64>,
    /// Each job's share over the whole window, CPUs (scaled as the module says).
    pub got: Vec<f64>,
    /// CPU other work on the machine took over the whole window.
    pub outside: f64,
    /// Per 1 s window: the worst job's error (points of one CPU) and the outside work.
    pub seconds: Vec<(f64, f64)>,
}

/// Measures `jobs` over `window`, second by second, against the model on `cpus` CPUs.
pub(crate) fn errors(jobs: &[&Busy], cpus: u32, window: Duration) -> Measured {
    let want = model(cpus, jobs);
    let mut seconds = Vec::new();
    let mut total = vec![0.0; jobs.len()];
    let mut outside_total = 0.0;
    let n = window.as_secs().max(1);
    for _ in 0..n {
        let (used, outside) = shares(jobs, window / n as u32);
        let (points, _) = against(&used, &want);
        seconds.push((points.iter().copied().fold(0.0, f64::max), outside));
        for (t, u) in total.iter_mut().zip(&used) {
            *t += u / n as f64;
        }
        outside_total += outside / n as f64;
    }
    let (points, got) = against(&total, &want);
    Measured {
        points,
        got,
        outside: outside_total,
        seconds,
    }
}

/// Errors (points of one CPU) and shares (CPUs) of `used` against `want`.
fn against(used: &[f64], want: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let total_used: f64 = used.iter().sum();
    let total_want: f64 = want.iter().sum();
    let got: Vec<f64> = used
        .iter()
        .map(|u| u / total_used.max(1e-9) * total_want)
        .collect();
    let points = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() * 100.0)
        .collect();
    (points, got)
}

/// CPUs (CPU seconds per wall second) each job used over `window`, and the CPU the
/// rest of the machine used meanwhile.
pub(crate) fn shares(jobs: &[&Busy], window: Duration) -> (Vec<f64>, f64) {
    let (used, outside, _) = shares_per_cpu(jobs, window);
    (used, outside)
}

/// As [`shares`], and also how busy each CPU of the machine was over the window (CPUs,
/// indexed by CPU number), whoever ran there.
pub(crate) fn shares_per_cpu(jobs: &[&Busy], window: Duration) -> (Vec<f64>, f64, Vec<f64>) {
    let _prompt = Prompt::new();
    let before: Vec<u64> = jobs.iter().map(|j| usage(&j.cgroup)).collect();
    let cpus0 = busy_ns();
    let t0 = Instant::now();
    std::thread::sleep(window);
    let after: Vec<u64> = jobs.iter().map(|j| usage(&j.cgroup)).collect();
    let cpus1 = busy_ns();
    let secs = t0.elapsed().as_secs_f64();
    let used: Vec<f64> = before
        .iter()
        .zip(&after)
        .map(|(b, a)| (a - b) as f64 / 1e9 / secs)
        .collect();
    let per_cpu: Vec<f64> = cpus1
        .cpus
        .iter()
        .zip(&cpus0.cpus)
        .map(|(a, b)| a.saturating_sub(*b) as f64 / 1e9 / secs)
        .collect();
    let machine = (cpus1.machine - cpus0.machine) as f64 / 1e9 / secs;
    let outside = (machine - used.iter().sum::<f64>()).max(0.0);
    (used, outside, per_cpu)
}

/// The measuring thread under `SCHED_FIFO` while it measures, back to `SCHED_OTHER`
/// when dropped. The jobs' counters are read one after another at each end of a
/// window; a measuring thread that waits for a CPU between two reads (beside the
/// market at `cgroup_weight` 10000 a root-level test process weighs about 1% of it)
/// would give the jobs read later a longer window than the others, an error of
/// the test's own. It sleeps through the window, so it takes nothing from the jobs.
struct Prompt;

impl Prompt {
    fn new() -> Prompt {
        // Without CAP_SYS_NICE this fails and the reads are as prompt as before.
        let _ = rexecd::sys::sched::make_current_thread_realtime(1);
        Prompt
    }
}

impl Drop for Prompt {
    fn drop(&mut self) {
        let _ = rexecd::sys::sched::make_current_thread_normal();
    }
}

/// CPU time spent busy so far (`/proc/stat`), nanoseconds: the machine's, and each
/// CPU's (indexed by CPU number; a CPU the file does not list counts as never busy).
struct BusyNs {
    machine: u64,
    cpus: Vec<u64>,
}

fn busy_ns() -> BusyNs {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let mut busy = BusyNs {
        machine: 0,
        cpus: Vec::new(),
    };
    for line in stat.lines() {
        let mut fields = line.split_whitespace();
        let Some(name) = fields.next().and_then(|n| n.strip_prefix("cpu")) else {
            continue;
        };
        // user nice system idle iowait irq softirq steal, then guest and guest_nice,
        // which user and nice already count: busy is the first eight but idle and
        // iowait. Steal (time the hypervisor gave another guest) is busy here: none of
        // the jobs ran then.
        let ticks: Vec<u64> = fields.take(8).map(|v| v.parse().unwrap()).collect();
        let ticks = ticks.iter().sum::<u64>() - ticks[3] - ticks.get(4).copied().unwrap_or(0);
        let hz = 100; // USER_HZ on Linux
        let ns = ticks * (1_000_000_000 / hz);
        if name.is_empty() {
            busy.machine = ns;
        } else if let Ok(cpu) = name.parse::<usize>() {
            if busy.cpus.len() <= cpu {
                busy.cpus.resize(cpu + 1, 0);
            }
            busy.cpus[cpu] = ns;
        }
    }
    busy
}
