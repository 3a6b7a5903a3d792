//! Money and time units: micro-credits, bids in micro-credits per minute, and their parsing.
//! [`parse_credits`] is the one parser of credits people write, used by every binary
//! (bids, `max_rate`, accountctl's amounts, accountd's limits).
//!
//! Every amount of money in the market is an `i64` count of micro-credits (one credit is
//! [`MICROS_PER_CREDIT`] micro-credits); no float ever touches money. A [`Bid`] is a rate,
//! micro-credits per minute, and is never negative: the only way to build one checks that.

use std::fmt;
use std::str::FromStr;

/// An amount of money: micro-credits (1 credit = [`MICROS_PER_CREDIT`]).
pub type MicroCredits = i64;

/// Micro-credits in one credit.
pub const MICROS_PER_CREDIT: i64 = 1_000_000;

/// Nanoseconds in one minute, the time unit of a bid.
pub const NANOS_PER_MINUTE: u64 = 60_000_000_000;

/// Decimal places a bid written in credits may carry (micro-credit resolution).
const DECIMALS: usize = 6;

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
/// use stride::parse_credits;
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

/// Why a bid was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BidError {
    /// The rate (in micro-credits per minute) is below zero.
    #[error(
        "a bid of {} credits per minute is negative; bid zero or more credits per minute",
        format_credits(*.0)
    )]
    Negative(i64),
    /// The text is not a decimal number of credits.
    #[error("bid {0:?} is not a number of credits per minute; write it like 2 or 0.5")]
    Malformed(String),
    /// The text has more than six decimal places.
    #[error("bid {0:?} is finer than one micro-credit; use at most 6 decimal places")]
    TooPrecise(String),
    /// The rate does not fit in 64 bits of micro-credits.
    #[error("bid {0:?} is too large; bid at most 9223372036854 credits per minute")]
    TooLarge(String),
}

/// A bid: the most a job is willing to pay, in micro-credits per minute of node time.
///
/// Zero is a valid bid (the job runs on what paying jobs leave over and never pays).
///
/// ```
/// use stride::Bid;
/// let b: Bid = "2.5".parse()?;
/// assert_eq!(b.micros_per_minute(), 2_500_000);
/// assert_eq!(b.to_string(), "2.5");
/// assert!(Bid::new(-1).is_err());
/// assert_eq!(Bid::from_credits(3), Bid::new(3_000_000)?);
/// # Ok::<(), stride::BidError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bid(i64);

impl Bid {
    /// The zero bid.
    pub const ZERO: Bid = Bid(0);

    /// A bid of `micros_per_minute` micro-credits per minute; negative rates are refused.
    pub fn new(micros_per_minute: i64) -> Result<Bid, BidError> {
        if micros_per_minute < 0 {
            Err(BidError::Negative(micros_per_minute))
        } else {
            Ok(Bid(micros_per_minute))
        }
    }

    /// A bid of a whole number of credits per minute (cannot overflow).
    pub const fn from_credits(credits: u32) -> Bid {
        Bid(credits as i64 * MICROS_PER_CREDIT)
    }

    /// The rate in micro-credits per minute (never negative).
    pub const fn micros_per_minute(self) -> i64 {
        self.0
    }

    /// Whether this is the zero bid.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// The rate as an unsigned number, for exact wide arithmetic.
    pub(crate) const fn unsigned(self) -> u64 {
        self.0 as u64
    }
}

impl TryFrom<i64> for Bid {
    type Error = BidError;
    fn try_from(micros_per_minute: i64) -> Result<Bid, BidError> {
        Bid::new(micros_per_minute)
    }
}

/// Parses a decimal number of credits per minute: `2`, `0.5`, `10.000001`.
impl FromStr for Bid {
    type Err = BidError;
    fn from_str(text: &str) -> Result<Bid, BidError> {
        let micros = parse_credits(text).map_err(|e| match e {
            CreditsError::TooPrecise(t) => BidError::TooPrecise(t),
            CreditsError::TooLarge(t) => BidError::TooLarge(t),
            CreditsError::NotANumber(t) => BidError::Malformed(t),
        })?;
        Bid::new(micros)
    }
}

/// Writes the bid in credits per minute, without trailing zeros: `2`, `0.5`.
impl fmt::Display for Bid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&format_credits(self.0))
    }
}

/// Formats micro-credits as credits with only the decimals needed: `2`, `-0.25`, `1.000001`.
///
/// ```
/// assert_eq!(stride::format_credits(40_000_000), "40");
/// assert_eq!(stride::format_credits(-250_000), "-0.25");
/// ```
pub fn format_credits(micros: MicroCredits) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let abs = micros.unsigned_abs();
    let whole = abs / MICROS_PER_CREDIT as u64;
    let frac = abs % MICROS_PER_CREDIT as u64;
    if frac == 0 {
        format!("{sign}{whole}")
    } else {
        let digits = format!("{frac:06}");
        format!("{sign}{whole}.{}", digits.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_round_trip() {
        for (text, micros) in [
            ("0", 0),
            ("2", 2_000_000),
            ("0.5", 500_000),
            (".5", 500_000),
            ("7.", 7_000_000),
            ("10.000001", 10_000_001),
            (" 3 ", 3_000_000),
            ("-0", 0),
        ] {
            assert_eq!(
                text.parse::<Bid>().unwrap().micros_per_minute(),
                micros,
                "{text}"
            );
        }
        assert_eq!(Bid::new(1_250_000).unwrap().to_string(), "1.25");
    }

    #[test]
    fn refuses_bad_bids_with_the_right_reason() {
        assert_eq!("-1".parse::<Bid>(), Err(BidError::Negative(-1_000_000)));
        // Users write credits, so the message speaks credits too.
        assert_eq!(
            BidError::Negative(-250_000).to_string(),
            "a bid of -0.25 credits per minute is negative; bid zero or more credits per minute"
        );
        assert!(matches!("".parse::<Bid>(), Err(BidError::Malformed(_))));
        assert!(matches!(".".parse::<Bid>(), Err(BidError::Malformed(_))));
        assert!(matches!("1e3".parse::<Bid>(), Err(BidError::Malformed(_))));
        assert!(matches!(
            "1.2.3".parse::<Bid>(),
            Err(BidError::Malformed(_))
        ));
        assert!(matches!(
            "0.0000001".parse::<Bid>(),
            Err(BidError::TooPrecise(_))
        ));
        assert!(matches!(
            "99999999999999".parse::<Bid>(),
            Err(BidError::TooLarge(_))
        ));
        assert_eq!(Bid::new(-5), Err(BidError::Negative(-5)));
    }
}
