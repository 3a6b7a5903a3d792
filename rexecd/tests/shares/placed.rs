//! The placement of single-threaded jobs (`market::control::placement`) on the real
//! kernel: Figure 4's three jobs bidding 40, 30 and 20 on a two-CPU node. While they
//! contend, the two larger ones are each confined to a CPU of their own and the bid-20
//! job moves between the two every period; once one leaves, every job may run on
//! every CPU again.

use std::time::{Duration, Instant};

use crate::util::{Daemon, can_run};
use crate::{Busy, SERIAL, node_config, start_busy, stop};

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

/// Polls `what` every 5 ms for `within`, collecting what it saw.
fn seen(job: &Busy, within: Duration) -> Vec<String> {
    let until = Instant::now() + within;
    let mut out: Vec<String> = Vec::new();
    while Instant::now() < until {
        if let Some(a) = allowed(job)
            && !out.contains(&a)
        {
            out.push(a);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn single_threaded_jobs_are_placed_while_contended_and_freed_after() {
    if !can_run("shares") {
        return;
    }
    let all = own_allowed();
    if all != "0-1" {
        // The node sells 2 CPUs; placement needs them to be every CPU rexecd may use.
        eprintln!("skipped: this test needs a machine of exactly two CPUs (here {all})");
        return;
    }
    let _serial = SERIAL.lock().await;
    let parent = format!("rexecd-test-{}-placed", std::process::id());
    let daemon = Daemon::start_with_config(parent.clone(), &node_config(&parent, "closed"));
    let mut jobs = Vec::new();
    for bid in [40, 30, 20] {
        jobs.push(start_busy(&daemon, bid, 1).await);
    }
    // A tick or two for the market to see three runnable threads.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (a, b, c) = tokio::task::block_in_place(|| {
        let a = seen(&jobs[0], Duration::from_millis(600));
        let b = seen(&jobs[1], Duration::from_millis(600));
        let c = seen(&jobs[2], Duration::from_millis(600));
        (a, b, c)
    });
    assert_eq!(a.len(), 1, "the bid-40 job stays on one CPU: {a:?}");
    assert_eq!(b.len(), 1, "the bid-30 job stays on one CPU: {b:?}");
    assert_ne!(a, b, "the two larger jobs have a CPU each");
    for cpus in a.iter().chain(&b) {
        assert!(cpus == "0" || cpus == "1", "{cpus}");
    }
    assert_eq!(
        c,
        vec!["0".to_string(), "1".to_string()],
        "the bid-20 job visits both CPUs in turn"
    );
    // One leaves: two jobs on two CPUs, nothing to divide, and nothing confined.
    let gone = jobs.remove(0);
    stop(gone).await;
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
