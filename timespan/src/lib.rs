//! Durations as people write them in flags, config files and environment
//! variables (`5s`, `250ms`, `1.5s`, `2m`, `1h`, a bare number of seconds): the one
//! parser every rexec binary uses, so a value one program accepts the others
//! accept too.
//!
//! Decimals are exact (integer arithmetic, no floats) and must come out as whole
//! milliseconds; zero, signs, exponents and anything over a day are refused.
//!
//! Batch jobs plan further ahead: [`parse_span`] also takes days (`7d`) and up to
//! [`MAX_SPAN`], and [`parse_offset`] (a time after submission, as in a utility
//! function's breakpoints) takes zero as well.

use std::time::Duration;

/// The longest duration [`parse_duration`] accepts: one day.
pub const MAX_DURATION: Duration = Duration::from_secs(86_400);

/// The longest duration [`parse_span`] and [`parse_offset`] accept: 366 days.
pub const MAX_SPAN: Duration = Duration::from_secs(366 * 86_400);

/// Why a text is not a duration; the message ends by saying how to write one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{why}; {how}")]
pub struct DurationError {
    why: &'static str,
    how: &'static str,
}

/// What each parser accepts.
struct Rules {
    /// The longest duration.
    max: Duration,
    /// What "too long" says.
    too_long: &'static str,
    /// Whether `d` (days) is a unit.
    days: bool,
    /// Whether zero is a duration.
    zero: bool,
    /// How to write one, ending every message.
    how: &'static str,
}

const SHORT: Rules = Rules {
    max: MAX_DURATION,
    too_long: "longer than one day",
    days: false,
    zero: false,
    how: "use a positive number with unit ms, s, m or h, such as 5s, 1.5s, 250ms or 2h",
};

const SPAN: Rules = Rules {
    max: MAX_SPAN,
    too_long: "longer than 366 days",
    days: true,
    zero: false,
    how: "use a positive number with unit s, m, h or d, such as 90m, 2h or 7d",
};

const OFFSET: Rules = Rules {
    zero: true,
    how: "use 0 or a positive number with unit s, m, h or d, such as 0, 90m, 2h or 7d",
    ..SPAN
};

/// Parses a positive duration: a number with unit `ms`, `s`, `m` or `h`, or a bare number of
/// seconds (`"5s"`, `"250ms"`, `"1.5"`). Decimals are exact (integer arithmetic, no
/// floats) and must come out as whole milliseconds; zero, negative numbers, exponents
/// and anything over a day ([`MAX_DURATION`]) are refused.
///
/// ```
/// use std::time::Duration;
/// use timespan::parse_duration;
/// assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
/// assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
/// assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
/// assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
/// assert!(parse_duration("25h").is_err());
/// assert!(parse_duration("0s").is_err());
/// assert!(parse_duration("-1").is_err());
/// assert!(parse_duration("1e-300s").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    parse(text, &SHORT)
}

/// Parses a positive span that may be longer than a day, as a batch job's length,
/// deadline or expiry: what [`parse_duration`] takes, and days (`d`), up to
/// [`MAX_SPAN`].
///
/// ```
/// use std::time::Duration;
/// use timespan::parse_span;
/// assert_eq!(parse_span("7d"), Ok(Duration::from_secs(7 * 86_400)));
/// assert_eq!(parse_span("36h"), Ok(Duration::from_secs(36 * 3_600)));
/// assert!(parse_span("0").is_err());
/// assert!(parse_span("367d").unwrap_err().to_string().contains("366 days"));
/// ```
pub fn parse_span(text: &str) -> Result<Duration, DurationError> {
    parse(text, &SPAN)
}

/// Parses a time after some moment (a utility breakpoint's time after submission):
/// what [`parse_span`] takes, and zero (`0`, `0s`).
///
/// ```
/// use std::time::Duration;
/// use timespan::parse_offset;
/// assert_eq!(parse_offset("0"), Ok(Duration::ZERO));
/// assert_eq!(parse_offset("2h"), Ok(Duration::from_secs(7_200)));
/// assert!(parse_offset("-1s").is_err());
/// ```
pub fn parse_offset(text: &str) -> Result<Duration, DurationError> {
    parse(text, &OFFSET)
}

