//! A running rank: the session loop that forwards stdin, signals and window sizes to
//! the job, has its output streamed back (by [`crate::pump::output`]), exchanges
//! heartbeats, and watches for the events that end the rank (see `end` for how a rank
//! ends and is cleaned up).
//!
//! Stdin is flow-controlled (`proto::node::STDIN_WINDOW`): the loop hands every chunk to
//! the stdin task at once and keeps reading the client, so a signal, a heartbeat or the
//! connection closing behind the stdin is seen whatever the job does with its input.
//! The stdin task counts what it wrote, and the loop reports that count
//! (`StdinTaken`) each quarter window. Only a client that ignores the window (more than a
//! window in flight) is no longer read until the job takes enough.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use proto::node::{
    ErrorCode, ErrorReply, FromNode, Heartbeat, JobId, Launch, Notice, NoticeKind, STDIN_WINDOW,
    Signal, Started, StdinTaken, ToNode,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::{Reader, Shared, Writer, frame_error_reply};
use crate::control::Control;
use crate::heartbeat::{Clocks, Due, Liveness};
use crate::pty::PtyMaster;
use crate::pump::{self, Out, Source, StdinMsg};
use crate::registry::Slot;
use crate::spawn::{JobChild, JobUser};
use crate::sys::{self, ProcessId};

/// The terminal's end-of-file character (VEOF, Ctrl-D), sent for `StdinEnd` under `-t`.
const TERMINAL_EOF: u8 = 0x04;

/// Progress of the job's stdin after which rexecd reports it (`StdinTaken`): a quarter
/// of the window, so a client waiting at a full window always hears back while the job
/// reads, and a streaming client's window never runs dry while a report is on its way
/// (about 10% more stdin throughput than reporting each half window; BENCHMARKS.md).
const ACK_STEP: u64 = (STDIN_WINDOW / 4) as u64;

/// A spawned rank, before its session loop runs.
#[derive(Debug)]
pub(super) struct Job {
    pub(super) job: JobId,
    pub(super) rank: u32,
    pub(super) program: String,
    pub(super) user: JobUser,
    pub(super) cgroup: u64,
    /// The registry entry; released as soon as the cgroup is gone.
    pub(super) slot: Option<Slot>,
    pub(super) child: JobChild,
    pub(super) pgid: Option<ProcessId>,
    pub(super) pty: Option<PtyMaster>,
    /// A notice for the client, sent right after `Started`.
    pub(super) notice: Option<String>,
    /// rexecd's end of the rank's PMI channel (`LaunchPmi`), until its relay starts.
    pub(super) pmi: Option<std::os::unix::net::UnixStream>,
    /// A signed batch rank's end, recorded for accountd when its program exits.
    pub(super) signed_end: Option<proto::account::RankEnd>,
    /// The rank's memory limit, bytes, when it has one.
    pub(super) mem_limit: Option<u64>,
    /// The rank's time limit, when it has one.
    pub(super) time_limit: Option<proto::node::TimeLimit>,
    /// A signed job's script file, removed when the rank is dropped.
    pub(super) script: Option<crate::signed::script::ScriptFile>,
}

impl Job {
    pub(super) fn new(
        request: &Launch,
        user: JobUser,
        slot: Slot,
        child: JobChild,
        pty: Option<PtyMaster>,
    ) -> Job {
        let pgid = child.id().map(|p| ProcessId(p as i32));
        Job {
            job: request.job,
            rank: request.rank,
            program: request.argv[0].clone(),
            user,
            cgroup: slot.cgroup(),
            slot: Some(slot),
            child,
            pgid,
            pty,
            notice: None,
            pmi: None,
            signed_end: None,
            mem_limit: None,
            time_limit: request.options.time_limit,
            script: None,
        }
    }
}

/// Why the loop stopped.
pub(super) enum End {
    /// The first process exited.
    Exited(std::io::Result<std::process::ExitStatus>),
    /// The client is gone; nobody to report to.
    ClientGone(String),
    /// The client broke the protocol; tell it, then close.
    Protocol(ErrorReply),
}

/// The per-rank state of the loop.
pub(super) struct Running<'a> {
    pub(super) shared: &'a Shared,
    pub(super) job: Job,
    pub(super) out: mpsc::Sender<Out>,
    pub(super) stdin: Option<mpsc::UnboundedSender<StdinMsg>>,
    /// Stdin bytes received from the client.
    pub(super) received: u64,
    /// Stdin bytes the stdin task has written to the job (or discarded after the job
    /// closed its stdin).
    pub(super) taken: watch::Receiver<u64>,
    /// The last count reported to the client.
    pub(super) acked: u64,
    /// The stdin task has ended (no more counts will come).
    pub(super) stdin_done: bool,
    pub(super) live: Liveness,
    pub(super) cpu: Duration,
    /// The cgroup's peak memory, bytes, read with `cpu` (unknown without the memory
    /// controller).
    pub(super) peak_memory: Option<u64>,
    pub(super) killed: bool,
    /// The relay of the rank's PMI channel, for `LaunchPmi`.
    pub(super) pmi: Option<crate::pmi::Relay>,
    /// The rank's time limit, while it has one to enforce.
    pub(super) limit: Option<super::limit_clock::LimitClock>,
}

