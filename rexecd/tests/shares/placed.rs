//! The placement of single-threaded jobs (`market::control::placement`) on the real
//! kernel: Figure 4's three jobs bidding 40, 30 and 20 on a two-CPU node. While they
//! contend, each job is confined to one CPU at a time, the two larger ones to different
//! CPUs, and every job visits both (the layout turns around the CPUs every period).
//! When the bid-10 job joins, every job fits whole on a CPU: the layout is packed,
//! still turned, the bid-40 and bid-10 jobs sharing one CPU and the others the other,
//! and every job is capped. Once two leave, every job may run on every CPU again. The thread that moves them
//! runs under `SCHED_FIFO` (the test runs rexecd as root, who may).
//!
//! The node owns two CPUs: on a machine of exactly two (as the test process may use
//! them), all of it, unpinned; on a larger one, the first two, pinned by the node's
//! `cpus` (its cpuset). With fewer it cannot run, and fails under `testhost`'s rule
//! unless skips are allowed.

use std::time::{Duration, Instant};

use crate::util::{Daemon, can_run};
use crate::{Busy, node_config, serial, start_busy, stop};

/// The CPUs a job's processes may run on, from `/proc/<pid>/status` (the first
/// process of its cgroup: the test's jobs are one shell each).
fn allowed(job: &Busy) -> Option<String> {
    let procs = std::fs::read_to_string(job.cgroup.join("cgroup.procs")).ok()?;
    let pid = procs.lines().next()?.trim().to_string();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|s| s.trim().to_string())
}

/// The CPUs this test process may use, as the kernel lists them.
fn own_allowed() -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string()
}

/// Polls the jobs' CPUs every 2 ms for `within`: every sample in which all of them
/// could be read.
fn samples(jobs: &[Busy], within: Duration) -> Vec<Vec<String>> {
    let until = Instant::now() + within;
    let mut out = Vec::new();
    while Instant::now() < until {
        let now: Option<Vec<String>> = jobs.iter().map(allowed).collect();
        out.extend(now);
        std::thread::sleep(Duration::from_millis(2));
    }
    out
}

/// The CPUs in a kernel CPU list (`0-3,8,10-11`), in order; `None` if it is not one.
fn cpu_list(list: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let (from, to) = part.split_once('-').unwrap_or((part, part));
        let (from, to): (u32, u32) = (from.parse().ok()?, to.parse().ok()?);
        cpus.extend(from..=to);
    }
    Some(cpus)
}

/// The node's two CPUs as the kernel lists them: each alone (`[a, b]`), and both
/// (`a-b` when they are neighbours, else `a,b`).
fn listed(pair: [u32; 2]) -> ([String; 2], String) {
    let [a, b] = pair;
    let both = if b == a + 1 {
        format!("{a}-{b}")
    } else {
        format!("{a},{b}")
    };
    ([a.to_string(), b.to_string()], both)
}

/// Samples the jobs' CPUs for a second (see [`samples`]) and checks that each job, named
/// by its bid, is confined to one CPU at a time and visits both of the node's `cpus`
/// (the layout turns).
fn turned(jobs: &[Busy], bids: &[u32], cpus: &[String; 2]) -> Vec<Vec<String>> {
    let seen = tokio::task::block_in_place(|| samples(jobs, Duration::from_millis(1000)));
    assert!(seen.len() > 100, "too few samples: {}", seen.len());
    let node_cpus = cpus;
    for (j, bid) in bids.iter().enumerate() {
        let mut cpus: Vec<&str> = seen.iter().map(|s| s[j].as_str()).collect();
        cpus.sort();
        cpus.dedup();
        assert_eq!(
            cpus,
            vec![node_cpus[0].as_str(), node_cpus[1].as_str()],
            "the bid-{bid} job is confined to one CPU at a time and visits both"
        );
    }
    seen
}

/// Whether a job's cgroup has a CFS bandwidth cap (v1 `cpu.cfs_quota_us`, v2
/// `cpu.max`).
fn capped(job: &Busy) -> bool {
    if let Ok(q) = std::fs::read_to_string(job.cgroup.join("cpu.cfs_quota_us")) {
        return q.trim().parse::<i64>().is_ok_and(|q| q > 0);
    }
    std::fs::read_to_string(job.cgroup.join("cpu.max"))
        .is_ok_and(|m| m.split_whitespace().next().is_some_and(|q| q != "max"))
}

/// The share of `seen` in which jobs `a` and `b` are on the same CPU.
fn together(seen: &[Vec<String>], a: usize, b: usize) -> f64 {
    seen.iter().filter(|s| s[a] == s[b]).count() as f64 / seen.len() as f64
}

