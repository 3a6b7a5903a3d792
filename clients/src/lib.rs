//! One typed client per protocol of the rexec market: request in, typed reply or
//! typed error out. Every program that speaks to a daemon goes through here — `rexec`,
//! `accountctl`, rexecd's credit check and debit delivery, and the tests.
//!
//! Module map:
//! - [`dial`]: TCP with a time limit, then the mutual-TLS handshake to the server
//!   certificate the caller meant to reach.
//! - [`rpc`]: one framed request/response connection, generic over a [`rpc::Protocol`]
//!   (request and response types, frame limits, the service's name in messages):
//!   fresh request ids, time limits, the id check, and errors naming the service and
//!   address.
//! - [`selector`]: [`selector::SelectorClient`] for vexecd, and asking several
//!   selectors in turn until one answers ([`selector::ask_any`]).
//! - [`account`]: [`account::AccountClient`] for accountd, and accountd's address as
//!   learnt from its announcements ([`account::LearntAddress`]).
//! - [`batch`]: [`batch::BatchClient`] for the batch queue (batchd).
//! - [`hedge`]: trying several instances of a service, the next beside the
//!   first when it is slow to answer, the first success winning.
//! - [`instances`]: several instances of one service, connecting to whichever
//!   answers, the one that answered last first.
//! - [`liveness`]: TCP keepalive and user timeout of a long-lived connection.
//! - [`node`]: [`node::Session`] for rexecd's node protocol: launches (plain, MPI,
//!   signed by a queue), the frames of a running rank, heartbeats, and the admin
//!   requests (list, kill, rebid).
//!
//! ```
//! // A reply of the wrong kind is a typed error, not a panic.
//! use clients::rpc::RpcError;
//! let e: RpcError<proto::select::SelectorError> = RpcError::WrongReply {
//!     service: "selector",
//!     addr: "10.0.0.5:7478".into(),
//!     asked: "Select",
//!     got: "Stats",
//! };
//! assert_eq!(e.to_string(), "selector at 10.0.0.5:7478 answered Stats to a Select");
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod account;
pub mod batch;
pub mod dial;
pub mod hedge;
pub mod instances;
pub mod liveness;
pub mod node;
pub mod rpc;
pub mod selector;
