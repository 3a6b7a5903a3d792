//! The v1 and v2 file protocols against fake cgroupfs trees in temporary directories.
//! A fake tree does not react like the kernel (mkdir creates no control files, writes
//! are plain file writes), so each test creates the control files it needs and then
//! checks exactly what the code wrote or parsed.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::detect::V1Mounts;
use super::*;

fn put(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn get(path: &Path) -> String {
    fs::read_to_string(path).unwrap()
}

fn v1_mounts(base: &Path) -> V1Mounts {
    V1Mounts {
        cpu: base.join("cpu"),
        cpuacct: Some(base.join("cpuacct")),
        pids: Some(base.join("pids")),
        freezer: Some(base.join("freezer")),
        memory: None,
        cpuset: None,
    }
}

fn v1_jobs(base: &Path) -> JobCgroups {
    let parent = ParentName::new("rexec-t").unwrap();
    for h in ["cpu", "cpuacct", "pids", "freezer"] {
        fs::create_dir_all(base.join(h)).unwrap();
    }
    JobCgroups::open(Hierarchy::V1(v1_mounts(base)), &parent).unwrap()
}

#[test]
fn v1_job_lives_in_every_mounted_hierarchy() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = v1_jobs(dir.path());
    jobs.create_job(7).unwrap();
    for h in ["cpu", "cpuacct", "pids", "freezer"] {
        assert!(dir.path().join(h).join("rexec-t/job-7").is_dir(), "{h}");
    }
    assert!(matches!(
        jobs.create_job(7),
        Err(CgroupError::JobExists { .. })
    ));
    let join = jobs.join(7).unwrap_err();
    // The fake tree has no cgroup.procs files until the test writes them.
    assert!(join.to_string().contains("cgroup.procs"), "{join}");
    for h in ["cpu", "cpuacct", "pids", "freezer"] {
        put(&dir.path().join(h).join("rexec-t/job-7/cgroup.procs"), "");
    }
    let join = jobs.join(7).unwrap();
    assert_eq!(join.paths().len(), 4);
    assert!(join.paths()[0].starts_with(dir.path().join("cpu")));
}

#[test]
fn v1_failed_create_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = v1_jobs(dir.path());
    // Make the freezer parent a file, so mkdir of the job fails there.
    fs::remove_dir(dir.path().join("freezer/rexec-t")).unwrap();
    put(&dir.path().join("freezer/rexec-t"), "");
    let err = jobs.create_job(8).unwrap_err();
    assert!(err.to_string().contains("freezer/rexec-t/job-8"), "{err}");
    assert!(!dir.path().join("cpu/rexec-t/job-8").exists());
    assert!(!dir.path().join("pids/rexec-t/job-8").exists());
}

#[test]
fn v1_comounted_cpu_cpuacct_is_one_directory() {
    let dir = tempfile::tempdir().unwrap();
    let both = dir.path().join("cpu,cpuacct");
    fs::create_dir_all(&both).unwrap();
    let mounts = V1Mounts {
        cpu: both.clone(),
        cpuacct: Some(both.clone()),
        pids: None,
        freezer: None,
        memory: None,
        cpuset: None,
    };
    let backend = v1::V1Cgroups::new(mounts, &ParentName::new("r").unwrap());
    assert_eq!(backend.hierarchies(), vec![both.as_path()]);
    let jobs = JobCgroups::with_backend(AnyCgroup::V1(backend)).unwrap();
    jobs.create_job(1).unwrap();
    put(&both.join("r/job-1/cpuacct.usage"), "1500000000\n");
    assert_eq!(jobs.usage(1).unwrap(), Duration::from_millis(1500));
    // Without a freezer, freezing is reported as unavailable rather than failing.
    assert!(!jobs.backend().freeze(1).unwrap());
}

