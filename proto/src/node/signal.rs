//! [`Signal`]: signals named portably, so that what crosses the wire never
//! depends on one host's signal numbers.
//!
//! Each signal has a fixed wire code. The codes for the classic signals were
//! chosen to equal the numbers most Linux ports use (so `128 + code` is the
//! exit status a shell shows), but they are this protocol's own table: a
//! port with other numbers maps through [`Signal::name`], never through the
//! raw number. Realtime signals are `SIGRTMIN + n`, code `100 + n`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A signal, by portable name.
///
/// ```
/// use proto::node::Signal;
/// assert_eq!("INT".parse::<Signal>().unwrap(), Signal::Int);
/// assert_eq!("sigterm".parse::<Signal>().unwrap(), Signal::Term);
/// assert_eq!(Signal::Tstp.name(), "SIGTSTP");
/// assert_eq!(Signal::from_code(Signal::Realtime(3).code()), Signal::Realtime(3));
/// assert_eq!(Signal::from_code(999), Signal::Unknown(999));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "u16", into = "u16")]
#[non_exhaustive]
#[allow(missing_docs)] // each variant is the POSIX signal of the same name
pub enum Signal {
    Hup,
    Int,
    Quit,
    Ill,
    Trap,
    Abrt,
    Bus,
    Fpe,
    Kill,
    Usr1,
    Segv,
    Usr2,
    Pipe,
    Alrm,
    Term,
    Stkflt,
    Chld,
    Cont,
    Stop,
    Tstp,
    Ttin,
    Ttou,
    Urg,
    Xcpu,
    Xfsz,
    Vtalrm,
    Prof,
    Winch,
    Io,
    Pwr,
    Sys,
    /// `SIGRTMIN + n`.
    Realtime(u8),
    /// A code this build does not know (sent by a newer peer).
    Unknown(u16),
}

/// The classic signals with their wire codes and names, in code order.
const TABLE: [(Signal, u16, &str); 31] = [
    (Signal::Hup, 1, "SIGHUP"),
    (Signal::Int, 2, "SIGINT"),
    (Signal::Quit, 3, "SIGQUIT"),
    (Signal::Ill, 4, "SIGILL"),
    (Signal::Trap, 5, "SIGTRAP"),
    (Signal::Abrt, 6, "SIGABRT"),
    (Signal::Bus, 7, "SIGBUS"),
    (Signal::Fpe, 8, "SIGFPE"),
    (Signal::Kill, 9, "SIGKILL"),
    (Signal::Usr1, 10, "SIGUSR1"),
    (Signal::Segv, 11, "SIGSEGV"),
    (Signal::Usr2, 12, "SIGUSR2"),
    (Signal::Pipe, 13, "SIGPIPE"),
    (Signal::Alrm, 14, "SIGALRM"),
    (Signal::Term, 15, "SIGTERM"),
    (Signal::Stkflt, 16, "SIGSTKFLT"),
    (Signal::Chld, 17, "SIGCHLD"),
    (Signal::Cont, 18, "SIGCONT"),
    (Signal::Stop, 19, "SIGSTOP"),
    (Signal::Tstp, 20, "SIGTSTP"),
    (Signal::Ttin, 21, "SIGTTIN"),
    (Signal::Ttou, 22, "SIGTTOU"),
    (Signal::Urg, 23, "SIGURG"),
    (Signal::Xcpu, 24, "SIGXCPU"),
    (Signal::Xfsz, 25, "SIGXFSZ"),
    (Signal::Vtalrm, 26, "SIGVTALRM"),
    (Signal::Prof, 27, "SIGPROF"),
    (Signal::Winch, 28, "SIGWINCH"),
    (Signal::Io, 29, "SIGIO"),
    (Signal::Pwr, 30, "SIGPWR"),
    (Signal::Sys, 31, "SIGSYS"),
];

/// Wire code of `Realtime(0)`.
const REALTIME_BASE: u16 = 100;

impl Signal {
    /// Every classic (non-realtime) signal.
    pub fn classic() -> impl Iterator<Item = Signal> {
        TABLE.iter().map(|&(s, _, _)| s)
    }

    /// The wire code.
    pub fn code(self) -> u16 {
        match self {
            Signal::Realtime(n) => REALTIME_BASE + u16::from(n),
            Signal::Unknown(code) => code,
            s => TABLE.iter().find(|e| e.0 == s).map_or(0, |e| e.1),
        }
    }

    /// The signal with this wire code (`Unknown` for codes not in the table).
    pub fn from_code(code: u16) -> Signal {
        match code {
            1..=31 => TABLE[usize::from(code - 1)].0,
            c if (REALTIME_BASE..=REALTIME_BASE + 255).contains(&c) => {
                Signal::Realtime(u8::try_from(c - REALTIME_BASE).unwrap_or(u8::MAX))
            }
            c => Signal::Unknown(c),
        }
    }

    /// The conventional name, such as `"SIGINT"` (`"SIGRTMIN+n"` for
    /// realtime signals, `"SIG?"` for unknown codes).
    pub fn name(self) -> &'static str {
        match self {
            Signal::Realtime(_) => "SIGRTMIN+n",
            Signal::Unknown(_) => "SIG?",
            s => TABLE.iter().find(|e| e.0 == s).map_or("SIG?", |e| e.2),
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Signal::Realtime(n) => write!(f, "SIGRTMIN+{n}"),
            Signal::Unknown(c) => write!(f, "unknown signal (code {c})"),
            s => f.write_str(s.name()),
        }
    }
}

impl From<u16> for Signal {
    fn from(code: u16) -> Self {
        Signal::from_code(code)
    }
}

impl From<Signal> for u16 {
    fn from(s: Signal) -> u16 {
        s.code()
    }
}

/// A signal name that is not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a signal name; use a name such as INT, TERM, KILL, HUP, USR1 or RTMIN+2")]
pub struct ParseSignalError(pub String);

impl FromStr for Signal {
    type Err = ParseSignalError;
    /// Accepts `INT`, `SIGINT`, `sigint` and `RTMIN+n` / `SIGRTMIN+n`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let upper = s.to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        if let Some(n) = bare.strip_prefix("RTMIN+") {
            return n
                .parse()
                .map(Signal::Realtime)
                .map_err(|_| ParseSignalError(s.to_owned()));
        }
        if bare == "RTMIN" {
            return Ok(Signal::Realtime(0));
        }
        TABLE
            .iter()
            .find(|e| &e.2[3..] == bare)
            .map(|e| e.0)
            .ok_or_else(|| ParseSignalError(s.to_owned()))
    }
}
