//! Heartbeat timing: the interval and timeout (`REXEC_HEARTBEAT_TIMEOUT`),
//! duration parsing and printing, and [`Pause`], which keeps a client that
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

use tokio::time::Instant;

/// How often the client sends a heartbeat.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

/// How long a node may stay silent before it is declared dead, by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The environment variable that overrides [`DEFAULT_TIMEOUT`].
pub const TIMEOUT_VAR: &str = "REXEC_HEARTBEAT_TIMEOUT";

/// A duration such as `5s`, `500ms`, `2m` or a bare number of seconds.
///
/// ```
/// use std::time::Duration;
/// use rexec::clock::parse_duration;
/// assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
/// assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
/// assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
/// assert!(parse_duration("0s").is_err());
/// assert!(parse_duration("soon").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (digits, unit_ms) = if let Some(d) = t.strip_suffix("ms") {
        (d, 1)
    } else if let Some(d) = t.strip_suffix('s') {
        (d, 1000)
    } else if let Some(d) = t.strip_suffix('m') {
        (d, 60_000)
    } else {
        (t, 1000)
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a duration; write it like 5s or 500ms"))?;
    let ms = n
        .checked_mul(unit_ms)
        .filter(|&ms| ms > 0 && ms <= 86_400_000)
        .ok_or_else(|| format!("{text:?} is out of range; use 1ms to 24h"))?;
    Ok(Duration::from_millis(ms))
}

/// The heartbeat timeout from the environment, or the default.
pub fn timeout_from_env() -> Result<Duration, String> {
    match std::env::var(TIMEOUT_VAR) {
        Ok(v) => parse_duration(&v).map_err(|e| format!("{TIMEOUT_VAR}: {e}")),
        Err(_) => Ok(DEFAULT_TIMEOUT),
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