#[test]
fn v1_weights_usage_threads_and_freezer_files() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = v1_jobs(dir.path()).with_proc_root(dir.path().join("proc"));
    let job = |h: &str, f: &str| dir.path().join(h).join("rexec-t/job-3").join(f);
    jobs.create_job(3).unwrap();
    jobs.create_job(4).unwrap();
    put(&job("cpu", "cpu.shares"), "1024\n");
    put(&dir.path().join("cpu/rexec-t/job-4/cpu.shares"), "1024\n");

    jobs.set_weight(3, 262_144).unwrap();
    assert_eq!(&get(&job("cpu", "cpu.shares"))[..6], "262144");
    assert_eq!(jobs.weight(3).unwrap(), 262_144);
    assert!(matches!(
        jobs.set_weight(3, 1),
        Err(CgroupError::WeightOutOfRange { min: 2, .. })
    ));
    let weights = weights_for_tickets(&[10, 40], jobs.weight_range());
    assert_eq!(weights, vec![65_536, 262_144]);
    jobs.set_weight(4, weights[1]).unwrap();
    assert_eq!(jobs.weight(4).unwrap(), 262_144);

    put(&job("cpuacct", "cpuacct.usage"), "not a number\n");
    let err = jobs.usage(3).unwrap_err().to_string();
    assert!(err.contains("cpuacct.usage"), "{err}");
    put(&job("cpuacct", "cpuacct.usage"), "42\n");
    assert_eq!(jobs.usage(3).unwrap(), Duration::from_nanos(42));

    put(&job("cpu", "tasks"), "100\n101\n102\n");
    for (tid, state) in [(100, 'R'), (101, 'S'), (102, 'R')] {
        put(
            &dir.path().join(format!("proc/{tid}/stat")),
            &format!("{tid} (burn) {state} 1"),
        );
    }
    let before = std::time::Instant::now();
    let sample = jobs.sample(3).unwrap();
    assert_eq!((sample.runnable, sample.threads), (2, 3));
    assert_eq!(sample.usage, Duration::from_nanos(42));
    assert!(sample.at >= before && sample.at <= std::time::Instant::now());

    put(&job("cpu", "cgroup.procs"), "100\n");
    put(&job("cpuacct", "cgroup.procs"), "100\n");
    put(&job("pids", "cgroup.procs"), "200\n");
    put(&job("freezer", "cgroup.procs"), "");
    let procs = jobs.procs(3).unwrap();
    assert_eq!(
        procs,
        vec![crate::sys::ProcessId(100), crate::sys::ProcessId(200)]
    );

    put(&job("freezer", "freezer.state"), "THAWED\n");
    assert!(!jobs.backend().is_frozen(3).unwrap());
    assert!(jobs.backend().freeze(3).unwrap());
    assert!(get(&job("freezer", "freezer.state")).starts_with("FROZEN"));
    jobs.backend().thaw(3).unwrap();
    assert!(get(&job("freezer", "freezer.state")).starts_with("THAWED"));
}

#[test]
fn v1_job_ids_union_hierarchies_and_skip_other_entries() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = v1_jobs(dir.path());
    fs::create_dir(dir.path().join("cpu/rexec-t/job-5")).unwrap();
    fs::create_dir(dir.path().join("freezer/rexec-t/job-9")).unwrap();
    fs::create_dir(dir.path().join("cpu/rexec-t/other")).unwrap();
    put(
        &dir.path().join("cpu/rexec-t/job-6"),
        "a file, not a cgroup",
    );
    assert_eq!(jobs.jobs().unwrap(), vec![5, 9]);
}

fn v2_tree(offered: &str, enabled: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cgroup");
    for d in [root.clone(), root.join("rexec"), root.join("rexec/node1")] {
        put(&d.join("cgroup.controllers"), offered);
        put(&d.join("cgroup.subtree_control"), enabled);
    }
    (dir, root)
}

fn v2_jobs(root: &Path) -> JobCgroups {
    let parent = ParentName::new("rexec/node1").unwrap();
    JobCgroups::open(
        Hierarchy::V2 {
            root: root.to_path_buf(),
        },
        &parent,
    )
    .unwrap()
}

#[test]
fn v2_parent_enables_offered_controllers_along_the_path() {
    // One write per controller, so the fake file holds the last one: memory (for
    // `--mem`) after pids.
    for (offered, expected) in [("cpu io", "+cpu"), ("pids memory", "+memory"), ("io", "")] {
        let (_dir, root) = v2_tree(offered, "");
        v2_jobs(&root);
        for d in [root.clone(), root.join("rexec"), root.join("rexec/node1")] {
            assert_eq!(
                get(&d.join("cgroup.subtree_control")),
                expected,
                "{offered}"
            );
        }
    }
    // Already enabled: nothing is written.
    let (_dir, root) = v2_tree("cpu pids", "cpu pids\n");
    v2_jobs(&root);
    assert_eq!(
        get(&root.join("rexec/cgroup.subtree_control")),
        "cpu pids\n"
    );
}

