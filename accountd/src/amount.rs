//! Credit amounts as text: parsing decimal credits typed by people into `i64`
//! micro-credits and printing micro-credits back with fixed precision.
//!
//! No floating point is involved anywhere: `"1.5"` becomes `1_500_000`
//! exactly, more than six decimals is an error rather than a silent rounding,
//! and overflow is refused.

use proto::account::MICROS_PER_CREDIT;

/// Digits after the decimal point in a printed amount.
pub const DECIMALS: usize = 6;

/// Why a text is not an amount.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AmountError {
    /// Empty or not a decimal number.
    #[error("`{0}` is not an amount: write credits like 12, -3 or 0.25")]
    NotANumber(String),
    /// More than six digits after the point.
    #[error("`{0}` has more than 6 decimals: credits are counted in millionths")]
    TooPrecise(String),
    /// Does not fit in an i64 of micro-credits.
    #[error("`{0}` is too large an amount")]
    TooLarge(String),
}

/// Parses decimal credits (`"12"`, `"-0.5"`, `"+3.000001"`) into micro-credits.
///
/// ```
/// use accountd::amount::parse_credits;
/// assert_eq!(parse_credits("1.5"), Ok(1_500_000));
/// assert_eq!(parse_credits("-0.000001"), Ok(-1));
/// assert!(parse_credits("1.0000001").is_err());
/// ```
pub fn parse_credits(text: &str) -> Result<i64, AmountError> {
    let t = text.trim();
    let (negative, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (whole, frac) = match body.split_once('.') {
        Some((w, f)) => (w, f),
        None => (body, ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && frac.is_empty()) || !digits(whole) || !digits(frac) {
        return Err(AmountError::NotANumber(text.to_string()));
    }
    if body.ends_with('.') && frac.is_empty() && whole.is_empty() {
        return Err(AmountError::NotANumber(text.to_string()));
    }
    if frac.len() > DECIMALS {
        return Err(AmountError::TooPrecise(text.to_string()));
    }
    let too_large = || AmountError::TooLarge(text.to_string());
    let mut micros: i64 = 0;
    for b in whole.bytes() {
        micros = micros
            .checked_mul(10)
            .and_then(|m| m.checked_add(i64::from(b - b'0')))
            .ok_or_else(too_large)?;
    }
    micros = micros
        .checked_mul(MICROS_PER_CREDIT)
        .ok_or_else(too_large)?;
    let mut frac_micros: i64 = 0;
    for (i, b) in frac.bytes().enumerate() {
        frac_micros += i64::from(b - b'0') * 10i64.pow((DECIMALS - 1 - i) as u32);
    }
    micros = micros.checked_add(frac_micros).ok_or_else(too_large)?;
    Ok(if negative { -micros } else { micros })
}

/// Prints micro-credits as credits with exactly six decimals.
///
/// ```
/// use accountd::amount::format_credits;
/// assert_eq!(format_credits(1_500_000), "1.500000");
/// assert_eq!(format_credits(-1), "-0.000001");
/// assert_eq!(format_credits(i64::MIN), "-9223372036854.775808");
/// ```
pub fn format_credits(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let abs = micros.unsigned_abs();
    let per = MICROS_PER_CREDIT as u64;
    format!("{sign}{}.{:06}", abs / per, abs % per)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_whole_and_fractional_credits() {
        assert_eq!(parse_credits("0"), Ok(0));
        assert_eq!(parse_credits("12"), Ok(12_000_000));
        assert_eq!(parse_credits("+12.25"), Ok(12_250_000));
        assert_eq!(parse_credits(".5"), Ok(500_000));
        assert_eq!(parse_credits("3."), Ok(3_000_000));
        assert_eq!(parse_credits(" -7.000001 "), Ok(-7_000_001));
    }

    #[test]
    fn refuses_garbage_precision_and_overflow() {
        for bad in ["", "-", ".", "1e3", "1,5", "abc", "1.2.3", "--1", "NaN"] {
            assert!(
                matches!(parse_credits(bad), Err(AmountError::NotANumber(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            parse_credits("0.0000001"),
            Err(AmountError::TooPrecise(_))
        ));
        assert!(matches!(
            parse_credits("9223372036855"),
            Err(AmountError::TooLarge(_))
        ));
        assert!(matches!(
            parse_credits("99999999999999999999999"),
            Err(AmountError::TooLarge(_))
        ));
    }

    #[test]
    fn format_then_parse_is_identity() {
        for m in [
            0,
            1,
            -1,
            999_999,
            1_000_000,
            -123_456_789,
            i64::MAX,
            i64::MIN + 1,
        ] {
            assert_eq!(parse_credits(&format_credits(m)), Ok(m), "{m}");
        }
    }
}
