//! Looking at the machine from outside, as a user of `ps` would: processes
//! found by a mark in their environment (every job process inherits the
//! client's environment), their state letter, and job cgroup directories in
//! every mounted cgroup hierarchy.

use std::fs;
use std::path::PathBuf;

/// The environment variable the harness sets in `rexec`'s environment.
pub const MARK_VAR: &str = "REXEC_E2E_MARK";

/// A process seen in `/proc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    /// Process id.
    pub pid: u32,
    /// State letter from `/proc/PID/stat` (`R`, `S`, `T`, `Z`, ...).
    pub state: char,
    /// Command line, spaces between arguments.
    pub cmd: String,
}

/// The state letter of `pid`, if it exists.
pub fn state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.trim_start().chars().next()
}

/// The parent process id of `pid`, if it exists.
pub fn parent(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

fn pids() -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Live (not zombie) processes whose environment holds `MARK_VAR=mark`.
pub fn with_env_mark(mark: &str) -> Vec<Proc> {
    let needle = format!("{MARK_VAR}={mark}");
    let mut out = Vec::new();
    for pid in pids() {
        let Ok(env) = fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !env.split(|&b| b == 0).any(|v| v == needle.as_bytes()) {
            continue;
        }
        let Some(state) = state(pid) else { continue };
        if state == 'Z' || state == 'X' {
            continue;
        }
        let cmd = fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| {
                String::from_utf8_lossy(&c)
                    .split('\0')
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        out.push(Proc { pid, state, cmd });
    }
    out
}

/// Mount points of every cgroup hierarchy (v1 and v2).
pub fn cgroup_mounts() -> Vec<PathBuf> {
    let text = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && (f[2] == "cgroup" || f[2] == "cgroup2")).then(|| PathBuf::from(f[1]))
        })
        .collect()
}

/// Job cgroup directories (`job-*`) under `parent` in every hierarchy.
pub fn job_cgroups(parent: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for mount in cgroup_mounts() {
        let Ok(dir) = fs::read_dir(mount.join(parent)) else {
            continue;
        };
        for e in dir.flatten() {
            let name = e.file_name();
            if name.to_string_lossy().starts_with("job-") && e.path().is_dir() {
                out.push(e.path());
            }
        }
    }
    out
}

/// Whether `parent` exists in any hierarchy.
pub fn parent_exists(parent: &str) -> bool {
    cgroup_mounts().iter().any(|m| m.join(parent).is_dir())
}

/// SIGKILL `pid` (ignoring errors).
pub fn kill(pid: u32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// Remove `parent` in every hierarchy: thaw and kill what its jobs hold,
/// remove the job directories, then the parent.
pub fn remove_parent(parent: &str) {
    for mount in cgroup_mounts() {
        let top = mount.join(parent);
        if !top.is_dir() {
            continue;
        }
        for job in job_cgroups(parent)
            .into_iter()
            .filter(|j| j.starts_with(&top))
        {
            let _ = fs::write(job.join("freezer.state"), "THAWED");
            for _ in 0..50 {
                let procs = fs::read_to_string(job.join("cgroup.procs")).unwrap_or_default();
                for pid in procs.lines().filter_map(|l| l.trim().parse().ok()) {
                    kill(pid);
                }
                if fs::remove_dir(&job).is_ok() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        let _ = fs::remove_dir(&top);
    }
}

/// Remove parents named `rexec-test-PID-...` whose test process `PID` is
/// gone (left by a test run that was killed before it could clean up).
pub fn sweep_dead_test_parents() {
    let mut names = Vec::new();
    for mount in cgroup_mounts() {
        let Ok(dir) = fs::read_dir(&mount) else {
            continue;
        };
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix("rexec-test-")
                .and_then(|rest| rest.split('-').next())
                .and_then(|p| p.parse::<u32>().ok());
            if let Some(pid) = pid
                && !std::path::Path::new(&format!("/proc/{pid}")).exists()
                && !names.contains(&name)
            {
                names.push(name);
            }
        }
    }
    for name in names {
        remove_parent(&name);
    }
}
