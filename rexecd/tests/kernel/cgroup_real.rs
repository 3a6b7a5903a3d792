//! Job cgroups on the host's real hierarchy (v1 here, v2 on unified hosts): metering of
//! real burners, weights the kernel accepts, and teardown that leaves nothing alive.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use rexecd::cgroup::{
    AnyCgroup, CgroupBackend, CgroupVersion, CpuQuota, JobCgroups, ParentName, weights_for_tickets,
};
use rexecd::sys::ProcessId;

use crate::util::{TestParent, can_run, eventually, is_dead, start_in, stat_field};

const BURN: &str = "while :; do :; done";

#[test]
fn usage_grows_and_runnable_counts_burners_not_sleepers() {
    if !can_run("usage_grows_and_runnable_counts_burners_not_sleepers") {
        return;
    }
    let t = TestParent::new("meter");
    let jobs = &t.jobs;
    jobs.create_job(1).unwrap();
    let mut children = vec![
        start_in(jobs, 1, BURN),
        start_in(jobs, 1, BURN),
        start_in(jobs, 1, "exec sleep 60"),
    ];
    let procs = eventually(Duration::from_secs(5), || {
        let p = jobs.procs(1).unwrap();
        (p.len() == 3).then_some(p)
    })
    .expect("three processes in the job");
    for c in &children {
        assert!(procs.contains(&ProcessId(c.id() as i32)));
    }

    // Two burners are always R (running or queued); the sleeper is S.
    let runnable = eventually(Duration::from_secs(5), || {
        let r = jobs.runnable(1).unwrap();
        (r == 2).then_some(r)
    });
    assert_eq!(
        runnable,
        Some(2),
        "runnable threads of 2 burners + 1 sleeper"
    );

    let before = jobs.usage(1).unwrap();
    let grown = eventually(Duration::from_secs(10), || {
        let now = jobs.usage(1).unwrap();
        (now >= before + Duration::from_millis(100)).then_some(now)
    });
    assert!(grown.is_some(), "usage stayed at {before:?}");
    let sample = jobs.sample(1).unwrap();
    assert_eq!(sample.threads, 3);
    assert!(sample.usage >= before);

    let range = jobs.weight_range();
    jobs.set_weight(1, range.min).unwrap();
    assert_eq!(jobs.weight(1).unwrap(), range.min);
    jobs.set_weight(1, range.max).unwrap();
    assert_eq!(jobs.weight(1).unwrap(), range.max);
    assert!(jobs.set_weight(1, range.max + 1).is_err());

    jobs.destroy(1).unwrap();
    assert!(!jobs.job_path(1).exists(), "job cgroup removed");
    for c in &mut children {
        assert_eq!(c.wait().unwrap().signal(), Some(9), "killed by SIGKILL");
    }
}

#[test]
fn a_capped_burner_stands_throttled_and_the_sample_says_for_how_long() {
    if !can_run("a_capped_burner_stands_throttled_and_the_sample_says_for_how_long") {
        return;
    }
    let t = TestParent::new("throttled");
    let jobs = &t.jobs;
    jobs.create_job(1).unwrap();
    // Uncapped, nothing is throttled (the file says so: zero, not missing).
    assert_eq!(jobs.sample(1).unwrap().throttled, Some(Duration::ZERO));
    jobs.set_quota(1, CpuQuota::for_cpus(0.1, 20_000)).unwrap();
    let mut child = start_in(jobs, 1, BURN);
    // Capped at a tenth of a CPU, a busy thread stands throttled nine tenths of the
    // time: 0.2 s of it within a few seconds even on a busy machine.
    let held = eventually(Duration::from_secs(20), || {
        let s = jobs.sample(1).unwrap();
        s.throttled.filter(|t| *t >= Duration::from_millis(200))
    });
    assert!(held.is_some(), "{:?}", jobs.sample(1).unwrap());
    let s = jobs.sample(1).unwrap();
    assert!(s.throttled.unwrap() > s.usage, "{s:?}");
    jobs.destroy(1).unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(9));
}

