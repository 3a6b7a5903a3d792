//! One running rank: after `Started`, its session is split into a writer
//! task and a reader task.
//!
//! The writer sends, in order of priority, control messages (signals,
//! resizes, flush marks) from an unbounded queue, stdin from a bounded one,
//! and a heartbeat every [`HEARTBEAT_INTERVAL`]. It runs apart from the
//! reader so that heartbeats keep flowing while output is held up by a slow
//! reader of the client's stdout.
//!
//! The reader passes output to the output thread (notices too, except a
//! credit notice the user has already read from another rank, see
//! [`crate::bill`]) and reports the end of the
//! rank to the coordinator as a [`RankEvent`]: its `Exit`, or a failure (an
//! `Error` from the node, the connection lost, or silence longer than the
//! heartbeat timeout; time spent waiting for the output thread does not
//! count as silence).

use std::sync::Arc;
use std::time::Duration;

use proto::node::{Exit, FromNode, Heartbeat, Signal, ToNode};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior, sleep_until};

use crate::bill::CreditNotices;
use crate::clock::{HEARTBEAT_INTERVAL, Pause};
use crate::output::{Out, Stream};
use crate::session::{Session, explain_frame};

/// Stdin chunks queued per rank.
pub const STDIN_QUEUE: usize = 16;

/// A control message for a rank's writer.
#[derive(Debug)]
pub enum Control {
    /// Send this message.
    Send(ToNode),
    /// Answer once everything queued before it has been written.
    Flush(oneshot::Sender<()>),
}

/// How a rank ended, as told to the coordinator.
#[derive(Debug)]
pub enum RankEvent {
    /// The node reported the exit.
    Exited {
        /// The rank.
        rank: u32,
        /// The report.
        exit: Exit,
    },
    /// The session failed before an exit was reported.
    Failed {
        /// The rank.
        rank: u32,
        /// One line: why.
        why: String,
    },
}

/// The coordinator's handle on a running rank.
#[derive(Debug)]
pub struct RankLink {
    /// The rank.
    pub rank: u32,
    /// The node's name.
    pub node: String,
    /// Control queue of the writer.
    pub control: mpsc::UnboundedSender<Control>,
    /// Stdin queue of the writer.
    pub stdin: mpsc::Sender<ToNode>,
    /// The reader task.
    pub reader: JoinHandle<()>,
}

impl RankLink {
    /// Queue `signal` for the node.
    pub fn signal(&self, signal: Signal) {
        let _ = self.control.send(Control::Send(ToNode::Signal(signal)));
    }

    /// Queue a flush mark; the answer comes once every control message
    /// queued before it has been written (or fails if the writer is gone).
    pub fn flush(&self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let _ = self.control.send(Control::Flush(tx));
        rx
    }
}

/// Start the writer and reader of a rank whose `Started` has arrived.
pub fn spawn(
    session: Session,
    rank: u32,
    output: mpsc::Sender<Out>,
    events: mpsc::UnboundedSender<RankEvent>,
    pause: Arc<Pause>,
    notices: Arc<CreditNotices>,
) -> RankLink {
    let Session {
        framed,
        node,
        timeout,
    } = session;
    let (reader, writer) = framed.into_split();
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let (stdin_tx, stdin_rx) = mpsc::channel(STDIN_QUEUE);
    tokio::spawn(write_loop(writer, control_rx, stdin_rx));
    let peer = Peer {
        rank,
        node: node.clone(),
        timeout,
    };
    let reader = tokio::spawn(read_loop(reader, peer, output, events, pause, notices));
    RankLink {
        rank,
        node,
        control: control_tx,
        stdin: stdin_tx,
        reader,
    }
}

type Writer = proto::FrameWriter<tokio::io::WriteHalf<crate::session::Tls>>;
type Reader = proto::FrameReader<tokio::io::ReadHalf<crate::session::Tls>>;

async fn write_loop(
    mut writer: Writer,
    mut control: mpsc::UnboundedReceiver<Control>,
    mut stdin: mpsc::Receiver<ToNode>,
) {
    let mut ticker = tokio::time::interval(HEARTBEAT_INTERVAL);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker.tick().await;
    let mut seq = 0u64;
    let mut stdin_open = true;
    loop {
        let msg = tokio::select! {
            biased;
            c = control.recv() => match c {
                Some(Control::Send(msg)) => msg,
                Some(Control::Flush(ack)) => {
                    let _ = ack.send(());
                    continue;
                }
                None => break,
            },
            m = stdin.recv(), if stdin_open => match m {
                Some(msg) => msg,
                None => {
                    stdin_open = false;
                    continue;
                }
            },
            _ = ticker.tick() => {
                seq += 1;
                ToNode::Heartbeat(Heartbeat { seq: seq - 1 })
            }
        };
        if writer.send(&msg).await.is_err() {
            // The reader sees the broken connection and reports it.
            break;
        }
    }
}

/// Which rank a reader serves, on which node, and how long that node may be silent.
struct Peer {
    rank: u32,
    node: String,
    timeout: Duration,
}

async fn read_loop(
    mut reader: Reader,
    peer: Peer,
    output: mpsc::Sender<Out>,
    events: mpsc::UnboundedSender<RankEvent>,
    pause: Arc<Pause>,
    notices: Arc<CreditNotices>,
) {
    let Peer {
        rank,
        node,
        timeout,
    } = peer;
    let failed = |why: String| RankEvent::Failed { rank, why };
    let mut deadline = Instant::now() + timeout;
    let event = loop {
        let frame = tokio::select! {
            biased;
            f = reader.recv::<FromNode>() => f,
            _ = sleep_until(deadline) => {
                match pause.excuse(Instant::now(), timeout) {
                    Some(later) => {
                        deadline = later;
                        continue;
                    }
                    None => break failed(format!("missed heartbeats for {}", crate::clock::show(timeout))),
                }
            }
        };
        let data = |stream, bytes| Out::Data {
            rank,
            stream,
            bytes,
        };
        match frame {
            Ok(Some(FromNode::Stdout(c))) => {
                let _ = output.send(data(Stream::Out, c.into_vec())).await;
            }
            Ok(Some(FromNode::Stderr(c))) => {
                let _ = output.send(data(Stream::Err, c.into_vec())).await;
            }
            Ok(Some(FromNode::Heartbeat(_))) => {}
            Ok(Some(FromNode::Notice(n))) if !notices.admit(n.kind) => {}
            Ok(Some(FromNode::Notice(n))) => {
                // A node that names itself already says where the news is from.
                let line = if n.text.starts_with(&format!("node {node}:")) {
                    format!("rexec: {}", n.text)
                } else {
                    format!("rexec: node {node} (rank {rank}): {}", n.text)
                };
                let _ = output.send(Out::Message(line)).await;
            }
            Ok(Some(FromNode::Exit(exit))) => break RankEvent::Exited { rank, exit },
            Ok(Some(FromNode::Error(e))) => break failed(e.message),
            Ok(Some(other)) => {
                let mut what = format!("{other:?}");
                what = what.chars().take(60).collect();
                break failed(format!("protocol error: unexpected {what}"));
            }
            Ok(None) => break failed("lost connection: the node closed it".into()),
            Err(e) => break failed(format!("lost connection: {}", explain_frame(&e))),
        }
        deadline = Instant::now() + timeout;
    };
    let _ = output.send(Out::RankDone(rank)).await;
    let _ = events.send(event);
}
