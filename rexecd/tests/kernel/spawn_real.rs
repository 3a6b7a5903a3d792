//! Spawning as an unprivileged user inside a job cgroup, for real: ids and groups after
//! the privilege drop, cgroup membership from the first instruction, the exact
//! environment, the working-directory fallback, sessions and terminals, and refusals.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};

use rexecd::spawn::SessionMode;
use rexecd::spawn::{JobCommand, JobLimits, JobUser, SpawnError, SpawnPolicy};

use crate::util::{TestParent, can_run, cpu_cgroup_line, stat_field, test_user};

/// Runs a built command to completion with stdout captured.
fn output(mut command: Command) -> Output {
    let out = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
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

#[test]
fn runs_as_the_user_with_its_groups_inside_the_job_cgroup() {
    if !can_run("runs_as_the_user_with_its_groups_inside_the_job_cgroup") {
        return;
    }
    let user = test_user();
    let t = TestParent::new("spawn-ids");
    t.jobs.create_job(1).unwrap();
    let run = |program: &str, args: &[&str]| {
        let cmd = JobCommand::new(program)
            .args(args)
            .env("PATH", "/usr/bin:/bin")
            .build(user, t.jobs.join(1).unwrap())
            .unwrap();
        stdout(&output(cmd))
    };

    assert_eq!(run("id", &["-u"]).trim(), user.uid().0.to_string());
    let groups: BTreeSet<u32> = run("id", &["-G"])
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
    let status = run("cat", &["/proc/self/status"]);
    assert_eq!(status_ids(&status, "Uid"), vec![user.uid().0; 4]);
    assert_eq!(status_ids(&status, "Gid"), vec![user.gid().0; 4]);
    let supplementary: BTreeSet<u32> = status_ids(&status, "Groups").into_iter().collect();
    assert_eq!(supplementary, expected);

    // `cat` reads its own cgroup: it was in the job before exec, nobody moved it after.
    let cgroup = run("cat", &["/proc/self/cgroup"]);
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
}

#[test]
fn environment_is_exactly_the_given_map() {
    if !can_run("environment_is_exactly_the_given_map") {
        return;
    }
    // The test process has PATH set; the child must not inherit it.
    assert!(std::env::var_os("PATH").is_some());
    let t = TestParent::new("spawn-env");
    t.jobs.create_job(1).unwrap();
    let given = [("REXEC_A", "1"), ("LANG", "C"), ("WITH_SPACE", "a b =c")];
    let cmd = JobCommand::new("/usr/bin/env")
        .envs(given)
        .build(test_user(), t.jobs.join(1).unwrap())
        .unwrap();
    let seen: BTreeSet<String> = stdout(&output(cmd)).lines().map(str::to_string).collect();
    let wanted: BTreeSet<String> = given.iter().map(|(k, v)| format!("{k}={v}")).collect();
    assert_eq!(seen, wanted);
}

#[test]
fn working_directory_falls_back_to_home_then_root() {
    if !can_run("working_directory_falls_back_to_home_then_root") {
        return;
    }
    let user = test_user();
    let t = TestParent::new("spawn-cwd");
    t.jobs.create_job(1).unwrap();
    let pwd = |cwd: &std::path::Path| {
        let cmd = JobCommand::new("/bin/pwd")
            .cwd(cwd)
            .build(user, t.jobs.join(1).unwrap())
            .unwrap();
        stdout(&output(cmd)).trim().to_string()
    };
    let home = user.home().to_str().unwrap().to_string();
    assert_eq!(pwd("/tmp".as_ref()), "/tmp");
    assert_eq!(pwd("/nonexistent/rexec/dir".as_ref()), home);

    // A directory the user may not enter (root-owned, 0700) also falls back to home:
    // the check is made as the user, after the privilege drop.
    let private = tempfile::tempdir().unwrap();
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(pwd(private.path()), home);
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

/// Reads `/proc/self/stat` of a child started in `mode` with stdin `stdin`.
fn child_stat(t: &TestParent, mode: SessionMode, stdin: Stdio) -> (i64, String) {
    let mut cmd = JobCommand::new("/bin/cat")
        .arg("/proc/self/stat")
        .session(mode)
        .build(test_user(), t.jobs.join(1).unwrap())
        .unwrap();
    let child = cmd.stdin(stdin).stdout(Stdio::piped()).spawn().unwrap();
    let pid = i64::from(child.id());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    (pid, String::from_utf8(out.stdout).unwrap())
}

#[test]
fn new_session_makes_the_child_a_session_and_group_leader() {
    if !can_run("new_session_makes_the_child_a_session_and_group_leader") {
        return;
    }
    let t = TestParent::new("spawn-sid");
    t.jobs.create_job(1).unwrap();
    let (pid, stat) = child_stat(&t, SessionMode::NewSession, Stdio::null());
    assert_eq!(stat_field(&stat, 5), pid, "process group");
    assert_eq!(stat_field(&stat, 6), pid, "session");
    assert_eq!(stat_field(&stat, 7), 0, "no controlling terminal");

    let (pid, stat) = child_stat(&t, SessionMode::Inherit, Stdio::null());
    assert_ne!(
        stat_field(&stat, 6),
        pid,
        "inherit keeps the caller's session"
    );
}

#[test]
fn tty_mode_takes_the_terminal_on_stdin_as_controlling_tty() {
    if !can_run("tty_mode_takes_the_terminal_on_stdin_as_controlling_tty") {
        return;
    }
    let t = TestParent::new("spawn-tty");
    t.jobs.create_job(1).unwrap();
    let pty = nix::pty::openpty(None, None).unwrap();
    let (pid, stat) = child_stat(&t, SessionMode::NewSessionWithTty, Stdio::from(pty.slave));
    assert_eq!(stat_field(&stat, 6), pid, "session leader");
    assert_ne!(stat_field(&stat, 7), 0, "has a controlling terminal");
    assert_eq!(
        stat_field(&stat, 8),
        pid,
        "and is its foreground process group"
    );
    drop(pty.master);
}

#[test]
fn a_missing_program_fails_to_spawn_and_runs_nothing() {
    if !can_run("a_missing_program_fails_to_spawn_and_runs_nothing") {
        return;
    }
    let t = TestParent::new("spawn-missing");
    t.jobs.create_job(1).unwrap();
    let mut cmd = JobCommand::new("/nonexistent/program")
        .build(test_user(), t.jobs.join(1).unwrap())
        .unwrap();
    let err = cmd.spawn().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(t.jobs.procs(1).unwrap().is_empty());
}

/// The daemon will spawn through tokio: converting the built command keeps the hook.
#[test]
fn tokio_command_from_the_built_command_keeps_the_pre_exec_hook() {
    if !can_run("tokio_command_from_the_built_command_keeps_the_pre_exec_hook") {
        return;
    }
    let t = TestParent::new("spawn-tokio");
    t.jobs.create_job(1).unwrap();
    let std_cmd = JobCommand::new("/bin/cat")
        .arg("/proc/self/cgroup")
        .build(test_user(), t.jobs.join(1).unwrap())
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = rt
        .block_on(async { tokio::process::Command::from(std_cmd).output().await })
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let line = cpu_cgroup_line(&text).unwrap();
    assert!(line.ends_with(&format!("/{}/job-1", t.name)), "{line}");
}

/// The job's `/proc/self/status` and `/proc/self/limits`, whitespace collapsed.
fn settings_of(t: &TestParent, limits: Option<JobLimits>) -> String {
    let mut command = JobCommand::new("/bin/sh").args([
        "-c",
        "grep -E '^(Umask|NoNewPrivs):' /proc/self/status; \
         grep -E 'Max (open files|core file size)' /proc/self/limits",
    ]);
    if let Some(limits) = limits {
        command = command.limits(limits);
    }
    let cmd = command.build(test_user(), t.jobs.join(1).unwrap()).unwrap();
    stdout(&output(cmd))
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn a_job_has_no_new_privileges_by_default() {
    if !can_run("a_job_has_no_new_privileges_by_default") {
        return;
    }
    let t = TestParent::new("spawn-nnp");
    t.jobs.create_job(1).unwrap();
    let got = settings_of(&t, None);
    assert!(got.contains("NoNewPrivs: 1"), "{got}");
    assert!(got.contains("Umask: 0022"), "{got}");
    // A set-user-id-root copy of `id` runs with the job's uid, not root's; the same
    // program with new privileges allowed shows that the copy does work as set-user-id.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let id = dir.path().join("id");
    std::fs::copy("/usr/bin/id", &id).unwrap();
    std::fs::set_permissions(&id, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let euid = |limits: JobLimits| {
        let cmd = JobCommand::new(&id)
            .arg("-u")
            .limits(limits)
            .build(test_user(), t.jobs.join(1).unwrap())
            .unwrap();
        stdout(&output(cmd)).trim().to_string()
    };
    assert_eq!(euid(JobLimits::default()), test_user().uid().0.to_string());
    let allowed = JobLimits {
        no_new_privs: false,
        ..JobLimits::default()
    };
    assert_eq!(
        euid(allowed),
        "0",
        "the set-user-id copy does not work here"
    );
}

#[test]
fn the_configured_umask_rlimits_and_no_new_privs_setting_apply() {
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
    let got = settings_of(&t, Some(limits));
    assert!(got.contains("NoNewPrivs: 0"), "{got}");
    assert!(got.contains("Umask: 0077"), "{got}");
    assert!(got.contains("Max open files 123 456 files"), "{got}");
    assert!(got.contains("Max core file size 0 0 bytes"), "{got}");
}
