//! The selector protocol over mutual TLS: accepts TCP connections (at most
//! `max_connections` in all, `max_connections_per_address` from one
//! address counted from accept, `max_connections_per_identity` per
//! certificate), runs the handshake (any valid certificate of the cluster:
//! user, node, admin or service), then answers framed
//! [`SelectorRequest`]s one at a time until the client closes, stays silent
//! for the idle timeout, or sends a frame that breaks the stream. A request
//! that decodes badly or asks for something wrong gets an error reply and
//! the connection stays usable.
//!
//! [`answer`] is the request logic on its own: select, list nodes, list
//! services, counters.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::daemon::ConnectionCaps;
use ::daemon::admit::{Admitted, FrameLimits, Incoming, admit, next_request};
use ::daemon::serve::{AcceptLimits, Gate};
use certs::{PeerIdentity, ReloadableAcceptor};
use proto::select::{
    MAX_LISTED, MAX_SELECTOR_REPLY, MAX_SELECTOR_REQUEST, NodeList, NodeView, SelectorError,
    SelectorErrorCode, SelectorOp, SelectorReply, SelectorRequest, SelectorResponse, ServiceKind,
    ServiceView,
};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::stats::Shared;
use crate::clock::Now;
use crate::policy::PolicyName;
use crate::rng::{RandomSource, Rng, SeedableRng, SplitMix64};
use crate::select::{SelectError, SelectRequest, Selected};
use crate::table::{Entry, idle_milli};

/// How the server limits its peers.
#[derive(Debug, Clone)]
pub struct ServerLimits {
    /// Most simultaneous connections.
    pub max_connections: usize,
    /// Most from one remote address (handshakes included).
    pub per_address: usize,
    /// Most of one certificate.
    pub per_identity: usize,
    /// A connection silent this long is closed.
    pub idle_timeout: Duration,
}

/// Serve `listener` until `shutdown` completes; then stop accepting, let
/// requests in flight finish (up to 5 s) and return.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<ReloadableAcceptor>,
    shared: Arc<Shared>,
    limits: ServerLimits,
    shutdown: impl Future,
) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let gate = Gate::new(AcceptLimits {
        max_connections: limits.max_connections,
        per_address: limits.per_address,
        per_identity: limits.per_identity,
    });
    let caps = gate.caps();
    let mut tasks = JoinSet::new();
    let mut seed = crate::rng::from_os().unwrap_or_else(|e| {
        tracing::warn!("no randomness from the operating system ({e}): the random policy picks from a fixed seed");
        SplitMix64::seed_from_u64(0)
    });
    gate.run(&listener, shutdown, &mut tasks, |tcp, addr| {
        let conn = Connection {
            shared: shared.clone(),
            caps: caps.clone(),
            idle: limits.idle_timeout,
            stop: stop_rx.clone(),
            rng: SplitMix64::seed_from_u64(seed.next_u64()),
        };
        conn.serve(tls.current(), tcp, addr)
    })
    .await;
    drop(listener);
    let _ = stop_tx.send(true);
    ::daemon::serve::drain(&mut tasks, Duration::from_secs(5)).await;
}

struct Connection {
    shared: Arc<Shared>,
    caps: Arc<ConnectionCaps>,
    idle: Duration,
    stop: watch::Receiver<bool>,
    rng: SplitMix64,
}

fn refusal(id: u64, code: SelectorErrorCode, message: String) -> SelectorResponse {
    SelectorResponse {
        id,
        result: Err(SelectorError::new(code, message)),
    }
}

impl Connection {
    async fn serve(
        mut self,
        acceptor: tokio_rustls::TlsAcceptor,
        tcp: TcpStream,
        addr: SocketAddr,
    ) {
        let limits = FrameLimits {
            max_request: MAX_SELECTOR_REQUEST,
            max_reply: MAX_SELECTOR_REPLY,
        };
        let busy = |why| refusal(0, SelectorErrorCode::Busy, why);
        let admitted =
            ::daemon::admit_or_return!(addr, admit(&acceptor, tcp, &self.caps, limits, busy).await);
        let Admitted {
            mut framed,
            peer,
            slot: _identity_slot,
        } = admitted;
        tracing::debug!(%addr, %peer, "connected");
        loop {
            let next =
                next_request::<SelectorRequest, _>(&mut framed, self.idle, &mut self.stop).await;
            let (response, close) = match next {
                Incoming::Idle => {
                    tracing::debug!(%addr, %peer, "idle connection closed");
                    break;
                }
                Incoming::Closed => break,
                Incoming::Request(req) => (
                    SelectorResponse {
                        id: req.id,
                        result: answer(&self.shared, &req, Now::system(), &mut self.rng),
                    },
                    false,
                ),
                Incoming::Malformed(e) if e.is_recoverable() => (
                    refusal(
                        0,
                        SelectorErrorCode::BadRequest,
                        format!("malformed request: {e}"),
                    ),
                    false,
                ),
                Incoming::Malformed(e) => {
                    // The stream is out of step: say why, then close.
                    tracing::debug!(%addr, %peer, error = %e, "oversized request; closing");
                    (
                        refusal(0, SelectorErrorCode::BadRequest, e.to_string()),
                        true,
                    )
                }
                Incoming::Broken(e) => {
                    tracing::debug!(%addr, %peer, error = %e, "connection ended");
                    break;
                }
            };
            if let Err(e) = framed.send(&response).await {
                tracing::debug!(%addr, %peer, error = %e, "could not answer; closing");
                break;
            }
            if close {
                break;
            }
        }
        let _ = framed.get_mut().shutdown().await;
        log_end(&peer, addr);
    }
}

