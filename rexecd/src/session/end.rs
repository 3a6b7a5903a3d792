//! How a rank ends, on every path, and what is left afterwards (nothing):
//! - its first process exits: the CPU usage is read, everything else in the cgroup is
//!   killed and the cgroup removed, the output is drained to EOF, a signed batch
//!   rank's end is recorded for accountd, and `Exit` is sent;
//! - `Signal(Kill)` from the client, `Kill` from an admin, or rexecd shutting down (which
//!   first sends a `ShuttingDown` notice): the cgroup is destroyed, which ends the first
//!   process by SIGKILL, and the rank then ends as above, with `Exit` reporting SIGKILL;
//! - the client closes the connection, its TLS fails or it misses heartbeats (see
//!   [`crate::heartbeat`]): the cgroup is destroyed and the session closes without
//!   `Exit` (nobody is listening);
//! - the client breaks the protocol (malformed frame, frame over the limit, a message
//!   that has no place in a job session): `Error` is sent when possible, the cgroup is
//!   destroyed and the session closes.
//!
//! The rank leaves the registry as soon as its cgroup is gone, before `Exit` is sent.
//! The last frames then wait for the client under the same liveness rules as the rest
//! of the session, so a client stopped by Ctrl-Z still gets them when it resumes.

use std::time::Duration;

use proto::FrameReader;
use proto::node::{ErrorCode, ErrorReply, Exit, ExitStatus, FromNode, RankUsage, Signal, ToNode};
use tokio::io::AsyncRead;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::Shared;
use super::job::{End, Running};
use crate::pump::Out;

/// How long a last `Error` may take to reach a client that broke the protocol.
const CLOSE_LIMIT: Duration = Duration::from_secs(5);

/// How long, after its last frame, a session keeps reading (and dropping) what the
/// client still sends, waiting for it to close first ([`linger`]).
const LINGER: Duration = Duration::from_secs(2);

