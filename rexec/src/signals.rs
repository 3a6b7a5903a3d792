//! Signals the client catches, turned into data for the coordinator.
//!
//! The forwarding rules, in one place:
//! - SIGINT: forwarded to every rank; a second one within
//!   [`DOUBLE_INT`] aborts the whole job (see `run`).
//! - SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2: forwarded to every rank;
//!   the client itself carries on until the ranks end.
//! - SIGTSTP (Ctrl-Z): every rank gets SIGTSTP, then the client restores
//!   its terminal and stops itself with SIGSTOP; when it is continued it
//!   re-enters raw mode (under `-t`) and sends SIGCONT to every rank.
//! - SIGCONT: marks the end of a stop (heartbeat silence is excused).
//! - SIGWINCH: under `-t`, the new size goes to rank 0 as `Resize`.

use std::time::Duration;

use proto::node::Signal;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

/// Two SIGINTs closer than this abort the job.
pub const DOUBLE_INT: Duration = Duration::from_secs(1);

/// A signal the client received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caught {
    /// SIGINT.
    Int,
    /// A signal forwarded as is.
    Forward(Signal),
    /// SIGTSTP.
    Tstp,
    /// SIGCONT.
    Cont,
    /// SIGWINCH.
    Winch,
}

/// Install the handlers (replacing the default actions, so SIGINT no longer
/// kills the client and SIGTSTP no longer stops it) and return the stream
/// of caught signals. Must run inside the tokio runtime.
pub fn install() -> std::io::Result<mpsc::UnboundedReceiver<Caught>> {
    let (tx, rx) = mpsc::unbounded_channel();
    let table = [
        (SignalKind::interrupt(), Caught::Int),
        (SignalKind::terminate(), Caught::Forward(Signal::Term)),
        (SignalKind::hangup(), Caught::Forward(Signal::Hup)),
        (SignalKind::quit(), Caught::Forward(Signal::Quit)),
        (SignalKind::user_defined1(), Caught::Forward(Signal::Usr1)),
        (SignalKind::user_defined2(), Caught::Forward(Signal::Usr2)),
        (SignalKind::from_raw(nix::libc::SIGTSTP), Caught::Tstp),
        (SignalKind::from_raw(nix::libc::SIGCONT), Caught::Cont),
        (SignalKind::window_change(), Caught::Winch),
    ];
    for (kind, caught) in table {
        let mut stream = signal(kind)?;
        let tx = tx.clone();
        tokio::spawn(async move {
            while stream.recv().await.is_some() {
                if tx.send(caught).is_err() {
                    break;
                }
            }
        });
    }
    Ok(rx)
}

/// Stop this process with SIGSTOP; returns once it is continued.
pub fn stop_self() {
    let _ = nix::sys::signal::kill(nix::unistd::getpid(), nix::sys::signal::Signal::SIGSTOP);
}