/// The scheduling policy of rexecd's thread named `name` (field 41 of
/// `/proc/PID/task/TID/stat`, counted after the command's closing parenthesis).
fn thread_policy(pid: i32, name: &str) -> Option<u32> {
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let dir = task.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
        if comm.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        let after = &stat[stat.rfind(')')? + 2..];
        // Fields from the state (3rd) on; the policy is the 41st.
        return after.split_whitespace().nth(41 - 3)?.parse().ok();
    }
    None
}

#[test]
fn cpu_lists_are_read_and_written_as_the_kernel_does() {
    assert_eq!(cpu_list("0-1"), Some(vec![0, 1]));
    assert_eq!(cpu_list("0-2,8,10-11"), Some(vec![0, 1, 2, 8, 10, 11]));
    assert_eq!(cpu_list("x"), None);
    assert_eq!(listed([0, 1]), (["0".into(), "1".into()], "0-1".into()));
    assert_eq!(listed([2, 5]), (["2".into(), "5".into()], "2,5".into()));
}

#[tokio::test(flavor = "multi_thread")]
async fn single_threaded_jobs_are_placed_while_contended_and_freed_after() {
    if !can_run("shares") {
        return;
    }
    // The node sells 2 CPUs; placement needs them to be every CPU its jobs may use:
    // the machine's two, or two of a larger machine pinned as the node's cpuset.
    let own = own_allowed();
    let mine = cpu_list(&own).unwrap_or_default();
    let (pair, pin) = match mine.as_slice() {
        [a, b] => ([*a, *b], None),
        [a, b, ..] => ([*a, *b], Some(format!("cpus = \"{a},{b}\"\n"))),
        _ => {
            testhost::cannot_run(
                "single_threaded_jobs_are_placed_while_contended_and_freed_after",
                &format!("the node needs two CPUs; this process may use {own}"),
            );
            return;
        }
    };
    let (cpus, all) = listed(pair);
    let _serial = serial().await;
    let parent = format!("rexecd-test-{}-placed", std::process::id());
    let config = format!(
        "{}{}",
        pin.unwrap_or_default(),
        node_config(&parent, "closed")
    );
    let daemon = Daemon::start_with_config(parent.clone(), &config);
    let mut jobs = Vec::new();
    for bid in [40, 30, 20] {
        jobs.push(start_busy(&daemon, bid, 1).await);
    }
    // A tick or two for the market to see three runnable threads.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen = turned(&jobs, &[40, 30, 20], &cpus);
    // SCHED_FIFO is policy 1.
    assert_eq!(
        thread_policy(daemon.pid(), "placer"),
        Some(1),
        "the placer runs under SCHED_FIFO"
    );
    // The two larger jobs are moved together at the same edges, one after the other:
    // apart from the moment between, they are on different CPUs.
    let apart = seen.iter().filter(|s| s[0] != s[1]).count();
    assert!(
        apart * 10 >= seen.len() * 9,
        "the two larger jobs share a CPU in {} of {} samples",
        seen.len() - apart,
        seen.len()
    );
    // Split, only the split job (the bid of 20) is capped: the pinned ones would
    // leave their CPU idle under a cap whenever it is not there.
    let caps: Vec<bool> = jobs.iter().map(capped).collect();
    assert_eq!(
        caps,
        [false, false, true],
        "a split layout caps its split job only"
    );
    // The bid-10 job joins: 0.8 + 0.2 on one CPU, 0.6 + 0.4 on the other.
    jobs.push(start_busy(&daemon, 10, 1).await);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen = turned(&jobs, &[40, 30, 20, 10], &cpus);
    let pairs = (
        together(&seen, 0, 3),
        together(&seen, 1, 2),
        together(&seen, 0, 1),
    );
    assert!(
        pairs.0 >= 0.9 && pairs.1 >= 0.9 && pairs.2 <= 0.1,
        "bids 40 and 10 share a CPU, 30 and 20 the other: together {pairs:?} of the time"
    );
    assert!(jobs.iter().all(capped), "a packed layout is capped");
    // Two leave: two jobs on two CPUs, nothing to divide, and nothing confined.
    for _ in 0..2 {
        let gone = jobs.remove(0);
        stop(gone).await;
    }
    let freed = tokio::task::block_in_place(|| {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            let now: Vec<Option<String>> = jobs.iter().map(allowed).collect();
            if now.iter().all(|a| a.as_deref() == Some(all.as_str())) {
                return Ok(());
            }
            if Instant::now() > until {
                return Err(now);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    assert_eq!(freed, Ok(()), "every job may use every CPU again");
    for job in jobs {
        stop(job).await;
    }
}
