//! Helpers for the real-kernel tests: skip checks, a test-unique parent cgroup that is
//! torn down even when a test fails, a root launcher for synchronous tests, running a
//! job to its end, and the unprivileged test user.

use std::io;
use std::process::ExitStatus;
use std::sync::OnceLock;

use rexecd::cgroup::{JobCgroups, ParentName};
use rexecd::spawn::{JobChild, JobCommand, JobStdio, JobUser, SpawnPolicy};
use rexecd::sys::ProcessId;
use tokio::io::AsyncReadExt;
use tokio::runtime::Runtime;

pub use testhost::cannot_run;
/// Polls `check` until it returns `Some` or the limit passes ([`testhost::wait::until`]).
pub use testhost::wait::until as eventually;

/// The test user's name (see [`test_user`]).
pub const TEST_USER: &str = testhost::user::TEST_USER;

/// True when the test can run here (root and a cpu controller); else fails the test,
/// or skips it under `REXEC_TESTS_ALLOW_SKIP=1` (the rule every suite shares,
/// [`testhost::can_run`]).
pub fn can_run(test: &str) -> bool {
    let cpu = || {
        rexecd::cgroup::detect::detect()
            .map(drop)
            .map_err(|e| e.to_string())
    };
    testhost::can_run(test, cpu)
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

    /// Like [`TestParent::new`], with the parent confined to `cpus` (a cpu list).
    pub fn pinned(tag: &str, cpus: &str) -> TestParent {
        let name = format!("rexec-test-{}-{tag}", std::process::id());
        let parent = ParentName::new(&name).unwrap();
        let jobs = JobCgroups::detect_pinned(&parent, Some(cpus.parse().unwrap())).unwrap();
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

/// Starts `sh -c script` as root inside job `id` (root is allowed for these helpers),
/// through rexecd's own spawn, for a synchronous test.
pub fn start_in(jobs: &JobCgroups, id: u64, script: &str) -> Started {
    let root = JobUser::resolve("root", SpawnPolicy { allow_root: true }).unwrap();
    let command = JobCommand::new("/bin/sh")
        .args(["-c", script])
        .env("PATH", "/usr/bin:/bin");
    let _entered = runtime().enter();
    let (mut child, _report) = command
        .spawn(&root, jobs.join(id).unwrap(), JobStdio::Pipes)
        .unwrap();
    // Standard input at its end at once, as from /dev/null; the output pipes stay open
    // (unread: these scripts print nothing) until the process is waited for.
    drop(child.stdin.take());
    let pid = child.id().unwrap();
    Started {
        child: Some(child),
        pid,
    }
}

/// A job process from [`start_in`]: a [`JobChild`] driven on this module's runtime.
pub struct Started {
    child: Option<JobChild>,
    pid: u32,
}

impl Started {
    /// The process id.
    pub fn id(&self) -> u32 {
        self.pid
    }

    /// Waits for the process to exit and reaps it.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        let child = self.child.as_mut().expect("present until dropped");
        runtime().block_on(child.wait())
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        // A child not waited for is reaped in the background, on the runtime entered here.
        let _entered = runtime().enter();
        drop(self.child.take());
    }
}

/// The runtime on which synchronous tests' job processes register their pidfds and pipes.
fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    })
}

/// A job run to its end: what it printed and how it ended.
#[derive(Debug)]
pub struct Ran {
    pub stdout: String,
    pub stderr: String,
    /// The exit code, or -1 after a signal.
    pub code: i32,
}

impl Ran {
    /// The standard output of a job that exited with 0; otherwise the test fails,
    /// showing the job's standard error.
    pub fn succeeded(self) -> String {
        assert_eq!(self.code, 0, "the job failed; its stderr: {}", self.stderr);
        self.stdout
    }
}

/// Runs `command` as the test user in job 1 of `t` with its standard input at its end,
/// to the end of its output and its exit.
pub async fn run_job(t: &TestParent, command: JobCommand) -> Ran {
    let (child, _report) = command
        .spawn(test_user(), t.jobs.join(1).unwrap(), JobStdio::Pipes)
        .unwrap();
    finish(child).await
}

/// Closes a started job's standard input, reads its output to the end and waits for it.
pub async fn finish(mut child: JobChild) -> Ran {
    drop(child.stdin.take());
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let (read_out, read_err) = tokio::join!(
        out.read_to_string(&mut stdout),
        err.read_to_string(&mut stderr)
    );
    read_out.unwrap();
    read_err.unwrap();
    let status = child.wait().await.unwrap();
    // A second wait gives the same status (the session waits again after a kill).
    assert_eq!(child.wait().await.unwrap(), status);
    Ran {
        stdout,
        stderr,
        code: status.code().unwrap_or(-1),
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

/// The unprivileged test user (with a supplementary group and an existing home), as
/// every suite defines it ([`testhost::user`]), created or brought to that on first use.
pub fn test_user() -> &'static JobUser {
    static USER: OnceLock<JobUser> = OnceLock::new();
    USER.get_or_init(|| {
        testhost::user::test_user();
        JobUser::resolve(TEST_USER, SpawnPolicy::default()).unwrap()
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

/// The `Cpus_allowed_list` of a process (`/proc/<pid>/status`), e.g. `"0"` or `"0-1"`.
pub fn cpus_allowed(pid: ProcessId) -> String {
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid.0)).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list in /proc/<pid>/status")
        .trim()
        .to_string()
}
