//! One client connection, after the TLS handshake: the `Hello`/`Welcome` exchange, then
//! either one job (`Launch`, or `LaunchPmi` for an MPI rank, see `launch`, `job` and `end`; or a queue's `LaunchSigned`,
//! see `signed`) or any number of admin requests (`ListJobs`, `Kill`, see `admin`), in
//! the order `proto::node` prescribes.
//!
//! Before a job runs, a peer gets one heartbeat timeout to send each request; silence,
//! a closed connection or a malformed frame ends the session (with an `Error` frame when
//! the peer can still read one); a request holding a negative bid is refused `BadBid`
//! and the session goes on. Nothing a peer sends can make the session panic.

mod admin;
mod end;
mod job;
mod launch;
mod limit_clock;
mod limits;
mod signed;

use std::sync::Arc;
use std::time::Duration;

use certs::PeerIdentity;
use proto::node::{ErrorCode, ErrorReply, FromNode, ToNode, Welcome};
use proto::{FrameError, FrameReader, FrameWriter, Framed};
use tokio::io::{AsyncRead, AsyncWrite, ReadHalf, WriteHalf};
use tokio::sync::watch;

use crate::config::Config;
use crate::registry::Registry;

/// What every session shares: the configuration, the registry of running ranks and the
/// server's stop signal.
#[derive(Debug)]
pub struct Shared {
    /// The resolved configuration.
    pub config: Config,
    /// Running ranks and the job cgroups.
    pub registry: Arc<Registry>,
    /// Becomes `true` when rexecd shuts down.
    pub stop: watch::Receiver<bool>,
    /// The signed batch ranks this node started.
    pub started: crate::signed::StartedRanks,
    /// The highest lease epoch seen from each queue.
    pub fences: crate::signed::fence::Fences,
    /// Launch latency and refusals, for metrics.
    pub meters: crate::metrics::SessionMeters,
}

/// The software name sent in `Welcome`.
pub const AGENT: &str = concat!("rexecd ", env!("CARGO_PKG_VERSION"));

type Reader<S> = FrameReader<ReadHalf<S>>;
type Writer<S> = FrameWriter<WriteHalf<S>>;

/// What waiting for the next frame produced.
enum Incoming {
    Frame(ToNode),
    Closed,
    TimedOut,
    Stopped,
    Failed(FrameError),
}

/// A session's stream that can name its TCP socket, for the liveness options.
pub trait ClientSocket {
    /// The TCP connection under the stream.
    fn tcp(&self) -> &tokio::net::TcpStream;
}

impl ClientSocket for tokio_rustls::server::TlsStream<certs::LazyBufReader<tokio::net::TcpStream>> {
    fn tcp(&self) -> &tokio::net::TcpStream {
        self.get_ref().0.get_ref()
    }
}

/// Runs one session over an authenticated stream.
pub async fn serve<S>(shared: Arc<Shared>, stream: S, peer: PeerIdentity, remote: String)
where
    S: AsyncRead + AsyncWrite + ClientSocket + Unpin + Send + 'static,
{
    // A session may last as long as its job: TCP itself must notice a client machine
    // that dies while the heartbeat clock is suspended (see `crate::heartbeat`).
    let config = &shared.config;
    if let Err(e) = crate::sys::net::set_liveness(
        stream.tcp(),
        config.heartbeat_interval,
        config.tcp_user_timeout,
    ) {
        tracing::warn!(%peer, %remote, error = %e, "cannot set TCP keepalive on the connection");
    }
    let (mut reader, mut writer) = Framed::new(stream, shared.config.max_frame).into_split();
    let mut stop = shared.stop.clone();
    let wait = shared.config.heartbeat_timeout;
    let party = Party {
        node: &shared.config.name,
        meters: &shared.meters,
        peer: &peer,
        remote: &remote,
    };
    let hello = match next(&mut reader, wait, &mut stop).await {
        Incoming::Frame(ToNode::Hello(hello)) => hello,
        Incoming::Frame(other) => {
            let text = format!("expected Hello first, got message tag {}", other.tag());
            return refuse(&party, &mut writer, ErrorCode::BadRequest, text).await;
        }
        other => return ended(&party, &mut writer, other).await,
    };
    let version = match proto::node::negotiate(&hello) {
        Ok(v) => v,
        Err(e) => {
            refuse(&party, &mut writer, ErrorReply::from(e), String::new()).await;
            // The launch may have come with the Hello: see `end::linger`.
            return end::linger(&mut reader).await;
        }
    };
    let welcome = FromNode::Welcome(Welcome {
        version,
        node: shared.config.name.clone(),
        agent: AGENT.to_string(),
    });
    if writer.send(&welcome).await.is_err() {
        return;
    }
    tracing::debug!(%peer, %remote, agent = %hello.agent, "session open");
    loop {
        match next(&mut reader, wait, &mut stop).await {
            Incoming::Frame(ToNode::Launch(request)) => {
                return launch::launch(shared, peer, request, reader, writer, false).await;
            }
            Incoming::Frame(ToNode::LaunchPmi(request)) => {
                return launch::launch(shared, peer, request, reader, writer, true).await;
            }
            Incoming::Frame(ToNode::LaunchCapped(request)) => {
                return launch::launch_capped(shared, peer, *request, reader, writer).await;
            }
            Incoming::Frame(ToNode::LaunchSigned(request)) => {
                return signed::launch(shared, peer, request, reader, writer).await;
            }
            Incoming::Frame(ToNode::ListJobs) => {
                let answer = admin::list(&shared, &peer);
                if let FromNode::Error(e) = &answer {
                    shared.meters.refused(e.code);
                }
                if writer.send(&answer).await.is_err() {
                    return;
                }
            }
            Incoming::Frame(ToNode::Kill(kill)) => {
                let answer = admin::kill(&shared, &peer, &kill);
                if let FromNode::Error(e) = &answer {
                    shared.meters.refused(e.code);
                }
                if writer.send(&answer).await.is_err() {
                    return;
                }
            }
            Incoming::Frame(ToNode::Rebid(rebid)) => {
                let answer = admin::rebid(&shared, &peer, &rebid).await;
                if let FromNode::Error(e) = &answer {
                    shared.meters.refused(e.code);
                }
                if writer.send(&answer).await.is_err() {
                    return;
                }
            }
            Incoming::Frame(ToNode::Heartbeat(_)) => {}
            Incoming::Frame(ToNode::Unknown { tag }) => {
                let text = format!("message tag {tag} is not supported by {AGENT}");
                return refuse(&party, &mut writer, ErrorCode::Unsupported, text).await;
            }
            Incoming::Frame(other) => {
                let text = format!(
                    "message tag {} is not allowed before Launch, LaunchSigned, ListJobs, Kill or Rebid",
                    other.tag()
                );
                return refuse(&party, &mut writer, ErrorCode::BadRequest, text).await;
            }
            Incoming::Failed(FrameError::BadBid(bid)) => {
                // The frame is consumed and the stream in step: the bid is refused as
                // the market refuses one (as a `Rebid` over `max_rate` is), and the
                // session goes on.
                let reply = crate::market::refuse_bid(party.node, &bid);
                tracing::info!(%peer, %remote, message = %reply.message, "request refused");
                shared.meters.refused(reply.code);
                if writer.send(&FromNode::Error(reply)).await.is_err() {
                    return;
                }
            }
            Incoming::Closed => return,
            other => return ended(&party, &mut writer, other).await,
        }
    }
}