#[test]
fn tickets_become_kernel_weights_proportionally() {
    if !can_run("tickets_become_kernel_weights_proportionally") {
        return;
    }
    let t = TestParent::new("weights");
    let jobs = &t.jobs;
    for id in [1, 2, 3] {
        jobs.create_job(id).unwrap();
    }
    let weights = weights_for_tickets(&[300, 100, 0], jobs.weight_range());
    let max = jobs.weight_range().max;
    let min = jobs.weight_range().min;
    assert_eq!(weights, vec![max, (max * 100 + 150) / 300, min]);
    for (id, &w) in [1, 2, 3].iter().zip(&weights) {
        jobs.set_weight(*id, w).unwrap();
    }
    for (id, &w) in [1, 2, 3].iter().zip(&weights) {
        assert_eq!(jobs.weight(*id).unwrap(), w);
    }
    // A job that vanished cannot take a weight, and the error names it.
    jobs.destroy(3).unwrap();
    let err = jobs.set_weight(3, max).unwrap_err();
    assert!(err.to_string().contains("job-3"), "{err}");
}

/// `cgroup_weight` lands on the parent as the kernel's own unit: `cpu.weight` on v2,
/// `cpu.shares` = weight x 1024 / 100 on v1; out of range is refused, naming the range.
#[test]
fn the_parent_takes_its_weight_against_other_work_in_the_kernels_unit() {
    if !can_run("the_parent_takes_its_weight_against_other_work_in_the_kernels_unit") {
        return;
    }
    let t = TestParent::new("parent-weight");
    let jobs = &t.jobs;
    let (written, kernel_default) = match jobs.version() {
        CgroupVersion::V1 => (20_480, 1024),
        CgroupVersion::V2 => (2000, 100),
    };
    assert_eq!(jobs.parent_weight().unwrap(), kernel_default);
    assert_eq!(jobs.set_parent_weight(2000).unwrap(), written);
    assert_eq!(jobs.parent_weight().unwrap(), written);
    let err = jobs.set_parent_weight(10_001).unwrap_err().to_string();
    assert!(err.contains("10000"), "{err}");
    assert_eq!(
        jobs.parent_weight().unwrap(),
        written,
        "a refused weight changes nothing"
    );
}

/// A job's daemon that called setsid and double-forked is reparented away from rexecd,
/// but it is still in the cgroup, so teardown must kill it.
#[test]
fn teardown_kills_a_setsid_double_forked_daemon() {
    if !can_run("teardown_kills_a_setsid_double_forked_daemon") {
        return;
    }
    let t = TestParent::new("daemon");
    let jobs = &t.jobs;
    jobs.create_job(5).unwrap();
    let script = "setsid sh -c 'sleep 600 </dev/null >/dev/null 2>&1 &'";
    let mut launcher = start_in(jobs, 5, script);
    assert!(
        launcher.wait().unwrap().success(),
        "the launcher exits after forking"
    );
    let daemon = eventually(Duration::from_secs(5), || {
        let p = jobs.procs(5).unwrap();
        (p.len() == 1).then(|| p[0])
    })
    .expect("only the daemon is left in the job");
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", daemon.0)).unwrap();
    let (ppid, sid) = (stat_field(&stat, 4), stat_field(&stat, 6));
    assert_ne!(ppid, i64::from(std::process::id()), "daemon was reparented");
    assert_ne!(
        sid,
        stat_field(&std::fs::read_to_string("/proc/self/stat").unwrap(), 6)
    );

    jobs.destroy(5).unwrap();
    assert!(is_dead(daemon), "daemon {daemon:?} survived teardown");
    assert!(!jobs.job_path(5).exists());
}

