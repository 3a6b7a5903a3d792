//! Translation between the protocol's portable [`Signal`] names and this host's signal
//! numbers, in both directions: for delivering a client's signal and for reporting how
//! a job died. Classic signals go through their names, realtime ones through
//! `SIGRTMIN + n`.

use std::str::FromStr;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_classic_signal_round_trips() {
        for signal in Signal::classic() {
            let host = to_host(signal).unwrap_or_else(|| panic!("{signal} has no host number"));
            assert_eq!(from_host(host), signal);
        }
    }
}
