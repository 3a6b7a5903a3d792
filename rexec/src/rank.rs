//! One running rank: after `Started`, its session is split into a writer
//! task and a reader task.
//!
//! The writer sends, in order of priority, control messages (signals,
//! resizes, flush marks) from an unbounded queue, stdin from a bounded one,
//! and a heartbeat every [`HEARTBEAT_INTERVAL`]. It runs apart from the
//! reader so that heartbeats keep flowing while output is held up by a slow
//! reader of the client's stdout.
//!
//! Stdin is flow-controlled: the writer keeps at most
//! [`STDIN_WINDOW`] bytes sent but not yet reported taken by the node
//! (`StdinTaken`, which the reader passes on), so a job that does not read its
//! stdin holds back the client's input, never its signals or heartbeats: the
//! node reads on to them. Should the socket still be full when the
//! coordinator asks for `Signal(Kill)` (a node that stopped reading), the
//! writer gives it [`KILL_PATIENCE`] and then resets the connection, which
//! the node takes as its client gone and kills the job.
//!
//! The reader passes output to the output thread (notices too, except a
//! credit notice the user has already read from another rank, see
//! [`crate::bill`]) and reports the end of the
//! rank to the coordinator as a [`RankEvent`]: its `Exit`, or a failure (an
//! `Error` from the node, the connection lost while the job ran, or silence
//! longer than the heartbeat timeout; time spent waiting for the output
//! thread does not count as silence).

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use proto::FrameError;
use proto::node::{CHUNK_SIZE, FromNode, STDIN_WINDOW, Signal, ToNode};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior, sleep_until};

use crate::bill::CreditNotices;
use crate::clock::{HEARTBEAT_INTERVAL, Pause, Silence};
use crate::output::{Out, Stream};
use crate::rank_msg::{Control, RankEvent};
use clients::node::{Session, explain_frame};

/// Stdin chunks queued per rank.
pub const STDIN_QUEUE: usize = 16;

/// How long a `Signal(Kill)` may wait behind a write the node does not take
/// before the connection is reset instead.
pub const KILL_PATIENCE: Duration = Duration::from_millis(300);

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
    pmi: Option<crate::mpi::Pmi>,
) -> RankLink {
    let Session {
        framed,
        node,
        timeout,
        ..
    } = session;
    // A second descriptor of the socket, to reset the connection without the
    // halves (see `write_loop`); it does not keep the connection open, as the
    // reset happens while both halves are still alive.
    let socket = framed
        .get_ref()
        .get_ref()
        .0
        .get_ref()
        .as_fd()
        .try_clone_to_owned()
        .ok();
    let (reader, writer) = framed.into_split();
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let (stdin_tx, stdin_rx) = mpsc::channel(STDIN_QUEUE);
    let (taken_tx, taken_rx) = watch::channel(0u64);
    let (reset_tx, reset_rx) = oneshot::channel();
    let pmi = pmi.map(|p| p.for_rank(rank, control_tx.clone()));
    tokio::spawn(write_loop(
        writer,
        control_rx,
        stdin_rx,
        taken_rx,
        Reset {
            socket,
            tell: reset_tx,
        },
    ));
    let reader = tokio::spawn(read_loop(
        reader,
        RankInfo {
            rank,
            node: node.clone(),
            timeout,
        },
        output,
        events,
        pause,
        notices,
        taken_tx,
        reset_rx,
        pmi,
    ));
    RankLink {
        rank,
        node,
        control: control_tx,
        stdin: stdin_tx,
        reader,
    }
}

type Reader = proto::FrameReader<tokio::io::ReadHalf<clients::node::Tls>>;

/// How the writer resets its connection: a descriptor of the socket (to set
/// `SO_LINGER` 0, so that closing it sends RST) and the reader to tell.
struct Reset {
    socket: Option<OwnedFd>,
    tell: oneshot::Sender<()>,
}

impl Reset {
    /// Make the connection's close a reset, and have the reader drop its half.
    fn now(self) {
        if let Some(socket) = &self.socket {
            let _ = socket2::SockRef::from(socket).set_linger(Some(Duration::ZERO));
        }
        let _ = self.tell.send(());
    }
}

/// Whether one more chunk fits the stdin window, given the bytes sent and
/// the node's last count of bytes taken.
fn window_open(sent: u64, taken: u64) -> bool {
    sent.saturating_sub(taken) + CHUNK_SIZE as u64 <= STDIN_WINDOW as u64
}

