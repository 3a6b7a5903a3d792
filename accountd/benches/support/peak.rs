//! Peak resident memory of a command run to its end (`VmHWM` of
//! `/proc/PID/status`, sampled every 5 ms until it exits; Linux only), for
//! the audit's benchmark and the tests that bound what `accountctl` keeps.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Peak memory (`VmHWM`, KiB) of process `pid`, if it still runs.
pub fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Runs `cmd` to its end, sampling its peak memory: seconds, peak KiB, output.
pub fn sampled(cmd: &mut Command) -> (f64, u64, Output) {
    let started = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the command");
    let mut peak = 0;
    while child.try_wait().expect("wait").is_none() {
        if let Some(p) = peak_kib(child.id()) {
            peak = peak.max(p);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let secs = started.elapsed().as_secs_f64();
    (secs, peak, child.wait_with_output().expect("its output"))
}
