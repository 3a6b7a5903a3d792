//! A [`Bid`] on the wire (feature `serde`): it is written as the plain `i64` of
//! micro-credits per minute, so a message holding a `Bid` has exactly the bytes the same
//! message had when the field was an `i64`, and a peer of either kind reads the other.
//! Reading refuses a negative rate: that is where a bid from the network is checked, once.
//!
//! Some formats (postcard among them) keep no text of a deserializer's own error, so a
//! reader could only say "malformed". [`catch_refused_bid`] runs a decode and hands back
//! the bid it refused, if any, so that the reader can say exactly what was wrong.

use std::cell::Cell;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::bid::{Bid, BidError};

thread_local! {
    /// The first negative rate refused by a decode running in [`catch_refused_bid`]
    /// on this thread (decoding is synchronous, so nothing else runs in between).
    static REFUSED: Cell<Option<i64>> = const { Cell::new(None) };
}

impl Serialize for Bid {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_i64(self.micros_per_minute())
    }
}

impl<'de> Deserialize<'de> for Bid {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Bid, D::Error> {
        let micros = i64::deserialize(deserializer)?;
        Bid::new(micros).map_err(|e| {
            REFUSED.with(|r| {
                if r.get().is_none() {
                    r.set(Some(micros));
                }
            });
            D::Error::custom(e)
        })
    }
}

/// Runs `decode` (a deserialization, on this thread) and returns its result with the
/// first bid it refused as negative, if any.
///
/// ```
/// use money::{Bid, BidError, catch_refused_bid};
/// let bytes = postcard::to_stdvec(&-5i64).unwrap();
/// let (got, refused) = catch_refused_bid(|| postcard::from_bytes::<Bid>(&bytes));
/// assert!(got.is_err());
/// assert_eq!(refused, Some(BidError::Negative(-5)));
/// let bytes = postcard::to_stdvec(&Bid::from_credits(2)).unwrap();
/// assert_eq!(catch_refused_bid(|| postcard::from_bytes::<Bid>(&bytes)).1, None);
/// ```
pub fn catch_refused_bid<T>(decode: impl FnOnce() -> T) -> (T, Option<BidError>) {
    // Nested calls each see only their own refusals.
    let outer = REFUSED.with(|r| r.take());
    let out = decode();
    let refused = REFUSED.with(|r| r.replace(outer));
    (out, refused.map(BidError::Negative))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bid_has_the_bytes_of_its_i64() {
        for micros in [0, 1, 63, 64, 2_000_000, i64::MAX] {
            let bid = Bid::new(micros).unwrap();
            let bytes = postcard::to_stdvec(&bid).unwrap();
            assert_eq!(bytes, postcard::to_stdvec(&micros).unwrap(), "{micros}");
            assert_eq!(postcard::from_bytes::<Bid>(&bytes), Ok(bid));
        }
    }

    #[test]
    fn a_negative_rate_is_refused_and_named() {
        let bytes = postcard::to_stdvec(&(-1_000_000i64, -2i64)).unwrap();
        let (got, refused) = catch_refused_bid(|| postcard::from_bytes::<(Bid, Bid)>(&bytes));
        assert!(got.is_err());
        // The first one refused.
        assert_eq!(refused, Some(BidError::Negative(-1_000_000)));
        // Nothing is left over for the next decode.
        let ok = postcard::to_stdvec(&3i64).unwrap();
        assert_eq!(
            catch_refused_bid(|| postcard::from_bytes::<Bid>(&ok)),
            (Ok(Bid::new(3).unwrap()), None)
        );
    }

    #[test]
    fn a_nested_catch_keeps_to_its_own_decode() {
        let bad = postcard::to_stdvec(&-7i64).unwrap();
        let (inner, outer) = catch_refused_bid(|| {
            let (_, inner) = catch_refused_bid(|| postcard::from_bytes::<Bid>(&bad));
            inner
        });
        assert_eq!((inner, outer), (Some(BidError::Negative(-7)), None));
    }
}
