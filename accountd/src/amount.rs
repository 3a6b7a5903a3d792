//! Credit amounts as text: parsing decimal credits typed by people into `i64`
//! micro-credits (with [`stride::parse_credits`], the parser every binary uses)
//! and printing micro-credits back with fixed precision.
//!
//! No floating point is involved anywhere: `"1.5"` becomes `1_500_000`
//! exactly, more than six decimals is an error rather than a silent rounding,
//! and overflow is refused.

use proto::account::MICROS_PER_CREDIT;

/// Digits after the decimal point in a printed amount.
pub const DECIMALS: usize = 6;

/// Why a text is not an amount (stride's error: one parser for every binary).
pub type AmountError = stride::CreditsError;

/// Parses decimal credits (`"12"`, `"-0.5"`, `"+3.000001"`) into micro-credits: the
/// parser bids and every other amount go through too ([`stride::parse_credits`]).
///
/// ```
/// use accountd::amount::parse_credits;
/// assert_eq!(parse_credits("1.5"), Ok(1_500_000));
/// assert_eq!(parse_credits("-0.000001"), Ok(-1));
/// assert!(parse_credits("1.0000001").is_err());
/// ```
pub use stride::parse_credits;

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
    fn amounts_and_bids_are_read_by_one_parser() {
        // What accountctl accepts as an amount, rexec accepts as a bid, and the
        // other way round; errors quote the text as the user wrote it.
        for text in ["0", "12", " 2.5 ", ".5", "7.", "10.000001", "-0", "+3"] {
            let bid: stride::Bid = text.parse().unwrap();
            assert_eq!(parse_credits(text), Ok(bid.micros_per_minute()), "{text:?}");
        }
        for text in ["", ".", "1e3", "1,5", "0.0000001", "99999999999999", "--1"] {
            assert!(parse_credits(text).is_err(), "{text:?}");
            assert!(text.parse::<stride::Bid>().is_err(), "{text:?}");
        }
        assert_eq!(
            parse_credits(" 1,5").unwrap_err().to_string(),
            "` 1,5` is not an amount: write credits like 12, -3 or 0.25"
        );
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
