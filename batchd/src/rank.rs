//! One rank of a started job on one node: the session the queue keeps with
//! rexecd for it, as `rexec` keeps one per rank. It opens a session with the node
//! (its certificate must name the node chosen), sends `ToNode::LaunchSigned` and
//! waits for `Started`; then it sends a heartbeat
//! every second, passes on the scheduler's signals (Stop/Cont for preemption,
//! Kill for a cancel), keeps the rank's stdout and stderr in the store up to the
//! job's `max_output` (the rest is counted as truncated), and reports how the
//! rank ended: its `Exit`, a launch the node refused for a reason of the job's own
//! (its program or its user missing there), or the session lost without an exit
//! (node gone, launch refused otherwise, silence past the heartbeat timeout). At
//! an exit it keeps what the rank used (CPU time, peak memory) for the job
//! history. The session itself is [`clients::node::Session`].

use std::sync::Arc;
use std::time::Duration;

use clients::node::{Agent, Heartbeats, Session, SessionError, explain_frame};
use proto::batch::SignedLaunch;
use proto::node::{ExitStatus, FromNode, Signal, ToNode};
use tokio::sync::mpsc;

use crate::Shared;
use crate::market::Node;
use crate::store::{RankUsage, Write};

/// How often the queue tells a node it is alive.
pub use clients::node::HEARTBEAT_INTERVAL;
/// How long a node may say nothing before its rank counts as lost (nodes
/// send a heartbeat every second; a node machine that vanished without closing
/// the connection is noticed this late).
pub const SILENCE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long dialling and the launch may take.
pub const LAUNCH_TIMEOUT: Duration = Duration::from_secs(10);

/// How a rank's session ended, or that it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The node confirmed the rank runs.
    Started,
    /// The rank exited.
    Exit(ExitStatus),
    /// The session ended without an exit (the reason, in words).
    Lost(String),
    /// The node refused the launch for a reason that belongs to the job (its
    /// program is missing or not executable there, its user unknown there: see
    /// [`proto::node::ErrorCode::belongs_to_the_job`]); the node's message, which
    /// names the node. The job fails; the node stays in service.
    Refused(String),
    /// The rank hit a limit: its time limit (the state is `Timeout`) or its memory
    /// (`OutOfMemory`); the node's words, naming the rank and the node. Its `Exit`
    /// follows.
    Limit(proto::batch::JobState, String),
}

/// An event of one rank of one attempt of one job.
#[derive(Debug, Clone)]
pub struct RankEvent {
    /// The job.
    pub job: u64,
    /// Which start of it.
    pub attempt: u32,
    /// The rank.
    pub rank: u32,
    /// What happened.
    pub event: Event,
    /// When the queue heard it (UTC ms): the clock's ticks order it.
    pub at_ms: i64,
}

/// Starts `launch` (one rank of one attempt of job `job`) on `node`; returns
/// where to send it signals. Events go to `events`.
pub fn spawn(
    shared: Arc<Shared>,
    node: Node,
    job: u64,
    launch: SignedLaunch,
    events: mpsc::UnboundedSender<RankEvent>,
) -> mpsc::UnboundedSender<Signal> {
    let (tx, rx) = mpsc::unbounded_channel();
    let (attempt, rank) = (launch.attempt, launch.rank);
    tokio::spawn(async move {
        let send = |event| {
            let _ = events.send(RankEvent {
                job,
                attempt,
                rank,
                event,
                at_ms: crate::unix_now_ms(),
            });
        };
        let end = session(&shared, &node, launch, job, rx, &send).await;
        send(match end {
            Ok(status) => Event::Exit(status),
            Err(End::Refused(why)) => Event::Refused(why),
            Err(End::Lost(why)) => Event::Lost(format!("node {}: {why}", node.name)),
        });
    });
    tx
}

/// batchd as a node sees it: its `Hello`, and the node's notices logged.
pub static AGENT: Agent = Agent {
    name: concat!("batchd ", env!("CARGO_PKG_VERSION")),
    on_notice: log_notice,
};

fn log_notice(node: &str, notice: &proto::node::Notice) {
    tracing::info!(node, "notice: {}", notice.text);
}

/// Why a rank's session ended without an exit.
enum End {
    /// The node refused the launch for a reason that belongs to the job.
    Refused(String),
    /// Anything else: the node, the network, or the queue letting go.
    Lost(String),
}

impl From<SessionError> for End {
    fn from(e: SessionError) -> End {
        match e {
            SessionError::Refused(r) if r.code.belongs_to_the_job() => End::Refused(r.message),
            SessionError::Refused(r) => End::Lost(format!("refused: {}", r.message)),
            other => End::Lost(other.to_string()),
        }
    }
}

