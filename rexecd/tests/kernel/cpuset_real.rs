//! Nodes that own their CPUs, on the real kernel: a parent pinned through the cpuset
//! controller (v1 here, with its own `cpuset` hierarchy beside `cpu`; v2 in the VM)
//! confines every process of every job to its CPUs, refuses CPUs the machine lacks or
//! the parent's parent may not use, survives a restart pinned elsewhere, and leaves no
//! cgroup behind in either hierarchy.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rexecd::cgroup::detect::{self, Hierarchy};
use rexecd::cgroup::{CgroupError, CpuSet, JobCgroups, ParentName};
use rexecd::sys::ProcessId;

use crate::util::{TestParent, can_run, cpus_allowed, eventually, is_dead, start_in};

const BURN: &str = "while :; do :; done";

/// Where the parent `name` sits in the hierarchy holding `cpuset`.
fn cpuset_dir(name: &str) -> PathBuf {
    match detect::detect().unwrap() {
        Hierarchy::V1(mounts) => mounts
            .cpuset
            .expect("a v1 host with cpu also mounts cpuset")
            .join(name),
        Hierarchy::V2 { root } => root.join(name),
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_string()
}

/// The CPUs this machine has online.
fn online() -> CpuSet {
    read(Path::new("/sys/devices/system/cpu/online"))
        .parse()
        .unwrap()
}

/// Pins a parent to `cpu` and checks that a job's processes, a forked child included,
/// run only there and sit in the job's cpuset cgroup; then that teardown removes the
/// job and the parent from every hierarchy.
fn pinned_job_runs_only_on(cpu: u32) {
    let tag = format!("pin{cpu}");
    let t = TestParent::pinned(&tag, &cpu.to_string());
    let jobs = &t.jobs;
    let parent = cpuset_dir(&t.name);
    assert_eq!(read(&parent.join("cpuset.cpus")), cpu.to_string());
    let effective = match jobs.version() {
        rexecd::cgroup::CgroupVersion::V1 => "cpuset.effective_cpus",
        rexecd::cgroup::CgroupVersion::V2 => "cpuset.cpus.effective",
    };
    assert_eq!(read(&parent.join(effective)), cpu.to_string());

    jobs.create_job(1).unwrap();
    let job = parent.join("job-1");
    assert!(job.is_dir(), "{}", job.display());
    let mut burner = start_in(jobs, 1, &format!("sleep 600 & {BURN}"));
    let procs = eventually(Duration::from_secs(5), || {
        let p = jobs.procs(1).unwrap();
        (p.len() == 2).then_some(p)
    })
    .expect("the shell and its forked sleeper in the job");
    for pid in &procs {
        assert_eq!(cpus_allowed(*pid), cpu.to_string(), "{pid:?}");
    }
    // Each process is in the job's cpuset cgroup (on v1 as well as in its cpu cgroup).
    let in_cpuset = read(&job.join("cgroup.procs"));
    let listed: Vec<ProcessId> = in_cpuset
        .lines()
        .map(|l| ProcessId(l.parse().unwrap()))
        .collect();
    for pid in &procs {
        assert!(listed.contains(pid), "{pid:?} not in {}", job.display());
    }
    eprintln!(
        "pinned to CPU {cpu}: {} processes with Cpus_allowed_list {}",
        procs.len(),
        cpus_allowed(procs[0])
    );

    jobs.destroy(1).unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(burner.wait().unwrap().signal(), Some(9));
    for pid in &procs {
        assert!(is_dead(*pid), "{pid:?} survived");
    }
    assert!(!job.exists(), "job cgroup left in the cpuset hierarchy");
    assert!(
        !jobs.job_path(1).exists(),
        "job cgroup left in the cpu hierarchy"
    );
    let cpu_parent = jobs.parent_path();
    drop(t);
    assert!(!parent.exists(), "parent left in the cpuset hierarchy");
    assert!(!cpu_parent.exists(), "parent left in the cpu hierarchy");
}

#[test]
fn a_parent_pinned_to_cpu_0_confines_its_jobs_and_is_removed_everywhere() {
    if !can_run("a_parent_pinned_to_cpu_0_confines_its_jobs_and_is_removed_everywhere") {
        return;
    }
    pinned_job_runs_only_on(0);
}

#[test]
fn a_parent_pinned_to_the_last_cpu_confines_its_jobs() {
    if !can_run("a_parent_pinned_to_the_last_cpu_confines_its_jobs") {
        return;
    }
    let last = online().iter().last().unwrap();
    assert!(last >= 1, "this test wants a machine with 2 CPUs or more");
    pinned_job_runs_only_on(last);
}

#[test]
fn a_cpu_the_machine_lacks_is_refused_naming_it_and_leaves_nothing() {
    if !can_run("a_cpu_the_machine_lacks_is_refused_naming_it_and_leaves_nothing") {
        return;
    }
    let name = format!("rexec-test-{}-nosuchcpu", std::process::id());
    let parent = ParentName::new(&name).unwrap();
    let missing = online().iter().last().unwrap() + 1;
    let err = JobCgroups::detect_pinned(&parent, Some(format!("0,{missing}").parse().unwrap()))
        .unwrap_err();
    assert!(
        matches!(err, CgroupError::NoSuchCpu { cpu, .. } if cpu == missing),
        "{err}"
    );
    let text = err.to_string();
    eprintln!("refused: {text}");
    assert!(
        text.contains(&format!("CPU {missing} does not exist")),
        "{text}"
    );
    assert!(!text.contains('\n'));
    assert!(
        !cpuset_dir(&name).exists(),
        "nothing left in the cpuset hierarchy"
    );
    let cpu_dir = JobCgroups::detect(&parent).unwrap();
    let dir = cpu_dir.parent_path();
    cpu_dir.remove_parent().unwrap();
    assert!(!dir.exists());
}

#[test]
fn a_cpu_the_parents_parent_may_not_use_is_refused() {
    if !can_run("a_cpu_the_parents_parent_may_not_use_is_refused") {
        return;
    }
    let last = online().iter().last().unwrap();
    assert!(last >= 1, "this test wants a machine with 2 CPUs or more");
    // An outer cgroup confined to CPU 0, as an admin might make, and rexecd's parent in it.
    let outer = TestParent::pinned("outer", "0");
    let name = format!("{}/node", outer.name);
    let parent = ParentName::new(&name).unwrap();
    let err =
        JobCgroups::detect_pinned(&parent, Some(last.to_string().parse().unwrap())).unwrap_err();
    assert!(
        matches!(err, CgroupError::CpuNotAllowed { cpu, .. } if cpu == last),
        "{err}"
    );
    let text = err.to_string();
    eprintln!("refused: {text}");
    assert!(
        text.contains(&format!("CPU {last} is not available")),
        "{text}"
    );
    assert!(text.contains(&outer.name), "{text}");
    assert!(
        !cpuset_dir(&name).exists(),
        "the refused parent was removed"
    );
    // CPU 0 is fine there.
    let inner = JobCgroups::detect_pinned(&parent, Some("0".parse().unwrap())).unwrap();
    assert_eq!(read(&cpuset_dir(&name).join("cpuset.cpus")), "0");
    inner.remove_parent().unwrap();
    drop(outer);
}

/// A restart pinned to other CPUs while jobs of the earlier run (pinned elsewhere) are
/// still there: v1 refuses to narrow the parent below its children, so they are swept
/// first; either way the old job dies and the parent ends up on the new CPUs.
#[test]
fn a_restart_pinned_elsewhere_removes_the_earlier_runs_jobs() {
    if !can_run("a_restart_pinned_elsewhere_removes_the_earlier_runs_jobs") {
        return;
    }
    let last = online().iter().last().unwrap();
    assert!(last >= 1, "this test wants a machine with 2 CPUs or more");
    let earlier = TestParent::pinned("repin", "0");
    earlier.jobs.create_job(3).unwrap();
    let mut sleeper = start_in(&earlier.jobs, 3, "exec sleep 600");
    let pid = ProcessId(sleeper.id() as i32);
    assert!(
        eventually(Duration::from_secs(5), || (cpus_allowed(pid) == "0")
            .then_some(()))
        .is_some()
    );
    let parent = ParentName::new(&earlier.name).unwrap();
    let restarted =
        JobCgroups::detect_pinned(&parent, Some(last.to_string().parse().unwrap())).unwrap();
    restarted.sweep_stale().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(sleeper.wait().unwrap().signal(), Some(9));
    assert!(restarted.jobs().unwrap().is_empty());
    assert_eq!(
        read(&cpuset_dir(&earlier.name).join("cpuset.cpus")),
        last.to_string()
    );
    // A new job runs on the new CPU.
    restarted.create_job(4).unwrap();
    let mut burner = start_in(&restarted, 4, BURN);
    let pid = ProcessId(burner.id() as i32);
    assert_eq!(cpus_allowed(pid), last.to_string());
    restarted.destroy(4).unwrap();
    assert_eq!(burner.wait().unwrap().signal(), Some(9));
    drop(earlier);
}
