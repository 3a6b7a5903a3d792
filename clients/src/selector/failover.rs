//! Asking several selectors in turn until one answers ([`ask_any`]), each within a
//! short time limit ([`ask_one`]) and the next asked beside one that has not
//! answered within [`crate::hedge::HEDGE_AFTER`] (so a selector whose host vanished
//! costs that, not its whole limit), with the rule that decides whether a failure moves
//! on to the next selector ([`after_failure`]): trouble with a selector or the way to
//! it tries the next; a refusal of the request itself stops, since every selector
//! judges a request alike.
//!
//! [`Selectors`] keeps the connection of the selector that answered open for the
//! next question, so a client that asks twice (the live selectors, then the nodes
//! of a job) shakes hands once; a kept connection that broke is dialled again
//! before the others are tried.
//!
//! Only a selector whose certificate names the service dialled is asked, so an
//! address taken from an announcement cannot impersonate a selector. Failing over is
//! silent; when every selector fails, [`AskAnyError::NoneAnswered`] names each one
//! and why.

use std::fmt;
use std::time::Duration;

use certs::CertError;
use proto::select::{SelectorError, SelectorErrorCode, SelectorRequest};
use tokio_rustls::TlsConnector;

use super::{Ask, ClientError, Selector, SelectorClient};
use crate::hedge::{Failed, HEDGE_AFTER, first_ok};
use crate::rpc::{Protocol, RpcError};

/// A selector (vexecd) to ask: its certificate name (role service) and where it
/// listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorEntry {
    /// The selector's name, as in its certificate.
    pub name: String,
    /// `host:port` to connect to.
    pub addr: String,
}

/// What to do after a selector failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Ask the next selector.
    TryNext,
    /// Stop: every selector would say the same (the request itself is wrong).
    Stop,
}

/// Whether a failure moves on to the next selector: anything about the selector or
/// the way to it does (unreachable, wrong certificate, silent, busy, too old, or
/// knowing too few nodes — a selector that just started may not have heard them all
/// yet); a refusal of the request itself (malformed, unknown policy, a policy that
/// needs `--length`) stops.
///
/// ```
/// use clients::rpc::RpcError;
/// use clients::selector::{Next, after_failure};
/// use proto::select::{SelectorError, SelectorErrorCode as C};
/// let refused = |c| RpcError::Server(SelectorError::new(c, "no"));
/// assert_eq!(after_failure(&refused(C::NeedsLength)), Next::Stop);
/// assert_eq!(after_failure(&refused(C::Busy)), Next::TryNext);
/// let closed = RpcError::Closed { service: "selector", addr: "a:1".into() };
/// assert_eq!(after_failure(&closed), Next::TryNext);
/// ```
pub fn after_failure(e: &ClientError) -> Next {
    match e {
        RpcError::Server(r) => after_refusal(r),
        _ => Next::TryNext,
    }
}

fn after_refusal(r: &SelectorError) -> Next {
    match r.code {
        SelectorErrorCode::BadRequest
        | SelectorErrorCode::UnknownPolicy
        | SelectorErrorCode::NeedsLength => Next::Stop,
        _ => Next::TryNext,
    }
}

/// Asks selector `sel` `question` on a new connection, all (connection, handshake,
/// answer) within `limit`. A request that is not well formed is refused here, before
/// anything is sent.
pub async fn ask_one<Q: Ask>(
    connector: &TlsConnector,
    sel: &SelectorEntry,
    question: &Q,
    limit: Duration,
) -> Result<Q::Answer, ClientError> {
    check(question)?;
    dial_and_ask(connector, sel, question, limit)
        .await
        .map(|(_, answer)| answer)
}

/// The refusal a selector would give a request that is not well formed.
fn check<Q: Ask>(question: &Q) -> Result<(), ClientError> {
    SelectorRequest::new(0, question.op())
        .check()
        .map_err(RpcError::Server)
}

/// Connects to `sel` and asks `question`, all within `limit`; the connection stays
/// open for more questions.
async fn dial_and_ask<Q: Ask>(
    connector: &TlsConnector,
    sel: &SelectorEntry,
    question: &Q,
    limit: Duration,
) -> Result<(SelectorClient, Q::Answer), ClientError> {
    let exchange = async {
        let mut client = SelectorClient::connect(&sel.addr, connector, &sel.name, limit).await?;
        let answer = client.ask(question).await?;
        Ok((client, answer))
    };
    tokio::time::timeout(limit, exchange)
        .await
        .map_err(|_| RpcError::Timeout {
            service: Selector::SERVICE,
            addr: sel.addr.clone(),
            limit,
        })?
}

/// One selector that failed, and why.
#[derive(Debug)]
pub struct Attempt {
    /// Its name.
    pub name: String,
    /// Its address.
    pub addr: String,
    /// Why it failed.
    pub error: ClientError,
}

/// No selector gave an answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
            write!(
                f,
                "\n  selector {} at {}: {}",
                a.name,
                a.addr,
                why(&a.error)
            )?;
        }
        Ok(())
    }
}

