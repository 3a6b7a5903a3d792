//! What is particular to `JobCommand::spawn` starting a job without a fork of rexecd,
//! for real: rexecd's own threads keeping their ids while the child drops its, `PATH`
//! lookup in the job's own environment and duplicate names, scripts without `#!`, the
//! errors a failed start gives (with no child left), and the directory report. What a
//! job gets (ids, groups, cgroup, environment, sessions, limits) is in `spawn_real`.

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;

use rexecd::spawn::{JobCommand, JobStdio, SpawnError};

use crate::util::{TestParent, can_run, cpu_cgroup_line, finish, run_job, test_user};

/// Runs `command` as the test user in job 1 of `t`; returns its stdout and exit code.
async fn run(t: &TestParent, command: JobCommand) -> (String, i32) {
    let ran = run_job(t, command).await;
    (ran.stdout, ran.code)
}

/// The uids (real, effective, saved, fs) of every thread of this test process.
fn own_thread_uids() -> Vec<String> {
    let mut uids = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let status = std::fs::read_to_string(task.unwrap().path().join("status"));
        if let Ok(status) = status {
            let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
            uids.push(line.to_string());
        }
    }
    uids
}

#[tokio::test]
async fn spawned_job_has_the_users_ids_and_cgroup_and_rexecd_keeps_its_own() {
    if !can_run("spawned_job_has_the_users_ids_and_cgroup_and_rexecd_keeps_its_own") {
        return;
    }
    let user = test_user();
    let t = TestParent::new("vfork-ids");
    t.jobs.create_job(1).unwrap();
    // A second thread of "rexecd": the C library's setuid would change its ids too.
    let (stop, parked) = std::sync::mpsc::channel::<()>();
    let other = std::thread::spawn(move || parked.recv());
    let cmd = JobCommand::new("sh")
        .args(["-c", "id -u; id -G; cat /proc/self/cgroup"])
        .env("PATH", "/usr/bin:/bin");
    let (out, code) = run(&t, cmd).await;
    assert_eq!(code, 0, "{out}");
    let mut lines = out.lines();
    assert_eq!(lines.next().unwrap(), user.uid().0.to_string());
    let groups: BTreeSet<u32> = lines
        .next()
        .unwrap()
        .split_whitespace()
        .map(|g| g.parse().unwrap())
        .collect();
    let expected: BTreeSet<u32> = user.groups().iter().map(|g| g.0).collect();
    assert_eq!(groups, expected);
    let line = cpu_cgroup_line(&out).unwrap();
    assert!(line.ends_with(&format!("/{}/job-1", t.name)), "{line}");
    for uids in own_thread_uids() {
        assert_eq!(
            uids.split_whitespace().collect::<Vec<_>>(),
            ["Uid:", "0", "0", "0", "0"]
        );
    }
    stop.send(()).unwrap();
    other.join().unwrap().unwrap();
}

#[tokio::test]
async fn environment_is_exact_and_path_is_the_jobs_own() {
    if !can_run("environment_is_exact_and_path_is_the_jobs_own") {
        return;
    }
    let t = TestParent::new("vfork-env");
    t.jobs.create_job(1).unwrap();
    // `env` is found along the job's PATH (a missing directory first), and a name
    // given twice keeps its last value, as std's Command does.
    let cmd = JobCommand::new("env").envs([
        ("PATH", "/nonexistent:/usr/bin:/bin"),
        ("REXEC_A", "1"),
        ("WITH_SPACE", "a b =c"),
        ("REXEC_A", "2"),
    ]);
    let (out, code) = run(&t, cmd).await;
    assert_eq!(code, 0);
    let seen: Vec<&str> = out.lines().collect();
    assert_eq!(
        seen,
        [
            "PATH=/nonexistent:/usr/bin:/bin",
            "REXEC_A=2",
            "WITH_SPACE=a b =c"
        ]
    );
}

#[tokio::test]
async fn a_script_without_an_interpreter_line_runs_under_sh() {
    if !can_run("a_script_without_an_interpreter_line_runs_under_sh") {
        return;
    }
    let t = TestParent::new("vfork-script");
    t.jobs.create_job(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("plain");
    std::fs::write(&script, "echo ran \"$1\"\nexit 7\n").unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cmd = JobCommand::new(&script)
        .arg("arg1")
        .env("PATH", "/usr/bin:/bin");
    assert_eq!(run(&t, cmd).await, ("ran arg1\n".to_string(), 7));
}

#[tokio::test]
async fn failed_starts_give_the_errno_and_leave_no_child() {
    if !can_run("failed_starts_give_the_errno_and_leave_no_child") {
        return;
    }
    let t = TestParent::new("vfork-fail");
    t.jobs.create_job(1).unwrap();
    let start = |cmd: JobCommand| {
        cmd.spawn(test_user(), t.jobs.join(1).unwrap(), JobStdio::Pipes)
            .map(drop)
    };
    let kind = |r: Result<(), SpawnError>| match r {
        Err(SpawnError::Start(e)) => e.kind(),
        other => panic!("{other:?}"),
    };
    let not_found = start(JobCommand::new("no-such-program").env("PATH", "/usr/bin:/bin"));
    assert_eq!(kind(not_found), ErrorKind::NotFound);
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let plain = dir.path().join("not-executable");
    std::fs::write(&plain, "true\n").unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(
        kind(start(JobCommand::new(&plain))),
        ErrorKind::PermissionDenied
    );
    assert_eq!(
        kind(start(JobCommand::new("/bin/true").env("A", "x\0y"))),
        ErrorKind::InvalidInput
    );
    // Nothing is left in the job cgroup: every failed child was reaped.
    let procs = t.jobs.join(1).unwrap().paths()[0].clone();
    assert_eq!(std::fs::read_to_string(procs).unwrap_or_default(), "");
}

#[tokio::test]
async fn working_directory_report_and_fallback() {
    if !can_run("working_directory_report_and_fallback") {
        return;
    }
    let user = test_user();
    let t = TestParent::new("vfork-cwd");
    t.jobs.create_job(1).unwrap();
    let cmd = JobCommand::new("/bin/pwd").cwd("/nonexistent/dir");
    let (child, report) = cmd
        .spawn(user, t.jobs.join(1).unwrap(), JobStdio::Pipes)
        .unwrap();
    assert_eq!(report.entered(), Some(user.home()));
    let ran = finish(child).await;
    assert_eq!(
        (ran.stdout.trim(), ran.code),
        (user.home().to_str().unwrap(), 0)
    );
}