/// Reads and drops what the client sends until it closes, at most [`LINGER`]. A
/// socket closed with unread input is reset, and a reset throws away whatever of the
/// last frames the kernel had not yet sent: a client streaming stdin would lose its
/// `Exit`, and one that sent its launch with its `Hello` (as `rexec` does) the
/// refusal of that `Hello`.
pub(super) async fn linger<R: AsyncRead + Unpin>(reader: &mut FrameReader<R>) {
    let drain = async { while let Ok(Some(_)) = reader.recv::<ToNode>().await {} };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// Destroys cgroup `id` off the async threads; failures are logged.
pub(super) async fn destroy(shared: &Shared, id: u64) {
    usage_then_destroy(shared, id, false).await;
}

/// What a cgroup used: CPU time (`None` when it cannot be read) and peak memory
/// (`None` when the kernel does not count it for the job).
type Used = (Option<Duration>, Option<u64>);

/// Reads the CPU time and peak memory cgroup `id` used (when `read_usage`), then
/// destroys it: one trip off the async threads for both.
async fn usage_then_destroy(shared: &Shared, id: u64, read_usage: bool) -> Used {
    let cgroups = shared.registry.cgroups().clone();
    let done = tokio::task::spawn_blocking(move || {
        let usage = read_usage.then(|| cgroups.usage(id).ok()).flatten();
        let peak = read_usage.then(|| cgroups.peak_memory(id)).flatten();
        ((usage, peak), cgroups.destroy(id))
    })
    .await;
    match done {
        Ok((usage, Ok(()))) => usage,
        Ok((usage, Err(e))) => {
            tracing::error!(cgroup = id, error = %e, "cannot destroy job cgroup");
            usage
        }
        Err(e) => {
            tracing::error!(cgroup = id, error = %e, "cgroup teardown task failed");
            (None, None)
        }
    }
}

impl Running<'_> {
    /// A signed batch rank's end, kept on disk for accountd before the queue is told
    /// the exit (see [`crate::signed::ends`]). Not recording it cannot undo the run:
    /// it is logged, and the exit is reported all the same.
    async fn record_signed_end(&mut self) {
        let Some(end) = self.job.signed_end.take() else {
            return;
        };
        let started = self.shared.started.clone();
        let recorded = tokio::task::spawn_blocking(move || started.record_end(&end)).await;
        let failed = match recorded {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        tracing::error!(job = %self.job.job, rank = self.job.rank, error = %failed,
            "cannot record the end of a signed batch rank: accountd will not know it ended");
    }

    /// Keeps what a read of the cgroup found (a failed read keeps the earlier one).
    fn keep_usage(&mut self, (cpu, peak): Used) {
        if let Some(cpu) = cpu {
            self.cpu = cpu;
        }
        if peak.is_some() {
            self.peak_memory = peak;
        }
    }

    /// Destroys the rank's cgroup now (the first process dies by SIGKILL).
    pub(super) async fn kill(&mut self) {
        if self.killed {
            return;
        }
        self.killed = true;
        self.keep_usage(usage_then_destroy(self.shared, self.job.cgroup, true).await);
    }

    /// Ends the rank: cgroup destroyed, output drained, `Exit` (or `Error`) sent.
    pub(super) async fn finish<R: AsyncRead + Unpin>(
        mut self,
        end: End,
        output: JoinHandle<Result<(), proto::FrameError>>,
        mut reader: FrameReader<R>,
    ) {
        // The rank stops competing now, not once its cgroup is gone: on a busy node the
        // teardown can take a tick or more, and the others would pay for it.
        let key = (self.job.job, self.job.rank);
        self.shared.registry.market().stop(key);
        let id = self.job.cgroup;
        if !self.killed && matches!(end, End::Exited(Ok(_))) {
            self.report_oom().await;
        }
        let used = usage_then_destroy(self.shared, id, !self.killed).await;
        self.keep_usage(used);
        // Settle the market (the last charge is journaled before `Exit` says it), then
        // unregister before reporting, so a listing after `Exit` no longer shows the rank.
        let charged = self
            .shared
            .registry
            .market()
            .leave(key, Some(self.cpu))
            .await
            .unwrap_or(0);
        self.job.slot = None;
        self.stdin = None;
        let user = self.job.user.name().to_string();
        let (job, rank) = (self.job.job, self.job.rank);
        let cpu_seconds = self.cpu.as_secs_f64();
        // After a protocol error or a lost client the reader is of no more use.
        let client_ok = matches!(end, End::Exited(_));
        let (last, exit_text) = match end {
            End::Exited(Ok(status)) => {
                if self.job.signed_end.is_some() {
                    // The queue's history: sent to the queue only, which knows the tag.
                    let usage = RankUsage {
                        peak_memory: self.peak_memory,
                    };
                    let _ = self.out.send(Out::Frame(FromNode::Usage(usage))).await;
                }
                self.record_signed_end().await;
                let status = crate::signals::exit_status(status);
                let exit = Exit {
                    status,
                    cpu_nanos: u64::try_from(self.cpu.as_nanos()).unwrap_or(u64::MAX),
                    charged,
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
        let charged_credits = money::format_credits(charged);
        tracing::info!(%user, %job, rank, exit = ?exit_text, cpu_seconds,
            charged = %charged_credits, "job ended");
        let _ = self.out.send(last).await;
        drop(self.out);
        // The client's clock restarts here: the time rexecd spent destroying the cgroup
        // is not the client's silence. This also ends a suspension for a full stdin,
        // which now has nowhere to go; a stop for Ctrl-Z still holds.
        self.live.saw_frame(Instant::now());
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
                        match msg {
                            ToNode::Signal(Signal::Tstp) => self.live.client_stopped(Instant::now()),
                            ToNode::Signal(Signal::Cont) => self.live.client_resumed(Instant::now()),
                            _ => {}
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
        match gone {
            Some(why) => {
                output.abort();
                tracing::debug!(%job, rank, why, "last frames not delivered");
            }
            None if client_ok => linger(&mut reader).await,
            None => {}
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
