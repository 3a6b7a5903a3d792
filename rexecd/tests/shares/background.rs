//! The busy background loop outside the market that the beside-a-loop tests start
//! (issue 41), and the node's weight against it: a `nice -n NICE` shell busy all the
//! time, in a session of its own in the cgroup the test runs in (not under rexecd's
//! parent), as a backup or an indexer would be; and the node's `cgroup_weight`, what
//! an admin who sells the whole node gives the market against such work.
//!
//! `REXEC_BESIDE_NICE` sets the loop's nice level (default 19); `REXEC_BESIDE_WEIGHT`
//! the node's `cgroup_weight` (default [`MARKET_WEIGHT`]; `kernel`: leave the
//! kernel's). Where the kernel groups each session's processes
//! (`kernel.sched_autogroup_enabled`), a process in the root cgroup weighs as much as
//! its session's autogroup, as at nice 0, whatever its own nice level;
//! `REXEC_BESIDE_AUTOGROUP=1` also sets the autogroup's nice level
//! (`/proc/PID/autogroup`) to the loop's, to measure a session that is at the lowest
//! priority as a whole. `REXEC_BESIDE_IDLE=1` moves the loop into a cgroup of its own
//! at the top of the `cpu` hierarchy with `cpu.idle = 1` (v1 from Linux 5.15, and
//! v2), the admin's other choice in OPERATIONS ("Background work on a market node"):
//! measured with the market's parent at the kernel's weight (`REXEC_BESIDE_WEIGHT=kernel`),
//! it shows what the idle group alone gives the jobs.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The node's `cgroup_weight` (v2 units): what an admin who sells the whole node
/// gives the market against other work. With the kernel's default (100, v1 1024)
/// an autogrouped session's loop took 0.54 CPU whatever its nice level, and no cap
/// inside the market can win that back: the kernel weighs the market's parent
/// against the loop's session before any job's weight counts (OPERATIONS,
/// "Background work on a market node").
pub(crate) const MARKET_WEIGHT: &str = "10000";

/// The loop's nice level: `REXEC_BESIDE_NICE`, else 19.
pub(crate) fn nice() -> i32 {
    std::env::var("REXEC_BESIDE_NICE")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(19)
}

/// The node's `cgroup_weight` beside the loop: `REXEC_BESIDE_WEIGHT`, else
/// [`MARKET_WEIGHT`] (`kernel`: none set).
pub(crate) fn market_weight() -> String {
    std::env::var("REXEC_BESIDE_WEIGHT").unwrap_or_else(|_| MARKET_WEIGHT.into())
}

/// `config` (a node config with a `[market]` table) with the node's `cgroup_weight`
/// set to `weight`, unless it is `kernel`.
pub(crate) fn weighted(config: &str, weight: &str) -> String {
    if weight == "kernel" {
        return config.to_string();
    }
    assert!(
        config.contains("\n[market]\n"),
        "a node config with a [market] table"
    );
    config.replacen(
        "\n[market]\n",
        &format!("\ncgroup_weight = {weight}\n\n[market]\n"),
        1,
    )
}

/// The busy loop outside the market; killed when dropped (and its idle group, if any,
/// removed).
pub(crate) struct Loop {
    child: Child,
    idle_group: Option<std::path::PathBuf>,
}

impl Loop {
    /// Starts `nice -n NICE sh -c 'while :; do :; done'` in a session of its own
    /// (`setsid`), in the test's own cgroup; confined to the CPUs `cpus` (a kernel CPU
    /// list, through `taskset`) when given, else free to run on any.
    pub(crate) fn start(nice: i32, cpus: Option<&str>) -> Loop {
        let nice = nice.to_string();
        let mut argv: Vec<&str> = Vec::new();
        if let Some(cpus) = cpus {
            argv.extend(["taskset", "-c", cpus]);
        }
        argv.extend(["nice", "-n", &nice, "sh", "-c", "while :; do :; done"]);
        let child = Command::new("setsid")
            .args(&argv)
            .spawn()
            .expect("start the busy loop (setsid, taskset, nice, sh)");
        let mut busy = Loop {
            child,
            idle_group: None,
        };
        // Running as the loop (not yet setsid, taskset or nice) before anything is
        // measured beside it.
        busy.wait_for_the_shell();
        if std::env::var("REXEC_BESIDE_AUTOGROUP").is_ok_and(|v| v == "1") {
            busy.set_autogroup_nice(&nice);
        }
        if std::env::var("REXEC_BESIDE_IDLE").is_ok_and(|v| v == "1") {
            busy.move_to_an_idle_group();
        }
        busy
    }

    /// Moves the loop into a new cgroup at the top of the `cpu` hierarchy with
    /// `cpu.idle = 1`: it then runs only on CPU that groups of normal weight leave.
    fn move_to_an_idle_group(&mut self) {
        let name = format!("rexec-test-{}-idle", std::process::id());
        let dir = crate::util::cpu_dir(&name).expect("a cpu hierarchy");
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        self.idle_group = Some(dir.clone());
        let idle = dir.join("cpu.idle");
        std::fs::write(&idle, "1").unwrap_or_else(|e| panic!("{}: {e}", idle.display()));
        let procs = dir.join("cgroup.procs");
        std::fs::write(&procs, self.child.id().to_string())
            .unwrap_or_else(|e| panic!("{}: {e}", procs.display()));
        eprintln!("the loop runs in {} (cpu.idle = 1)", dir.display());
    }

    /// Waits until the loop's process is the shell (setsid has exec'd taskset or
    /// nice, and they the shell).
    fn wait_for_the_shell(&self) {
        let pid = self.child.id();
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default() != "sh\n" {
            assert!(Instant::now() < deadline, "the loop never started");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Sets the nice level of the loop's autogroup (it runs in its own session).
    fn set_autogroup_nice(&self, nice: &str) {
        let path = format!("/proc/{}/autogroup", self.child.id());
        std::fs::write(&path, nice).unwrap_or_else(|e| panic!("{path}: {e}"));
        eprintln!(
            "the loop's autogroup: {}",
            std::fs::read_to_string(&path).unwrap_or_default().trim()
        );
    }

    /// CPU seconds the loop has used so far (`utime` + `stime` of `/proc/PID/stat`).
    pub(crate) fn cpu_secs(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .expect("the busy loop is alive");
        let after = &stat[stat.rfind(')').expect("a stat line") + 2..];
        let fields: Vec<&str> = after.split_whitespace().collect();
        // After the name: state is field 3, utime 14 and stime 15 of the whole line.
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        ticks as f64 / 100.0 // USER_HZ on Linux
    }

    /// CPUs the loop used (CPU seconds per wall second) while `f` ran, and what `f`
    /// returned.
    pub(crate) fn while_running<T>(&self, f: impl FnOnce() -> T) -> (T, f64) {
        let before = self.cpu_secs();
        let started = Instant::now();
        let out = f();
        let cpus = (self.cpu_secs() - before) / started.elapsed().as_secs_f64();
        (out, cpus)
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.idle_group {
            let _ = std::fs::remove_dir(dir);
        }
    }
}