/// The usual end of a job, its only process exited and reaped: the cgroup goes at
/// once, in every hierarchy (no kill round is needed, none may be skipped wrongly).
#[test]
fn an_emptied_job_is_removed_in_every_hierarchy() {
    if !can_run("an_emptied_job_is_removed_in_every_hierarchy") {
        return;
    }
    let t = TestParent::new("emptied");
    let jobs = &t.jobs;
    jobs.create_job(7).unwrap();
    let mut short = start_in(jobs, 7, "exit 0");
    assert!(short.wait().unwrap().success());
    assert!(jobs.procs(7).unwrap().is_empty());
    jobs.destroy(7).unwrap();
    assert!(jobs.jobs().unwrap().is_empty(), "a job directory is left");
}

/// With `favordynmods` set (rexecd's default), every cgroup2 mount carries it, and
/// a job still starts inside its cgroup.
#[test]
fn favordynmods_lands_on_every_cgroup2_mount() {
    if !can_run("favordynmods_lands_on_every_cgroup2_mount") {
        return;
    }
    let done = rexecd::cgroup::dynmods::favor().expect("remount with favordynmods");
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mounts = rexecd::cgroup::dynmods::cgroup2_mounts(&text);
    assert_eq!(done.len(), mounts.len(), "{done:?} against {mounts:?}");
    for m in &mounts {
        assert!(
            m.has_option(),
            "{} lacks favordynmods: {}",
            m.path.display(),
            m.options
        );
    }
    let t = TestParent::new("dynmods");
    let jobs = &t.jobs;
    jobs.create_job(8).unwrap();
    let mut child = start_in(jobs, 8, "exec sleep 60");
    let pid = ProcessId(child.id() as i32);
    let inside = eventually(Duration::from_secs(5), || {
        jobs.procs(8).unwrap().contains(&pid).then_some(())
    });
    assert!(inside.is_some(), "the process is not in its job cgroup");
    jobs.destroy(8).unwrap();
    let _ = child.wait();
}

/// A process forking as fast as it can cannot outrun teardown: the job is frozen
/// before the kill.
#[test]
fn teardown_stops_a_forking_loop() {
    if !can_run("teardown_stops_a_forking_loop") {
        return;
    }
    let t = TestParent::new("forker");
    let jobs = &t.jobs;
    jobs.create_job(6).unwrap();
    // Ten children that will be orphaned, then forking without pause.
    let script = "i=0; while [ $i -lt 10 ]; do sleep 600 & i=$((i+1)); done; \
                  while :; do /bin/true; done";
    let mut forker = start_in(jobs, 6, script);
    assert!(
        eventually(Duration::from_secs(10), || (jobs.procs(6).unwrap().len()
            > 10)
            .then_some(()))
        .is_some()
    );
    let before = jobs.procs(6).unwrap();
    jobs.destroy(6).unwrap();
    assert_eq!(forker.wait().unwrap().signal(), Some(9));
    for pid in before {
        assert!(is_dead(pid), "{pid:?} survived teardown");
    }
    assert!(!jobs.job_path(6).exists());
}