fn parse(text: &str, rules: &Rules) -> Result<Duration, DurationError> {
    let bad = |why| DurationError {
        why,
        how: rules.how,
    };
    let text = text.trim();
    // Milliseconds per unit.
    let (number, unit_ms): (&str, u64) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1_000)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60_000)
    } else if let Some(n) = text.strip_suffix('h') {
        (n, 3_600_000)
    } else if let Some(n) = text.strip_suffix('d').filter(|_| rules.days) {
        (n, 86_400_000)
    } else {
        (text, 1_000)
    };
    let number = number.trim();
    let (whole, fraction) = match number.split_once('.') {
        Some((w, f)) => (w, f),
        None => (number, ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && fraction.is_empty() {
        return Err(bad("no number"));
    }
    if !digits(whole) || !digits(fraction) || (number.contains('.') && fraction.is_empty()) {
        return Err(bad(
            "not a plain decimal number (no sign, exponent or other characters)",
        ));
    }
    let max_ms = rules.max.as_millis() as u64;
    let too_long = || bad(rules.too_long);
    // Leading zeros cannot overflow anything; strip them before the length check.
    let whole = whole.trim_start_matches('0');
    if whole.len() > 12 {
        return Err(too_long());
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_long())?
    };
    let mut millis = whole.checked_mul(unit_ms).ok_or_else(too_long)?;
    // The fraction, in units of 10^-len; it must come out as whole milliseconds.
    let fraction = fraction.trim_end_matches('0');
    if !fraction.is_empty() {
        if fraction.len() > 6 {
            return Err(bad("more decimals than whole milliseconds allow"));
        }
        let scale = 10u64.pow(fraction.len() as u32);
        let part: u64 = fraction.parse().map_err(|_| bad("bad decimals"))?;
        let numerator = part * unit_ms;
        if !numerator.is_multiple_of(scale) {
            return Err(bad("not a whole number of milliseconds"));
        }
        millis = millis.checked_add(numerator / scale).ok_or_else(too_long)?;
    }
    if millis == 0 && !rules.zero {
        return Err(bad("zero is not a valid duration"));
    }
    if millis > max_ms {
        return Err(too_long());
    }
    Ok(Duration::from_millis(millis))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_exactly_with_integers() {
        let ok = |t: &str| parse_duration(t).unwrap_or_else(|e| panic!("{t}: {e}"));
        assert_eq!(ok("5s"), Duration::from_secs(5));
        assert_eq!(ok("250ms"), Duration::from_millis(250));
        assert_eq!(ok("2m"), Duration::from_secs(120));
        assert_eq!(ok("3"), Duration::from_secs(3));
        assert_eq!(ok("1.5s"), Duration::from_millis(1500));
        assert_eq!(ok(" 0.001s "), Duration::from_millis(1));
        assert_eq!(ok(".5s"), Duration::from_millis(500));
        assert_eq!(ok("0.25m"), Duration::from_secs(15));
        assert_eq!(ok("1.500s"), Duration::from_millis(1500));
        assert_eq!(ok("007s"), Duration::from_secs(7));
        assert_eq!(ok("1440m"), Duration::from_secs(86_400));
        assert_eq!(ok("86400s"), MAX_DURATION);
    }

    #[test]
    fn zero_durations_are_refused() {
        for text in ["0s", "0", "0ms", "0.0s", "0.0001s", "0.0004s"] {
            let e = parse_duration(text).unwrap_err().to_string();
            assert!(e.contains("ms, s, m or h"), "{text}: {e}");
        }
        assert!(
            parse_duration("0s")
                .unwrap_err()
                .to_string()
                .contains("zero")
        );
    }

    #[test]
    fn exponents_signs_and_junk_are_refused() {
        for text in [
            "1e-300s", "1e3", "1E2s", "-1", "-1s", "+1s", "inf", "NaN", "s", "", "1.", "1..5s",
            "1.5ms", "1 s 2", "0x10s", "1d", "1,5s", "soon",
        ] {
            assert!(parse_duration(text).is_err(), "{text:?} was accepted");
        }
        assert!(
            parse_duration("1e-300s")
                .unwrap_err()
                .to_string()
                .contains("exponent")
        );
    }

    #[test]
    fn spans_take_days_and_offsets_take_zero() {
        assert_eq!(parse_span("1.5d"), Ok(Duration::from_secs(129_600)));
        assert_eq!(parse_span("366d"), Ok(MAX_SPAN));
        assert_eq!(parse_span("90m"), Ok(Duration::from_secs(5_400)));
        for text in ["0", "0d", "-1d", "1e3d", "d", "1w", "366.001d"] {
            let e = parse_span(text).unwrap_err().to_string();
            assert!(e.contains("unit s, m, h or d"), "{text}: {e}");
        }
        assert!(parse_span("0s").unwrap_err().to_string().contains("zero"));
        assert_eq!(parse_offset("0"), Ok(Duration::ZERO));
        assert_eq!(parse_offset("0.0h"), Ok(Duration::ZERO));
        assert_eq!(parse_offset("6h"), Ok(Duration::from_secs(21_600)));
        assert!(parse_offset("-0").is_err());
        assert!(parse_offset("367d").is_err());
        // The short form keeps refusing days, and its own message.
        let e = parse_duration("1d").unwrap_err().to_string();
        assert!(e.ends_with("such as 5s, 1.5s, 250ms or 2h"), "{e}");
    }

    #[test]
    fn durations_over_a_day_are_refused() {
        for text in [
            "86401s",
            "1441m",
            "86400001ms",
            "86400.001s",
            "99999999999999999999999999s",
            "18446744073709551616ms",
        ] {
            let e = parse_duration(text).unwrap_err().to_string();
            assert!(e.contains("longer than one day"), "{text}: {e}");
        }
    }
}
