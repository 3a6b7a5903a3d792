//! Heartbeat timing: the interval and timeout (`REXEC_HEARTBEAT_TIMEOUT`, read
//! with [`proto::duration`]), printing durations, and [`Pause`], which keeps a client that
//! stopped itself (Ctrl-Z) from blaming the nodes for the silence it caused.
//!
//! While the client is stopped it reads nothing, so on resume every node
//! looks silent for as long as the stop lasted. The client therefore marks
//! the stop before it happens and the moment it resumes; a rank's silence
//! deadline that falls inside the stop, or within one timeout after the
//! resume, is pushed back instead of declaring the node dead.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use proto::duration::parse_duration;
use tokio::time::Instant;

/// How often the client sends a heartbeat.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

/// How long a node may stay silent before it is declared dead, by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The environment variable that overrides [`DEFAULT_TIMEOUT`].
pub const TIMEOUT_VAR: &str = "REXEC_HEARTBEAT_TIMEOUT";

/// The heartbeat timeout from the environment, or the default.
pub fn timeout_from_env() -> Result<Duration, String> {
    timeout_from(std::env::var(TIMEOUT_VAR).ok())
}

/// The heartbeat timeout `value` (the variable's text, if set) names, read by the
/// parser every rexec binary uses ([`proto::duration::parse_duration`]).
fn timeout_from(value: Option<String>) -> Result<Duration, String> {
    match value {
        Some(v) => parse_duration(&v).map_err(|e| format!("{TIMEOUT_VAR}={v:?}: {e}")),
        None => Ok(DEFAULT_TIMEOUT),
    }
}

/// A duration for messages: `5s`, `1.5s` or `250ms`.
pub fn show(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else if ms > 1000 {
        let secs = format!("{}.{:03}", ms / 1000, ms % 1000);
        format!("{}s", secs.trim_end_matches('0'))
    } else {
        format!("{ms}ms")
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
}
