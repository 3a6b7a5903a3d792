//! The real `rexecd` binary on a real cgroup2 kernel, inside the VM that [`crate::vm`]
//! boots: it detects v2, turns two jobs' bids into `cpu.weight`, kills a job's
//! double-forked grandchild with the job, and removes its parent cgroup when it stops.
//! It runs pinned (`--cpus 1`, the second of the VM's two CPUs): `+cpuset` above its
//! parent, `cpuset.cpus` on it, and every process of its jobs on CPU 1 only.
//! It drives rexecd with the daemon suite's own harness (real TLS with a test PKI,
//! the raw node protocol over loopback inside the VM), compiled in here unchanged.

use std::path::Path;

use proto::node::{ExitStatus, Signal, ToNode};

use crate::daemon_util::{
    Daemon, PATIENCE, assert_nothing_left, can_run, cpu_dir, eventually_async, is_dead, launch,
};
use crate::util::cpus_allowed;
use crate::v2_vm::in_vm;
use rexecd::sys::ProcessId;

/// A job whose grandchild escapes into its own session (reparented to init) and
/// prints its pid, then the job waits.
const ESCAPE: &str =
    "setsid sh -c 'sleep 300 & echo escaped $!' ; echo ready; while :; do sleep 0.05; done";

fn weight(dir: &Path) -> u64 {
    let text = std::fs::read_to_string(dir.join("cpu.weight")).unwrap();
    text.trim().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs inside the VM booted by vm::v2_suite_passes_inside_a_real_cgroup2_kernel"]
async fn guest_rexecd_weights_bids_and_kills_an_escaped_grandchild_on_v2() {
    in_vm();
    assert!(can_run("guest_rexecd"));
    let mut d = Daemon::start("vm", &["--cpus", "1"]);
    let parent = cpu_dir(&d.parent).unwrap();
    assert_eq!(parent, Path::new("/sys/fs/cgroup").join(&d.parent));
    d.wait_for_log_line(PATIENCE, |l| {
        l.contains("job cgroups ready") && l.contains("version=V2") && l.contains("cpus=1")
    });
    let read = |p: &Path| std::fs::read_to_string(p).unwrap().trim().to_string();
    assert_eq!(read(&parent.join("cpuset.cpus")), "1");
    assert_eq!(read(&parent.join("cpuset.cpus.effective")), "1");
    let above = read(&Path::new("/sys/fs/cgroup").join("cgroup.subtree_control"));
    assert!(above.split_whitespace().any(|c| c == "cpuset"), "{above}");

    // Bids 4 and 1 credits a minute: the top of v2's range and a quarter of it.
    let mut high = d.user().await;
    let mut request = launch(&["/bin/sh", "-c", ESCAPE]);
    request.bid = money::Bid::from_credits(4);
    let started = high.start(request).await;
    let text = high.read_until("ready").await;
    let grandchild: i32 = text
        .split_whitespace()
        .skip_while(|w| *w != "escaped")
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {text:?}"));
    assert!(!is_dead(grandchild));
    // The job and its escaped grandchild run on the node's CPU only.
    for pid in [started.pid as i32, grandchild] {
        let allowed = cpus_allowed(ProcessId(pid));
        assert_eq!(allowed, "1", "process {pid}");
    }
    eprintln!("rexecd pinned to CPU 1: its job and escaped grandchild have Cpus_allowed_list 1");
    let mut low = d.user().await;
    let mut request = launch(&["/bin/sleep", "300"]);
    request.bid = money::Bid::from_credits(1);
    low.start(request).await;

    let dirs = d.job_cgroups();
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    let weights: Vec<u64> = dirs.iter().map(|j| weight(&parent.join(j))).collect();
    let mut sorted = weights.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, [2_500, 10_000], "cpu.weight of the two jobs");
    // The escaped grandchild is still in the bidding job's cgroup.
    let holder = dirs
        .iter()
        .find(|j| {
            std::fs::read_to_string(parent.join(j).join("cgroup.procs"))
                .unwrap()
                .lines()
                .any(|p| p == grandchild.to_string())
        })
        .expect("the grandchild is in a job cgroup");
    assert_eq!(weight(&parent.join(holder)), 10_000);

    high.send(ToNode::Signal(Signal::Kill)).await;
    let out = high.outcome().await;
    assert!(
        matches!(
            out.status(),
            ExitStatus::Signaled {
                signal: Signal::Kill,
                ..
            }
        ),
        "{:?}",
        out.status()
    );
    assert!(
        eventually_async(PATIENCE, || async { is_dead(grandchild) }).await,
        "grandchild {grandchild} survived; log:\n{}",
        d.log()
    );
    // The low bidder is alone now: back to the top of the range.
    assert!(eventually_async(PATIENCE, || async { d.job_cgroups().len() == 1 }).await);
    // The market's engine rewrites the weights right after the rank leaves (which is
    // after its cgroup is gone).
    let left = d.job_cgroups();
    let alone = parent.join(&left[0]);
    assert!(
        eventually_async(PATIENCE, || async { weight(&alone) == 10_000 }).await,
        "the lone bidder's weight stayed {}",
        weight(&alone)
    );
    low.send(ToNode::Signal(Signal::Kill)).await;
    low.outcome().await;
    assert_nothing_left(&d, &[started.pid as i32, grandchild]).await;

    d.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(d.wait_exit(PATIENCE).success(), "log:\n{}", d.log());
    assert!(!parent.exists(), "rexecd removed its parent cgroup on stop");
}

