//! Wall-clock UTC time for the ledger record: microseconds since the Unix
//! epoch, parsing the `--since`/`--until` forms people type, and printing
//! entries' times. (Metering intervals are the nodes' monotonic clocks and
//! never pass through here.)

use std::time::{SystemTime, UNIX_EPOCH};

/// The environment variable that sets this process's clock ahead (or back,
/// negative) by so many seconds: for tests that need a clock jump (income
/// periods); never set it in production.
pub const CLOCK_SHIFT_ENV: &str = "ACCOUNTD_TEST_CLOCK_SHIFT_S";

fn shift_us() -> i64 {
    static SHIFT: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *SHIFT.get_or_init(|| {
        let secs = std::env::var(CLOCK_SHIFT_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(0);
        if secs != 0 {
            tracing::warn!(
                seconds = secs,
                "{CLOCK_SHIFT_ENV} shifts this process's ledger clock (a test setting)"
            );
        }
        secs.saturating_mul(1_000_000)
    })
}

/// Now, in UTC microseconds since the epoch (shifted by [`CLOCK_SHIFT_ENV`]).
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
        .saturating_add(shift_us())
}

/// Why a time could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a time: write 2026-11-22, 2026-11-22T13:05:00Z or @<unix seconds>")]
pub struct TimeError(pub String);

/// Parses `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM[:SS]Z` (space also accepted for `T`,
/// `Z` optional, always UTC) or `@SECONDS` into UTC microseconds. The calendar
/// (month lengths, leap years) is the `time` crate's.
///
/// ```
/// use accountd::time::parse_time;
/// assert_eq!(parse_time("1970-01-02"), Ok(86_400_000_000));
/// assert_eq!(parse_time("@60"), Ok(60_000_000));
/// ```
pub fn parse_time(text: &str) -> Result<i64, TimeError> {
    let err = || TimeError(text.to_string());
    let t = text.trim();
    if let Some(secs) = t.strip_prefix('@') {
        let s: i64 = secs.parse().map_err(|_| err())?;
        return s.checked_mul(1_000_000).ok_or_else(err);
    }
    let t = t.strip_suffix('Z').unwrap_or(t);
    let (date, clock) = match t.split_once(['T', ' ']) {
        Some((d, c)) => (d, Some(c)),
        None => (t, None),
    };
    let mut d = date.splitn(3, '-');
    let num = |s: Option<&str>, lo: u16, hi: u16| -> Result<u16, TimeError> {
        let s = s.ok_or_else(err)?;
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || s.len() > 4 {
            return Err(err());
        }
        let v: u16 = s.parse().map_err(|_| err())?;
        if v < lo || v > hi { Err(err()) } else { Ok(v) }
    };
    let (y, m, day) = (
        num(d.next(), 1970, 9999)?,
        num(d.next(), 1, 12)?,
        num(d.next(), 1, 31)?,
    );
    let month = time::Month::try_from(m as u8).map_err(|_| err())?;
    let date = time::Date::from_calendar_date(i32::from(y), month, day as u8).map_err(|_| err())?;
    let mut clock_time = time::Time::MIDNIGHT;
    if let Some(c) = clock {
        let mut parts = c.splitn(3, ':');
        let h = num(parts.next(), 0, 23)?;
        let mi = num(parts.next(), 0, 59)?;
        let s = match parts.next() {
            Some(s) => num(Some(s), 0, 59)?,
            None => 0,
        };
        clock_time = time::Time::from_hms(h as u8, mi as u8, s as u8).map_err(|_| err())?;
    }
    let secs = time::PrimitiveDateTime::new(date, clock_time)
        .assume_utc()
        .unix_timestamp();
    Ok(secs * 1_000_000)
}

/// Prints UTC microseconds as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (as `@SECONDS.ffffff`
/// outside the years the calendar covers, which no ledger time reaches).
///
/// ```
/// use accountd::time::format_time;
/// assert_eq!(format_time(86_400_000_001), "1970-01-02T00:00:00.000001Z");
/// ```
pub fn format_time(us: i64) -> String {
    let secs = us.div_euclid(1_000_000);
    let frac = us.rem_euclid(1_000_000);
    match discovery::clock::date_time(secs) {
        Some(t) => format!("{t}.{frac:06}Z"),
        None => format!("@{secs}.{frac:06}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(parse_time("1970-01-01"), Ok(0));
        assert_eq!(parse_time("2000-03-01T00:00:00Z"), Ok(951_868_800_000_000));
        assert_eq!(parse_time("2026-11-22 13:05"), Ok(1_795_352_700_000_000));
        assert_eq!(
            format_time(951_868_800_000_000),
            "2000-03-01T00:00:00.000000Z"
        );
    }

    #[test]
    fn round_trip_over_many_days() {
        for day in (0..40_000).step_by(37) {
            let us = day * 86_400_000_000 + 3_723_000_000;
            let text = format_time(us);
            assert_eq!(parse_time(&text[..19]), Ok(us), "{text}");
        }
    }

    #[test]
    fn leap_days_exist_only_in_leap_years() {
        assert_eq!(
            parse_time("2024-02-29"),
            parse_time("2024-03-01").map(|t| t - 86_400_000_000)
        );
        assert!(parse_time("2000-02-29").is_ok());
        assert!(parse_time("2026-12-31").is_ok());
    }

    #[test]
    fn times_print_as_gnu_date_prints_them() {
        // An independent calendar: GNU date, not the code under test.
        for secs in [
            0i64,
            951_782_400,
            951_868_799,
            1_795_352_700,
            4_102_444_800,
            253_402_300_799,
        ] {
            let out = std::process::Command::new("date")
                .args([
                    "-u",
                    "-d",
                    &format!("@{secs}"),
                    "+%Y-%m-%dT%H:%M:%S.000000Z",
                ])
                .output()
                .unwrap();
            let want = String::from_utf8(out.stdout).unwrap();
            assert_eq!(format_time(secs * 1_000_000), want.trim_end(), "{secs}");
            assert_eq!(parse_time(&want.trim_end()[..19]), Ok(secs * 1_000_000));
        }
        assert_eq!(format_time(i64::MAX), "@9223372036854.775807");
    }

    #[test]
    fn rejects_nonsense() {
        for bad in [
            "",
            "yesterday",
            "2026-13-01",
            "2026-1",
            "2026-01-01T25:00",
            "@x",
            "1969-12-31",
            "2026-02-29",
            "2026-02-31",
            "2026-04-31",
            "2100-02-29",
            "2026-01-01T12:00:60",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
    }
}