fn log_end(peer: &PeerIdentity, addr: SocketAddr) {
    tracing::debug!(%addr, %peer, "disconnected");
}

/// Answer one request from the table as it is `now`.
pub fn answer(
    shared: &Shared,
    req: &SelectorRequest,
    now: Now,
    rng: &mut dyn RandomSource,
) -> Result<SelectorReply, SelectorError> {
    req.check()?;
    match &req.op {
        SelectorOp::Select(q) => {
            let started = Instant::now();
            let policy: PolicyName =
                q.policy
                    .parse()
                    .map_err(|e: crate::policy::UnknownPolicy| {
                        shared
                            .recorder()
                            .select(super::recorder::UNKNOWN_POLICY, false, started);
                        SelectorError::new(SelectorErrorCode::UnknownPolicy, e.to_string())
                    })?;
            let request = SelectRequest {
                count: q.count as usize,
                policy,
                max_price: q.max_price,
                exclude: q.exclude.clone(),
                expected_cpu: q.expected_cpu_ms.map(Duration::from_millis),
            };
            let picked = shared.read().select(&request, now, rng);
            shared
                .recorder()
                .select(policy.as_str(), picked.is_ok(), started);
            let picked = picked.map_err(select_error)?;
            shared.served_select();
            Ok(SelectorReply::Selected(
                picked.into_iter().map(selected_view).collect(),
            ))
        }
        SelectorOp::Nodes(q) => {
            let cpu_secs = q.expected_cpu_ms.map(|ms| ms as f64 / 1000.0);
            let week_secs = now.week_secs() as f64;
            let mut nodes: Vec<NodeView> = {
                let table = shared.read();
                table
                    .nodes(now.instant)
                    .filter_map(|e| node_view(e, now.instant, week_secs, cpu_secs))
                    .collect()
            };
            nodes.sort_unstable_by(|a, b| a.name.cmp(&b.name));
            let total = nodes.len() as u64;
            nodes.truncate(MAX_LISTED);
            Ok(SelectorReply::Nodes(NodeList { total, nodes }))
        }
        SelectorOp::Services => {
            let mut services: Vec<ServiceView> = {
                let table = shared.read();
                let view = |kind| {
                    move |e: &Entry| ServiceView {
                        kind,
                        name: e.announcement.name.clone(),
                        addr: e.announcement.addr,
                        age_ms: millis(e.age(now.instant)),
                    }
                };
                table
                    .selectors(now.instant)
                    .map(view(ServiceKind::Selector))
                    .chain(
                        table
                            .account_services(now.instant)
                            .map(view(ServiceKind::Account)),
                    )
                    .chain(
                        table
                            .batch_services(now.instant)
                            .map(view(ServiceKind::Batch)),
                    )
                    .collect()
            };
            services.sort_unstable_by(|a, b| {
                (a.kind != ServiceKind::Selector, &a.name)
                    .cmp(&(b.kind != ServiceKind::Selector, &b.name))
            });
            services.truncate(MAX_LISTED);
            Ok(SelectorReply::Services(services))
        }
        SelectorOp::Stats => Ok(SelectorReply::Stats(shared.stats(now.instant))),
        // `check` refused unknown operations; a variant added to the
        // protocol but not handled here is refused the same way.
        op => Err(SelectorError::new(
            SelectorErrorCode::Unsupported,
            format!("operation {} is not supported by this selector", op.tag()),
        )),
    }
}

fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

fn select_error(e: SelectError) -> SelectorError {
    let code = match &e {
        SelectError::NotEnoughNodes { .. } => SelectorErrorCode::NotEnoughNodes,
        SelectError::NeedsLength { .. } => SelectorErrorCode::NeedsLength,
        _ => SelectorErrorCode::BadRequest,
    };
    SelectorError::new(code, e.to_string())
}

fn selected_view(s: Selected) -> NodeView {
    NodeView {
        name: s.name,
        addr: s.addr,
        status: s.status,
        idle_milli: s.idle_milli,
        speed_milli: s.speed.map(|v| (v * 1000.0).round() as u32),
        predicted_ms: s.predicted.map(millis),
        age_ms: millis(s.age),
    }
}

fn node_view(e: &Entry, now: Instant, week_secs: f64, cpu_secs: Option<f64>) -> Option<NodeView> {
    let status = *e.status()?;
    let predicted = match (&e.summary, cpu_secs) {
        (Some(s), Some(cpu)) => s.predict(week_secs, cpu),
        _ => None,
    };
    Some(NodeView {
        name: e.announcement.name.clone(),
        addr: e.announcement.addr,
        idle_milli: idle_milli(&status),
        status,
        speed_milli: e
            .summary
            .as_ref()
            .map(|s| (s.speed() * 1000.0).round() as u32),
        predicted_ms: predicted.map(|p| (p * 1000.0).round() as u64),
        age_ms: millis(e.age(now)),
    })
}
