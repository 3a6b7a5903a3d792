//! Bounds on what one message may hold, and the decoder that enforces them
//! on sequences without trusting their declared length.
//!
//! A frame body is already limited in bytes (see [`crate::frame`]), but a
//! byte on the wire can become many bytes in memory: an empty string costs
//! one byte to send and a 24-byte `String` to hold. Capping how many
//! elements a sequence may have keeps every decoded message within a few
//! MiB whatever its body says (the worst body, a `Launch` with the most
//! empty arguments and variables allowed, peaks near 3 MiB while decoding),
//! and capping the preallocation keeps a declared length from reserving
//! memory for elements that never arrive. `tests/alloc_bound.rs` measures
//! both with a counting allocator.
//!
//! In [`crate::account`], a history page is capped at [`MAX_HISTORY_PAGE`]
//! entries (what accountd sends at most), and a selector's listing at
//! [`MAX_LISTED`] nodes. Every bound is defined here, and the protocol modules
//! name the ones their messages use.
//! Report rows and audit problems are plain `Vec`s: their count depends on
//! the ledger, so only the frame limit bounds them, and a 1 MiB answer of
//! minimal rows can take tens of MiB to decode. They only travel from
//! accountd, an authenticated service, to clients. A declared length larger
//! than the bytes left reserves nothing (postcard then gives serde no size
//! hint).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, SeqAccess, Visitor};

/// Most arguments in a `Launch` (`argv`, program name included).
pub const MAX_ARGS: usize = 65_536;

/// Most environment variables in a `Launch`.
pub const MAX_ENV: usize = 8_192;

/// Most entries one history page may hold; servers cap larger requests to this.
pub const MAX_HISTORY_PAGE: u32 = 1000;

/// Most nodes one selector listing returns (the reply says how many there were).
pub const MAX_LISTED: usize = 8192;

/// Most entries in one job list; a node with more ranks lists the first ones.
pub const MAX_JOBS: usize = 4_096;

/// Most hours one spend summary covers (a week).
pub const MAX_SPEND_HOURS: u32 = 168;

/// Most projects one spend summary lists (the reply counts the rest).
pub const MAX_SPEND_PROJECTS: usize = 256;

/// Largest body of one request to accountd. No valid request comes near it
/// (names are at most 64 bytes and a reason 500, so the largest is well under
/// 1 KiB); accountd reads requests with this limit, so a connection can make it
/// buffer at most this much, while its answers (history pages, reports) may
/// still use the full [`crate::DEFAULT_MAX_FRAME`].
pub const MAX_ACCOUNT_REQUEST: usize = 16 * 1024;

/// Most bytes reserved up front for a sequence before its elements arrive.
const PREALLOC_BYTES: usize = 4096;

/// Decode a sequence of at most `MAX` elements, reserving at most
/// `PREALLOC_BYTES` before the elements are actually read.
fn bounded_vec<'de, D, T, const MAX: usize>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Bounded<T, const MAX: usize>(PhantomData<T>);

    impl<'de, T: Deserialize<'de>, const MAX: usize> Visitor<'de> for Bounded<T, MAX> {
        type Value = Vec<T>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a sequence of at most {MAX} elements")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let hint = seq.size_hint().unwrap_or(0);
            if hint > MAX {
                return Err(de::Error::invalid_length(hint, &self));
            }
            let cap = hint.min(PREALLOC_BYTES / size_of::<T>().max(1));
            let mut out = Vec::with_capacity(cap);
            while let Some(item) = seq.next_element()? {
                if out.len() == MAX {
                    return Err(de::Error::invalid_length(MAX + 1, &self));
                }
                out.push(item);
            }
            Ok(out)
        }
    }

    deserializer.deserialize_seq(Bounded::<T, MAX>(PhantomData))
}

/// `deserialize_with` for `argv`.
pub(crate) fn args<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    bounded_vec::<D, String, MAX_ARGS>(d)
}

/// `deserialize_with` for `env`.
pub(crate) fn env<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
    bounded_vec::<D, (String, String), MAX_ENV>(d)
}

/// `deserialize_with` for a page of ledger history.
pub(crate) fn history<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    bounded_vec::<D, T, { MAX_HISTORY_PAGE as usize }>(d)
}

/// `deserialize_with` for job lists.
pub(crate) fn jobs<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    bounded_vec::<D, T, MAX_JOBS>(d)
}

/// `deserialize_with` for the projects of a spend summary.
pub(crate) fn spend_projects<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    bounded_vec::<D, T, MAX_SPEND_PROJECTS>(d)
}

/// `deserialize_with` for one project's hours in a spend summary.
pub(crate) fn spend_hours<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    bounded_vec::<D, T, { MAX_SPEND_HOURS as usize }>(d)
}

/// `deserialize_with` for a selector's node listing.
pub(crate) fn listed<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    bounded_vec::<D, T, { MAX_LISTED }>(d)
}

/// `deserialize_with` (beside `#[serde(default)]`) for a field appended to a message
/// after its first release: a sender that predates the field ends the message before
/// it, and the field then reads as its default. postcard is not self-describing, so
/// the end of the input shows only as a failed read of the field; that failure means
/// "absent" here. Use it only on fields that come after every field of the first
/// release, and on every such field (each may be the first one an old sender lacks).
/// Only the end of the input means "absent": a field that is there but malformed is
/// an error, as it would be anywhere else in the message.
pub(crate) fn trailing<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    match T::deserialize(d) {
        Ok(value) => Ok(value),
        Err(e) if is_end_of_input(&e) => Ok(T::default()),
        Err(e) => Err(e),
    }
}

/// Whether a decode error is postcard's end of the input (the serde error type is
/// generic here, so it is known by its message, which postcard 1 keeps stable; a
/// test below holds it to postcard's own error).
fn is_end_of_input(e: &impl std::fmt::Display) -> bool {
    e.to_string() == postcard::Error::DeserializeUnexpectedEnd.to_string()
}

#[cfg(test)]
mod trailing_tests {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize)]
    struct First {
        a: u32,
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Later {
        a: u32,
        #[serde(default, deserialize_with = "super::trailing")]
        b: Option<u32>,
    }

    #[test]
    fn an_absent_field_reads_as_its_default_and_a_malformed_one_is_an_error() {
        let old = postcard::to_allocvec(&First { a: 7 }).unwrap();
        assert_eq!(
            postcard::from_bytes::<Later>(&old).unwrap(),
            Later { a: 7, b: None }
        );
        let new = postcard::to_allocvec(&Later { a: 7, b: Some(9) }).unwrap();
        assert_eq!(postcard::from_bytes::<Later>(&new).unwrap().b, Some(9));
        // An Option's tag may only be 0 or 1: the field is there, and wrong.
        let mut bad = old.clone();
        bad.push(2);
        assert!(postcard::from_bytes::<Later>(&bad).is_err());
        // Cut inside the field: the end of the input, as from an older sender.
        let mut cut = old;
        cut.push(1);
        assert_eq!(postcard::from_bytes::<Later>(&cut).unwrap().b, None);
    }
}