impl AskAnyError {
    /// When every selector refused alike, the refusal in words that name no
    /// selector and no address, said once: the same refusal of the request, or
    /// the same refusal of the connection (a peer that does not trust our
    /// certificate, as every selector of another cluster says). `None` when they
    /// failed differently, or in ways that concern each one (unreachable, silent,
    /// an impostor), which are told selector by selector.
    ///
    /// ```
    /// use clients::selector::{AskAnyError, Attempt};
    /// use proto::select::{SelectorError, SelectorErrorCode};
    /// let refused = |name: &str| Attempt {
    ///     name: name.into(),
    ///     addr: "127.0.0.1:1".into(),
    ///     error: clients::rpc::RpcError::Server(SelectorError::new(
    ///         SelectorErrorCode::NotEnoughNodes, "2 nodes asked for, 1 qualify")),
    /// };
    /// let e = AskAnyError::NoneAnswered(vec![refused("v1"), refused("v2")]);
    /// assert_eq!(e.common_refusal().as_deref(), Some("2 nodes asked for, 1 qualify"));
    /// assert_eq!(AskAnyError::NoSelectors.common_refusal(), None);
    /// ```
    pub fn common_refusal(&self) -> Option<String> {
        let AskAnyError::NoneAnswered(attempts) = self else {
            return None;
        };
        let first = refusal(&attempts.first()?.error)?;
        attempts[1..]
            .iter()
            .all(|a| refusal(&a.error).as_ref() == Some(&first))
            .then_some(first)
    }
}

/// A refusal by the selector, in words without its name or address: of the
/// request, or of the TLS connection (during the handshake, or at the first read
/// when the peer rejects our certificate after TLS 1.3 let us finish ours).
fn refusal(e: &ClientError) -> Option<String> {
    match e {
        RpcError::Server(r) => Some(r.to_string()),
        RpcError::Tls { cause, .. } => match &**cause {
            CertError::Handshake { detail, .. } => Some(detail.clone()),
            _ => None,
        },
        RpcError::Frame { cause, .. } => certs::explain_tls_error(&**cause),
        _ => None,
    }
}

/// Why one selector failed, for a line that already names it and its address.
fn why(e: &ClientError) -> String {
    match e {
        RpcError::Connect { addr, cause, .. } => format!("cannot connect to {addr}: {cause}"),
        RpcError::Tls { cause, .. } => match &**cause {
            CertError::WrongPeer {
                peer,
                expected,
                got,
            } => format!("{peer} is {got}, not {expected}"),
            other => other.to_string(),
        },
        RpcError::Frame { detail, .. } => format!("lost connection: {detail}"),
        RpcError::Closed { .. } => "it closed the connection without answering".to_string(),
        RpcError::Timeout { limit, .. } => format!("no answer within {}s", limit.as_secs_f32()),
        RpcError::Mismatch { want, got, .. } => {
            format!("protocol error: answer to request {got} when {want} was asked")
        }
        RpcError::WrongReply { asked, got, .. } => {
            format!("protocol error: answered {got} to a {asked}")
        }
        other => other.to_string(),
    }
}

fn attempt(sel: &SelectorEntry, error: ClientError) -> Attempt {
    Attempt {
        name: sel.name.clone(),
        addr: sel.addr.clone(),
        error,
    }
}

/// Asks `selectors` in order until one answers `question`; returns the index of the
/// one that did and its answer. Each gets `limit` ([`ask_one`]).
pub async fn ask_any<Q: Ask>(
    connector: &TlsConnector,
    selectors: &[SelectorEntry],
    question: &Q,
    limit: Duration,
) -> Result<(usize, Q::Answer), AskAnyError> {
    Selectors::new(selectors.to_vec())
        .ask(connector, question, limit)
        .await
}

/// Selectors to ask in turn, with the connection of the last one that answered
/// kept open for the next question.
pub struct Selectors {
    list: Vec<SelectorEntry>,
    /// The index in `list` of the selector connected to, and the connection.
    open: Option<(usize, SelectorClient)>,
}

impl fmt::Debug for Selectors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Selectors")
            .field("list", &self.list)
            .field("open", &self.open.as_ref().map(|(i, _)| *i))
            .finish()
    }
}

impl Selectors {
    /// `list`, in the order to ask them, with no connection yet.
    pub fn new(list: Vec<SelectorEntry>) -> Selectors {
        Selectors { list, open: None }
    }

    /// The selectors, in the order they are asked.
    pub fn list(&self) -> &[SelectorEntry] {
        &self.list
    }

    /// The selectors, without the open connection (closed here).
    pub fn into_list(self) -> Vec<SelectorEntry> {
        self.list
    }

    /// Whether a connection is open, and to which selector (tests, `-v`).
    pub fn connected(&self) -> Option<&SelectorEntry> {
        self.open.as_ref().map(|(i, _)| &self.list[*i])
    }

