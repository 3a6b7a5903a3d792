//! A rank's limits as its session enforces them: the time limit (a batch job's
//! length) and the report of a kill for memory.
//!
//! The time limit's clock ([`super::limit_clock`]) runs on the node, from the rank's start (see
//! [`crate::signed::limits`] for why the node and not the queue holds it): when it
//! strikes, every process of the rank's cgroup gets SIGTERM and the client a
//! [`NoticeKind::TimeLimit`]; if anything of the rank is still running after the
//! grace, the cgroup is destroyed (SIGKILL). The memory limit is the kernel's (the
//! memory controller kills inside the rank's cgroup); at the end the session reads
//! whether it did and tells the client with [`NoticeKind::OutOfMemory`] before `Exit`.
//!
//! The clock stops while the rank is stopped by its queue or client (`Signal(Stop)`,
//! a preemption) and runs again at `Signal(Cont)`: a suspended job is not charged time
//! against its length, as Slurm does not count a suspended job's time.

use nix::sys::signal::Signal as HostSignal;
use proto::node::{FromNode, Notice, NoticeKind};
use proto::size::format_size;
use tokio::time::Instant;

use super::job::Running;
use crate::pump::Out;
use crate::sys;

impl Running<'_> {
    /// The next step of the time limit: SIGTERM to every process of the rank and a
    /// notice, or, after the grace, SIGKILL by destroying the cgroup.
    pub(super) async fn on_time_limit(&mut self) {
        let Some(clock) = self.limit.as_mut() else {
            return;
        };
        if clock.termed() {
            tracing::info!(job = %self.job.job, rank = self.job.rank,
                "time limit: still running after the grace; killing");
            self.limit = None;
            self.kill().await;
            return;
        }
        let grace = clock.term(Instant::now());
        let text = format!(
            "rank {} on node {} reached its time limit: sent SIGTERM, SIGKILL follows in {} s",
            self.job.rank,
            self.shared.config.name,
            grace.as_secs_f64()
        );
        tracing::info!(job = %self.job.job, rank = self.job.rank, "time limit: SIGTERM");
        let notice = FromNode::Notice(Notice {
            kind: NoticeKind::TimeLimit,
            text,
        });
        let _ = self.out.send(Out::Frame(notice)).await;
        let cgroups = self.shared.registry.cgroups().clone();
        let id = self.job.cgroup;
        let _ = tokio::task::spawn_blocking(move || {
            for pid in cgroups.procs(id).unwrap_or_default() {
                let _ = sys::send_signal(pid, HostSignal::SIGTERM);
            }
        })
        .await;
    }

    /// Tells the client the kernel killed part of the rank for memory (read from the
    /// cgroup before it is destroyed), naming the rank, the node and the limit.
    pub(super) async fn report_oom(&self) {
        let Some(limit) = self.job.mem_limit else {
            return;
        };
        let cgroups = self.shared.registry.cgroups().clone();
        let id = self.job.cgroup;
        let kills = tokio::task::spawn_blocking(move || cgroups.oom_kills(id)).await;
        let kills = match kills {
            Ok(Ok(n)) => n,
            Ok(Err(e)) => {
                tracing::warn!(cgroup = id, error = %e, "cannot read the job's memory events");
                return;
            }
            Err(_) => return,
        };
        if kills == 0 {
            return;
        }
        let text = format!(
            "rank {} on node {} ran out of memory: it went over its limit of {} (--mem) and the kernel killed it",
            self.job.rank,
            self.shared.config.name,
            format_size(limit)
        );
        tracing::info!(job = %self.job.job, rank = self.job.rank, kills, "out of memory");
        let _ = self
            .out
            .send(Out::Frame(FromNode::Notice(Notice {
                kind: NoticeKind::OutOfMemory,
                text,
            })))
            .await;
    }
}
