//! [`RankUsage`]: what a signed batch rank used, measured by its node as it ended, for
//! the queue's job history.

use serde::{Deserialize, Serialize};

/// What a rank used (node to queue), sent just before [`super::FromNode::Exit`] to the
/// queue's sessions (`LaunchSigned`) only; CPU time is in the `Exit` itself. A queue
/// that does not know this message skips it (its tag is unknown to it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankUsage {
    /// The most memory the rank's cgroup used, bytes, as the kernel counted it; `None`
    /// when the node does not account memory for the rank.
    pub peak_memory: Option<u64>,
}
