//! Helpers for the real-kernel tests: skip checks, a test-unique parent cgroup that is
//! torn down even when a test fails, a root launcher, and the unprivileged test user.

use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rexecd::cgroup::{JobCgroups, ParentName};
use rexecd::spawn::{JobCommand, JobUser, SpawnPolicy};
use rexecd::sys::{self, ProcessId};

/// The test user's name; created if missing.
pub const TEST_USER: &str = "rexectest";
/// A supplementary group the test user is put in.
pub const TEST_GROUP: &str = "rexectestaux";

/// True when the test can run; otherwise prints the reason.
pub fn can_run(test: &str) -> bool {
    if !sys::effective_user().is_root() {
        return cannot_run(test, "needs root");
    }
    if let Err(e) = rexecd::cgroup::detect::detect() {
        return cannot_run(test, &e.to_string());
    }
    true
}

/// What to do when a test cannot run here: fail, unless `REXEC_TESTS_ALLOW_SKIP=1`
/// says a skip is wanted (a developer without root). A silent skip in CI would
/// pass without testing anything.
pub fn cannot_run(test: &str, why: &str) -> bool {
    if std::env::var_os("REXEC_TESTS_ALLOW_SKIP").is_some_and(|v| v == "1") {
        eprintln!("skipping {test}: {why}");
        return false;
    }
    panic!("{test} cannot run here: {why} (set REXEC_TESTS_ALLOW_SKIP=1 to skip it)");
}

/// A parent cgroup unique to this test process and tag; on drop every job under it is
/// destroyed and the parent removed, so a failing test leaves nothing behind.
pub struct TestParent {
    pub jobs: JobCgroups,
    pub name: String,
}

impl TestParent {
    pub fn new(tag: &str) -> TestParent {
        let name = format!("rexec-test-{}-{tag}", std::process::id());
        let parent = ParentName::new(&name).unwrap();
        let jobs = JobCgroups::detect(&parent).unwrap();
        TestParent { jobs, name }
    }

    /// Guards an already opened manager whose parent is `name`.
    pub fn from_jobs(jobs: JobCgroups, name: String) -> TestParent {
        TestParent { jobs, name }
    }
}

impl Drop for TestParent {
    fn drop(&mut self) {
        let swept = self.jobs.sweep_stale();
        let removed = self.jobs.remove_parent();
        if !std::thread::panicking() {
            swept.unwrap();
            removed.unwrap();
        }
    }
}

/// Starts `sh -c script` as root inside job `id` (root is allowed for these helpers).
pub fn start_in(jobs: &JobCgroups, id: u64, script: &str) -> Child {
    let root = JobUser::resolve("root", SpawnPolicy { allow_root: true }).unwrap();
    JobCommand::new("/bin/sh")
        .args(["-c", script])
        .env("PATH", "/usr/bin:/bin")
        .build(&root, jobs.join(id).unwrap())
        .unwrap()
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

/// Polls `check` until it returns `Some` or `limit` passes.
pub fn eventually<T>(limit: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The scheduler state of a process, or `None` when it no longer exists.
pub fn state_of(pid: ProcessId) -> Option<char> {
    let line = std::fs::read_to_string(format!("/proc/{}/stat", pid.0)).ok()?;
    rexecd::cgroup::procstat::stat_state(&line)
}

/// True once `pid` is gone or a zombie (dead; PID 1 on some machines never reaps).
pub fn is_dead(pid: ProcessId) -> bool {
    matches!(state_of(pid), None | Some('Z') | Some('X'))
}

/// Field `n` (1-based, as in proc(5)) of `/proc/<pid>/stat` text.
pub fn stat_field(stat: &str, n: usize) -> i64 {
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after
        .split_whitespace()
        .nth(n - 3)
        .unwrap()
        .parse()
        .unwrap()
}

/// The unprivileged test user (with a supplementary group and an existing home),
/// created on first use.
pub fn test_user() -> &'static JobUser {
    static USER: OnceLock<JobUser> = OnceLock::new();
    USER.get_or_init(|| {
        let run = |args: &[&str]| {
            let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        };
        if sys::lookup_user(TEST_USER).unwrap().is_none() {
            let (ok, err) = run(&[
                "useradd",
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                "/var/lib/rexectest",
                "--shell",
                "/usr/sbin/nologin",
                TEST_USER,
            ]);
            assert!(
                ok || sys::lookup_user(TEST_USER).unwrap().is_some(),
                "useradd: {err}"
            );
        }
        let (ok, err) = run(&["groupadd", "-f", "--system", TEST_GROUP]);
        assert!(ok, "groupadd: {err}");
        let (ok, err) = run(&["usermod", "-a", "-G", TEST_GROUP, TEST_USER]);
        assert!(ok, "usermod: {err}");
        let user = JobUser::resolve(TEST_USER, SpawnPolicy::default()).unwrap();
        let home = user.home();
        if !home.exists() {
            std::fs::create_dir_all(home).unwrap();
            std::os::unix::fs::chown(home, Some(user.uid().0), Some(user.gid().0)).unwrap();
        }
        user
    })
}

/// The line of `/proc/<pid>/cgroup` text for the hierarchy that holds `cpu`.
pub fn cpu_cgroup_line(text: &str) -> Option<String> {
    let v1 = text.lines().find(|l| {
        let mut parts = l.splitn(3, ':');
        parts.next();
        parts
            .next()
            .is_some_and(|c| c.split(',').any(|c| c == "cpu"))
    });
    v1.or_else(|| text.lines().find(|l| l.starts_with("0::")))
        .map(str::to_string)
}
