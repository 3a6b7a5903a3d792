//! A rank's limits as its session enforces them: the time limit (a batch job's
//! length) and the report of a kill for memory.
//!
//! The time limit's clock runs here, on the node, from the rank's start (see
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
use proto::node::{FromNode, Notice, NoticeKind, TimeLimit};
use proto::size::format_size;
use tokio::time::{Duration, Instant};

use super::job::Running;
use crate::pump::Out;
use crate::sys;

/// Where a rank's time limit stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LimitClock {
    term_at: Instant,
    grace: Duration,
    /// SIGTERM was sent at this instant.
    termed: Option<Instant>,
    /// Stopped (SIGSTOP) since this instant: the clock does not run.
    paused: Option<Instant>,
}

impl LimitClock {
    /// The clock of a rank that started at `start`, when it has a limit.
    pub(super) fn new(limit: Option<TimeLimit>, start: Instant) -> Option<LimitClock> {
        let limit = limit?;
        Some(LimitClock {
            term_at: start + Duration::from_millis(limit.length_ms),
            grace: Duration::from_millis(limit.kill_wait_ms),
            termed: None,
            paused: None,
        })
    }

    /// Whether the clock is stopped.
    pub(super) fn paused(&self) -> bool {
        self.paused.is_some()
    }

    /// Follows a signal to the rank: `Stop` stops the clock, `Cont` restarts it with
    /// every deadline moved by the time it stood.
    pub(super) fn on_signal(&mut self, signal: proto::node::Signal, now: Instant) {
        match signal {
            proto::node::Signal::Stop => {
                self.paused.get_or_insert(now);
            }
            proto::node::Signal::Cont => {
                if let Some(since) = self.paused.take() {
                    let stood = now.saturating_duration_since(since);
                    self.term_at += stood;
                    if let Some(t) = self.termed.as_mut() {
                        *t += stood;
                    }
                }
            }
            _ => {}
        }
    }

    /// When the next step is due (SIGTERM, then SIGKILL).
    pub(super) fn due(&self) -> Instant {
        match self.termed {
            None => self.term_at,
            Some(at) => at + self.grace,
        }
    }
}

/// A far instant for a `select!` arm that is switched off.
pub(super) fn never() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}

impl Running<'_> {
    /// The next step of the time limit: SIGTERM to every process of the rank and a
    /// notice, or, after the grace, SIGKILL by destroying the cgroup.
    pub(super) async fn on_time_limit(&mut self) {
        let Some(clock) = self.limit.as_mut() else {
            return;
        };
        if clock.termed.is_some() {
            tracing::info!(job = %self.job.job, rank = self.job.rank,
                "time limit: still running after the grace; killing");
            self.limit = None;
            self.kill().await;
            return;
        }
        clock.termed = Some(Instant::now());
        let grace = clock.grace;
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

#[cfg(test)]
mod tests {
    use super::*;
    use proto::node::Signal;

    #[test]
    fn the_clock_strikes_at_the_length_then_the_grace_and_stands_while_stopped() {
        let t0 = Instant::now();
        let limit = TimeLimit {
            length_ms: 10_000,
            kill_wait_ms: 2_000,
        };
        assert!(LimitClock::new(None, t0).is_none());
        let mut c = LimitClock::new(Some(limit), t0).unwrap();
        assert_eq!(c.due(), t0 + Duration::from_secs(10));
        c.on_signal(Signal::Stop, t0 + Duration::from_secs(4));
        assert!(c.paused());
        c.on_signal(Signal::Stop, t0 + Duration::from_secs(5));
        c.on_signal(Signal::Cont, t0 + Duration::from_secs(7));
        assert!(!c.paused());
        // Stopped from 4 s to 7 s: SIGTERM 3 s later than planned.
        assert_eq!(c.due(), t0 + Duration::from_secs(13));
        c.termed = Some(t0 + Duration::from_secs(13));
        assert_eq!(c.due(), t0 + Duration::from_secs(15));
        c.on_signal(Signal::Int, t0 + Duration::from_secs(14));
        assert_eq!(c.due(), t0 + Duration::from_secs(15));
    }
}
