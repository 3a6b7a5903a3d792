//! The test process and the daemons it drives, at the nodes' weight while a
//! scenario runs: in a cgroup of their own beside the nodes' parents, with the CPU
//! weight of one of them, and back where the test process was when dropped.
//!
//! A scenario that gives the nodes' parents a high weight (the top weight of the
//! pinned nodes; `cgroup_weight` 10000 beside a busy loop) outweighs everything at
//! the root of the hierarchy, and the test and its daemons are there too. With the
//! kernel's session autogroups, the whole test session weighs as one nice-0 task
//! against the parents: with both CPUs busy it got about 0.4% of a CPU, a launch
//! took rexecd 7 s of wall time (session open at 21:58:43.44, job started at
//! 21:58:50.77 in one run) and the test's own TLS handshakes and message waits timed
//! out, in clean-clone CI quiet (pinned nodes) and beside a busy loop (Figure 4).
//! The node's software and the client that drives it are not the neighbours the
//! weight is meant to outweigh: an admin gives rexecd the node's weight the same way
//! (OPERATIONS, "Background work on a market node"). A busy loop the test starts
//! stays where it was started: start it before entering, as the tests do.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::util::{Daemon, cpu_dir};

/// Real-time time the group gets per period (µs of the root's 1 s period, of which
/// the root keeps 950 ms for real-time threads): the placer's moves need a small part.
const RT_RUNTIME_US: &str = "100000";

/// The test process and some daemons in a cgroup at a node parent's weight.
pub(crate) struct AtNodesWeight {
    dir: PathBuf,
    home: PathBuf,
}

impl AtNodesWeight {
    /// Moves this process and `daemons` into `<hierarchy>/<name>`, with the CPU
    /// weight that the node parent `like` has now (`cpu.shares` on v1, `cpu.weight`
    /// on v2).
    pub(crate) fn enter(name: &str, like: &Path, daemons: &[&Daemon]) -> AtNodesWeight {
        let dir = cpu_dir(name).expect("a cpu hierarchy");
        let root = dir.parent().expect("a hierarchy's root").to_path_buf();
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let file = weight_file(like);
        let weight = std::fs::read_to_string(like.join(file))
            .unwrap_or_else(|e| panic!("{}: {e}", like.join(file).display()));
        write(&dir.join(file), weight.trim());
        // v1 with real-time group scheduling: a new group has no real-time time, and
        // the kernel refuses to move a process with a `SCHED_FIFO` thread into it
        // (EINVAL), or to make a thread of its real-time there (rexecd's placer then
        // runs at normal priority, and beside the loop the jobs got 1.39 CPU of 2).
        let rt = dir.join("cpu.rt_runtime_us");
        if rt.exists() {
            write(&rt, RT_RUNTIME_US);
        }
        let home = root.join(own_cgroup(&root).trim_start_matches('/'));
        let pids =
            std::iter::once(std::process::id() as i32).chain(daemons.iter().map(|d| d.pid()));
        for pid in pids {
            write(&dir.join("cgroup.procs"), &pid.to_string());
        }
        eprintln!(
            "the test and its daemons run in {} ({file} {})",
            dir.display(),
            weight.trim()
        );
        AtNodesWeight { dir, home }
    }
}

impl Drop for AtNodesWeight {
    fn drop(&mut self) {
        // This process goes home, and so does a daemon that is still running (a
        // failed assertion drops this before the daemons); then the group goes.
        let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        let home = self.home.join("cgroup.procs");
        let _ = std::fs::write(&home, std::process::id().to_string());
        for pid in procs.lines() {
            let _ = std::fs::write(&home, pid);
        }
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The file that holds a cgroup's CPU weight: `cpu.shares` (v1) or `cpu.weight` (v2).
pub(crate) fn weight_file(dir: &Path) -> &'static str {
    if dir.join("cpu.shares").exists() {
        "cpu.shares"
    } else {
        "cpu.weight"
    }
}

/// Writes `value` to `path`, or panics saying where.
fn write(path: &Path, value: &str) {
    std::fs::write(path, value).unwrap_or_else(|e| panic!("{}: {value}: {e}", path.display()));
}

/// This process's cgroup in the hierarchy mounted at `root` (the cpu controller's on
/// v1, the unified one on v2), as `/proc/self/cgroup` names it.
fn own_cgroup(root: &Path) -> String {
    let v1 = root.join("cpu.shares").exists() || !root.join("cgroup.controllers").exists();
    let lines = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    lines
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
            let ours = if v1 {
                controllers.split(',').any(|c| c == "cpu")
            } else {
                controllers.is_empty()
            };
            ours.then(|| path.to_string())
        })
        .next()
        .unwrap_or_else(|| panic!("no cpu cgroup of this process in {lines}"))
}