/// Who a session talks to, and where its refusals are counted.
struct Party<'a> {
    node: &'a str,
    meters: &'a crate::metrics::SessionMeters,
    peer: &'a PeerIdentity,
    remote: &'a str,
}

/// Waits up to `limit` for the next frame, or until rexecd stops.
async fn next<S: AsyncRead>(
    reader: &mut Reader<S>,
    limit: Duration,
    stop: &mut watch::Receiver<bool>,
) -> Incoming {
    if *stop.borrow() {
        return Incoming::Stopped;
    }
    tokio::select! {
        got = tokio::time::timeout(limit, reader.recv::<ToNode>()) => match got {
            Err(_) => Incoming::TimedOut,
            Ok(Ok(Some(frame))) => Incoming::Frame(frame),
            Ok(Ok(None)) => Incoming::Closed,
            Ok(Err(e)) => Incoming::Failed(e),
        },
        _ = stop.wait_for(|s| *s) => Incoming::Stopped,
    }
}

/// Answers a frame error or timeout before any job runs, then closes.
async fn ended<S: AsyncWrite>(party: &Party<'_>, writer: &mut Writer<S>, why: Incoming) {
    let (code, text) = match why {
        Incoming::TimedOut => (
            ErrorCode::BadRequest,
            "no request within the heartbeat timeout; closing".to_string(),
        ),
        Incoming::Stopped => (
            ErrorCode::Busy,
            "rexecd is shutting down; try another node".to_string(),
        ),
        Incoming::Failed(e) => match frame_error_reply(party.node, &e) {
            Some(reply) => (reply.code, reply.message),
            None => {
                let (peer, remote) = (party.peer, party.remote);
                tracing::info!(%peer, %remote, error = %e, "session ended");
                return;
            }
        },
        Incoming::Closed | Incoming::Frame(_) => return,
    };
    refuse(party, writer, code, text).await;
}

/// Node `node`'s `Error` answer for a frame error the peer should hear about (malformed,
/// too large, or holding a negative bid: refused as the market refuses a bid); `None` when
/// the connection itself failed.
fn frame_error_reply(node: &str, e: &FrameError) -> Option<ErrorReply> {
    match e {
        FrameError::BadBid(bid) => Some(crate::market::refuse_bid(node, bid)),
        FrameError::Decode(_) | FrameError::TooLarge { .. } => Some(ErrorReply::new(
            ErrorCode::BadRequest,
            format!("{e}; closing the session"),
        )),
        _ => None,
    }
}

/// Sends `Error` (an empty `text` keeps `reply`'s own message) and closes.
async fn refuse<S: AsyncWrite>(
    party: &Party<'_>,
    writer: &mut Writer<S>,
    reply: impl Into<Reply>,
    text: String,
) {
    let (peer, remote) = (party.peer, party.remote);
    let mut reply = reply.into().0;
    party.meters.refused(reply.code);
    if !text.is_empty() {
        reply.message = text;
    }
    tracing::info!(%peer, %remote, code = ?reply.code, message = %reply.message, "request refused");
    let _ = writer.send(&FromNode::Error(reply)).await;
    let _ = writer.shutdown().await;
}

/// An `ErrorReply` or a bare code, for [`refuse`].
struct Reply(ErrorReply);

impl From<ErrorReply> for Reply {
    fn from(r: ErrorReply) -> Self {
        Reply(r)
    }
}

impl From<ErrorCode> for Reply {
    fn from(code: ErrorCode) -> Self {
        Reply(ErrorReply::new(code, ""))
    }
}
