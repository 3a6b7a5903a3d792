//! Wire formats shared by rexec, rexecd, vexecd and accountd.
//!
//! Module map:
//! - [`frame`]: length-prefixed framing of postcard messages over a byte
//!   stream, with a size limit checked before allocating.
//! - [`account`]: messages to and from the account service (accountd).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod account;
pub mod frame;

pub use frame::{DEFAULT_MAX_FRAME, FrameError, FrameReader, FrameWriter, Framed, encode_frame};
