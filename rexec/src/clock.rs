//! Heartbeat timing: the interval and timeout (`REXEC_HEARTBEAT_TIMEOUT`, read
//! with [`timespan`]), printing durations, and [`Pause`], which keeps a client that
//! stopped itself (Ctrl-Z) from blaming the nodes for the silence it caused.
//!
//! While the client is stopped it reads nothing, so on resume every node
//! looks silent for as long as the stop lasted. The client therefore marks
//! the stop before it happens and the moment it resumes; a rank's silence
//! deadline that falls inside the stop, or within one timeout after the
//! resume, is pushed back instead of declaring the node dead. [`Silence`] keeps that
//! deadline for one rank; its tests run minutes of heartbeats under tokio's paused clock.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use timespan::parse_duration;
use tokio::time::Instant;

/// How often the client sends a heartbeat.
pub use clients::node::HEARTBEAT_INTERVAL;
/// A duration for messages: `5s`, `1.5s` or `250ms`.
pub use clients::node::show_duration as show;

/// How long a node may stay silent before it is declared dead, by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The environment variable that overrides [`DEFAULT_TIMEOUT`].
pub const TIMEOUT_VAR: &str = "REXEC_HEARTBEAT_TIMEOUT";

/// The heartbeat timeout from the environment, or the default.
pub fn timeout_from_env() -> Result<Duration, String> {
    timeout_from(std::env::var(TIMEOUT_VAR).ok())
}

/// The heartbeat timeout `value` (the variable's text, if set) names, read by the
/// parser every rexec binary uses ([`timespan::parse_duration`]).
fn timeout_from(value: Option<String>) -> Result<Duration, String> {
    match value {
        Some(v) => parse_duration(&v).map_err(|e| format!("{TIMEOUT_VAR}={v:?}: {e}")),
        None => Ok(DEFAULT_TIMEOUT),
    }
}

/// Marks of the client's own stops, shared by every rank task.
#[derive(Debug, Default)]
pub struct Pause {
    stopped: AtomicBool,
    resumed: Mutex<Option<Instant>>,
}

impl Pause {
    /// A pause tracker that has seen no stop.
    pub fn new() -> Pause {
        Pause::default()
    }

    /// Call just before the client stops itself.
    pub fn stopping(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }

    /// Call as soon as the client runs again.
    pub fn resumed(&self) {
        if let Ok(mut r) = self.resumed.lock() {
            *r = Some(Instant::now());
        }
        self.stopped.store(false, Ordering::SeqCst);
    }

    /// A silence deadline has passed at `now`: the later deadline to use
    /// instead when the silence is the client's own doing, else `None`.
    pub fn excuse(&self, now: Instant, timeout: Duration) -> Option<Instant> {
        if self.stopped.load(Ordering::SeqCst) {
            return Some(now + timeout);
        }
        let resumed = self.resumed.lock().ok().and_then(|r| *r)?;
        let until = resumed + timeout;
        (until > now).then_some(until)
    }
}

/// One rank's silence deadline: one timeout after the last frame from its node,
/// pushed back while [`Pause`] excuses the silence as the client's own doing.
#[derive(Debug, Clone, Copy)]
pub struct Silence {
    deadline: Instant,
    timeout: Duration,
}

impl Silence {
    /// Nothing heard yet: the node has one `timeout` from `now`.
    pub fn new(timeout: Duration, now: Instant) -> Silence {
        Silence {
            deadline: now + timeout,
            timeout,
        }
    }

    /// A frame from the node arrived at `now`: it has one more timeout.
    pub fn heard(&mut self, now: Instant) {
        self.deadline = now + self.timeout;
    }