    /// Replaces the list by `list`; the open connection is kept when its selector
    /// (same name and address) is in the new list.
    pub fn set_list(&mut self, list: Vec<SelectorEntry>) {
        let open = self.open.take().and_then(|(i, client)| {
            let was = &self.list[i];
            let at = list.iter().position(|e| e == was)?;
            Some((at, client))
        });
        self.list = list;
        self.open = open;
    }

    /// Asks `question`: on the open connection first, then each selector in order
    /// on a new connection (the one whose connection broke among them), until one
    /// answers; returns its index in [`Selectors::list`] and the answer, and keeps
    /// its connection. A refusal of the request itself stops at once
    /// ([`after_failure`]). Each selector gets `limit`; one that has not answered
    /// within [`HEDGE_AFTER`] has the next asked beside it ([`first_ok`]).
    pub async fn ask<Q: Ask>(
        &mut self,
        connector: &TlsConnector,
        question: &Q,
        limit: Duration,
    ) -> Result<(usize, Q::Answer), AskAnyError> {
        let Some(first) = self.list.first() else {
            return Err(AskAnyError::NoSelectors);
        };
        if let Err(RpcError::Server(error)) = check(question) {
            // Every selector would refuse it alike: nothing is sent.
            if after_refusal(&error) == Next::Stop {
                return Err(AskAnyError::Refused {
                    name: first.name.clone(),
                    error,
                });
            }
            let attempts = self.list.iter().map(|sel| Attempt {
                name: sel.name.clone(),
                addr: sel.addr.clone(),
                error: RpcError::Server(error.clone()),
            });
            return Err(AskAnyError::NoneAnswered(attempts.collect()));
        }
        let mut attempts = Vec::new();
        let mut asked = None;
        if let Some((i, mut client)) = self.open.take() {
            match client.ask(question).await {
                Ok(answer) => {
                    self.open = Some((i, client));
                    return Ok((i, answer));
                }
                Err(RpcError::Server(error)) => {
                    let sel = &self.list[i];
                    if after_refusal(&error) == Next::Stop {
                        self.open = Some((i, client));
                        return Err(AskAnyError::Refused {
                            name: sel.name.clone(),
                            error,
                        });
                    }
                    // It answered, and would answer a new connection alike.
                    asked = Some(i);
                    attempts.push(attempt(sel, RpcError::Server(error)));
                }
                // The connection broke (or the selector went quiet): dial again.
                Err(_) => {}
            }
        }
        // Each selector in order on a new connection, the next beside a slow one.
        let order: Vec<usize> = (0..self.list.len()).filter(|&i| asked != Some(i)).collect();
        let list = &self.list;
        let ask = |k: usize| dial_and_ask(connector, &list[order[k]], question, limit);
        let stop =
            |e: &ClientError| matches!(e, RpcError::Server(r) if after_refusal(r) == Next::Stop);
        match first_ok(order.len(), HEDGE_AFTER, ask, stop).await {
            Ok((k, (client, answer))) => {
                self.open = Some((order[k], client));
                return Ok((order[k], answer));
            }
            Err(Failed::Stopped(k, RpcError::Server(error))) => {
                return Err(AskAnyError::Refused {
                    name: self.list[order[k]].name.clone(),
                    error,
                });
            }
            Err(Failed::Stopped(k, error)) => attempts.push(attempt(&self.list[order[k]], error)),
            Err(Failed::All(errors)) => attempts.extend(
                errors
                    .into_iter()
                    .map(|(k, error)| attempt(&self.list[order[k]], error)),
            ),
        }
        Err(AskAnyError::NoneAnswered(attempts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::select::SelectorErrorCode as C;

    fn refused(code: SelectorErrorCode) -> ClientError {
        RpcError::Server(SelectorError::new(code, "x"))
    }

    #[test]
    fn request_errors_stop_and_selector_troubles_fail_over() {
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
        let (service, addr) = ("selector", || "a:1".to_string());
        let io = || std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        for e in [
            RpcError::Closed {
                service,
                addr: addr(),
            },
            RpcError::Timeout {
                service,
                addr: addr(),
                limit: Duration::from_secs(2),
            },
            RpcError::Connect {
                service,
                addr: addr(),
                cause: io(),
            },
            RpcError::Tls {
                service,
                addr: addr(),
                cause: Box::new(CertError::WrongPeer {
                    peer: addr(),
                    expected: "service v1".into(),
                    got: "service v9".into(),
                }),
            },
            RpcError::Mismatch {
                service,
                addr: addr(),
                want: 1,
                got: 2,
            },
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
                error: RpcError::Timeout {
                    service: "selector",
                    addr: "127.0.0.1:1".into(),
                    limit: Duration::from_secs(2),
                },
            },
            Attempt {
                name: "v2".into(),
                addr: "127.0.0.1:2".into(),
                error: RpcError::Closed {
                    service: "selector",
                    addr: "127.0.0.1:2".into(),
                },
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
