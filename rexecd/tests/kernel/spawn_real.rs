//! Spawning as an unprivileged user inside a job cgroup (`JobCommand::spawn`, the path
//! every session takes, without a fork of rexecd), for real: ids and groups after the
//! privilege drop while rexecd's own threads keep theirs, cgroup membership from the
//! first instruction, the exact environment and `PATH` lookup in it, scripts without
//! `#!`, the working-directory report and fallback, sessions and terminals, the
//! hardening limits, and refusals and failed starts (with no child left).

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;

use proto::node::WindowSize;
use rexecd::pty::Pty;
use rexecd::spawn::SessionMode;
use rexecd::spawn::{JobCommand, JobLimits, JobStdio, JobUser, SpawnError, SpawnPolicy};
use tokio::io::AsyncReadExt;

use crate::util::{TestParent, can_run, cpu_cgroup_line, finish, run_job, stat_field, test_user};

/// Runs `command` as the test user in job 1 of `t`, which must succeed; its stdout.
async fn stdout(t: &TestParent, command: JobCommand) -> String {
    run_job(t, command).await.succeeded()
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

/// The numbers after `key:` in /proc/<pid>/status text.
fn status_ids(status: &str, key: &str) -> Vec<u32> {
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("{key}:")))
        .unwrap();
    line[key.len() + 1..]
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect()
}

