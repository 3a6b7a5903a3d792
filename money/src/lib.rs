//! Money in rexec market: every amount is an `i64` count of micro-credits, never a float,
//! from the command line to the ledger. Every crate that reads, writes or prints money
//! takes it from here, so there is one parser and one meaning of a credit.
//!
//! Map of the crate:
//!
//! - [`credits`]: [`MicroCredits`], [`MICROS_PER_CREDIT`], [`parse_credits`] (the one parser
//!   of credits people write: bids, `max_rate`, accountctl's amounts, accountd's limits) and
//!   its [`CreditsError`], and the two printers, [`format_credits`] (only the decimals
//!   needed) and [`format_credits_fixed`] (always six, for the ledger's records).
//! - [`bid`]: [`Bid`], a rate in micro-credits per minute that is never negative, with its
//!   [`BidError`], and [`NANOS_PER_MINUTE`], the time unit of a rate.
//! - `wire` (feature `serde`): a [`Bid`] is written as its `i64` and refused when negative
//!   as it is read; `catch_refused_bid` tells a reader which bid it refused.
//!
//! ```
//! use money::{Bid, format_credits, format_credits_fixed, parse_credits};
//! let micros = parse_credits("2.5")?;
//! assert_eq!(micros, 2_500_000);
//! assert_eq!(format_credits(-micros), "-2.5");
//! assert_eq!(format_credits_fixed(-micros), "-2.500000");
//! // A bid is read by the same parser, and is never negative.
//! assert_eq!("2.5".parse::<Bid>().unwrap().micros_per_minute(), micros);
//! assert!("-2.5".parse::<Bid>().is_err());
//! # Ok::<(), money::CreditsError>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod bid;
pub mod credits;
#[cfg(feature = "serde")]
pub mod wire;

pub use bid::{Bid, BidError, NANOS_PER_MINUTE};
pub use credits::{
    CreditsError, MICROS_PER_CREDIT, MicroCredits, format_credits, format_credits_fixed,
    parse_credits,
};
#[cfg(feature = "serde")]
pub use wire::catch_refused_bid;
