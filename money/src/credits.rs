//! Amounts of money: [`MicroCredits`], the one parser of credits people write
//! ([`parse_credits`], used by every binary: bids, `max_rate`, accountctl's amounts,
//! accountd's limits) and the two ways of printing them.
//!
//! No floating point is involved anywhere: `"1.5"` becomes `1_500_000` exactly, more than
//! six decimals is an error rather than a silent rounding, and overflow is refused.

/// An amount of money: micro-credits (1 credit = [`MICROS_PER_CREDIT`]).
pub type MicroCredits = i64;

/// Micro-credits in one credit.
pub const MICROS_PER_CREDIT: MicroCredits = 1_000_000;

/// Decimal places an amount written in credits may carry (micro-credit resolution), and
/// the places [`format_credits_fixed`] always prints.
pub const DECIMALS: usize = 6;

/// Why a text is not an amount of credits; each message quotes the text as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CreditsError {
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

/// Parses decimal credits (`"12"`, `"-0.5"`, `"+3.000001"`, `".5"`, `"7."`) into
/// micro-credits, exactly (no floating point): more than six decimals is an error
/// rather than a rounding, and overflow is refused.
///
/// ```
/// use money::parse_credits;
/// assert_eq!(parse_credits("1.5"), Ok(1_500_000));
/// assert_eq!(parse_credits("-0.000001"), Ok(-1));
/// assert!(parse_credits("1.0000001").is_err());
/// ```
pub fn parse_credits(text: &str) -> Result<MicroCredits, CreditsError> {
    let s = text.trim();
    let (negative, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && frac.is_empty()) || !digits(whole) || !digits(frac) {
        return Err(CreditsError::NotANumber(text.to_owned()));
    }
    if frac.len() > DECIMALS {
        return Err(CreditsError::TooPrecise(text.to_owned()));
    }
    let too_large = || CreditsError::TooLarge(text.to_owned());
    let mut micros: i64 = 0;
    for b in whole.bytes().chain(frac.bytes()) {
        micros = micros
            .checked_mul(10)
            .and_then(|m| m.checked_add(i64::from(b - b'0')))
            .ok_or_else(too_large)?;
    }
    for _ in frac.len()..DECIMALS {
        micros = micros.checked_mul(10).ok_or_else(too_large)?;
    }
    Ok(if negative { -micros } else { micros })
}

/// Formats micro-credits as credits with only the decimals needed: `2`, `-0.25`,
/// `1.000001` (what people read: bids, prices, charges).
///
/// ```
/// assert_eq!(money::format_credits(40_000_000), "40");
/// assert_eq!(money::format_credits(-250_000), "-0.25");
/// ```
pub fn format_credits(micros: MicroCredits) -> String {
    let fixed = format_credits_fixed(micros);
    fixed.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Formats micro-credits as credits with exactly six decimals (the ledger's records and
/// reports, where amounts line up in columns).
///
/// ```
/// use money::format_credits_fixed;
/// assert_eq!(format_credits_fixed(1_500_000), "1.500000");
/// assert_eq!(format_credits_fixed(-1), "-0.000001");
/// assert_eq!(format_credits_fixed(i64::MIN), "-9223372036854.775808");
/// ```
pub fn format_credits_fixed(micros: MicroCredits) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let abs = micros.unsigned_abs();
    let per = MICROS_PER_CREDIT.unsigned_abs();
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
                matches!(parse_credits(bad), Err(CreditsError::NotANumber(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            parse_credits("0.0000001"),
            Err(CreditsError::TooPrecise(_))
        ));
        assert!(matches!(
            parse_credits("9223372036855"),
            Err(CreditsError::TooLarge(_))
        ));
        assert!(matches!(
            parse_credits("99999999999999999999999"),
            Err(CreditsError::TooLarge(_))
        ));
        assert_eq!(
            parse_credits(" 1,5").unwrap_err().to_string(),
            "` 1,5` is not an amount: write credits like 12, -3 or 0.25"
        );
    }

    #[test]
    fn both_printers_read_back_exactly() {
        for m in [
            0,
            1,
            -1,
            999_999,
            1_000_000,
            -123_456_789,
            40_000_000,
            i64::MAX,
            i64::MIN + 1,
        ] {
            assert_eq!(parse_credits(&format_credits_fixed(m)), Ok(m), "{m}");
            assert_eq!(parse_credits(&format_credits(m)), Ok(m), "{m}");
        }
    }

    #[test]
    fn the_short_printer_drops_only_trailing_zeros() {
        for (micros, text) in [
            (0, "0"),
            (40_000_000, "40"),
            (10_000_000, "10"),
            (-250_000, "-0.25"),
            (1_000_001, "1.000001"),
            (-1, "-0.000001"),
            (100_000, "0.1"),
        ] {
            assert_eq!(format_credits(micros), text, "{micros}");
        }
    }
}
