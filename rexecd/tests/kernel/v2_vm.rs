//! The v2 backend on a real cgroup2 kernel, run inside the VM that [`crate::vm`] boots
//! (this host's `cpu` controller is on v1, so only a VM gives v2 a kernel with `cpu`):
//! detection of the unified layout, `cpu.weight` from bids and the split the kernel
//! makes with them, usage readings, `cgroup.kill` of a double-forked daemon, and
//! cleanup. Each test is `#[ignore]`d on the host and refuses to run outside the VM;
//! `vm::v2_suite_passes_inside_a_real_cgroup2_kernel` runs them with `--include-ignored`.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};

use money::Bid;
use rexecd::cgroup::detect::{self, Hierarchy};
use rexecd::cgroup::{CgroupBackend, CgroupError, CgroupVersion, JobCgroups, ParentName};
use stride::{tickets_for_bids, weights_for_bids};

use crate::util::{TestParent, eventually, is_dead, start_in, stat_field};

/// Set by the VM's `/init` for the test binary it runs.
pub const IN_VM: &str = "REXEC_IN_VM";

/// Where the VM's `/init` mounts cgroup2.
const ROOT: &str = "/sys/fs/cgroup";

/// Every test the VM runs, by its full libtest name: the real rexecd on v2, these
/// v2-only tests, and the generic real-cgroup tests, which on the VM meet v2 instead
/// of this host's v1.
pub const GUEST_TESTS: [&str; 23] = [
    "rexecd_vm::guest_rexecd_weights_bids_and_kills_an_escaped_grandchild_on_v2",
    "rexecd_vm::guest_rexecd_kills_a_rank_over_its_memory_and_says_out_of_memory_on_v2",
    "v2_vm::guest_detects_the_unified_layout_and_enables_cpu_for_jobs",
    "v2_vm::guest_cpu_weight_follows_bids_and_the_kernel_splits_by_it",
    "v2_vm::guest_usage_rises_for_a_busy_job_and_not_for_an_idle_one",
    "v2_vm::guest_cgroup_kill_reaches_a_double_forked_daemon",
    "v2_vm::guest_cleanup_leaves_no_cgroup_behind",
    "cgroup_real::usage_grows_and_runnable_counts_burners_not_sleepers",
    "cgroup_real::tickets_become_kernel_weights_proportionally",
    "cgroup_real::teardown_kills_a_setsid_double_forked_daemon",
    "cgroup_real::teardown_stops_a_forking_loop",
    "cgroup_real::sweep_removes_jobs_of_an_earlier_run",
    "cgroup_real::detection_matches_the_hierarchy_in_use",
    "cgroup_real::an_emptied_job_is_removed_in_every_hierarchy",
    "cgroup_real::favordynmods_lands_on_every_cgroup2_mount",
    "cgroup_real::a_capped_burner_stands_throttled_and_the_sample_says_for_how_long",
    "cgroup_real::peak_memory_is_what_the_v1_memory_controller_counted",
    "cgroup_real::the_parent_takes_its_weight_against_other_work_in_the_kernels_unit",
    "cpuset_real::a_parent_pinned_to_cpu_0_confines_its_jobs_and_is_removed_everywhere",
    "cpuset_real::a_parent_pinned_to_the_last_cpu_confines_its_jobs",
    "cpuset_real::a_cpu_the_machine_lacks_is_refused_naming_it_and_leaves_nothing",
    "cpuset_real::a_cpu_the_parents_parent_may_not_use_is_refused",
    "cpuset_real::a_restart_pinned_elsewhere_removes_the_earlier_runs_jobs",
];

const BURN: &str = "while :; do :; done";