/// Runs the rank to its end.
pub(super) async fn run<S>(
    shared: Arc<Shared>,
    mut job: Job,
    mut reader: Reader<S>,
    writer: Writer<S>,
    mut control: mpsc::Receiver<Control>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let pid = job.child.id().unwrap_or(0);
    let started = FromNode::Started(Started {
        job: job.job,
        rank: job.rank,
        pid,
    });
    tracing::info!(user = %job.user.name(), job = %job.job, rank = job.rank, pid,
        program = %job.program, cgroup = job.cgroup, "job started");

    let (stdin_tx, stdin_rx) = mpsc::unbounded_channel();
    let (taken_tx, taken_rx) = watch::channel(0u64);
    let (stdout, stderr): (Option<Source>, Option<Source>) = match &job.pty {
        Some(master) => {
            tokio::spawn(pump::feed_stdin(
                master.clone(),
                Some(TERMINAL_EOF),
                stdin_rx,
                taken_tx,
            ));
            (Some(Box::pin(master.clone())), None)
        }
        None => {
            match job.child.stdin.take() {
                Some(stdin) => {
                    tokio::spawn(pump::feed_stdin(stdin, None, stdin_rx, taken_tx));
                }
                None => {
                    tokio::spawn(pump::feed_stdin(
                        tokio::io::sink(),
                        None,
                        stdin_rx,
                        taken_tx,
                    ));
                }
            }
            (
                job.child.stdout.take().map(|s| Box::pin(s) as Source),
                job.child.stderr.take().map(|s| Box::pin(s) as Source),
            )
        }
    };
    let (out, out_rx) = mpsc::channel(pump::OUT_QUEUE);
    let output = tokio::spawn(pump::output(writer, started, stdout, stderr, out_rx));
    let pmi = job.pmi.take().and_then(|socket| {
        crate::pmi::Relay::start(socket, out.clone())
            .map_err(|e| tracing::warn!(error = %e, "cannot relay the rank's PMI channel"))
            .ok()
    });

    let config = &shared.config;
    let mut state = Running {
        shared: &shared,
        job,
        out,
        stdin: Some(stdin_tx),
        received: 0,
        taken: taken_rx,
        acked: 0,
        stdin_done: false,
        live: Liveness::new(config.heartbeat_timeout, Instant::now())
            .with_stop_limit(config.stopped_client_limit),
        cpu: Duration::ZERO,
        peak_memory: None,
        killed: false,
        pmi,
        limit: None,
    };
    state.limit = super::limit_clock::LimitClock::new(state.job.time_limit, Instant::now());
    if let Some(text) = state.job.notice.take() {
        state.notice(text);
    }
    let mut clocks = Clocks::new(config.heartbeat_interval, &state.live);
    let mut stop = shared.stop.clone();
    let mut stopping = false;

    let end = loop {
        let flooded = state.flooded();
        let limit_due = state
            .limit
            .map_or_else(super::limit_clock::never, |c| c.due());
        tokio::select! {
            status = state.job.child.wait() => break End::Exited(status),
            _ = tokio::time::sleep_until(limit_due), if state.limit.is_some_and(|c| !c.paused()) => {
                state.on_time_limit().await;
            }
            frame = reader.recv::<ToNode>(), if !flooded => {
                state.live.saw_frame(Instant::now());
                match frame {
                    Ok(Some(msg)) => {
                        if let Some(end) = state.on_frame(msg).await {
                            break end;
                        }
                    }
                    Ok(None) => break End::ClientGone("the client closed the connection".into()),
                    Err(e) => match frame_error_reply(&state.shared.config.name, &e) {
                        Some(reply) => break End::Protocol(reply),
                        None => break End::ClientGone(e.to_string()),
                    },
                }
            }
            changed = state.taken.changed(), if !state.stdin_done => {
                if changed.is_err() {
                    // The stdin task has ended: its input is closed, nothing more comes.
                    state.stdin_done = true;
                }
                state.report_taken();
                if flooded && !state.flooded() {
                    // Reading again: the client is evidently alive, its frames were
                    // just queued behind its stdin.
                    state.live.saw_frame(Instant::now());
                }
            }
            due = clocks.next() => match due {
                Due::Beat => {
                    let seq = state.live.next_seq();
                    let _ = state.out.try_send(Out::Frame(FromNode::Heartbeat(Heartbeat { seq })));
                    state.report_taken();
                }
                Due::Check => {
                    if let Some(gone) = state.live.gone(Instant::now()) {
                        break End::ClientGone(gone.to_string());
                    }
                }
            },
            Some(c) = control.recv() => match c {
                Control::Signal(signal) => state.deliver(signal).await,
                Control::Withdraw => {
                    state.job.signed_end = None;
                    state.deliver(Signal::Kill).await;
                }
                Control::Notice(n) => {
                    let _ = state.out.try_send(Out::Frame(FromNode::Notice(n)));
                }
            },
            _ = stopped(&mut stop), if !stopping => {
                stopping = true;
                let text = format!("rexecd on node {} is shutting down; the job is killed", config.name);
                let _ = state.out.try_send(Out::Frame(FromNode::Notice(Notice { kind: NoticeKind::ShuttingDown, text })));
                state.kill().await;
            }
        }
    };
    state.finish(end, output, reader).await;
}

