//! Wire formats shared by rexec, rexecd, vexecd and accountd: typed
//! messages encoded with postcard, carried in length-prefixed frames over
//! TLS streams, and the multicast announcement datagram.
//!
//! Module map:
//! - [`frame`]: length-prefixed framing of postcard messages over a byte
//!   stream, with a size limit checked before allocating; cancel-safe reads.
//! - [`tagged`]: how message enums carry explicit tags so that old peers can
//!   skip messages they do not know; the rules for evolving the protocol.
//! - [`limits`]: how many elements a message may hold, enforced while decoding.
//! - [`chunk`]: raw stdin/stdout/stderr bytes, encoded compactly.
//! - [`job`]: a job's id and its state, named by every protocol below.
//! - [`node`]: the client/node protocol (rexec and admin tools to rexecd).
//! - [`announce`]: the multicast announcement datagram of nodes, selectors
//!   and the account service.
//! - [`account`]: messages to and from the account service (accountd).
//! - [`ledger`]: the account service's records (a debit, a receipt, a ledger row).
//! - [`select`]: messages to and from the selector (vexecd).
//! - [`batch`]: signed batch jobs and the queue's protocol (batchd).
//! - [`size`]: the one parser of memory sizes people write (`512M`, `2G`).
//! - [`output`]: batch output file patterns (`%j`, `%a`, `%r`, `%n`) and their expansion.
//!
//! # Compatibility
//!
//! - A session starts with a version handshake ([`node::Hello`],
//!   [`node::negotiate`]); peers with no common version get a clear
//!   [`node::ErrorCode::IncompatibleVersion`] error, never garbage.
//! - Message tags are append-only and never reused; a message with a tag a
//!   build does not know decodes to `Unknown { tag }` and can be skipped.
//!   Changing a message means adding a new tag (see [`tagged`]).
//! - Codes (signals, error codes, notice kinds) are append-only numbers; an
//!   unknown one decodes to `Unknown(n)`.
//! - A malformed frame body is a recoverable error: the frame is consumed
//!   and the stream stays in step ([`FrameError::is_recoverable`]).
//! - Announcements carry a layout version byte; see [`announce`].
//!
//! Money on the wire is always `i64` micro-credits (1 credit = 1 000 000);
//! CPU time is `u64` nanoseconds.
//!
//! ```
//! use proto::node::{Chunk, FromNode, Hello, ToNode, Welcome, negotiate};
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let (client, node) = tokio::io::duplex(4096);
//! let mut client = proto::Framed::new(client, proto::DEFAULT_MAX_FRAME);
//! let mut node = proto::Framed::new(node, proto::DEFAULT_MAX_FRAME);
//!
//! client.send(&ToNode::Hello(Hello::new("rexec 0.1"))).await.unwrap();
//! let Some(ToNode::Hello(hello)) = node.recv().await.unwrap() else { panic!() };
//! let version = negotiate(&hello).unwrap();
//! let welcome = Welcome { version, node: "node7".into(), agent: "rexecd 0.1".into() };
//! node.send(&FromNode::Welcome(welcome)).await.unwrap();
//! node.send(&FromNode::Stdout(Chunk(b"hello\n".to_vec()))).await.unwrap();
//!
//! let Some(FromNode::Welcome(w)) = client.recv().await.unwrap() else { panic!() };
//! assert_eq!(w.check_version(), Ok(version));
//! let out: Option<FromNode> = client.recv().await.unwrap();
//! assert_eq!(out, Some(FromNode::Stdout(Chunk(b"hello\n".to_vec()))));
//! # });
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod account;
pub mod announce;
pub mod batch;
pub mod chunk;
pub mod frame;
pub mod history;
pub mod job;
pub mod ledger;
pub mod limits;
pub mod node;
pub mod output;
pub mod project;
pub mod select;
pub mod size;
pub mod spend;
pub mod tagged;

pub use chunk::Chunk;
pub use frame::{DEFAULT_MAX_FRAME, FrameError, FrameReader, FrameWriter, Framed, encode_frame};
