//! The clock of a rank's time limit: when SIGTERM is due, then SIGKILL after
//! the grace, standing still while the rank is stopped (see [`super::limits`]
//! for what the session does when it strikes).

use proto::node::TimeLimit;
use tokio::time::{Duration, Instant};

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

    /// Whether SIGTERM was sent: the next step is SIGKILL.
    pub(super) fn termed(&self) -> bool {
        self.termed.is_some()
    }

    /// Notes that SIGTERM was sent at `now`; the grace until SIGKILL.
    pub(super) fn term(&mut self, now: Instant) -> Duration {
        self.termed = Some(now);
        self.grace
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
        c.term(t0 + Duration::from_secs(13));
        assert_eq!(c.due(), t0 + Duration::from_secs(15));
        c.on_signal(Signal::Int, t0 + Duration::from_secs(14));
        assert_eq!(c.due(), t0 + Duration::from_secs(15));
    }
}
