//! Wire formats shared by rexec, rexecd, vexecd and accountd.
//!
//! Module map:
//! - [`frame`]: length-prefixed framing of postcard messages over a byte
//!   stream, with a size limit checked before allocating.
//! - [`tagged`]: how message enums carry explicit tags so that old peers can
//!   skip messages they do not know; the rules for evolving the protocol.
//! - [`limits`]: how many elements a message may hold, enforced while decoding.
//! - [`chunk`]: raw stdin/stdout/stderr bytes, encoded compactly.
//! - [`node`]: the client/node protocol (rexec and admin tools to rexecd).
//! - [`announce`]: the multicast announcement datagram of nodes, selectors
//!   and the account service.
//! - [`account`]: messages to and from the account service (accountd).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod account;
pub mod announce;
pub mod chunk;
pub mod frame;
pub mod limits;
pub mod node;
pub mod tagged;

pub use chunk::Chunk;
pub use frame::{DEFAULT_MAX_FRAME, FrameError, FrameReader, FrameWriter, Framed, encode_frame};