/// Completes once rexecd is stopping (or its server is gone).
async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

impl Running<'_> {
    /// Handles one frame from the client; `Some` ends the loop.
    async fn on_frame(&mut self, msg: ToNode) -> Option<End> {
        match msg {
            ToNode::Stdin(chunk) => self.queue_stdin(StdinMsg::Data(chunk)),
            ToNode::StdinEnd => {
                self.queue_stdin(StdinMsg::End);
                // Later stdin has nowhere to go; dropping the sender ends the stdin task
                // once it has written everything queued.
                self.stdin = None;
            }
            ToNode::Signal(signal) => {
                if let Some(clock) = self.limit.as_mut() {
                    clock.on_signal(signal, Instant::now());
                }
                match signal {
                    Signal::Tstp => self.live.client_stopped(Instant::now()),
                    Signal::Cont => self.live.client_resumed(Instant::now()),
                    _ => {}
                }
                self.deliver(signal).await
            }
            ToNode::Resize(size) => {
                if let Some(pty) = &self.job.pty
                    && let Err(e) = pty.resize(size)
                {
                    tracing::debug!(error = %e, "cannot resize the job's terminal");
                }
            }
            ToNode::Heartbeat(_) => {}
            ToNode::Pmi(chunk) => {
                let relayed = self.pmi.as_ref().map(|relay| relay.send(chunk));
                let why = match relayed {
                    Some(Ok(())) => return None,
                    Some(Err(e)) => e.to_string(),
                    None => "PMI bytes for a rank launched without PMI".to_string(),
                };
                return Some(End::Protocol(ErrorReply::new(
                    ErrorCode::BadRequest,
                    format!("{why}; closing the session"),
                )));
            }
            ToNode::Unknown { tag } => {
                let text = format!("node ignored a message with tag {tag} it does not know");
                self.notice(text);
            }
            other => {
                return Some(End::Protocol(ErrorReply::new(
                    ErrorCode::BadRequest,
                    format!(
                        "message tag {} is not allowed while a job runs; closing the session",
                        other.tag()
                    ),
                )));
            }
        }
        None
    }

    fn notice(&self, text: String) {
        let _ = self.out.try_send(Out::Frame(FromNode::Notice(Notice {
            kind: NoticeKind::Info,
            text,
        })));
    }

    /// Hands stdin to the stdin task; the window bounds how much it holds.
    fn queue_stdin(&mut self, msg: StdinMsg) {
        let Some(tx) = &self.stdin else { return };
        let len = match &msg {
            StdinMsg::Data(chunk) => chunk.len() as u64,
            StdinMsg::End => 0,
        };
        if tx.send(msg).is_err() {
            self.stdin = None;
            return;
        }
        self.received += len;
        if self.flooded() {
            // A client that ignores the window is read no further until the job has
            // taken enough; it cannot send heartbeats meanwhile.
            self.live.suspend();
        }
    }

    /// True when the client has more than a window of stdin in flight (it ignores
    /// `StdinTaken`): the loop then stops reading it, as the only way to hold it back.
    fn flooded(&self) -> bool {
        self.received.saturating_sub(*self.taken.borrow()) > STDIN_WINDOW as u64
    }

    /// Tells the client how much stdin the job has taken, each quarter window.
    fn report_taken(&mut self) {
        let taken = *self.taken.borrow();
        if taken.saturating_sub(self.acked) < ACK_STEP {
            return;
        }
        let msg = FromNode::StdinTaken(StdinTaken { bytes: taken });
        if self.out.try_send(Out::Frame(msg)).is_ok() {
            self.acked = taken;
        }
    }

    /// Delivers a client's (or admin's) signal to the rank.
    async fn deliver(&mut self, signal: Signal) {
        if signal == Signal::Kill {
            return self.kill().await;
        }
        let Some(pgid) = self.job.pgid else { return };
        if crate::signals::is_terminal_stop(signal) {
            let cgroups = self.shared.registry.cgroups().clone();
            let id = self.job.cgroup;
            let host = match signal {
                Signal::Ttin => nix::sys::signal::Signal::SIGTTIN,
                Signal::Ttou => nix::sys::signal::Signal::SIGTTOU,
                _ => nix::sys::signal::Signal::SIGTSTP,
            };
            let _ = tokio::task::spawn_blocking(move || {
                if let Ok(pids) = cgroups.procs(id) {
                    crate::signals::stop_group(Path::new("/proc"), &pids, pgid, host);
                }
            })
            .await;
            return;
        }
        match crate::signals::to_host(signal) {
            Some(number) => match sys::signal_group(pgid, number) {
                Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
                Err(e) => tracing::warn!(%pgid, %signal, error = %e, "cannot signal job"),
            },
            None => self.notice(format!("{signal} does not exist on this node; ignored")),
        }
    }
}