async fn write_loop<W: tokio::io::AsyncWrite + Unpin>(
    mut writer: proto::FrameWriter<W>,
    mut control: mpsc::UnboundedReceiver<Control>,
    mut stdin: mpsc::Receiver<ToNode>,
    mut taken: watch::Receiver<u64>,
    reset: Reset,
) {
    let mut ticker = tokio::time::interval(HEARTBEAT_INTERVAL);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker.tick().await;
    let mut beats = clients::node::Heartbeats::default();
    let mut stdin_open = true;
    let mut taken_open = true;
    let mut sent = 0u64;
    // Control messages that arrived while a write was under way, oldest first.
    let mut held: VecDeque<Control> = VecDeque::new();
    let mut control_open = true;
    loop {
        let room = window_open(sent, *taken.borrow());
        let next = match held.pop_front() {
            Some(c) => Some(c),
            None => tokio::select! {
                biased;
                c = control.recv(), if control_open => match c {
                    Some(c) => Some(c),
                    None => break,
                },
                m = stdin.recv(), if stdin_open && room => match m {
                    Some(msg) => Some(Control::Send(msg)),
                    None => {
                        stdin_open = false;
                        continue;
                    }
                },
                changed = taken.changed(), if taken_open => {
                    taken_open = changed.is_ok();
                    continue;
                }
                _ = ticker.tick() => Some(Control::Send(beats.next_beat())),
            },
        };
        let msg = match next {
            Some(Control::Send(msg)) => msg,
            Some(Control::Flush(ack)) => {
                let _ = ack.send(());
                continue;
            }
            None => continue,
        };
        if let ToNode::Stdin(chunk) = &msg {
            sent += chunk.len() as u64;
        }
        let killing = matches!(msg, ToNode::Signal(Signal::Kill));
        let mut give_up = killing.then(|| Instant::now() + KILL_PATIENCE);
        let send = writer.send(&msg);
        tokio::pin!(send);
        let result = loop {
            tokio::select! {
                biased;
                r = &mut send => break Some(r),
                _ = sleep_until(give_up.unwrap_or_else(Instant::now)), if give_up.is_some() => break None,
                c = control.recv(), if control_open => match c {
                    Some(c) => {
                        if give_up.is_none()
                            && matches!(c, Control::Send(ToNode::Signal(Signal::Kill)))
                        {
                            give_up = Some(Instant::now() + KILL_PATIENCE);
                        }
                        held.push_back(c);
                    }
                    None => control_open = false,
                },
            }
        };
        match result {
            Some(Ok(())) => {}
            // The reader sees the broken connection and reports it.
            Some(Err(_)) => break,
            None => {
                // The node takes nothing, and the job must go: reset the
                // connection, which the node sees whatever it is reading.
                reset.now();
                return;
            }
        }
        if !control_open && held.is_empty() {
            break;
        }
    }
}

/// Who a reader reports for.
struct RankInfo {
    rank: u32,
    node: String,
    timeout: Duration,
}

/// Why a rank's connection was lost while its job ran, in one line.
fn lost(e: &FrameError) -> String {
    format!("lost connection while the job ran: {}", explain_frame(e))
}

