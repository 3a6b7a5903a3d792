//! Liveness of a client as rexecd sees it. Any frame from the client counts as a sign of
//! life; a client silent for longer than the configured timeout is dead and its job is
//! destroyed. Two exceptions suspend the timeout:
//!
//! - from the client's `Signal(Tstp)` until its `Signal(Cont)`: a client stopping itself
//!   for Ctrl-Z sends nothing while it is stopped (its TCP connection still reports it if
//!   it is killed). Other frames in between do not end this suspension: a heartbeat the
//!   client queued just before it stopped must not restart the clock while it is stopped;
//! - while rexecd itself stops reading because the job's stdin is full, until the next
//!   frame: the client is evidently alive, its frames are just queued behind the stdin
//!   data.
//!
//! rexecd sends its own `Heartbeat { seq }` every interval; [`Liveness::next_seq`]
//! numbers them.

use std::time::Duration;

use tokio::time::Instant;

/// Tracks when a client was last heard from.
#[derive(Debug, Clone)]
pub struct Liveness {
    last_frame: Instant,
    timeout: Duration,
    suspended: bool,
    stopped: bool,
    seq: u64,
}

impl Liveness {
    /// Starts counting from `now`.
    pub fn new(timeout: Duration, now: Instant) -> Liveness {
        Liveness {
            last_frame: now,
            timeout,
            suspended: false,
            stopped: false,
            seq: 0,
        }
    }

    /// A frame arrived: the client is alive and a suspension for a full stdin ends
    /// (a stop for Ctrl-Z lasts until [`Self::client_resumed`]).
    pub fn saw_frame(&mut self, now: Instant) {
        self.last_frame = now;
        self.suspended = false;
    }

    /// Suspends the timeout until the next frame (see the module docs).
    pub fn suspend(&mut self) {
        self.suspended = true;
    }

    /// The client sent `Signal(Tstp)`: it is about to stop itself, so the timeout is
    /// suspended until [`Self::client_resumed`].
    pub fn client_stopped(&mut self) {
        self.stopped = true;
    }

    /// The client sent `Signal(Cont)`: it runs again, and the clock restarts at `now`.
    pub fn client_resumed(&mut self, now: Instant) {
        self.stopped = false;
        self.last_frame = now;
    }

    /// True when the client has been silent for longer than the timeout and no
    /// suspension is in force.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    /// use rexecd::heartbeat::Liveness;
    /// let start = Instant::now();
    /// let mut live = Liveness::new(Duration::from_secs(5), start);
    /// assert!(!live.is_dead(start + Duration::from_secs(5)));
    /// assert!(live.is_dead(start + Duration::from_secs(6)));
    /// live.suspend();
    /// assert!(!live.is_dead(start + Duration::from_secs(60)));
    /// ```
    pub fn is_dead(&self, now: Instant) -> bool {
        !self.suspended
            && !self.stopped
            && now.saturating_duration_since(self.last_frame) > self.timeout
    }

    /// The configured timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// How often to check [`Self::is_dead`]: a quarter of the timeout, so a dead client
    /// is noticed within 1.25 timeouts.
    pub fn check_period(&self) -> Duration {
        (self.timeout / 4).max(Duration::from_millis(10))
    }

    /// Sequence number for the next heartbeat rexecd sends.
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_ends_the_suspension_and_restarts_the_clock() {
        let t0 = Instant::now();
        let mut live = Liveness::new(Duration::from_secs(2), t0);
        live.suspend();
        assert!(!live.is_dead(t0 + Duration::from_secs(10)));
        live.saw_frame(t0 + Duration::from_secs(10));
        assert!(!live.is_dead(t0 + Duration::from_secs(12)));
        assert!(live.is_dead(t0 + Duration::from_millis(12_001)));
        assert_eq!((live.next_seq(), live.next_seq()), (1, 2));
    }

    /// Regression: a heartbeat the client queued just before Ctrl-Z stopped it arrived
    /// after its TSTP, restarted the clock, and the stopped client was declared dead.
    #[test]
    fn a_stopped_client_stays_alive_through_late_frames_until_it_resumes() {
        let t0 = Instant::now();
        let mut live = Liveness::new(Duration::from_secs(2), t0);
        live.client_stopped();
        live.saw_frame(t0 + Duration::from_millis(5));
        assert!(!live.is_dead(t0 + Duration::from_secs(60)));
        live.client_resumed(t0 + Duration::from_secs(60));
        assert!(!live.is_dead(t0 + Duration::from_secs(62)));
        assert!(live.is_dead(t0 + Duration::from_millis(62_001)));
    }
}
