//! The harness of the daemon tests: a shared test PKI, the real `rexecd` binary
//! ([`Daemon`]) started with a unique cgroup parent and a ready file (stopped, and its
//! cgroups swept, on drop), a raw protocol client over real mutual TLS ([`Client`]),
//! and checks on processes and job cgroups. Waiting on a condition is
//! [`testhost::wait`]'s, re-exported here: `eventually_async` in the (async) tests,
//! `eventually` in the harness's sync parts (on multi-thread runtimes only).

mod client;
mod daemon;

pub use client::{Client, Outcome};
pub use daemon::Daemon;
pub use testhost::wait::{eventually, eventually_async};

use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use certs::testing::TestPki;
use proto::node::{JobId, Launch};
use rexecd::cgroup::Hierarchy;

/// The unprivileged Unix user jobs run as (one definition for every suite: `testhost`).
pub const USER: &str = testhost::user::TEST_USER;
/// The node name of every test daemon.
pub const NODE: &str = "n1";

/// How long a test waits for anything that should happen promptly.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// True when these tests can run here (root and a cpu controller); else fails the test,
/// or skips it under `REXEC_TESTS_ALLOW_SKIP=1` (the rule every suite shares,
/// [`testhost::can_run`]). Makes sure the test user exists.
pub fn can_run(test: &str) -> bool {
    let cpu = || {
        rexecd::cgroup::detect::detect()
            .map(drop)
            .map_err(|e| e.to_string())
    };
    if !testhost::can_run(test, cpu) {
        return false;
    }
    testhost::user::test_user();
    true
}

/// The PKI every test shares.
pub fn pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(TestPki::new)
}

/// A fresh job id.
pub fn job_id() -> JobId {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    JobId(
        (u64::from(std::process::id()) << 40)
            ^ (u64::from(nanos) << 8)
            ^ NEXT.fetch_add(1, Ordering::Relaxed),
    )
}

/// A launch of `argv` as rank 0 of 1, with a plain PATH.
pub fn launch(argv: &[&str]) -> Launch {
    Launch {
        job: job_id(),
        rank: 0,
        nranks: 1,
        bid: money::Bid::ZERO,
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: None,
        terminal: None,
        options: Default::default(),
    }
}

/// The parent's directory in the hierarchy holding `cpu`.
pub fn cpu_dir(parent: &str) -> Option<PathBuf> {
    match rexecd::cgroup::detect::detect().ok()? {
        Hierarchy::V1(mounts) => Some(mounts.cpu.join(parent)),
        Hierarchy::V2 { root } => Some(root.join(parent)),
    }
}

/// Names of the `job-*` directories under a parent (none when it does not exist).
pub fn job_dirs(parent: &str) -> Vec<String> {
    let Some(dir) = cpu_dir(parent) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("job-"))
        .collect();
    out.sort();
    out
}

/// True once `pid` is gone or a zombie.
pub fn is_dead(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    let state = rexecd::cgroup::procstat::stat_state(&stat);
    matches!(state, None | Some('Z') | Some('X'))
}

/// True once `pid` is gone, a zombie, or on its way out (the kernel's `PF_EXITING` flag
/// is set). A killed process leaves its cgroup's `cgroup.procs` (and may let the cgroup
/// be removed) a moment before it turns into a zombie, so right after a cgroup was
/// emptied this is what can be asserted at once; [`is_dead`] follows shortly after.
pub fn is_dying(pid: i32) -> bool {
    const PF_EXITING: u64 = 0x4;
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    if is_dead(pid) {
        return true;
    }
    // After the command name: state ppid pgrp session tty_nr tpgid flags ...
    let flags = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().nth(6))
        .and_then(|f| f.parse::<u64>().ok());
    flags.is_some_and(|f| f & PF_EXITING != 0)
}

/// The scheduler state letter of `pid`, if it exists.
pub fn state_of(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    rexecd::cgroup::procstat::stat_state(&stat)
}

/// The user id `pid` runs as.
pub fn uid_of(pid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs `argv` as the test user to the end.
pub async fn run(daemon: &Daemon, request: Launch) -> Outcome {
    let mut c = daemon.user().await;
    c.start(request).await;
    c.outcome().await
}

/// Checks that nothing of a job is left: the pids are dead and no job cgroup remains.
pub async fn assert_nothing_left(daemon: &Daemon, pids: &[i32]) {
    for &pid in pids {
        assert!(
            eventually_async(PATIENCE, || async { is_dead(pid) }).await,
            "process {pid} survived; log:\n{}",
            daemon.log()
        );
    }
    assert!(
        eventually_async(PATIENCE, || async { daemon.job_cgroups().is_empty() }).await,
        "job cgroups left: {:?}; log:\n{}",
        daemon.job_cgroups(),
        daemon.log()
    );
}

/// The fields of a `tracing` log line whose message is `message`, in order, as
/// `(key, value)`: the `key=value` pairs after the message, a value running up to the
/// next `key=` (so an unquoted `exit=code 5` is one field), surrounding quotes removed. `None` when
/// the line does not carry `message`.
pub fn log_fields(line: &str, message: &str) -> Option<Vec<(String, String)>> {
    let rest = &line[line.find(&format!(": {message} "))? + message.len() + 2..];
    let mut fields: Vec<(String, String)> = Vec::new();
    for word in rest.split_whitespace() {
        let key = word
            .split_once('=')
            .map(|(k, _)| k)
            .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        match (key, fields.last_mut()) {
            (Some(key), _) => fields.push((key.to_string(), word[key.len() + 1..].to_string())),
            (None, Some((_, value))) => {
                value.push(' ');
                value.push_str(word);
            }
            (None, None) => return None,
        }
    }
    for (_, value) in &mut fields {
        if let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            *value = inner.to_string();
        }
    }
    Some(fields)
}

/// The value of field `key` in `fields` (see [`log_fields`]).
pub fn field<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}