/// After a restart, rexecd finds the job cgroups of its earlier run, kills what is in
/// them and removes them.
#[test]
fn sweep_removes_jobs_of_an_earlier_run() {
    if !can_run("sweep_removes_jobs_of_an_earlier_run") {
        return;
    }
    let t = TestParent::new("sweep");
    let earlier = &t.jobs;
    earlier.create_job(10).unwrap();
    earlier.create_job(11).unwrap();
    let mut a = start_in(earlier, 10, "exec sleep 600");
    let mut b = start_in(earlier, 11, "sleep 600 & exec sleep 600");
    assert!(
        eventually(Duration::from_secs(5), || (earlier
            .procs(11)
            .unwrap()
            .len()
            == 2)
            .then_some(()))
        .is_some()
    );
    let orphan = earlier.procs(11).unwrap();

    // A job whose creation was cut short: on v1 its directory exists in only one of the
    // hierarchies (here the last one, e.g. freezer). The sweep must still remove it.
    let partial = 12;
    let mut expected = vec![10, 11];
    if let AnyCgroup::V1(v1) = earlier.backend() {
        let last = *v1.hierarchies().last().unwrap();
        std::fs::create_dir(last.join(&t.name).join(format!("job-{partial}"))).unwrap();
        expected.push(partial);
    }

    // A second manager on the same parent name: what a restarted rexecd opens.
    let restarted = JobCgroups::detect(&ParentName::new(&t.name).unwrap()).unwrap();
    assert_eq!(restarted.sweep_stale().unwrap(), expected);
    assert!(restarted.jobs().unwrap().is_empty());
    assert_eq!(a.wait().unwrap().signal(), Some(9));
    assert_eq!(b.wait().unwrap().signal(), Some(9));
    for pid in orphan {
        assert!(is_dead(pid));
    }
    // Sweeping again finds nothing, and destroying a missing job is not an error.
    assert!(restarted.sweep_stale().unwrap().is_empty());
    restarted.destroy(10).unwrap();
}

#[test]
fn detection_matches_the_hierarchy_in_use() {
    if !can_run("detection_matches_the_hierarchy_in_use") {
        return;
    }
    let t = TestParent::new("detect");
    let parent = t.jobs.parent_path();
    assert!(parent.is_dir());
    let expected_file = match t.jobs.version() {
        CgroupVersion::V1 => "cpu.shares",
        CgroupVersion::V2 => "cgroup.subtree_control",
    };
    assert!(parent.join(expected_file).exists(), "{}", parent.display());
    assert_eq!(t.jobs.backend().version(), t.jobs.version());
}

/// The v1 `memory` hierarchy's copy of `t`'s parent, removed on drop (after its
/// jobs' processes are gone).
struct MemoryParent(std::path::PathBuf);

impl Drop for MemoryParent {
    fn drop(&mut self) {
        let job = self.0.join("job-1");
        let _ = eventually(Duration::from_secs(10), || {
            let procs = std::fs::read_to_string(job.join("cgroup.procs")).unwrap_or_default();
            procs.trim().is_empty().then_some(())
        });
        let _ = std::fs::remove_dir(&job);
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn peak_memory_is_what_the_v1_memory_controller_counted() {
    if !can_run("peak_memory_is_what_the_v1_memory_controller_counted") {
        return;
    }
    let t = TestParent::new("peak");
    let jobs = &t.jobs;
    let memory = std::path::Path::new("/sys/fs/cgroup/memory");
    if jobs.version() != CgroupVersion::V1 || !memory.join("memory.max_usage_in_bytes").exists() {
        eprintln!("skipped: no v1 memory hierarchy at {}", memory.display());
        return;
    }
    jobs.create_job(1).unwrap();
    let guard = MemoryParent(memory.join(&t.name));
    let dir = guard.0.join("job-1");
    std::fs::create_dir_all(&dir).unwrap();
    // The job waits for its move into the memory cgroup, then touches a 48 MiB buffer.
    let mut child = start_in(
        jobs,
        1,
        "sleep 1; dd if=/dev/zero of=/dev/null bs=48M count=1 2>/dev/null; exec sleep 60",
    );
    std::fs::write(dir.join("cgroup.procs"), child.id().to_string()).unwrap();
    let want = 48u64 << 20;
    let peak = eventually(Duration::from_secs(20), || {
        jobs.peak_memory(1).filter(|p| *p >= want)
    });
    let kernel: u64 = std::fs::read_to_string(dir.join("memory.max_usage_in_bytes"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        peak.is_some_and(|p| p <= kernel && p < 4 * want),
        "peak {peak:?}, the kernel's {kernel} bytes"
    );
    jobs.destroy(1).unwrap();
    let _ = child.wait();
    drop(guard);
    assert!(!dir.exists(), "{} left behind", dir.display());
}
