//! The time a caller passes in. The table ages nodes on a monotonic
//! [`Instant`]; the availability history needs the wall-clock position in
//! the week (UTC, weeks starting Monday 00:00), so both travel together.
//! Also the one calendar form of a wall-clock time, [`date_time`], that the
//! ledger's and the batch listings' printers share.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Seconds in a week.
pub const WEEK_SECS: u64 = 7 * 24 * 3600;

/// The Unix epoch was a Thursday; shifting by three days puts week starts
/// on Monday 00:00 UTC.
const MONDAY_SHIFT: u64 = 3 * 24 * 3600;

/// "Now", as the caller sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// Monotonic time, for ages and windows.
    pub instant: Instant,
    /// Wall-clock time in seconds since the Unix epoch, for the position in
    /// the week.
    pub unix_secs: u64,
}

impl Now {
    /// The system's clocks.
    pub fn system() -> Now {
        Now {
            instant: Instant::now(),
            unix_secs: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        }
    }

    /// Seconds since Monday 00:00 UTC, in `0..WEEK_SECS`.
    pub fn week_secs(&self) -> u64 {
        week_secs(self.unix_secs)
    }
}

/// Seconds since Monday 00:00 UTC of the week holding `unix_secs`.
pub fn week_secs(unix_secs: u64) -> u64 {
    (unix_secs + MONDAY_SHIFT) % WEEK_SECS
}

/// Which week (counted from the epoch's) holds `unix_secs`.
pub fn week_index(unix_secs: u64) -> u64 {
    (unix_secs + MONDAY_SHIFT) / WEEK_SECS
}

/// `secs` since the Unix epoch (in whatever zone the caller has already
/// shifted it to) as `YYYY-MM-DDTHH:MM:SS`; `None` outside the years the
/// calendar covers.
///
/// ```
/// use discovery::clock::date_time;
/// assert_eq!(date_time(86_400).as_deref(), Some("1970-01-02T00:00:00"));
/// assert_eq!(date_time(i64::MAX), None);
/// ```
pub fn date_time(secs: i64) -> Option<String> {
    let t = time::OffsetDateTime::from_unix_timestamp(secs).ok()?;
    Some(format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weeks_start_on_monday() {
        // 2024-01-01 00:00 UTC was a Monday.
        let monday = 1_704_067_200;
        assert_eq!(week_secs(monday), 0);
        assert_eq!(week_secs(monday + 3600), 3600);
        assert_eq!(week_index(monday + WEEK_SECS), week_index(monday) + 1);
        assert_eq!(week_secs(monday - 1), WEEK_SECS - 1);
    }
}
