//! How a job ended: [`Exit`] with its [`ExitStatus`], the CPU time it used
//! and what it was charged.

use serde::{Deserialize, Serialize};

use super::Signal;

/// How the job's main process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ExitStatus {
    /// It called `exit` with this code.
    Code(i32),
    /// A signal killed it.
    Signaled {
        /// The signal.
        signal: Signal,
        /// Whether it left a core dump.
        core_dumped: bool,
    },
}

impl ExitStatus {
    /// The status a shell would show for a local run, and the one `rexec`
    /// exits with: the code itself (low 8 bits), or `128 + signal code`.
    ///
    /// ```
    /// use proto::node::{ExitStatus, Signal};
    /// assert_eq!(ExitStatus::Code(3).shell_code(), 3);
    /// assert_eq!(ExitStatus::Signaled { signal: Signal::Int, core_dumped: false }.shell_code(), 130);
    /// ```
    pub fn shell_code(self) -> i32 {
        match self {
            ExitStatus::Code(c) => c & 0xff,
            ExitStatus::Signaled { signal, .. } => 128 + i32::from(signal.code() & 0x7f),
        }
    }

    /// True for `Code(0)`.
    pub fn success(self) -> bool {
        self == ExitStatus::Code(0)
    }
}

/// The job ended (node to client); the last message of a job session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exit {
    /// How the job's main process ended.
    pub status: ExitStatus,
    /// CPU time used by every process of this rank, user plus system, in nanoseconds.
    pub cpu_nanos: u64,
    /// Credits charged for this rank, in micro-credits (1 credit = 1 000 000).
    pub charged: i64,
}