#[allow(clippy::too_many_arguments)]
async fn read_loop(
    mut reader: Reader,
    info: RankInfo,
    output: mpsc::Sender<Out>,
    events: mpsc::UnboundedSender<RankEvent>,
    pause: Arc<Pause>,
    notices: Arc<CreditNotices>,
    taken: watch::Sender<u64>,
    mut reset: oneshot::Receiver<()>,
    pmi: Option<crate::mpi::RankPmi>,
) {
    let RankInfo {
        rank,
        node,
        timeout,
    } = info;
    let failed = |why: String| RankEvent::Failed { rank, why };
    let mut silence = Silence::new(timeout, Instant::now());
    let mut reset_open = true;
    let event = loop {
        let frame = tokio::select! {
            biased;
            r = &mut reset, if reset_open => {
                if r.is_ok() {
                    break failed(
                        "killed: the node took no input, so the connection was reset".into(),
                    );
                }
                reset_open = false;
                continue;
            }
            f = reader.recv::<FromNode>() => f,
            _ = sleep_until(silence.deadline()) => {
                if silence.expired(Instant::now(), &pause) {
                    break failed(format!("missed heartbeats for {}", crate::clock::show(timeout)));
                }
                continue;
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
            Ok(Some(FromNode::Pmi(c))) if pmi.is_some() => {
                if let Some(p) = &pmi {
                    p.bytes(c.into_vec());
                }
            }
            Ok(Some(FromNode::PmiEnd)) if pmi.is_some() => {
                if let Some(p) = &pmi {
                    p.end();
                }
            }
            Ok(Some(FromNode::StdinTaken(t))) => {
                taken.send_if_modified(|v| {
                    let newer = t.bytes > *v;
                    if newer {
                        *v = t.bytes;
                    }
                    newer
                });
            }
            Ok(Some(FromNode::Notice(n))) if n.kind == proto::node::NoticeKind::OutOfMemory => {
                let _ = events.send(RankEvent::OutOfMemory { rank, text: n.text });
            }
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
            Ok(Some(FromNode::Exit(exit))) => {
                if let Some(p) = &pmi
                    && let Some(why) = p.exited().await
                    && exit.status.success()
                {
                    let code = Some(crate::exit::FAILED);
                    let _ = events.send(RankEvent::Aborted { rank, why, code });
                }
                break RankEvent::Exited { rank, exit };
            }
            Ok(Some(FromNode::Error(e))) => break failed(e.message),
            Ok(Some(other)) => {
                let mut what = format!("{other:?}");
                what = what.chars().take(60).collect();
                break failed(format!("protocol error: unexpected {what}"));
            }
            Ok(None) => {
                break failed(
                    "lost connection while the job ran: the node closed it without ending the job"
                        .into(),
                );
            }
            Err(e) => break failed(lost(&e)),
        }
        silence.heard(Instant::now());
    };
    let _ = output.send(Out::RankDone(rank)).await;
    let _ = events.send(event);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stdin_window_holds_at_most_a_window_in_flight() {
        let w = STDIN_WINDOW as u64;
        let chunk = CHUNK_SIZE as u64;
        assert!(window_open(0, 0));
        assert!(window_open(w - chunk, 0));
        assert!(!window_open(w - chunk + 1, 0));
        // What the node counts back opens it again.
        assert!(window_open(w, chunk));
        // A count that runs ahead of what was sent (a confused node) does not underflow.
        assert!(window_open(0, w));
    }

    /// The kill gets through a node that takes nothing: the connection is
    /// reset when the `Signal(Kill)` cannot be written in time.
    #[tokio::test]
    async fn a_kill_stuck_behind_a_full_socket_resets_the_connection() {
        // A peer that never reads: 4 KiB of buffer, then every write waits.
        let (ours, _theirs) = tokio::io::duplex(4096);
        let writer = proto::FrameWriter::new(ours, proto::DEFAULT_MAX_FRAME);
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let (stdin_tx, stdin_rx) = mpsc::channel(STDIN_QUEUE);
        let (_taken_tx, taken_rx) = watch::channel(0u64);
        let (reset_tx, reset_rx) = oneshot::channel();
        let reset = Reset {
            socket: None,
            tell: reset_tx,
        };
        let task = tokio::spawn(write_loop(writer, control_rx, stdin_rx, taken_rx, reset));
        let chunk = proto::Chunk(vec![b'x'; CHUNK_SIZE]);
        stdin_tx.send(ToNode::Stdin(chunk)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let asked = Instant::now();
        control_tx
            .send(Control::Send(ToNode::Signal(Signal::Kill)))
            .unwrap();
        tokio::time::timeout(Duration::from_secs(10), reset_rx)
            .await
            .expect("no reset")
            .expect("the writer ended without a reset");
        assert!(asked.elapsed() >= KILL_PATIENCE, "{:?}", asked.elapsed());
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap();
    }

    /// Regression: a node that died mid-job was said to have closed the
    /// connection "during the handshake".
    #[test]
    fn a_connection_lost_mid_job_is_named_so() {
        let eof = FrameError::Io(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "peer closed connection without sending TLS close_notify",
        ));
        let text = lost(&eof);
        assert!(
            text.starts_with("lost connection while the job ran: "),
            "{text}"
        );
        assert!(!text.contains("handshake"), "{text}");
        assert!(text.contains("the node closed it"), "{text}");
    }
}
