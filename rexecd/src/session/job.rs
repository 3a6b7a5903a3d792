//! A running rank: the session loop that forwards stdin, signals and window sizes to
//! the job, streams its output back, exchanges heartbeats, and ends the rank on every
//! path with its cgroup destroyed.
//!
//! How a rank ends:
//! - its first process exits: the CPU usage is read, everything else in the cgroup is
//!   killed and the cgroup removed, the output is drained to EOF, and `Exit` is sent;
//! - `Signal(Kill)` from the client, `Kill` from an admin, or rexecd shutting down (which
//!   first sends a `ShuttingDown` notice): the cgroup is destroyed, which ends the first
//!   process by SIGKILL, and the rank then ends as above, with `Exit` reporting SIGKILL;
//! - the client closes the connection, its TLS fails or it misses heartbeats (see
//!   [`crate::heartbeat`]): the cgroup is destroyed and the session closes without
//!   `Exit` (nobody is listening);
//! - the client breaks the protocol (malformed frame, frame over the limit, a message
//!   that has no place in a job session): `Error` is sent when possible, the cgroup is
//!   destroyed and the session closes.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use proto::FrameReader;
use proto::node::{
    ErrorCode, ErrorReply, Exit, ExitStatus, FromNode, Heartbeat, JobId, Launch, Notice,
    NoticeKind, Signal, Started, ToNode,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::process::Child;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use super::{Reader, Shared, Writer, frame_error_reply};
use crate::heartbeat::Liveness;
use crate::pty::PtyMaster;
use crate::pump::{self, Out, Source, StdinMsg};
use crate::registry::{Control, Slot};
use crate::spawn::JobUser;
use crate::sys::{self, ProcessId};

/// How long a last `Error` may take to reach a client that broke the protocol.
const CLOSE_LIMIT: Duration = Duration::from_secs(5);
/// The terminal's end-of-file character (VEOF, Ctrl-D), sent for `StdinEnd` under `-t`.
const TERMINAL_EOF: u8 = 0x04;

/// A spawned rank, before its session loop runs.
#[derive(Debug)]
pub(super) struct Job {
    job: JobId,
    rank: u32,
    program: String,
    user: JobUser,
    cgroup: u64,
    /// The registry entry; released as soon as the cgroup is gone.
    slot: Option<Slot>,
    child: Child,
    pgid: Option<ProcessId>,
    pty: Option<PtyMaster>,
}

impl Job {
    pub(super) fn new(
        request: &Launch,
        user: JobUser,
        slot: Slot,
        child: Child,
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
        }
    }
}

/// Why the loop stopped.
enum End {
    /// The first process exited.
    Exited(io::Result<std::process::ExitStatus>),
    /// The client is gone; nobody to report to.
    ClientGone(String),
    /// The client broke the protocol; tell it, then close.
    Protocol(ErrorReply),
}

/// Destroys cgroup `id` off the async threads; failures are logged.
pub(super) async fn destroy(shared: &Shared, id: u64) {
    let cgroups = shared.registry.cgroups().clone();
    match tokio::task::spawn_blocking(move || cgroups.destroy(id)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(cgroup = id, error = %e, "cannot destroy job cgroup"),
        Err(e) => tracing::error!(cgroup = id, error = %e, "cgroup teardown task failed"),
    }
}

/// Reads the CPU time used so far (zero when the cgroup is gone).
async fn usage(shared: &Shared, id: u64) -> Option<Duration> {
    let cgroups = shared.registry.cgroups().clone();
    tokio::task::spawn_blocking(move || cgroups.usage(id).ok())
        .await
        .ok()
        .flatten()
}

/// The per-rank state of the loop.
struct Running<'a> {
    shared: &'a Shared,
    job: Job,
    out: mpsc::Sender<Out>,
    stdin: Option<mpsc::Sender<StdinMsg>>,
    pending: Option<StdinMsg>,
    live: Liveness,
    cpu: Duration,
    killed: bool,
}