#[test]
fn v2_weight_stat_events_and_kill_files() {
    let (_dir, root) = v2_tree("cpu pids", "cpu pids\n");
    let jobs = v2_jobs(&root);
    let job = |f: &str| root.join("rexec/node1/job-11").join(f);
    jobs.create_job(11).unwrap();
    assert!(matches!(
        jobs.set_weight(11, 100),
        Err(CgroupError::ControllerMissing {
            controller: "cpu",
            ..
        })
    ));
    put(&job("cpu.weight"), "100\n");
    jobs.set_weight(11, 10_000).unwrap();
    assert_eq!(jobs.weight(11).unwrap(), 10_000);
    assert!(jobs.set_weight(11, 0).is_err());
    assert_eq!(jobs.weight_range(), WeightRange::V2_WEIGHT);

    put(
        &job("cpu.stat"),
        "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n",
    );
    assert_eq!(jobs.usage(11).unwrap(), Duration::from_micros(2500));
    put(&job("cpu.stat"), "user_usec 2000\n");
    let err = jobs.usage(11).unwrap_err().to_string();
    assert!(
        err.contains("cpu.stat") && err.contains("usage_usec"),
        "{err}"
    );

    put(&job("cgroup.events"), "populated 1\nfrozen 0\n");
    put(&job("cgroup.freeze"), "0\n");
    assert!(!jobs.backend().is_frozen(11).unwrap());
    assert!(jobs.backend().freeze(11).unwrap());
    assert_eq!(&get(&job("cgroup.freeze"))[..1], "1");
    put(&job("cgroup.events"), "populated 1\nfrozen 1\n");
    assert!(jobs.backend().is_frozen(11).unwrap());

    put(&job("cgroup.kill"), "");
    put(&job("cgroup.procs"), "");
    jobs.backend().kill_all(11).unwrap();
    assert_eq!(get(&job("cgroup.kill")), "1");

    assert_eq!(jobs.join(11).unwrap().paths(), &[job("cgroup.procs")]);
    assert_eq!(jobs.jobs().unwrap(), vec![11]);
}

#[test]
fn v2_memory_limit_and_kills_through_the_backend() {
    let (_dir, root) = v2_tree("cpu pids memory", "");
    let jobs = v2_jobs(&root);
    assert_eq!(
        get(&root.join("rexec/node1/cgroup.subtree_control")),
        "+memory"
    );
    let job = |f: &str| root.join("rexec/node1/job-12").join(f);
    jobs.create_job(12).unwrap();
    // Without the controller's files in the job: named, not a silent no-limit.
    assert!(matches!(
        jobs.set_memory_limit(12, 1 << 20),
        Err(CgroupError::ControllerMissing {
            controller: "memory",
            ..
        })
    ));
    assert_eq!(jobs.oom_kills(12).unwrap(), 0);
    put(&job("memory.max"), "");
    put(
        &job("memory.events"),
        "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n",
    );
    jobs.set_memory_limit(12, 48 << 20).unwrap();
    assert_eq!(get(&job("memory.max")), "50331648");
    assert_eq!(jobs.oom_kills(12).unwrap(), 1);
}

#[test]
fn v1_memory_hierarchy_holds_the_job_its_limit_and_kills() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    fs::create_dir_all(base.join("memory")).unwrap();
    let mounts = V1Mounts {
        memory: Some(base.join("memory")),
        ..v1_mounts(base)
    };
    for h in ["cpu", "cpuacct", "pids", "freezer"] {
        fs::create_dir_all(base.join(h)).unwrap();
    }
    let jobs =
        JobCgroups::open(Hierarchy::V1(mounts), &ParentName::new("rexec-t").unwrap()).unwrap();
    jobs.create_job(3).unwrap();
    let job = base.join("memory/rexec-t/job-3");
    assert!(job.is_dir(), "the job joins the memory hierarchy");
    assert!(
        jobs.join(3)
            .unwrap_err()
            .to_string()
            .contains("cgroup.procs"),
        "fake tree: no cgroup.procs to open"
    );
    put(&job.join("memory.limit_in_bytes"), "");
    jobs.set_memory_limit(3, 8 << 20).unwrap();
    assert_eq!(get(&job.join("memory.limit_in_bytes")), "8388608");
    put(
        &job.join("memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n",
    );
    assert_eq!(jobs.oom_kills(3).unwrap(), 4);
    // Without the memory controller mounted: a clear error, and no kills to report.
    let plain = v1_jobs(&base.join("other"));
    plain.create_job(4).unwrap();
    assert!(matches!(
        plain.set_memory_limit(4, 1 << 20),
        Err(CgroupError::ControllerMissing {
            controller: "memory",
            ..
        })
    ));
    assert_eq!(plain.oom_kills(4).unwrap(), 0);
}

