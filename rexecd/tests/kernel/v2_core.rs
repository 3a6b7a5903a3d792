//! The v2 backend against the real kernel on a hybrid host, where a cgroup2 mount sits
//! beside the v1 controllers without `cpu`. The core v2 files (cgroup.procs,
//! cgroup.threads, cpu.stat usage, cgroup.freeze, cgroup.kill) still work there, so the
//! v2 teardown path runs for real even though weights cannot be set.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;

use rexecd::cgroup::v2::V2Cgroups;
use rexecd::cgroup::{AnyCgroup, CgroupError, JobCgroups, ParentName, detect};

use crate::util::{TestParent, can_run, cannot_run, eventually, is_dead, start_in};

#[test]
fn v2_core_files_meter_and_teardown_on_the_hybrid_unified_mount() {
    if !can_run("v2_core_files_meter_and_teardown_on_the_hybrid_unified_mount") {
        return;
    }
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mounts = detect::parse_mountinfo(&text, Path::new("/")).unwrap();
    let (Some(unified), true) = (mounts.unified, mounts.v1.contains_key("cpu")) else {
        // Not silently: CI on a host of another kind fails here unless
        // REXEC_TESTS_ALLOW_SKIP=1 says the hybrid path is covered elsewhere (the
        // generic tests cover v2 with its cpu controller on unified hosts).
        cannot_run(
            "v2_core_files_meter_and_teardown_on_the_hybrid_unified_mount",
            "not a hybrid host (a cgroup2 mount beside the v1 cpu controller)",
        );
        return;
    };
    let name = format!("rexec-test-{}-v2core", std::process::id());
    let parent = ParentName::new(&name).unwrap();
    let backend = AnyCgroup::V2(V2Cgroups::new(unified, &parent));
    let t = TestParent::from_jobs(JobCgroups::with_backend(backend).unwrap(), name);
    let jobs = &t.jobs;
    jobs.create_job(1).unwrap();

    let mut burner = start_in(jobs, 1, "while :; do :; done");
    let mut launcher = start_in(
        jobs,
        1,
        "setsid sh -c 'sleep 600 </dev/null >/dev/null 2>&1 &'",
    );
    assert!(launcher.wait().unwrap().success());
    let procs = eventually(Duration::from_secs(5), || {
        let p = jobs.procs(1).unwrap();
        (p.len() == 2).then_some(p)
    })
    .expect("burner and daemon in the v2 job");
    // The daemon is runnable for a moment after exec, then sleeps; the burner stays R.
    let runnable = eventually(Duration::from_secs(5), || {
        let r = jobs.runnable(1).unwrap();
        (r == 1).then_some(r)
    });
    assert_eq!(runnable, Some(1));
    let before = jobs.usage(1).unwrap();
    assert!(
        eventually(Duration::from_secs(10), || (jobs.usage(1).unwrap()
            >= before + Duration::from_millis(50))
        .then_some(()))
        .is_some()
    );
    // No cpu controller on this cgroup2 mount: a typed error, not a confusing ENOENT.
    assert!(matches!(
        jobs.set_weight(1, 100),
        Err(CgroupError::ControllerMissing {
            controller: "cpu",
            ..
        })
    ));

    jobs.destroy(1).unwrap();
    assert_eq!(burner.wait().unwrap().signal(), Some(9));
    for pid in procs {
        assert!(is_dead(pid), "{pid:?} survived");
    }
    assert!(!jobs.job_path(1).exists());
    let parent_dir = jobs.parent_path();
    drop(t);
    assert!(!parent_dir.exists(), "parent removed");
}
