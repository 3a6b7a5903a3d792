//! Asking selectors (vexecd): one request over mutual TLS with a short time
//! limit ([`ask_one`]), and the same request to a list of selectors in turn
//! until one answers ([`ask_any`]), with the rule that decides whether a
//! failure moves on to the next selector ([`after_failure`]).
//!
//! The client presents the user's certificate (the connector every rexec
//! connection uses) and accepts only a selector whose certificate names the
//! service it dialled (`certs::connect` with role service), so an address
//! taken from an announcement cannot impersonate a selector. Requests are
//! [`proto::select::SelectorRequest`]s over [`proto::Framed`]; the answer
//! must echo the request's id.
//!
//! Failing over is silent: callers print which selector answered only when
//! asked to (`-v`). When every selector fails, [`AskAnyError::NoneAnswered`]
//! names each one and why.

use std::fmt;
use std::time::Duration;

use certs::{CertError, Role};
use proto::select::{
    SelectorError, SelectorErrorCode, SelectorOp, SelectorReply, SelectorRequest, SelectorResponse,
};
use proto::{FrameError, Framed};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::config::SelectorEntry;

/// The policy used when `--policy` is not given.
pub const DEFAULT_POLICY: &str = "lowest-price";

/// How long one selector may take to accept, shake hands and answer.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// Largest answer accepted from a selector (a listing of
/// [`proto::select::MAX_LISTED`] nodes with long names fits).
pub const MAX_ANSWER: usize = 8 << 20;

/// Why one selector gave no usable answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AskError {
    /// The address did not resolve.
    #[error("cannot resolve {addr}: {source}")]
    Resolve {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// TCP connection refused or failed.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// No answer within the time limit.
    #[error("no answer within {}s", .0.as_secs_f32())]
    Timeout(Duration),
    /// The TLS handshake failed or a certificate is unusable.
    #[error("{0}")]
    Tls(CertError),
    /// The certificate is valid but names someone else.
    #[error("{addr} is {got}, not {expected}")]
    WrongPeer {
        /// The address.
        addr: String,
        /// Who we meant to reach.
        expected: String,
        /// Who answered.
        got: String,
    },
    /// Reading or writing frames failed.
    #[error("lost connection: {}", crate::session::explain_frame(.0))]
    Frame(#[from] FrameError),
    /// The selector closed the connection without answering.
    #[error("it closed the connection without answering")]
    Closed,
    /// The answer does not fit the question.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The selector refused the request.
    #[error("{0}")]
    Refused(SelectorError),
}

/// What to do after a selector failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Ask the next selector.
    TryNext,
    /// Stop: every selector would say the same (the request itself is wrong).
    Stop,
}

/// Whether a failure moves on to the next selector: anything about the
/// selector or the way to it does (unreachable, wrong certificate, silent,
/// busy, too old, or knowing too few nodes — a selector that just started
/// may not have heard them all yet); a refusal of the request itself
/// (malformed, unknown policy, a policy that needs `--length`) stops, since
/// every selector judges a request alike.
///
/// ```
/// use proto::select::{SelectorError, SelectorErrorCode as C};
/// use rexec::select::{AskError, Next, after_failure};
/// let refused = |c| AskError::Refused(SelectorError::new(c, "no"));
/// assert_eq!(after_failure(&refused(C::NeedsLength)), Next::Stop);
/// assert_eq!(after_failure(&refused(C::Busy)), Next::TryNext);
/// assert_eq!(after_failure(&AskError::Closed), Next::TryNext);
/// ```
pub fn after_failure(e: &AskError) -> Next {
    match e {
        AskError::Refused(r) => match r.code {
            SelectorErrorCode::BadRequest
            | SelectorErrorCode::UnknownPolicy
            | SelectorErrorCode::NeedsLength => Next::Stop,
            _ => Next::TryNext,
        },
        _ => Next::TryNext,
    }
}

/// Send `op` to selector `sel` and read its answer, all within `limit`.
pub async fn ask_one(
    connector: &TlsConnector,
    sel: &SelectorEntry,
    op: SelectorOp,
    limit: Duration,
) -> Result<SelectorReply, AskError> {
    tokio::time::timeout(limit, ask_inner(connector, sel, op))
        .await
        .map_err(|_| AskError::Timeout(limit))?
}

