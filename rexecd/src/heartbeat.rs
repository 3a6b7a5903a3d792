//! Liveness of a client as rexecd sees it. Any frame from the client counts as a sign of
//! life; a client silent for longer than the configured timeout is dead and its job is
//! destroyed. Two exceptions suspend the timeout:
//!
//! - from the client's `Signal(Tstp)` until its `Signal(Cont)`, for at most the
//!   configured stop limit (`stopped_client_limit`): a client stopping itself for Ctrl-Z
//!   sends nothing while it is stopped (its TCP connection still reports it if it is
//!   killed, and TCP keepalive and `TCP_USER_TIMEOUT` if its machine dies). Other frames
//!   in between do not end this suspension: a heartbeat the client queued just before it
//!   stopped must not restart the clock while it is stopped. A client stopped for longer
//!   than the limit counts as gone;
//! - while rexecd itself stops reading because a client ignored the stdin window (sent
//!   more than `proto::node::STDIN_WINDOW` the job has not taken), until the next frame:
//!   its frames are queued behind that stdin. A client that keeps to the window is
//!   always read, so its heartbeats count.
//!
//! rexecd sends its own `Heartbeat { seq }` every interval; [`Liveness::next_seq`]
//! numbers them. [`Clocks`] holds a session's two timers (the beat it sends and the
//! check of the client's silence), and [`Liveness::gone`] says whether and why a check
//! finds the client gone; the session loop only wires them to its frames, so the
//! timing is tested under a paused clock (`heartbeat/tests.rs`).

use std::fmt;
use std::time::Duration;

use tokio::time::{Instant, Interval, MissedTickBehavior};

/// How long a client stopped by Ctrl-Z keeps its job unless configured otherwise.
pub const DEFAULT_STOP_LIMIT: Duration = Duration::from_secs(3600);

/// Tracks when a client was last heard from.
#[derive(Debug, Clone)]
pub struct Liveness {
    last_frame: Instant,
    timeout: Duration,
    suspended: bool,
    /// Since when the client is stopped (Ctrl-Z), if it is.
    stopped: Option<Instant>,
    stop_limit: Duration,
    seq: u64,
}

impl Liveness {
    /// Starts counting from `now`; a stopped client is trusted for [`DEFAULT_STOP_LIMIT`]
    /// (see [`Self::with_stop_limit`]).
    pub fn new(timeout: Duration, now: Instant) -> Liveness {
        Liveness {
            last_frame: now,
            timeout,
            suspended: false,
            stopped: None,
            stop_limit: DEFAULT_STOP_LIMIT,
            seq: 0,
        }
    }

    /// How long a client stopped by Ctrl-Z keeps its job.
    pub fn with_stop_limit(mut self, limit: Duration) -> Liveness {
        self.stop_limit = limit;
        self
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

    /// The client sent `Signal(Tstp)` at `now`: it is about to stop itself, so the
    /// timeout is suspended until [`Self::client_resumed`], for at most the stop limit
    /// (a repeated `Tstp` does not extend it).
    pub fn client_stopped(&mut self, now: Instant) {
        self.stopped.get_or_insert(now);
    }

    /// The client sent `Signal(Cont)`: it runs again, and the clock restarts at `now`.
    pub fn client_resumed(&mut self, now: Instant) {
        self.stopped = None;
        self.last_frame = now;
    }

    /// True when the client has been stopped (Ctrl-Z) for longer than the stop limit.
    pub fn stopped_too_long(&self, now: Instant) -> bool {
        self.stopped
            .is_some_and(|since| now.saturating_duration_since(since) > self.stop_limit)
    }

    /// The configured stop limit.
    pub fn stop_limit(&self) -> Duration {
        self.stop_limit
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
        if self.stopped.is_some() {
            return self.stopped_too_long(now);
        }
        !self.suspended && now.saturating_duration_since(self.last_frame) > self.timeout
    }

    /// Whether the client counts as gone at `now`, and why: stopped (Ctrl-Z) for
    /// longer than the stop limit, or silent for longer than the timeout.
    pub fn gone(&self, now: Instant) -> Option<Gone> {
        if self.stopped_too_long(now) {
            return Some(Gone::StoppedTooLong(self.stop_limit));
        }
        self.is_dead(now).then_some(Gone::Silent(self.timeout))
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

/// Why a client counts as gone (the text ends its job in the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// Silent for longer than this timeout.
    Silent(Duration),
    /// Stopped (Ctrl-Z) for longer than this stop limit.
    StoppedTooLong(Duration),
}

impl fmt::Display for Gone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Gone::Silent(t) => write!(f, "missed heartbeats for {}s", t.as_secs_f64()),
            Gone::StoppedTooLong(limit) => write!(
                f,
                "the client stayed stopped (Ctrl-Z) for more than stopped_client_limit ({}s)",
                limit.as_secs_f64()
            ),
        }
    }
}

/// What a session's [`Clocks`] say is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Send a heartbeat now.
    Beat,
    /// Check the client's liveness now ([`Liveness::gone`]).
    Check,
}

/// A session's two timers: a heartbeat every interval, a liveness check every
/// [`Liveness::check_period`]. Both fire at once when created; a tick missed because
/// the runtime was busy fires once late, never as a burst.
#[derive(Debug)]
pub struct Clocks {
    beat: Interval,
    check: Interval,
}

impl Clocks {
    /// Timers for a session beating every `beat_every` and checking `live`.
    pub fn new(beat_every: Duration, live: &Liveness) -> Clocks {
        let mut beat = tokio::time::interval(beat_every);
        beat.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut check = tokio::time::interval(live.check_period());
        check.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Clocks { beat, check }
    }

    /// Waits for the next thing due. Cancel-safe (a `select!` branch may drop it).
    pub async fn next(&mut self) -> Due {
        tokio::select! {
            _ = self.beat.tick() => Due::Beat,
            _ = self.check.tick() => Due::Check,
        }
    }
}

#[cfg(test)]
mod tests;
