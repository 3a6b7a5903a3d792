//! Bids: the most a job is willing to pay, as a rate in micro-credits per minute of node
//! time, never negative (the only way to build a [`Bid`] checks that), written by people in
//! credits per minute and read by [`crate::parse_credits`].

use std::fmt;
use std::str::FromStr;

use crate::credits::{CreditsError, MICROS_PER_CREDIT, format_credits, parse_credits};

/// Nanoseconds in one minute, the time unit of a bid.
pub const NANOS_PER_MINUTE: u64 = 60_000_000_000;

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
/// use money::Bid;
/// let b: Bid = "2.5".parse()?;
/// assert_eq!(b.micros_per_minute(), 2_500_000);
/// assert_eq!(b.to_string(), "2.5");
/// assert!(Bid::new(-1).is_err());
/// assert_eq!(Bid::from_credits(3), Bid::new(3_000_000)?);
/// # Ok::<(), money::BidError>(())
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

    /// The rate as an unsigned number (a bid is never negative), for exact wide arithmetic.
    pub const fn unsigned(self) -> u64 {
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

    #[test]
    fn amounts_and_bids_are_read_by_one_parser() {
        // What accountctl accepts as an amount, rexec accepts as a bid, and the
        // other way round; errors quote the text as the user wrote it.
        for text in ["0", "12", " 2.5 ", ".5", "7.", "10.000001", "-0", "+3"] {
            let bid: Bid = text.parse().unwrap();
            assert_eq!(parse_credits(text), Ok(bid.micros_per_minute()), "{text:?}");
        }
        for text in ["", ".", "1e3", "1,5", "0.0000001", "99999999999999", "--1"] {
            assert!(parse_credits(text).is_err(), "{text:?}");
            assert!(text.parse::<Bid>().is_err(), "{text:?}");
        }
    }
}
