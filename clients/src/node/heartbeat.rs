//! Heartbeats a client sends: how often, and their sequence numbers (counting up
//! from 0 on each side, so a node's log shows gaps).

use std::time::Duration;

use proto::node::{Heartbeat, ToNode};

/// How often a client tells a node it is alive (nodes do the same).
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

/// The heartbeats of one session, numbered from 0.
///
/// ```
/// use clients::node::Heartbeats;
/// use proto::node::{Heartbeat, ToNode};
/// let mut beats = Heartbeats::default();
/// assert_eq!(beats.next_beat(), ToNode::Heartbeat(Heartbeat { seq: 0 }));
/// assert_eq!(beats.next_beat(), ToNode::Heartbeat(Heartbeat { seq: 1 }));
/// ```
#[derive(Debug, Default, Clone)]
pub struct Heartbeats {
    seq: u64,
}

impl Heartbeats {
    /// The next heartbeat to send.
    pub fn next_beat(&mut self) -> ToNode {
        let beat = ToNode::Heartbeat(Heartbeat { seq: self.seq });
        self.seq += 1;
        beat
    }
}