#[test]
fn v2_without_cgroup_kill_signals_each_listed_process() {
    let (_dir, root) = v2_tree("cpu pids", "cpu pids\n");
    let jobs = v2_jobs(&root);
    jobs.create_job(12).unwrap();
    let mut victim = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    put(
        &root.join("rexec/node1/job-12/cgroup.procs"),
        &format!("{}\n", victim.id()),
    );
    jobs.backend().kill_all(12).unwrap();
    let status = victim.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9));
}

#[test]
fn v2_runnable_counts_from_cgroup_threads() {
    let (dir, root) = v2_tree("cpu pids", "cpu pids\n");
    let jobs = v2_jobs(&root).with_proc_root(dir.path().join("proc"));
    jobs.create_job(13).unwrap();
    put(&root.join("rexec/node1/job-13/cgroup.threads"), "7\n8\n");
    put(&dir.path().join("proc/7/stat"), "7 (a b) R 1");
    put(&dir.path().join("proc/8/stat"), "8 (c) R 1");
    assert_eq!(jobs.runnable(13).unwrap(), 2);
}

/// A v2 tree offering cpuset, with the effective CPUs of the root (the machine's) and
/// of `rexec` (what `rexec/node1` may use), and the parent's `cpuset.cpus`.
fn v2_cpuset_tree(offered: &str, machine: &str, allowed: &str) -> (tempfile::TempDir, PathBuf) {
    let (dir, root) = v2_tree(offered, "");
    put(&root.join("cpuset.cpus.effective"), machine);
    put(&root.join("rexec/cpuset.cpus.effective"), allowed);
    put(&root.join("rexec/node1/cpuset.cpus"), "");
    (dir, root)
}

fn v2_pinned(root: &Path, cpus: &str) -> Result<JobCgroups> {
    JobCgroups::open_pinned(
        Hierarchy::V2 {
            root: root.to_path_buf(),
        },
        &ParentName::new("rexec/node1").unwrap(),
        Some(cpus.parse().unwrap()),
    )
}

#[test]
fn v2_pinned_parent_gets_cpuset_above_it_and_its_cpus() {
    let (_dir, root) = v2_cpuset_tree("cpuset cpu pids", "0-3\n", "0-1\n");
    let jobs = v2_pinned(&root, "1").unwrap();
    assert_eq!(jobs.cpus().map(ToString::to_string).as_deref(), Some("1"));
    // One write per controller: the last one left in each fake file is cpuset in the
    // root and in the parent's parent, and pids in the parent, whose children need
    // no cpuset of their own.
    assert_eq!(get(&root.join("cgroup.subtree_control")), "+cpuset");
    assert_eq!(get(&root.join("rexec/cgroup.subtree_control")), "+cpuset");
    assert_eq!(
        get(&root.join("rexec/node1/cgroup.subtree_control")),
        "+pids"
    );
    assert_eq!(get(&root.join("rexec/node1/cpuset.cpus")), "1");

    // Job cgroups need no cpuset file: the parent's CPUs confine them.
    jobs.create_job(4).unwrap();
    let job = root.join("rexec/node1/job-4");
    assert_eq!(fs::read_dir(&job).unwrap().count(), 0, "nothing written");
    put(&job.join("cgroup.procs"), "");
    assert_eq!(jobs.join(4).unwrap().paths(), &[job.join("cgroup.procs")]);

    // Already enabled: cpuset is not written again.
    let (_dir, root) = v2_cpuset_tree("cpuset cpu pids", "0-3\n", "0-3\n");
    for d in [root.clone(), root.join("rexec")] {
        put(&d.join("cgroup.subtree_control"), "cpuset cpu pids\n");
    }
    v2_pinned(&root, "0,2-3").unwrap();
    assert_eq!(
        get(&root.join("rexec/cgroup.subtree_control")),
        "cpuset cpu pids\n"
    );
    assert_eq!(get(&root.join("rexec/node1/cpuset.cpus")), "0,2-3");
}

