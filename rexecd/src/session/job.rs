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
use crate::pump::{self, StdinMsg, Stream};
use crate::registry::{Control, Slot};
use crate::spawn::JobUser;
use crate::sys::{self, ProcessId};

/// How long the output of an ended rank may take to drain.
const DRAIN_LIMIT: Duration = Duration::from_secs(5);
/// How long the final frames may take to reach the client.
const FLUSH_LIMIT: Duration = Duration::from_secs(10);
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
    out: mpsc::Sender<FromNode>,
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
    let (out, out_rx) = mpsc::channel(pump::OUT_QUEUE);
    let writer_task = tokio::spawn(pump::write_frames(writer, out_rx));
    let pid = job.child.id().unwrap_or(0);
    let _ = out
        .send(FromNode::Started(Started {
            job: job.job,
            rank: job.rank,
            pid,
        }))
        .await;
    tracing::info!(user = job.user.name(), job = %job.job, rank = job.rank, pid,
        program = %job.program, cgroup = job.cgroup, "job started");

    let (stdin_tx, stdin_rx) = mpsc::channel(pump::STDIN_QUEUE);
    let mut pumps: Vec<JoinHandle<io::Result<u64>>> = Vec::new();
    match &job.pty {
        Some(master) => {
            pumps.push(tokio::spawn(pump::pump_output(
                master.clone(),
                Stream::Stdout,
                out.clone(),
            )));
            tokio::spawn(pump::feed_stdin(
                master.clone(),
                Some(TERMINAL_EOF),
                stdin_rx,
            ));
        }
        None => {
            if let Some(stdout) = job.child.stdout.take() {
                pumps.push(tokio::spawn(pump::pump_output(
                    stdout,
                    Stream::Stdout,
                    out.clone(),
                )));
            }
            if let Some(stderr) = job.child.stderr.take() {
                pumps.push(tokio::spawn(pump::pump_output(
                    stderr,
                    Stream::Stderr,
                    out.clone(),
                )));
            }
            if let Some(stdin) = job.child.stdin.take() {
                tokio::spawn(pump::feed_stdin(stdin, None, stdin_rx));
            }
        }
    }

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
                let _ = state.out.try_send(FromNode::Heartbeat(Heartbeat { seq }));
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
                let _ = state.out.try_send(FromNode::Notice(Notice { kind: NoticeKind::ShuttingDown, text }));
                state.kill().await;
            }
        }
    };
    state.finish(end, pumps, writer_task).await;
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
        let _ = self.out.try_send(FromNode::Notice(Notice {
            kind: NoticeKind::Info,
            text,
        }));
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
    async fn finish(
        mut self,
        end: End,
        pumps: Vec<JoinHandle<io::Result<u64>>>,
        writer_task: JoinHandle<Result<(), proto::FrameError>>,
    ) {
        let id = self.job.cgroup;
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
        let exit_text = match end {
            End::Exited(Ok(status)) => {
                drain(pumps).await;
                let status = crate::signals::exit_status(status);
                let exit = Exit {
                    status,
                    cpu_nanos: u64::try_from(self.cpu.as_nanos()).unwrap_or(u64::MAX),
                    charged: 0,
                };
                let _ = self.out.send(FromNode::Exit(exit)).await;
                describe(status)
            }
            End::Exited(Err(e)) => {
                drain(pumps).await;
                let reply =
                    ErrorReply::new(ErrorCode::Internal, format!("cannot wait for the job: {e}"));
                let _ = self.out.send(FromNode::Error(reply)).await;
                format!("unknown ({e})")
            }
            End::ClientGone(why) => {
                abort(pumps);
                // Reap the first process (dead by now) so it leaves no zombie.
                let _ = self.job.child.wait().await;
                format!("killed: {why}")
            }
            End::Protocol(reply) => {
                abort(pumps);
                let _ = self.job.child.wait().await;
                let text = format!("killed: {}", reply.message);
                let _ = self.out.send(FromNode::Error(reply)).await;
                text
            }
        };
        drop(self.out);
        tracing::info!(%user, %job, rank, exit = %exit_text, cpu_seconds, "job ended");
        match tokio::time::timeout(FLUSH_LIMIT, writer_task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => {
                tracing::debug!(%job, rank, error = %e, "cannot send the last frames")
            }
            Ok(Err(e)) => tracing::warn!(%job, rank, error = %e, "writer task failed"),
            Err(_) => tracing::info!(%job, rank, "client did not take the last frames in time"),
        }
    }
}

/// Waits for the output pumps to reach EOF (bounded), aborting stragglers.
async fn drain(pumps: Vec<JoinHandle<io::Result<u64>>>) {
    let deadline = Instant::now() + DRAIN_LIMIT;
    for mut pump in pumps {
        match tokio::time::timeout_at(deadline, &mut pump).await {
            Ok(Ok(Ok(_))) => {}
            Ok(Ok(Err(e))) => tracing::debug!(error = %e, "output pump failed"),
            Ok(Err(e)) => tracing::warn!(error = %e, "output pump task failed"),
            Err(_) => {
                tracing::warn!("job output did not reach EOF in time; dropping the rest");
                pump.abort();
            }
        }
    }
}

fn abort(pumps: Vec<JoinHandle<io::Result<u64>>>) {
    for pump in pumps {
        pump.abort();
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
