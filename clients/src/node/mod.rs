//! The node protocol's client: what `rexec`, batchd and the tests say to rexecd
//! (the protocol itself is [`proto::node`]).
//!
//! - [`session`]: [`Session`], one mutually authenticated session with one node:
//!   resolve and connect (TCP keepalive and a user timeout so a vanished node machine
//!   is noticed), the TLS handshake to the node the caller meant, `Hello`/`Welcome`,
//!   then `Launch`, `LaunchPmi` or `LaunchSigned` answered by `Started` — or `Hello`
//!   and a launch in one flight ([`Dial::open_and_launch`]) — and the frames of a
//!   running job with heartbeats skipped ([`Session::next`]).
//! - [`admin`]: the short admin sessions: list the jobs on a node, kill a job,
//!   change its bid, each a typed answer.
//! - [`error`]: [`SessionError`], why a step failed, in one line.
//! - [`heartbeat`]: the heartbeat interval and the counted heartbeats a client sends.
//!
//! Whoever speaks says who they are in `Hello` and what to do with a node's notices
//! ([`Agent`]).
//!
//! ```
//! use clients::node::{SessionError, show_duration};
//! use std::time::Duration;
//! let e = SessionError::Silent(Duration::from_millis(1500));
//! assert_eq!(e.to_string(), "missed heartbeats for 1.5s");
//! assert_eq!(show_duration(Duration::from_secs(5)), "5s");
//! ```

pub mod admin;
pub mod error;
pub mod heartbeat;
pub mod session;

pub use error::{SessionError, explain_frame, show_duration};
pub use heartbeat::{HEARTBEAT_INTERVAL, Heartbeats};
pub use session::{CONNECT_TIMEOUT, Dial, MAX_FRAME, READ_BUFFER, Session, Tls, set_liveness};

use proto::node::Notice;

/// Who speaks to a node: the software named in `Hello`, and what becomes of the
/// notices a node sends while a session is set up or asked something.
#[derive(Debug)]
pub struct Agent {
    /// Client software and version, for the node's logs (`"rexec 0.1.0"`).
    pub name: &'static str,
    /// Called with the node's name and each notice [`Session::next`] skips.
    pub on_notice: fn(node: &str, notice: &Notice),
}

impl Agent {
    /// The `Hello` this agent opens a session with.
    pub fn hello(&self) -> proto::node::ToNode {
        proto::node::ToNode::Hello(proto::node::Hello::new(self.name))
    }
}