/// Fills one 100 MiB buffer at once (`dd` reads /dev/zero into a block that size),
/// then says it survived: quick even under the VM's emulated CPU, well inside the
/// session's heartbeat limit (this client sends none).
const HOG: &str = "dd if=/dev/zero of=/dev/null bs=104857600 count=1 && echo survived";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs inside the VM booted by vm::v2_suite_passes_inside_a_real_cgroup2_kernel"]
async fn guest_rexecd_kills_a_rank_over_its_memory_and_says_out_of_memory_on_v2() {
    in_vm();
    assert!(can_run("guest_rexecd_oom"));
    let mut d = Daemon::start("vm-oom", &[]);
    let parent = cpu_dir(&d.parent).unwrap();
    d.wait_for_log_line(PATIENCE, |l| {
        l.contains("job cgroups ready") && l.contains("version=V2")
    });
    let mut user = d.user().await;
    let mut request = launch(&["/bin/sh", "-c", HOG]);
    request.options.mem_bytes = Some(32 << 20);
    user.start(request).await;
    // While it runs, its cgroup holds the limit in v2's file.
    let limited = eventually_async(PATIENCE, || async {
        d.job_cgroups().iter().any(|j| {
            std::fs::read_to_string(parent.join(j).join("memory.max"))
                .is_ok_and(|m| m.trim() == (32u64 << 20).to_string())
        })
    })
    .await;
    let out = user.outcome().await;
    assert!(limited, "no job cgroup with memory.max 32 MiB: {out:?}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("survived"),
        "the hog survived its limit: {out:?}"
    );
    let oom: Vec<_> = out
        .notices
        .iter()
        .filter(|n| n.kind == proto::node::NoticeKind::OutOfMemory)
        .collect();
    assert_eq!(
        oom.len(),
        1,
        "one out-of-memory notice: {out:?}\n{}",
        d.log()
    );
    assert!(
        oom[0].text.contains("rank 0") && oom[0].text.contains("32M"),
        "{}",
        oom[0].text
    );
    assert!(eventually_async(PATIENCE, || async { d.job_cgroups().is_empty() }).await);
    d.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(d.wait_exit(PATIENCE).success(), "log:\n{}", d.log());
    assert!(!parent.exists(), "rexecd removed its parent cgroup on stop");
}