/// Runs the rank to its end.
pub(super) async fn run<S>(
    shared: Arc<Shared>,
    mut job: Job,
    mut reader: Reader<S>,
    writer: Writer<S>,
    mut control: mpsc::UnboundedReceiver<Control>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let pid = job.child.id().unwrap_or(0);
    let started = FromNode::Started(Started {
        job: job.job,
        rank: job.rank,
        pid,
    });
    tracing::info!(user = job.user.name(), job = %job.job, rank = job.rank, pid,
        program = %job.program, cgroup = job.cgroup, "job started");

    let (stdin_tx, stdin_rx) = mpsc::channel(pump::STDIN_QUEUE);
    let (stdout, stderr): (Option<Source>, Option<Source>) = match &job.pty {
        Some(master) => {
            tokio::spawn(pump::feed_stdin(
                master.clone(),
                Some(TERMINAL_EOF),
                stdin_rx,
            ));
            (Some(Box::pin(master.clone())), None)
        }
        None => {
            if let Some(stdin) = job.child.stdin.take() {
                tokio::spawn(pump::feed_stdin(stdin, None, stdin_rx));
            }
            (
                job.child.stdout.take().map(|s| Box::pin(s) as Source),
                job.child.stderr.take().map(|s| Box::pin(s) as Source),
            )
        }
    };
    let (out, out_rx) = mpsc::channel(pump::OUT_QUEUE);
    let output = tokio::spawn(pump::output(writer, started, stdout, stderr, out_rx));

    let config = &shared.config;
    let mut state = Running {
        shared: &shared,
        job,
        out,
        stdin: Some(stdin_tx),
        pending: None,
        live: Liveness::new(config.heartbeat_timeout, Instant::now()),
        cpu: Duration::ZERO,
        killed: false,
    };
    let mut beat = tokio::time::interval(config.heartbeat_interval);
    beat.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut check = tokio::time::interval(state.live.check_period());
    check.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut stop = shared.stop.clone();
    let mut stopping = false;

    let end = loop {
        let stdin = state.stdin.clone();
        tokio::select! {
            status = state.job.child.wait() => break End::Exited(status),
            frame = reader.recv::<ToNode>(), if state.pending.is_none() => {
                state.live.saw_frame(Instant::now());
                match frame {
                    Ok(Some(msg)) => {
                        if let Some(end) = state.on_frame(msg).await {
                            break end;
                        }
                    }
                    Ok(None) => break End::ClientGone("the client closed the connection".into()),
                    Err(e) => match frame_error_reply(&e) {
                        Some(reply) => break End::Protocol(reply),
                        None => break End::ClientGone(e.to_string()),
                    },
                }
            }
            permit = reserve(stdin), if state.pending.is_some() => {
                if let (Some(permit), Some(msg)) = (permit, state.pending.take()) {
                    permit.send(msg);
                }
                state.live.saw_frame(Instant::now());
            }
            _ = beat.tick() => {
                let seq = state.live.next_seq();
                let _ = state.out.try_send(Out::Frame(FromNode::Heartbeat(Heartbeat { seq })));
            }
            _ = check.tick() => {
                if state.live.is_dead(Instant::now()) {
                    let secs = state.live.timeout().as_secs_f64();
                    break End::ClientGone(format!("missed heartbeats for {secs}s"));
                }
            }
            Some(Control::Signal(signal)) = control.recv() => state.deliver(signal).await,
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

/// Waits for room in the stdin queue (`None` when there is no queue any more).
async fn reserve(stdin: Option<mpsc::Sender<StdinMsg>>) -> Option<mpsc::OwnedPermit<StdinMsg>> {
    stdin?.reserve_owned().await.ok()
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
                if self.pending.is_none() {
                    self.stdin = None;
                }
            }
            ToNode::Signal(signal) => self.deliver(signal).await,
            ToNode::Resize(size) => {
                if let Some(pty) = &self.job.pty
                    && let Err(e) = pty.resize(size)
                {
                    tracing::debug!(error = %e, "cannot resize the job's terminal");
                }
            }
            ToNode::Heartbeat(_) => {}
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

    fn queue_stdin(&mut self, msg: StdinMsg) {
        let Some(tx) = &self.stdin else { return };
        match tx.try_send(msg) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(msg)) => {
                self.pending = Some(msg);
                self.live.suspend();
            }
            Err(mpsc::error::TrySendError::Closed(_)) => self.stdin = None,
        }
    }

    /// Delivers a client's (or admin's) signal to the rank.
    async fn deliver(&mut self, signal: Signal) {
        if signal == Signal::Kill {
            return self.kill().await;
        }
        if signal == Signal::Tstp {
            self.live.suspend();
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

    /// Destroys the rank's cgroup now (the first process dies by SIGKILL).
    async fn kill(&mut self) {
        if self.killed {
            return;
        }
        self.killed = true;
        let id = self.job.cgroup;
        if let Some(cpu) = usage(self.shared, id).await {
            self.cpu = cpu;
        }
        destroy(self.shared, id).await;
    }

    /// Ends the rank: cgroup destroyed, output drained, `Exit` (or `Error`) sent.
    async fn finish<R: AsyncRead + Unpin>(
        mut self,
        end: End,
        output: JoinHandle<Result<(), proto::FrameError>>,
        mut reader: FrameReader<R>,
    ) {
        let id = self.job.cgroup;
        if self.pending.is_some() {
            // The suspension was for stdin that now has nowhere to go.
            self.live.saw_frame(Instant::now());
        }
        if !self.killed
            && let Some(cpu) = usage(self.shared, id).await
        {
            self.cpu = cpu;
        }
        destroy(self.shared, id).await;
        // Unregister before reporting, so a listing after `Exit` no longer shows the rank.
        self.job.slot = None;
        self.stdin = None;
        self.pending = None;
        let user = self.job.user.name().to_string();
        let (job, rank) = (self.job.job, self.job.rank);
        let cpu_seconds = self.cpu.as_secs_f64();
        // After a protocol error or a lost client the reader is of no more use.
        let client_ok = matches!(end, End::Exited(_));
        let (last, exit_text) = match end {
            End::Exited(Ok(status)) => {
                let status = crate::signals::exit_status(status);
                let exit = Exit {
                    status,
                    cpu_nanos: u64::try_from(self.cpu.as_nanos()).unwrap_or(u64::MAX),
                    charged: 0,
                };
                (Out::Finish(FromNode::Exit(exit)), describe(status))
            }
            End::Exited(Err(e)) => {
                let text = format!("cannot wait for the job: {e}");
                let reply = ErrorReply::new(ErrorCode::Internal, text.clone());
                (Out::Finish(FromNode::Error(reply)), text)
            }
            End::ClientGone(why) => {
                // Reap the first process (dead by now) so it leaves no zombie.
                let _ = self.job.child.wait().await;
                (Out::Close(None), format!("killed: {why}"))
            }
            End::Protocol(reply) => {
                let _ = self.job.child.wait().await;
                let text = format!("killed: {}", reply.message);
                (Out::Close(Some(FromNode::Error(reply))), text)
            }
        };
        tracing::info!(%user, %job, rank, exit = %exit_text, cpu_seconds, "job ended");
        let _ = self.out.send(last).await;
        drop(self.out);
        // The last frames reach the client when it reads them; a stopped (Ctrl-Z) or
        // slow but live client is waited for under the same liveness rules as before.
        let mut output = output;
        let mut check = tokio::time::interval(self.live.check_period());
        let gone = loop {
            tokio::select! {
                done = &mut output => {
                    match done {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => tracing::debug!(%job, rank, error = %e, "cannot send the last frames"),
                        Err(e) => tracing::warn!(%job, rank, error = %e, "output task failed"),
                    }
                    break None;
                }
                _ = tokio::time::sleep(CLOSE_LIMIT), if !client_ok => {
                    break Some("the client did not take the error in time");
                }
                frame = reader.recv::<ToNode>(), if client_ok => match frame {
                    Ok(Some(msg)) => {
                        self.live.saw_frame(Instant::now());
                        if msg == ToNode::Signal(Signal::Tstp) {
                            self.live.suspend();
                        }
                    }
                    Ok(None) => break Some("the client closed the connection"),
                    Err(_) => break Some("the client connection failed"),
                },
                _ = check.tick() => {
                    if self.live.is_dead(Instant::now()) {
                        break Some("the client missed heartbeats");
                    }
                }
            }
        };
        if let Some(why) = gone {
            output.abort();
            tracing::debug!(%job, rank, why, "last frames not delivered");
        }
    }
}

/// "code 3" or "signal SIGKILL" for the log.
fn describe(status: ExitStatus) -> String {
    match status {
        ExitStatus::Code(c) => format!("code {c}"),
        ExitStatus::Signaled {
            signal,
            core_dumped: true,
        } => format!("signal {signal} (core dumped)"),
        ExitStatus::Signaled { signal, .. } => format!("signal {signal}"),
    }
}