/// Panics unless this process runs in the VM: these tests assume a v2-only kernel.
pub fn in_vm() {
    assert!(
        std::env::var_os(IN_VM).is_some_and(|v| v == "1"),
        "this test runs only inside the VM (vm::v2_suite_passes_inside_a_real_cgroup2_kernel \
         boots it); run that test instead"
    );
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn words(path: &Path) -> Vec<String> {
    read(path).split_whitespace().map(str::to_string).collect()
}

/// The raw `usage_usec` of a job, read from the file without rexecd's code.
fn raw_usage(jobs: &JobCgroups, id: u64) -> Duration {
    let text = read(&jobs.job_path(id).join("cpu.stat"));
    let line = text
        .lines()
        .find(|l| l.starts_with("usage_usec "))
        .expect("usage_usec in cpu.stat");
    Duration::from_micros(line[11..].trim().parse().unwrap())
}

#[test]
#[ignore = "runs inside the VM booted by vm::v2_suite_passes_inside_a_real_cgroup2_kernel"]
fn guest_detects_the_unified_layout_and_enables_cpu_for_jobs() {
    in_vm();
    let mountinfo = read(Path::new("/proc/self/mountinfo"));
    let mounts = detect::parse_mountinfo(&mountinfo, Path::new("/")).unwrap();
    assert!(mounts.v1.is_empty(), "no v1 controller mounted: {mounts:?}");
    assert_eq!(mounts.unified.as_deref(), Some(Path::new(ROOT)));
    assert_eq!(
        detect::detect().unwrap(),
        Hierarchy::V2 { root: ROOT.into() }
    );

    let t = TestParent::new("detect");
    let jobs = &t.jobs;
    assert_eq!(jobs.version(), CgroupVersion::V2);
    assert_eq!(jobs.weight_range(), rexecd::cgroup::WeightRange::V2_WEIGHT);
    // rexecd enabled cpu and pids on the way down, so job cgroups get their files.
    for dir in [Path::new(ROOT), &jobs.parent_path()] {
        let enabled = words(&dir.join("cgroup.subtree_control"));
        for c in ["cpu", "pids"] {
            assert!(enabled.iter().any(|e| e == c), "{c} in {}", dir.display());
        }
    }
    jobs.create_job(1).unwrap();
    let job = jobs.job_path(1);
    assert_eq!(job, Path::new(ROOT).join(&t.name).join("job-1"));
    let controllers = words(&job.join("cgroup.controllers"));
    // cpu for weights and caps, memory for --mem (limits and the OOM kill), pids.
    assert_eq!(
        controllers,
        ["cpu", "memory", "pids"],
        "what the parent delegates"
    );
    for file in [
        "cpu.weight",
        "cpu.stat",
        "cgroup.kill",
        "cgroup.freeze",
        "pids.max",
    ] {
        assert!(job.join(file).exists(), "{file} in the job cgroup");
    }
    assert_eq!(
        read(&job.join("cpu.weight")).trim(),
        "100",
        "kernel default"
    );
    assert!(matches!(
        jobs.create_job(1),
        Err(CgroupError::JobExists { .. })
    ));
    assert_eq!(jobs.jobs().unwrap(), [1]);
}

#[test]
#[ignore = "runs inside the VM booted by vm::v2_suite_passes_inside_a_real_cgroup2_kernel"]
fn guest_cpu_weight_follows_bids_and_the_kernel_splits_by_it() {
    in_vm();
    // Pinned to one of the VM's two CPUs, so that two burners must share it.
    let t = TestParent::pinned("weights", "0");
    let jobs = &t.jobs;
    let range = jobs.weight_range();

    // The Figure 4 bids plus a zero bid, mapped exactly as rexecd's registry does.
    let bids = [40, 30, 20, 10, 0].map(Bid::from_credits);
    let weights = weights_for_bids(&bids, range.min, range.max);
    assert_eq!(weights, [10_000, 7_500, 5_000, 2_500, 1]);
    for (id, &w) in (1..).zip(&weights) {
        jobs.create_job(id).unwrap();
        jobs.set_weight(id, w).unwrap();
    }
    for (id, &w) in (1..).zip(&weights) {
        let file = read(&jobs.job_path(id).join("cpu.weight"));
        assert_eq!(file.trim(), w.to_string(), "job {id}");
        assert_eq!(jobs.weight(id).unwrap(), w);
    }
    // Outside the kernel's range: refused before the write, the file unchanged.
    for bad in [0, 10_001] {
        assert!(matches!(
            jobs.set_weight(1, bad),
            Err(CgroupError::WeightOutOfRange { .. })
        ));
    }
    assert_eq!(jobs.weight(1).unwrap(), 10_000);
    // The ticket path the daemon takes (tickets, then the kernel range) gives the same
    // weights, and the files take them.
    let tickets = tickets_for_bids(&bids);
    let from_tickets = rexecd::cgroup::weights_for_tickets(&tickets, range);
    assert_eq!(from_tickets, weights);
    for (id, w) in (1..).zip(&from_tickets) {
        jobs.set_weight(id, *w).unwrap();
        assert_eq!(jobs.weight(id).unwrap(), *w);
    }

    // The kernel enforces them: two burners bidding 1 and 3 on the one CPU the parent
    // is pinned to split it about 1:3.
    let bids = [1, 3].map(Bid::from_credits);
    let weights = weights_for_bids(&bids, range.min, range.max);
    for (id, w) in [(11, weights[0]), (12, weights[1])] {
        jobs.create_job(id).unwrap();
        jobs.set_weight(id, w).unwrap();
    }
    let burners = [start_in(jobs, 11, BURN), start_in(jobs, 12, BURN)];
    // Let both start, then measure a window.
    std::thread::sleep(Duration::from_millis(500));
    let (l0, h0) = (jobs.usage(11).unwrap(), jobs.usage(12).unwrap());
    std::thread::sleep(Duration::from_secs(3));
    let (l1, h1) = (jobs.usage(11).unwrap(), jobs.usage(12).unwrap());
    let (low, high) = ((l1 - l0).as_secs_f64(), (h1 - h0).as_secs_f64());
    let ratio = high / low.max(1e-6);
    eprintln!("bids 1:3 on one CPU: used {low:.3} s and {high:.3} s, ratio {ratio:.2}");
    assert!(low > 0.05, "the low bidder still runs: {low}");
    assert!((2.2..=4.0).contains(&ratio), "asked 3, got {ratio:.2}");
    for id in [11, 12] {
        jobs.destroy(id).unwrap();
    }
    for mut b in burners {
        assert_eq!(b.wait().unwrap().signal(), Some(9));
    }
}

#[test]
#[ignore = "runs inside the VM booted by vm::v2_suite_passes_inside_a_real_cgroup2_kernel"]
fn guest_usage_rises_for_a_busy_job_and_not_for_an_idle_one() {
    in_vm();
    let t = TestParent::new("usage");
    let jobs = &t.jobs;
    jobs.create_job(1).unwrap();
    jobs.create_job(2).unwrap();
    let children = [start_in(jobs, 1, BURN), start_in(jobs, 2, "exec sleep 600")];
    assert!(
        eventually(Duration::from_secs(10), || (jobs.procs(2).unwrap().len()
            == 1
            && jobs.runnable(2).unwrap() == 0)
            .then_some(()))
        .is_some(),
        "the sleeper settles"
    );
    let busy0 = jobs.usage(1).unwrap();
    let idle0 = jobs.usage(2).unwrap();
    let start = Instant::now();
    let grown = eventually(Duration::from_secs(20), || {
        let now = jobs.usage(1).unwrap();
        (now >= busy0 + Duration::from_millis(500)).then_some(now)
    });
    assert!(grown.is_some(), "busy job's usage stayed near {busy0:?}");
    let elapsed = start.elapsed();
    let idle = jobs.usage(2).unwrap() - idle0;
    eprintln!("busy job used 0.5 s in {elapsed:?}; idle job used {idle:?}");
    assert!(idle < Duration::from_millis(20), "idle job used {idle:?}");

    // rexecd's reading is the kernel's usage_usec, read just before the raw file.
    let ours = jobs.usage(1).unwrap();
    let raw = raw_usage(jobs, 1);
    assert!(
        raw >= ours && raw - ours < Duration::from_secs(1),
        "{ours:?} {raw:?}"
    );
    let sample = jobs.sample(1).unwrap();
    assert_eq!((sample.runnable, sample.threads), (1, 1));
    assert!(sample.usage >= ours);
    assert_eq!(jobs.runnable(2).unwrap(), 0);
    for id in [1, 2] {
        jobs.destroy(id).unwrap();
    }
    for mut c in children {
        assert_eq!(c.wait().unwrap().signal(), Some(9));
    }
}

#[test]
#[ignore = "runs inside the VM booted by vm::v2_suite_passes_inside_a_real_cgroup2_kernel"]
fn guest_cgroup_kill_reaches_a_double_forked_daemon() {
    in_vm();
    let t = TestParent::new("kill");
    let jobs = &t.jobs;
    jobs.create_job(7).unwrap();
    let kill_file = jobs.job_path(7).join("cgroup.kill");
    assert!(kill_file.exists(), "this kernel has cgroup.kill");
    let mut burner = start_in(jobs, 7, BURN);
    let mut launcher = start_in(
        jobs,
        7,
        "setsid sh -c 'sleep 600 </dev/null >/dev/null 2>&1 &'",
    );
    assert!(launcher.wait().unwrap().success());
    let procs = eventually(Duration::from_secs(10), || {
        let p = jobs.procs(7).unwrap();
        (p.len() == 2).then_some(p)
    })
    .expect("burner and daemon in the job");
    let daemon = *procs
        .iter()
        .find(|p| p.0 != burner.id() as i32)
        .expect("the daemon");
    let stat = read(Path::new(&format!("/proc/{}/stat", daemon.0)));
    assert_eq!(stat_field(&stat, 4), 1, "the daemon was reparented to init");
    assert_ne!(
        stat_field(&stat, 6),
        stat_field(&read(Path::new("/proc/self/stat")), 6),
        "the daemon has its own session"
    );

    // The backend's kill alone (one write to cgroup.kill) takes the whole job.
    jobs.backend().kill_all(7).unwrap();
    assert_eq!(burner.wait().unwrap().signal(), Some(9));
    assert!(
        eventually(Duration::from_secs(10), || jobs
            .procs(7)
            .unwrap()
            .is_empty()
            .then_some(()))
        .is_some(),
        "job empty after cgroup.kill"
    );
    for pid in &procs {
        assert!(is_dead(*pid), "{pid:?} survived cgroup.kill");
    }
    let events = read(&jobs.job_path(7).join("cgroup.events"));
    assert!(events.contains("populated 0"), "{events}");

    // destroy() on a fresh job with the same shape: freeze, kill, thaw, remove.
    jobs.create_job(8).unwrap();
    let mut launcher = start_in(
        jobs,
        8,
        "setsid sh -c 'sleep 600 </dev/null >/dev/null 2>&1 &'",
    );
    assert!(launcher.wait().unwrap().success());
    let daemon = eventually(Duration::from_secs(10), || {
        let p = jobs.procs(8).unwrap();
        (p.len() == 1).then(|| p[0])
    })
    .expect("only the daemon is left in job 8");
    jobs.destroy(8).unwrap();
    assert!(is_dead(daemon), "daemon {daemon:?} survived destroy");
    assert!(!jobs.job_path(8).exists());
    jobs.destroy(7).unwrap();
    assert!(!jobs.job_path(7).exists());
}

#[test]
#[ignore = "runs inside the VM booted by vm::v2_suite_passes_inside_a_real_cgroup2_kernel"]
fn guest_cleanup_leaves_no_cgroup_behind() {
    in_vm();
    // A nested parent name, as two rexecd on one machine would use.
    let top = format!("rexec-test-{}-cleanup", std::process::id());
    let name = format!("{top}/node1");
    let jobs = JobCgroups::detect(&ParentName::new(&name).unwrap()).unwrap();
    let t = TestParent::from_jobs(jobs, name);
    let jobs = &t.jobs;
    let mut all = Vec::new();
    for id in [1, 2, 3] {
        jobs.create_job(id).unwrap();
        all.push(start_in(jobs, id, "sleep 600 & sleep 600 & exec sleep 600"));
    }
    let procs = eventually(Duration::from_secs(10), || {
        let p: Vec<_> = [1, 2, 3]
            .iter()
            .flat_map(|&id| jobs.procs(id).unwrap())
            .collect();
        (p.len() == 9).then_some(p)
    })
    .expect("three processes in each of three jobs");

    // A restarted rexecd on the same parent sweeps every job of the earlier run.
    let restarted = JobCgroups::detect(&ParentName::new(&t.name).unwrap()).unwrap();
    assert_eq!(restarted.sweep_stale().unwrap(), [1, 2, 3]);
    for pid in &procs {
        assert!(is_dead(*pid), "{pid:?} survived the sweep");
    }
    for mut c in all {
        c.wait().unwrap();
    }
    let parent = jobs.parent_path();
    assert!(parent.is_dir());
    assert!(restarted.jobs().unwrap().is_empty());
    drop(t);
    assert!(!parent.exists(), "parent removed");
    assert!(
        !Path::new(ROOT).join(&top).exists(),
        "empty upper level removed"
    );
    let left: Vec<String> = std::fs::read_dir(ROOT)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("rexec-test-{}-", std::process::id())))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
