//! Why a session with a node could not be opened or a request failed
//! ([`SessionError`]), in one line; callers put the node and rank in front.

use std::time::Duration;

use certs::CertError;
use proto::FrameError;
use proto::node::{ErrorCode, ErrorReply, FromNode};

use super::session::CONNECT_TIMEOUT;

/// Why a session could not be opened or a request failed. Not `non_exhaustive`:
/// callers that decide whether a failure leaves a node usable (rexec's choice of
/// nodes) name every variant, and a new one must make them decide again.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The address did not resolve.
    #[error("cannot resolve {addr}: {source}")]
    Resolve {
        /// The configured address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// TCP connection refused or failed.
    #[error("cannot connect to {addr}: {source}; is rexecd running there?")]
    Connect {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// TCP connection took too long.
    #[error("connecting to {addr} timed out after {}s", CONNECT_TIMEOUT.as_secs())]
    ConnectTimeout {
        /// The address.
        addr: String,
    },
    /// The TLS handshake failed, took too long, or a certificate is unusable.
    #[error("{0}")]
    Tls(#[from] CertError),
    /// The peer's certificate is valid but names someone else.
    #[error("{addr} is {got}, not {expected}; check the address of this node in the configuration")]
    WrongPeer {
        /// The address.
        addr: String,
        /// Who we meant to reach.
        expected: String,
        /// Who answered.
        got: String,
    },
    /// The node refused the request.
    #[error("{0}")]
    Refused(ErrorReply),
    /// Reading or writing frames failed.
    #[error("lost connection: {}", explain_frame(.0))]
    Frame(#[from] FrameError),
    /// The node closed the connection.
    #[error("lost connection: the node closed it")]
    Closed,
    /// The node said nothing for too long.
    #[error("missed heartbeats for {}", show_duration(*.0))]
    Silent(Duration),
    /// The node did not accept a session in time.
    #[error("no session within {}s", .0.as_secs())]
    NoSession(Duration),
    /// The node sent something out of order.
    #[error("protocol error: expected {expected}, got {got}")]
    Unexpected {
        /// What the client waited for.
        expected: &'static str,
        /// What came.
        got: String,
    },
    /// No common protocol version.
    #[error("{0}")]
    Version(#[from] proto::node::VersionMismatch),
}

impl SessionError {
    /// The node's refusal code, when the node refused.
    pub fn refusal(&self) -> Option<ErrorCode> {
        match self {
            SessionError::Refused(e) => Some(e.code),
            _ => None,
        }
    }

    /// Whether the node refused a launch for a reason that belongs to the job
    /// ([`ErrorCode::belongs_to_the_job`]): the node itself is fine.
    pub fn is_the_jobs(&self) -> bool {
        self.refusal().is_some_and(ErrorCode::belongs_to_the_job)
    }

    /// An answer of the wrong kind (`expected` was waited for).
    pub fn unexpected(expected: &'static str, got: &FromNode) -> SessionError {
        let got = format!("{got:?}").chars().take(80).collect();
        SessionError::Unexpected { expected, got }
    }
}

/// One line for a frame error after the TLS handshake: TLS alerts are
/// explained by `certs`; a connection that just ends was closed by the node
/// (or its machine) without ending the session.
pub fn explain_frame(e: &FrameError) -> String {
    match e {
        FrameError::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            "the node closed it without ending the session (did rexecd or its machine stop?)"
                .to_string()
        }
        FrameError::Io(io) => certs::explain_io(io),
        other => other.to_string(),
    }
}

/// A duration for messages: `5s`, `1.5s` or `250ms`.
pub fn show_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else if ms > 1000 {
        let secs = format!("{}.{:03}", ms / 1000, ms % 1000);
        format!("{}s", secs.trim_end_matches('0'))
    } else {
        format!("{ms}ms")
    }
}