async fn ask_inner(
    connector: &TlsConnector,
    sel: &SelectorEntry,
    op: SelectorOp,
) -> Result<SelectorReply, AskError> {
    let addr = sel.addr.as_str();
    let addrs: Vec<_> = tokio::net::lookup_host(addr)
        .await
        .map_err(|source| AskError::Resolve {
            addr: addr.to_string(),
            source,
        })?
        .collect();
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no addresses");
    let mut tcp = None;
    for a in addrs {
        match TcpStream::connect(a).await {
            Ok(s) => {
                tcp = Some(s);
                break;
            }
            Err(e) => last = e,
        }
    }
    let tcp = tcp.ok_or_else(|| AskError::Connect {
        addr: addr.to_string(),
        source: last,
    })?;
    let _ = tcp.set_nodelay(true);
    let (stream, _) = certs::connect(connector, tcp, Role::Service, &sel.name)
        .await
        .map_err(|e| match e {
            CertError::WrongPeer {
                peer,
                expected,
                got,
            } => AskError::WrongPeer {
                addr: peer,
                expected,
                got,
            },
            other => AskError::Tls(other),
        })?;
    let mut framed = Framed::with_limits(stream, MAX_ANSWER, proto::select::MAX_SELECTOR_REQUEST);
    let id = crate::plan::new_job_id().0;
    let request = SelectorRequest::new(id, op);
    request.check().map_err(AskError::Refused)?;
    framed.send(&request).await?;
    let response: SelectorResponse = framed.recv().await?.ok_or(AskError::Closed)?;
    if response.id != id && response.id != 0 {
        return Err(AskError::Protocol(format!(
            "answer to request {} when {id} was asked",
            response.id
        )));
    }
    let reply = response.result.map_err(AskError::Refused)?;
    let expected = matches!(
        (&request.op, &reply),
        (SelectorOp::Select(_), SelectorReply::Selected(_))
            | (SelectorOp::Nodes(_), SelectorReply::Nodes(_))
            | (SelectorOp::Services, SelectorReply::Services(_))
    );
    if !expected {
        let got: String = format!("{reply:?}").chars().take(60).collect();
        return Err(AskError::Protocol(format!("unexpected answer {got}")));
    }
    Ok(reply)
}

/// One selector that failed, and why.
#[derive(Debug)]
pub struct Attempt {
    /// Its name.
    pub name: String,
    /// Its address.
    pub addr: String,
    /// Why it failed.
    pub error: AskError,
}

/// No selector gave an answer.
#[derive(Debug, thiserror::Error)]
pub enum AskAnyError {
    /// There is no selector to ask.
    #[error("no selector to ask")]
    NoSelectors,
    /// A selector refused the request itself; asking others would not help.
    #[error("selector {name} refused: {error}")]
    Refused {
        /// The selector.
        name: String,
        /// Its refusal.
        error: SelectorError,
    },
    /// Every selector failed.
    #[error("{}", NoneAnswered(.0))]
    NoneAnswered(Vec<Attempt>),
}

struct NoneAnswered<'a>(&'a [Attempt]);

impl fmt::Display for NoneAnswered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no selector could answer:")?;
        for a in self.0 {
            write!(f, "\n  selector {} at {}: {}", a.name, a.addr, a.error)?;
        }
        Ok(())
    }
}

/// Ask `selectors` in order until one answers `op`; returns the index of
/// the one that did and its answer. Each gets [`ASK_TIMEOUT`] (or `limit`).
pub async fn ask_any(
    connector: &TlsConnector,
    selectors: &[SelectorEntry],
    op: &SelectorOp,
    limit: Duration,
) -> Result<(usize, SelectorReply), AskAnyError> {
    if selectors.is_empty() {
        return Err(AskAnyError::NoSelectors);
    }
    let mut attempts = Vec::new();
    for (i, sel) in selectors.iter().enumerate() {
        match ask_one(connector, sel, op.clone(), limit).await {
            Ok(reply) => return Ok((i, reply)),
            Err(error) => {
                if after_failure(&error) == Next::Stop
                    && let AskError::Refused(r) = error
                {
                    return Err(AskAnyError::Refused {
                        name: sel.name.clone(),
                        error: r,
                    });
                }
                attempts.push(Attempt {
                    name: sel.name.clone(),
                    addr: sel.addr.clone(),
                    error,
                });
            }
        }
    }
    Err(AskAnyError::NoneAnswered(attempts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: SelectorErrorCode) -> AskError {
        AskError::Refused(SelectorError::new(code, "x"))
    }

    #[test]
    fn request_errors_stop_and_selector_troubles_fail_over() {
        use SelectorErrorCode as C;
        for code in [C::BadRequest, C::UnknownPolicy, C::NeedsLength] {
            assert_eq!(after_failure(&refused(code)), Next::Stop, "{code:?}");
        }
        for code in [
            C::NotEnoughNodes,
            C::Busy,
            C::Unsupported,
            C::IncompatibleVersion,
        ] {
            assert_eq!(after_failure(&refused(code)), Next::TryNext, "{code:?}");
        }
        let io = || std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        for e in [
            AskError::Closed,
            AskError::Timeout(ASK_TIMEOUT),
            AskError::Connect {
                addr: "a:1".into(),
                source: io(),
            },
            AskError::WrongPeer {
                addr: "a:1".into(),
                expected: "service v1".into(),
                got: "service v9".into(),
            },
            AskError::Protocol("x".into()),
        ] {
            assert_eq!(after_failure(&e), Next::TryNext, "{e}");
        }
    }

    #[test]
    fn the_all_failed_message_names_every_selector() {
        let e = AskAnyError::NoneAnswered(vec![
            Attempt {
                name: "v1".into(),
                addr: "127.0.0.1:1".into(),
                error: AskError::Timeout(ASK_TIMEOUT),
            },
            Attempt {
                name: "v2".into(),
                addr: "127.0.0.1:2".into(),
                error: AskError::Closed,
            },
        ]);
        let text = e.to_string();
        assert!(
            text.contains("selector v1 at 127.0.0.1:1: no answer within 2s"),
            "{text}"
        );
        assert!(
            text.contains("selector v2 at 127.0.0.1:2: it closed"),
            "{text}"
        );
    }
}