    /// When the node counts as dead unless something is heard first.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The deadline passed at `now`: true when the node is dead; false when `pause`
    /// excuses the silence, and the deadline moved later.
    pub fn expired(&mut self, now: Instant, pause: &Pause) -> bool {
        match pause.excuse(now, self.timeout) {
            Some(later) => {
                self.deadline = later;
                false
            }
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heartbeat_timeout_takes_what_rexecd_takes() {
        // One parser for every binary: rexecd's --heartbeat-timeout takes decimals.
        let from = |v: &str| timeout_from(Some(v.to_string()));
        assert_eq!(from("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(from("0.25m"), Ok(Duration::from_secs(15)));
        assert_eq!(from("2"), Ok(Duration::from_secs(2)));
        let e = from("soon").unwrap_err();
        assert!(e.starts_with("REXEC_HEARTBEAT_TIMEOUT=\"soon\": "), "{e}");
        assert!(from("0s").is_err());
        assert_eq!(timeout_from(None), Ok(DEFAULT_TIMEOUT));
    }

    #[test]
    fn show_is_short() {
        assert_eq!(show(Duration::from_secs(5)), "5s");
        assert_eq!(show(Duration::from_millis(1500)), "1.5s");
        assert_eq!(show(Duration::from_millis(300)), "300ms");
    }

    #[test]
    fn a_stop_excuses_silence_until_one_timeout_after_resume() {
        let p = Pause::new();
        let t = Duration::from_secs(2);
        let now = Instant::now();
        assert_eq!(p.excuse(now, t), None);
        p.stopping();
        assert_eq!(p.excuse(now, t), Some(now + t));
        p.resumed();
        let later = Instant::now();
        let until = p.excuse(later, t).unwrap();
        assert!(until > later && until <= later + t);
        assert_eq!(p.excuse(later + t + t, t), None);
    }

    // A rank's watch over its node under tokio's paused clock: `watch` runs the
    // read loop's timing (frames restart the deadline, the deadline's expiry asks the
    // pause) against scripted frames and returns when the node was declared dead.

    use tokio::sync::mpsc;
    use tokio::time::sleep_until;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// What happens at a scripted time.
    #[derive(Debug, Clone, Copy)]
    enum Step {
        /// A frame from the node.
        Frame,
        /// The client stops itself (Ctrl-Z).
        Stop,
        /// The client runs again.
        Resume,
    }

    /// Milliseconds after the start at which the node was declared dead, with frames
    /// and stops at the scripted times; `None` when it lived to `until`.
    async fn watch(timeout: Duration, script: &[(u64, Step)], until: u64) -> Option<u64> {
        let t0 = Instant::now();
        let pause = std::sync::Arc::new(Pause::new());
        let (tx, mut frames) = mpsc::unbounded_channel();
        let (script, p) = (script.to_vec(), pause.clone());
        let node = tokio::spawn(async move {
            for (at, step) in script {
                sleep_until(t0 + ms(at)).await;
                match step {
                    Step::Frame => drop(tx.send(())),
                    Step::Stop => p.stopping(),
                    Step::Resume => p.resumed(),
                }
            }
            std::future::pending::<()>().await;
        });
        let mut silence = Silence::new(timeout, t0);
        let mut dead = None;
        while Instant::now() < t0 + ms(until) {
            tokio::select! {
                Some(()) = frames.recv() => silence.heard(Instant::now()),
                _ = sleep_until(silence.deadline()) => {
                    let passed = silence.deadline();
                    if silence.expired(Instant::now(), &pause) {
                        dead = Some(Instant::now().duration_since(t0).as_millis() as u64);
                        break;
                    }
                    // Excused: the deadline moved on, so it cannot fire again at once.
                    assert!(silence.deadline() > passed);
                }
                _ = sleep_until(t0 + ms(until)) => {}
            }
        }
        node.abort();
        dead
    }

    #[tokio::test(start_paused = true)]
    async fn a_beating_node_lives_and_a_silent_one_dies_at_the_timeout_not_before() {
        let wall = std::time::Instant::now();
        let beats: Vec<(u64, Step)> = (0..600_000)
            .step_by(1000)
            .map(|t| (t, Step::Frame))
            .collect();
        assert_eq!(watch(ms(5000), &beats, 600_000).await, None);
        assert_eq!(watch(ms(5000), &[], 60_000).await, Some(5000));
        // Minutes on the paused clock in a fraction of a second (bounded loosely).
        assert!(
            wall.elapsed() < Duration::from_secs(10),
            "{:?}",
            wall.elapsed()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_frame_restarts_the_deadline() {
        let script = [(4900, Step::Frame), (9800, Step::Frame)];
        assert_eq!(watch(ms(5000), &script, 60_000).await, Some(14_800));
    }

    #[tokio::test(start_paused = true)]
    async fn the_clients_own_stop_excuses_silence_until_one_timeout_after_it_resumes() {
        // Stopped from 1 s to 30 s: no frame read, yet the node is not blamed until
        // one timeout after the resume (35 s).
        let script = [(1000, Step::Stop), (30_000, Step::Resume)];
        assert_eq!(watch(ms(5000), &script, 60_000).await, Some(35_000));
        // A frame after the resume restarts the deadline from there.
        let script = [
            (1000, Step::Stop),
            (30_000, Step::Resume),
            (33_000, Step::Frame),
        ];
        assert_eq!(watch(ms(5000), &script, 60_000).await, Some(38_000));
    }
}
