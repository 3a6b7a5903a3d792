//! One rank of a started job on one node: the session the queue keeps with
//! rexecd for it, as `rexec` keeps one per rank. It dials the node (its
//! certificate must name the node chosen), says `Hello`, sends
//! `ToNode::LaunchSigned` and waits for `Started`; then it sends a heartbeat
//! every second, passes on the scheduler's signals (Stop/Cont for preemption,
//! Kill for a cancel), keeps the rank's stdout and stderr in the store up to the
//! job's `max_output` (the rest is counted as truncated), and reports how the
//! rank ended: its `Exit`, or the session lost without one (node gone, launch
//! refused, silence past the heartbeat timeout).

use std::sync::Arc;
use std::time::Duration;

use certs::Role;
use proto::Framed;
use proto::batch::SignedLaunch;
use proto::node::{ExitStatus, FromNode, Heartbeat, Hello, Signal, ToNode};
use tokio::sync::mpsc;

use crate::Shared;
use crate::market::Node;
use crate::store::Write;

/// How often the queue tells a node it is alive.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
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
            Err(why) => Event::Lost(format!("node {}: {why}", node.name)),
        });
    });
    tx
}

async fn session(
    shared: &Shared,
    node: &Node,
    launch: SignedLaunch,
    job: u64,
    mut signals: mpsc::UnboundedReceiver<Signal>,
    send: &impl Fn(Event),
) -> Result<ExitStatus, String> {
    let addr = node.addr.to_string();
    let (stream, _) = clients::dial::dial(
        &addr,
        &shared.connector,
        Role::Node,
        &node.name,
        LAUNCH_TIMEOUT,
    )
    .await
    .map_err(|e| format!("cannot reach rexecd at {addr}: {e}"))?;
    let mut framed = Framed::new(stream, proto::DEFAULT_MAX_FRAME);
    let lost = |e: proto::FrameError| format!("lost connection: {e}");
    let agent = concat!("batchd ", env!("CARGO_PKG_VERSION"));
    framed
        .send(&ToNode::Hello(Hello::new(agent)))
        .await
        .map_err(lost)?;
    let mut started = false;
    let welcome = tokio::time::timeout(LAUNCH_TIMEOUT, framed.recv::<FromNode>()).await;
    match welcome {
        Ok(Ok(Some(FromNode::Welcome(w)))) => {
            w.check_version().map_err(|e| e.to_string())?;
        }
        Ok(Ok(Some(FromNode::Error(e)))) => return Err(format!("refused: {}", e.message)),
        Ok(Ok(other)) => return Err(format!("protocol error: expected Welcome, got {other:?}")),
        Ok(Err(e)) => return Err(lost(e)),
        Err(_) => return Err("no Welcome in time".into()),
    }
    framed
        .send(&ToNode::LaunchSigned(launch))
        .await
        .map_err(lost)?;
    let mut beat = tokio::time::interval(HEARTBEAT_INTERVAL);
    let mut seq = 0;
    let mut last_heard = tokio::time::Instant::now();
    loop {
        let silence = last_heard
            + if started {
                SILENCE_TIMEOUT
            } else {
                LAUNCH_TIMEOUT
            };
        tokio::select! {
            frame = framed.recv::<FromNode>() => {
                last_heard = tokio::time::Instant::now();
                match frame.map_err(lost)? {
                    None => return Err("the node closed the session without an exit".into()),
                    Some(FromNode::Started(_)) => {
                        started = true;
                        send(Event::Started);
                    }
                    Some(FromNode::Stdout(c)) => keep(shared, job, 0, c.into_vec()).await,
                    Some(FromNode::Stderr(c)) => keep(shared, job, 1, c.into_vec()).await,
                    Some(FromNode::Exit(e)) => return Ok(e.status),
                    Some(FromNode::Error(e)) => return Err(format!("refused: {}", e.message)),
                    Some(_) => {}
                }
            }
            s = signals.recv() => match s {
                Some(s) => framed.send(&ToNode::Signal(s)).await.map_err(lost)?,
                // The scheduler let go of the rank: the node kills it when we leave.
                None => {
                    let _ = framed.send(&ToNode::Signal(Signal::Kill)).await;
                    return Err("abandoned by the queue".into());
                }
            },
            _ = beat.tick() => {
                seq += 1;
                framed.send(&ToNode::Heartbeat(Heartbeat { seq })).await.map_err(lost)?;
            }
            _ = tokio::time::sleep_until(silence) => {
                return Err(format!("silent for {} s", (silence - last_heard).as_secs()));
            }
        }
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