async fn session(
    shared: &Shared,
    node: &Node,
    launch: SignedLaunch,
    job: u64,
    mut signals: mpsc::UnboundedReceiver<Signal>,
    send: &impl Fn(Event),
) -> Result<ExitStatus, End> {
    let (attempt, rank) = (launch.attempt, launch.rank);
    let mut peak_memory = None;
    let addr = node.addr.to_string();
    let open = Session::open(
        &AGENT,
        &shared.connector,
        &node.name,
        &addr,
        SILENCE_TIMEOUT,
    );
    let mut session = tokio::time::timeout(LAUNCH_TIMEOUT, open)
        .await
        .map_err(|_| End::Lost("no Welcome in time".into()))?
        .map_err(|e| match e {
            e @ (SessionError::Resolve { .. }
            | SessionError::Connect { .. }
            | SessionError::ConnectTimeout { .. }
            | SessionError::Tls(_)
            | SessionError::WrongPeer { .. }) => {
                End::Lost(format!("cannot reach rexecd at {addr}: {e}"))
            }
            e => End::from(e),
        })?;
    tokio::time::timeout(LAUNCH_TIMEOUT, session.launch_signed(launch))
        .await
        .map_err(|_| End::Lost("no Started in time".into()))??;
    send(Event::Started);
    let mut beat = tokio::time::interval(HEARTBEAT_INTERVAL);
    let mut beats = Heartbeats::default();
    let framed = &mut session.framed;
    let lost = |e: proto::FrameError| End::Lost(format!("lost connection: {}", explain_frame(&e)));
    let mut last_heard = tokio::time::Instant::now();
    loop {
        let silence = last_heard + SILENCE_TIMEOUT;
        tokio::select! {
            frame = framed.recv::<FromNode>() => {
                last_heard = tokio::time::Instant::now();
                match frame.map_err(lost)? {
                    None => return Err(End::Lost("the node closed the session without an exit".into())),
                    Some(FromNode::Stdout(c)) => keep(shared, job, 0, c.into_vec()).await,
                    Some(FromNode::Stderr(c)) => keep(shared, job, 1, c.into_vec()).await,
                    Some(FromNode::Usage(u)) => peak_memory = u.peak_memory,
                    Some(FromNode::Exit(e)) => {
                        let usage = RankUsage { job, attempt, rank, node: node.name.clone(),
                            cpu_nanos: e.cpu_nanos, peak_memory, ended_ms: crate::unix_now_ms() };
                        record_usage(shared, usage).await;
                        return Ok(e.status);
                    }
                    Some(FromNode::Notice(n)) => match crate::limit::state_of(n.kind) {
                        Some(state) => send(Event::Limit(state, n.text)),
                        None => log_notice(&node.name, &n),
                    },
                    Some(FromNode::Error(e)) => return Err(End::Lost(format!("refused: {}", e.message))),
                    Some(_) => {}
                }
            }
            s = signals.recv() => match s {
                Some(s) => framed.send(&ToNode::Signal(s)).await.map_err(lost)?,
                // The scheduler let go of the rank: the node kills it when we leave.
                None => {
                    let _ = framed.send(&ToNode::Signal(Signal::Kill)).await;
                    return Err(End::Lost("abandoned by the queue".into()));
                }
            },
            _ = beat.tick() => {
                framed.send(&beats.next_beat()).await.map_err(lost)?;
            }
            _ = tokio::time::sleep_until(silence) => {
                return Err(End::Lost(format!("silent for {} s", SILENCE_TIMEOUT.as_secs())));
            }
        }
    }
}

/// Keeps what a rank used for the job history, before its exit is passed on (so
/// the job's end finds it); a store failure loses only this record (logged).
async fn record_usage(shared: &Shared, usage: RankUsage) {
    let job = usage.job;
    if let Err(e) = shared.store.write(Write::RankUsage(Box::new(usage))).await {
        tracing::warn!(job = %format_args!("{job:016x}"), error = %e, "rank usage not kept");
    }
}

/// Keeps output bytes of `stream` (0 stdout, 1 stderr) of `job`, up to the
/// job's cap (stdout and stderr together); the rest is counted as truncated.
async fn keep(shared: &Shared, job: u64, stream: usize, data: Vec<u8>) {
    let (offset, kept) = {
        let mut q = shared.lock_queue();
        let Some(j) = q.jobs.get_mut(&job) else {
            return;
        };
        let used = j.out[0] + j.out[1];
        let room = shared.cfg.max_output.saturating_sub(used) as usize;
        let n = data.len().min(room);
        j.rec.truncated += (data.len() - n) as u64;
        let offset = j.out[stream];
        j.out[stream] += n as u64;
        (offset, n)
    };
    if kept == 0 {
        return;
    }
    let mut data = data;
    data.truncate(kept);
    let write = Write::Output {
        id: job,
        stream: stream as u8 + 1,
        offset,
        data,
    };
    if let Err(e) = shared.store.write(write).await {
        tracing::warn!(job = %format_args!("{job:016x}"), error = %e, "output not kept");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::node::{ErrorCode, ErrorReply};

    fn end(code: ErrorCode) -> End {
        End::from(SessionError::Refused(ErrorReply::new(code, "node n1: why")))
    }

    #[test]
    fn the_jobs_own_refusals_fail_it_and_the_rest_count_as_a_lost_node() {
        assert!(matches!(end(ErrorCode::SpawnFailed), End::Refused(m) if m == "node n1: why"));
        assert!(matches!(end(ErrorCode::UnknownUser), End::Refused(_)));
        for code in [
            ErrorCode::Busy,
            ErrorCode::Internal,
            ErrorCode::NotAuthorized,
        ] {
            assert!(matches!(end(code), End::Lost(m) if m == "refused: node n1: why"));
        }
        assert!(matches!(End::from(SessionError::Closed), End::Lost(_)));
    }
}