#[tokio::test]
async fn runs_as_the_user_with_its_groups_inside_the_job_cgroup() {
    if !can_run("runs_as_the_user_with_its_groups_inside_the_job_cgroup") {
        return;
    }
    let user = test_user();
    let t = TestParent::new("spawn-ids");
    t.jobs.create_job(1).unwrap();
    // A second thread of "rexecd": the C library's setuid would change its ids too.
    let (stop, parked) = std::sync::mpsc::channel::<()>();
    let other = std::thread::spawn(move || parked.recv());
    let run = |program: &str, args: &[&str]| {
        let cmd = JobCommand::new(program)
            .args(args)
            .env("PATH", "/usr/bin:/bin");
        stdout(&t, cmd)
    };

    assert_eq!(run("id", &["-u"]).await.trim(), user.uid().0.to_string());
    let groups: BTreeSet<u32> = run("id", &["-G"])
        .await
        .split_whitespace()
        .map(|g| g.parse().unwrap())
        .collect();
    let expected: BTreeSet<u32> = user.groups().iter().map(|g| g.0).collect();
    assert_eq!(groups, expected);
    assert!(
        expected.len() >= 2,
        "the test user has a supplementary group"
    );

    // Real, effective, saved and filesystem ids all dropped; no root group kept.
    let status = run("cat", &["/proc/self/status"]).await;
    assert_eq!(status_ids(&status, "Uid"), vec![user.uid().0; 4]);
    assert_eq!(status_ids(&status, "Gid"), vec![user.gid().0; 4]);
    let supplementary: BTreeSet<u32> = status_ids(&status, "Groups").into_iter().collect();
    assert_eq!(supplementary, expected);

    // `cat` reads its own cgroup: it was in the job before exec, nobody moved it after.
    let cgroup = run("cat", &["/proc/self/cgroup"]).await;
    let line = cpu_cgroup_line(&cgroup).unwrap();
    assert!(line.ends_with(&format!("/{}/job-1", t.name)), "{line}");
    // On v1 every job hierarchy was joined, not only cpu.
    if t.jobs.version() == rexecd::cgroup::CgroupVersion::V1 {
        let in_job = cgroup
            .lines()
            .filter(|l| l.ends_with(&format!("/{}/job-1", t.name)))
            .count();
        assert_eq!(in_job, t.jobs.join(1).unwrap().paths().len(), "{cgroup}");
    }
    // The job dropped its ids; this process's threads kept theirs.
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
async fn environment_is_exactly_the_given_map() {
    if !can_run("environment_is_exactly_the_given_map") {
        return;
    }
    // The test process has PATH set; the child must not inherit it.
    assert!(std::env::var_os("PATH").is_some());
    let t = TestParent::new("spawn-env");
    t.jobs.create_job(1).unwrap();
    let given = [("REXEC_A", "1"), ("LANG", "C"), ("WITH_SPACE", "a b =c")];
    let cmd = JobCommand::new("/usr/bin/env").envs(given);
    let seen: BTreeSet<String> = stdout(&t, cmd).await.lines().map(str::to_string).collect();
    let wanted: BTreeSet<String> = given.iter().map(|(k, v)| format!("{k}={v}")).collect();
    assert_eq!(seen, wanted);

    // `env` is found along the job's PATH (a missing directory first), and a name
    // given twice keeps its last value, as std's Command does.
    let cmd = JobCommand::new("env").envs([
        ("PATH", "/nonexistent:/usr/bin:/bin"),
        ("REXEC_A", "1"),
        ("WITH_SPACE", "a b =c"),
        ("REXEC_A", "2"),
    ]);
    let out = stdout(&t, cmd).await;
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
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
    let t = TestParent::new("spawn-script");
    t.jobs.create_job(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("plain");
    // The script is written by another process (`install`): a file this process held
    // open for writing could be inherited by a child another test thread forks at that
    // moment, and exec would fail with "Text file busy" until that child's exec.
    let source = dir.path().join("plain.txt");
    std::fs::write(&source, "echo ran \"$1\"\nexit 7\n").unwrap();
    let installed = std::process::Command::new("install")
        .args(["-m", "0755"])
        .arg(&source)
        .arg(&script)
        .status()
        .unwrap();
    assert!(installed.success(), "install failed: {installed}");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let cmd = JobCommand::new(&script)
        .arg("arg1")
        .env("PATH", "/usr/bin:/bin");
    let ran = run_job(&t, cmd).await;
    assert_eq!((ran.stdout.as_str(), ran.code), ("ran arg1\n", 7));
}

#[tokio::test]
async fn working_directory_falls_back_to_home_then_root() {
    if !can_run("working_directory_falls_back_to_home_then_root") {
        return;
    }
    let user = test_user();
    let t = TestParent::new("spawn-cwd");
    t.jobs.create_job(1).unwrap();
    let pwd = async |cwd: &std::path::Path| {
        let cmd = JobCommand::new("/bin/pwd").cwd(cwd);
        stdout(&t, cmd).await.trim().to_string()
    };
    let home = user.home().to_str().unwrap().to_string();
    // The report says where the job really started.
    let cmd = JobCommand::new("/bin/pwd").cwd("/nonexistent/dir");
    let (child, report) = cmd
        .spawn(user, t.jobs.join(1).unwrap(), JobStdio::Pipes)
        .unwrap();
    assert_eq!(report.entered(), Some(user.home()));
    assert_eq!(finish(child).await.succeeded().trim(), home);
    assert_eq!(pwd("/tmp".as_ref()).await, "/tmp");
    assert_eq!(pwd("/nonexistent/rexec/dir".as_ref()).await, home);

    // A directory the user may not enter (root-owned, 0700) also falls back to home:
    // the check is made as the user, after the privilege drop.
    let private = tempfile::tempdir().unwrap();
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(pwd(private.path()).await, home);
}

#[test]
fn root_and_unknown_users_are_refused() {
    let err = JobUser::resolve("root", SpawnPolicy::default()).unwrap_err();
    assert!(matches!(err, SpawnError::RootRefused { .. }), "{err}");
    assert!(err.to_string().contains("allow root"), "{err}");
    let err = JobUser::resolve("rexec-no-such-user", SpawnPolicy::default()).unwrap_err();
    assert!(matches!(err, SpawnError::UnknownUser { .. }), "{err}");
    assert!(err.to_string().contains("rexec-no-such-user"));
    let err = JobUser::resolve("nul\0name", SpawnPolicy { allow_root: true }).unwrap_err();
    assert!(matches!(err, SpawnError::UnknownUser { .. }), "{err}");
    assert!(JobUser::resolve("root", SpawnPolicy { allow_root: true }).is_ok());
}

/// Reads `/proc/self/stat` of a child started in `mode` with its stdio on pipes.
async fn child_stat(t: &TestParent, mode: SessionMode) -> (i64, String) {
    let cmd = JobCommand::new("/bin/cat")
        .arg("/proc/self/stat")
        .session(mode);
    let (child, _report) = cmd
        .spawn(test_user(), t.jobs.join(1).unwrap(), JobStdio::Pipes)
        .unwrap();
    let pid = i64::from(child.id().unwrap());
    (pid, finish(child).await.succeeded())
}

#[tokio::test]
async fn new_session_makes_the_child_a_session_and_group_leader() {
    if !can_run("new_session_makes_the_child_a_session_and_group_leader") {
        return;
    }
    let t = TestParent::new("spawn-sid");
    t.jobs.create_job(1).unwrap();
    let (pid, stat) = child_stat(&t, SessionMode::NewSession).await;
    assert_eq!(stat_field(&stat, 5), pid, "process group");
    assert_eq!(stat_field(&stat, 6), pid, "session");
    assert_eq!(stat_field(&stat, 7), 0, "no controlling terminal");

    let (pid, stat) = child_stat(&t, SessionMode::Inherit).await;
    assert_ne!(
        stat_field(&stat, 6),
        pid,
        "inherit keeps the caller's session"
    );
}

#[tokio::test]
async fn tty_mode_takes_the_terminal_on_stdin_as_controlling_tty() {
    if !can_run("tty_mode_takes_the_terminal_on_stdin_as_controlling_tty") {
        return;
    }
    let t = TestParent::new("spawn-tty");
    t.jobs.create_job(1).unwrap();
    // The terminal as a `rexec -t` session has it: the job's stdio all on the slave,
    // its output read from the master until every slave holder is gone.
    let pty = Pty::open(WindowSize { rows: 24, cols: 80 }).unwrap();
    let cmd = JobCommand::new("/bin/cat")
        .arg("/proc/self/stat")
        .session(SessionMode::NewSessionWithTty);
    let (mut child, _report) = cmd
        .spawn(
            test_user(),
            t.jobs.join(1).unwrap(),
            JobStdio::Terminal(pty.slave),
        )
        .unwrap();
    let pid = i64::from(child.id().unwrap());
    let mut stat = String::new();
    let mut master = pty.master.clone();
    master.read_to_string(&mut stat).await.unwrap();
    assert!(child.wait().await.unwrap().success(), "{stat}");
    assert_eq!(stat_field(&stat, 6), pid, "session leader");
    assert_ne!(stat_field(&stat, 7), 0, "has a controlling terminal");
    assert_eq!(
        stat_field(&stat, 8),
        pid,
        "and is its foreground process group"
    );
}

#[tokio::test]
async fn failed_starts_give_the_errno_and_leave_no_child() {
    if !can_run("failed_starts_give_the_errno_and_leave_no_child") {
        return;
    }
    let t = TestParent::new("spawn-fail");
    t.jobs.create_job(1).unwrap();
    let start = |cmd: JobCommand| {
        cmd.spawn(test_user(), t.jobs.join(1).unwrap(), JobStdio::Pipes)
            .map(drop)
    };
    let kind = |r: Result<(), SpawnError>| match r {
        Err(SpawnError::Start(e)) => e.kind(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        kind(start(JobCommand::new("/nonexistent/program"))),
        ErrorKind::NotFound
    );
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
    assert!(t.jobs.procs(1).unwrap().is_empty());
}

/// rexecd runs on tokio's multi-threaded runtime: a job spawned from one of its worker
/// threads is in the job cgroup, and its pipes and exit reach the runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_spawned_on_a_multi_threaded_runtime_is_in_the_job_cgroup() {
    if !can_run("a_job_spawned_on_a_multi_threaded_runtime_is_in_the_job_cgroup") {
        return;
    }
    let t = TestParent::new("spawn-tokio");
    t.jobs.create_job(1).unwrap();
    let join = t.jobs.join(1).unwrap();
    let text = tokio::spawn(async move {
        let cmd = JobCommand::new("/bin/cat").arg("/proc/self/cgroup");
        let (child, _report) = cmd.spawn(test_user(), join, JobStdio::Pipes).unwrap();
        finish(child).await.succeeded()
    })
    .await
    .unwrap();
    let line = cpu_cgroup_line(&text).unwrap();
    assert!(line.ends_with(&format!("/{}/job-1", t.name)), "{line}");
}

/// The job's `/proc/self/status` and `/proc/self/limits`, whitespace collapsed.
async fn settings_of(t: &TestParent, limits: Option<JobLimits>) -> String {
    let mut command = JobCommand::new("/bin/sh").args([
        "-c",
        "grep -E '^(Umask|NoNewPrivs):' /proc/self/status; \
         grep -E 'Max (open files|core file size)' /proc/self/limits",
    ]);
    if let Some(limits) = limits {
        command = command.limits(limits);
    }
    stdout(t, command)
        .await
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test]
async fn a_job_has_no_new_privileges_by_default() {
    if !can_run("a_job_has_no_new_privileges_by_default") {
        return;
    }
    let t = TestParent::new("spawn-nnp");
    t.jobs.create_job(1).unwrap();
    let got = settings_of(&t, None).await;
    assert!(got.contains("NoNewPrivs: 1"), "{got}");
    assert!(got.contains("Umask: 0022"), "{got}");
    // A set-user-id-root copy of `id` runs with the job's uid, not root's; the same
    // program with new privileges allowed shows that the copy does work as set-user-id.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let id = dir.path().join("id");
    // Copied by another process, for the reason in
    // `a_script_without_an_interpreter_line_runs_under_sh`.
    let installed = std::process::Command::new("install")
        .args(["-m", "4755", "/usr/bin/id"])
        .arg(&id)
        .status()
        .unwrap();
    assert!(installed.success(), "install failed: {installed}");
    let euid = async |limits: JobLimits| {
        let cmd = JobCommand::new(&id).arg("-u").limits(limits);
        stdout(&t, cmd).await.trim().to_string()
    };
    assert_eq!(
        euid(JobLimits::default()).await,
        test_user().uid().0.to_string()
    );
    let allowed = JobLimits {
        no_new_privs: false,
        ..JobLimits::default()
    };
    assert_eq!(
        euid(allowed).await,
        "0",
        "the set-user-id copy does not work here"
    );
}

#[tokio::test]
async fn the_configured_umask_rlimits_and_no_new_privs_setting_apply() {
    if !can_run("the_configured_umask_rlimits_and_no_new_privs_setting_apply") {
        return;
    }
    use nix::sys::resource::Resource;
    let t = TestParent::new("spawn-limits");
    t.jobs.create_job(1).unwrap();
    let limits = JobLimits {
        no_new_privs: false,
        umask: 0o077,
        rlimits: vec![
            (Resource::RLIMIT_NOFILE, 123, 456),
            (Resource::RLIMIT_CORE, 0, 0),
        ],
    };
    let got = settings_of(&t, Some(limits)).await;
    assert!(got.contains("NoNewPrivs: 0"), "{got}");
    assert!(got.contains("Umask: 0077"), "{got}");
    assert!(got.contains("Max open files 123 456 files"), "{got}");
    assert!(got.contains("Max core file size 0 0 bytes"), "{got}");
}
