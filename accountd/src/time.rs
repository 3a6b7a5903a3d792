//! Wall-clock UTC time for the ledger record: microseconds since the Unix
//! epoch, parsing the `--since`/`--until` forms people type, and printing
//! entries' times. (Metering intervals are the nodes' monotonic clocks and
//! never pass through here.)

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in UTC microseconds since the epoch.
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Why a time could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a time: write 2026-11-22, 2026-11-22T13:05:00Z or @<unix seconds>")]
pub struct TimeError(pub String);

/// Parses `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM[:SS]Z` (space also accepted for `T`,
/// `Z` optional, always UTC) or `@SECONDS` into UTC microseconds.
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
    let num = |s: Option<&str>, lo: i64, hi: i64| -> Result<i64, TimeError> {
        let s = s.ok_or_else(err)?;
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || s.len() > 4 {
            return Err(err());
        }
        let v: i64 = s.parse().map_err(|_| err())?;
        if v < lo || v > hi { Err(err()) } else { Ok(v) }
    };
    let (y, m, day) = (
        num(d.next(), 1970, 9999)?,
        num(d.next(), 1, 12)?,
        num(d.next(), 1, 31)?,
    );
    if day > days_in_month(y, m) {
        return Err(err());
    }
    let mut secs = days_from_civil(y, m, day) * 86_400;
    if let Some(c) = clock {
        let mut parts = c.splitn(3, ':');
        let h = num(parts.next(), 0, 23)?;
        let mi = num(parts.next(), 0, 59)?;
        let s = match parts.next() {
            Some(s) => num(Some(s), 0, 60)?,
            None => 0,
        };
        secs += h * 3600 + mi * 60 + s;
    }
    Ok(secs * 1_000_000)
}

/// Prints UTC microseconds as `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
///
/// ```
/// use accountd::time::format_time;
/// assert_eq!(format_time(86_400_000_001), "1970-01-02T00:00:00.000001Z");
/// ```
pub fn format_time(us: i64) -> String {
    let secs = us.div_euclid(1_000_000);
    let frac = us.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:06}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Howard Hinnant's days_from_civil / civil_from_days (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
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
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
    }
}
