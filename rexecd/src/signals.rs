//! Translation between the protocol's portable [`Signal`] names and this host's signal
//! numbers, in both directions: for delivering a client's signal and for reporting how
//! a job died. Classic signals go through their names, realtime ones through
//! `SIGRTMIN + n`.
//!
//! Stop signals need care: a job's process group is *orphaned* in the POSIX sense (its
//! leader started a new session and its parent, rexecd, lives in another one), and the
//! kernel silently discards SIGTSTP, SIGTTIN and SIGTTOU sent to a process of an
//! orphaned group whose action is the default. [`stop_group`] therefore does what the
//! terminal's signal would have done locally: a process that catches the signal gets
//! it, one that ignores it is left alone, and one with the default action is stopped
//! with SIGSTOP.

use std::path::Path;
use std::str::FromStr;

use nix::sys::signal::Signal as HostSignal;

use nix::libc;
use proto::node::Signal;

/// The host signal number for `signal`, or `None` when this host has no such signal
/// (an unknown code, or a realtime offset beyond `SIGRTMAX`).
///
/// ```
/// use proto::node::Signal;
/// assert_eq!(rexecd::signals::to_host(Signal::Int), Some(nix::libc::SIGINT));
/// assert_eq!(rexecd::signals::to_host(Signal::Realtime(1)), Some(nix::libc::SIGRTMIN() + 1));
/// assert_eq!(rexecd::signals::to_host(Signal::Unknown(99)), None);
/// ```
pub fn to_host(signal: Signal) -> Option<i32> {
    match signal {
        Signal::Realtime(n) => {
            let number = libc::SIGRTMIN() + i32::from(n);
            (number <= libc::SIGRTMAX()).then_some(number)
        }
        Signal::Unknown(_) => None,
        other => nix::sys::signal::Signal::from_str(other.name())
            .ok()
            .map(|s| s as i32),
    }
}

/// The portable name of host signal `number` (`Unknown(number)` when it has none).
///
/// ```
/// use proto::node::Signal;
/// assert_eq!(rexecd::signals::from_host(nix::libc::SIGKILL), Signal::Kill);
/// assert_eq!(rexecd::signals::from_host(nix::libc::SIGRTMIN() + 2), Signal::Realtime(2));
/// ```
pub fn from_host(number: i32) -> Signal {
    if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&number) {
        return Signal::Realtime(u8::try_from(number - libc::SIGRTMIN()).unwrap_or(u8::MAX));
    }
    nix::sys::signal::Signal::try_from(number)
        .ok()
        .and_then(|s| Signal::from_str(s.as_str()).ok())
        .unwrap_or(Signal::Unknown(u16::try_from(number).unwrap_or(u16::MAX)))
}

/// How a finished process ended, in protocol terms.
pub fn exit_status(status: std::process::ExitStatus) -> proto::node::ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => proto::node::ExitStatus::Code(code),
        (None, Some(signal)) => proto::node::ExitStatus::Signaled {
            signal: from_host(signal),
            core_dumped: status.core_dumped(),
        },
        // Neither a code nor a signal: stopped/continued statuses are never returned by
        // wait() for an exit; report it as a failure rather than invent a signal.
        (None, None) => proto::node::ExitStatus::Code(255),
    }
}

/// True for the signals whose default action stops the process on a terminal's behalf.
pub fn is_terminal_stop(signal: Signal) -> bool {
    matches!(signal, Signal::Tstp | Signal::Ttin | Signal::Ttou)
}

/// Delivers a terminal stop signal to every process of `pids` (the job's processes)
/// that belongs to process group `pgid`, as described in the module docs. Processes
/// that vanish meanwhile are skipped.
pub fn stop_group(
    proc_root: &Path,
    pids: &[crate::sys::ProcessId],
    pgid: crate::sys::ProcessId,
    signal: HostSignal,
) {
    let bit = 1u64 << (signal as i32 - 1);
    for &pid in pids {
        let dir = proc_root.join(pid.0.to_string());
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            continue;
        };
        if process_group(&stat) != Some(pgid.0) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(dir.join("status")) else {
            continue;
        };
        let send = if mask(&status, "SigCgt:") & bit != 0 {
            Some(signal)
        } else if mask(&status, "SigIgn:") & bit != 0 {
            None
        } else {
            Some(HostSignal::SIGSTOP)
        };
        if let Some(send) = send {
            let _ = crate::sys::send_signal(pid, send);
        }
    }
}

/// Field 5 (`pgrp`) of `/proc/<pid>/stat` text.
fn process_group(stat: &str) -> Option<i32> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(2)?.parse().ok()
}

/// A hexadecimal signal mask line of `/proc/<pid>/status` (0 when absent).
fn mask(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_fields_parse() {
        assert_eq!(process_group("42 (a b) S 1 77 77 0"), Some(77));
        let status = "Name:\tx\nSigIgn:\t0000000000000004\nSigCgt:\t0000000000080000\n";
        assert_eq!(mask(status, "SigIgn:"), 4);
        assert_eq!(mask(status, "SigCgt:"), 1 << 19);
        assert_eq!(mask(status, "SigBlk:"), 0);
    }

    #[test]
    fn every_classic_signal_round_trips() {
        for signal in Signal::classic() {
            let host = to_host(signal).unwrap_or_else(|| panic!("{signal} has no host number"));
            assert_eq!(from_host(host), signal);
        }
    }
}