#[test]
fn v2_pinned_refuses_cpus_the_machine_or_the_parent_lacks_writing_nothing() {
    let (_dir, root) = v2_cpuset_tree("cpuset cpu pids", "0-3\n", "0-1\n");
    let err = v2_pinned(&root, "1,7").unwrap_err();
    assert!(
        matches!(err, CgroupError::NoSuchCpu { cpu: 7, .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("CPU 7 does not exist") && text.contains("0-3"),
        "{text}"
    );
    let err = v2_pinned(&root, "0-2").unwrap_err();
    assert!(
        matches!(err, CgroupError::CpuNotAllowed { cpu: 2, .. }),
        "{err}"
    );
    let text = err.to_string();
    let allowed = root.join("rexec/cpuset.cpus.effective");
    assert!(
        text.contains("CPU 2 is not available") && text.contains(&allowed.display().to_string()),
        "{text}"
    );
    assert_eq!(
        get(&root.join("rexec/node1/cpuset.cpus")),
        "",
        "not written"
    );

    // No cpuset offered: a clear error naming the controller.
    let (_dir, root) = v2_cpuset_tree("cpu pids", "0-3\n", "0-1\n");
    let err = v2_pinned(&root, "0").unwrap_err();
    assert!(
        matches!(
            err,
            CgroupError::ControllerMissing {
                controller: "cpuset",
                ..
            }
        ),
        "{err}"
    );
    // Without pinning the same tree is fine, and nothing about cpuset is written.
    let jobs = v2_jobs(&root);
    assert_eq!(jobs.cpus(), None);
    assert_eq!(get(&root.join("rexec/node1/cpuset.cpus")), "");
}

/// A v1 tree with a separate cpuset hierarchy: the machine has CPUs 0-3 and memory
/// node 0; the parent exists with the empty cpuset files a new v1 cgroup starts with.
fn v1_cpuset_tree(base: &Path) -> V1Mounts {
    for h in ["cpu", "cpuacct", "pids", "freezer"] {
        fs::create_dir_all(base.join(h)).unwrap();
    }
    let cs = base.join("cpuset");
    put(&cs.join("cpuset.cpus"), "0-3\n");
    put(&cs.join("cpuset.effective_cpus"), "0-3\n");
    put(&cs.join("cpuset.mems"), "0\n");
    put(&cs.join("rexec-t/cpuset.cpus"), "");
    put(&cs.join("rexec-t/cpuset.mems"), "");
    V1Mounts {
        cpuset: Some(cs),
        ..v1_mounts(base)
    }
}

#[test]
fn v1_pinned_parent_inherits_mems_takes_its_cpus_and_a_failed_job_copy_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mounts = v1_cpuset_tree(dir.path());
    let parent = ParentName::new("rexec-t").unwrap();
    let pinned = |cpus: &str| {
        JobCgroups::open_pinned(
            Hierarchy::V1(mounts.clone()),
            &parent,
            Some(cpus.parse().unwrap()),
        )
    };
    let cs = dir.path().join("cpuset/rexec-t");
    let err = pinned("4").unwrap_err().to_string();
    assert!(err.contains("CPU 4 does not exist"), "{err}");
    assert_eq!(get(&cs.join("cpuset.cpus")), "0-3", "inherited, not pinned");

    let jobs = pinned("2-3").unwrap();
    assert_eq!(get(&cs.join("cpuset.cpus")), "2-3");
    assert_eq!(get(&cs.join("cpuset.mems")), "0");
    let AnyCgroup::V1(v1) = jobs.backend() else {
        panic!("v1")
    };
    assert_eq!(
        v1.hierarchies().last(),
        Some(&dir.path().join("cpuset").as_path())
    );

    // The fake job directory has no cpuset files to copy into (the kernel makes them):
    // the copy fails, and the failed create leaves no directory in any hierarchy.
    let err = jobs.create_job(1).unwrap_err().to_string();
    assert!(err.contains("cpuset/rexec-t/job-1/cpuset.cpus"), "{err}");
    for h in ["cpu", "cpuacct", "pids", "freezer", "cpuset"] {
        assert!(!dir.path().join(h).join("rexec-t/job-1").exists(), "{h}");
    }
}

#[test]
fn v1_unpinned_cleans_up_what_a_pinned_run_left_in_the_cpuset_hierarchy() {
    let dir = tempfile::tempdir().unwrap();
    let mounts = v1_cpuset_tree(dir.path());
    let jobs =
        JobCgroups::open(Hierarchy::V1(mounts), &ParentName::new("rexec-t").unwrap()).unwrap();
    let AnyCgroup::V1(v1) = jobs.backend() else {
        panic!("v1")
    };
    assert!(
        !v1.hierarchies()
            .contains(&dir.path().join("cpuset").as_path())
    );
    assert_eq!(
        get(&dir.path().join("cpuset/rexec-t/cpuset.cpus")),
        "",
        "unpinned: cpuset untouched"
    );
    // A job an earlier pinned run left only in the cpuset hierarchy.
    let left = dir.path().join("cpuset/rexec-t/job-9");
    fs::create_dir(&left).unwrap();
    put(&left.join("cgroup.procs"), "");
    assert_eq!(jobs.jobs().unwrap(), vec![9]);
    assert!(jobs.backend().job_exists(9));
    assert!(jobs.procs(9).unwrap().is_empty());
    fs::remove_file(left.join("cgroup.procs")).unwrap();
    jobs.backend().remove_job(9).unwrap();
    assert!(!left.exists());
}

#[test]
fn v1_quota_writes_the_period_then_the_quota_and_minus_one_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = v1_jobs(dir.path());
    let job = |f: &str| dir.path().join("cpu/rexec-t/job-5").join(f);
    jobs.create_job(5).unwrap();
    put(&job("cpu.cfs_period_us"), "100000\n");
    put(&job("cpu.cfs_quota_us"), "-1\n");
    assert_eq!(jobs.backend().quota(5).unwrap(), None);
    // A fake file is not truncated on write, as the kernel's are not: start empty.
    let clear = || {
        put(&job("cpu.cfs_period_us"), "");
        put(&job("cpu.cfs_quota_us"), "");
    };
    let cap = CpuQuota::for_cpus(0.444, 20_000);
    clear();
    jobs.set_quota(5, cap).unwrap();
    assert_eq!(get(&job("cpu.cfs_period_us")), "20000");
    assert_eq!(get(&job("cpu.cfs_quota_us")), "8880");
    assert_eq!(jobs.backend().quota(5).unwrap(), cap);
    put(&job("cpu.cfs_quota_us"), "");
    jobs.set_quota(5, None).unwrap();
    assert_eq!(get(&job("cpu.cfs_quota_us")), "-1");
    assert_eq!(jobs.backend().quota(5).unwrap(), None);
    put(&job("cpu.cfs_quota_us"), "lots\n");
    let err = jobs.backend().quota(5).unwrap_err().to_string();
    assert!(err.contains("cpu.cfs_quota_us"), "{err}");
}

#[test]
fn v2_quota_is_one_cpu_max_line() {
    let (_dir, root) = v2_tree("cpu pids", "cpu pids\n");
    let jobs = v2_jobs(&root);
    let job = |f: &str| root.join("rexec/node1/job-12").join(f);
    jobs.create_job(12).unwrap();
    // No cpu.max: the cpu controller is not enabled for the job.
    assert!(matches!(
        jobs.set_quota(12, None),
        Err(CgroupError::ControllerMissing {
            controller: "cpu",
            ..
        })
    ));
    put(&job("cpu.max"), "max 100000\n");
    assert_eq!(jobs.backend().quota(12).unwrap(), None);
    let cap = CpuQuota::for_cpus(0.889, 20_000);
    put(&job("cpu.max"), "");
    jobs.set_quota(12, cap).unwrap();
    assert_eq!(get(&job("cpu.max")), "17780 20000");
    assert_eq!(jobs.backend().quota(12).unwrap(), cap);
    put(&job("cpu.max"), "");
    jobs.set_quota(12, None).unwrap();
    assert_eq!(get(&job("cpu.max")), "max 100000");
}
