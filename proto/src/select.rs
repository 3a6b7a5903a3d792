//! Messages between clients and the selector (vexecd): "select N nodes by
//! POLICY", "list the nodes you know", "which selectors and account
//! services do you know".
//!
//! Every request travels in a [`SelectorRequest`] envelope carrying the
//! protocol version ([`SELECTOR_PROTOCOL_VERSION`]) and an id the selector
//! echoes in its [`SelectorResponse`]. One connection may carry many
//! requests, one at a time. Operations and replies are tagged message enums
//! and [`SelectorErrorCode`] a code enum (see [`crate::tagged`]), so a newer
//! client gets a clear `Unsupported` answer from an older selector.
//!
//! A node's view ([`NodeView`]) is what its last announcement said, plus
//! what the selector derived from it: its speed and the predicted completion
//! of the job's expected CPU length, from its availability summary. Names
//! and addresses are hints: a client must still check that the node's
//! certificate names the node it chose.
//!
//! ```
//! use proto::select::*;
//! let req = SelectorRequest::new(1, SelectorOp::Select(SelectQuery::new(4, "lowest-price")));
//! assert_eq!(req.version, SELECTOR_PROTOCOL_VERSION);
//! assert!(req.check().is_ok());
//! let bad = SelectorRequest::new(2, SelectorOp::Select(SelectQuery::new(0, "lowest-price")));
//! assert_eq!(bad.check().unwrap_err().code, SelectorErrorCode::BadRequest);
//! ```

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::announce::{MAX_NAME, NodeStatus};

/// Version of the selector protocol spoken by this build. Version 2's
/// [`NodeView`] carries the node's charging rate and contention with its price.
pub const SELECTOR_PROTOCOL_VERSION: u16 = 2;

/// Most nodes one select may ask for.
pub const MAX_SELECT: u32 = 4096;

/// Most names in a select's exclusion list.
pub const MAX_EXCLUDE: usize = 4096;

pub use crate::limits::MAX_LISTED;

/// Longest policy name, in bytes.
pub const MAX_POLICY: usize = 64;

/// Largest body of one request to a selector (the largest valid request, a
/// select excluding [`MAX_EXCLUDE`] names of the longest kind, is about
/// 1 MiB; a selector reads requests with this limit).
pub const MAX_SELECTOR_REQUEST: usize = 1 << 20;

/// Largest body of one answer from a selector (a listing of [`MAX_LISTED`] nodes
/// with long names fits; a client reads answers with this limit).
pub const MAX_SELECTOR_REPLY: usize = 8 << 20;

/// The envelope of every request sent to a selector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectorRequest {
    /// Protocol version the sender speaks.
    pub version: u16,
    /// Chosen by the sender, echoed in the response.
    pub id: u64,
    /// What to do.
    pub op: SelectorOp,
}

impl SelectorRequest {
    /// A request at the current protocol version.
    pub fn new(id: u64, op: SelectorOp) -> SelectorRequest {
        SelectorRequest {
            version: SELECTOR_PROTOCOL_VERSION,
            id,
            op,
        }
    }

    /// Check the request is well formed (a selector does this before
    /// anything else; a client may do it before sending).
    pub fn check(&self) -> Result<(), SelectorError> {
        if self.version != SELECTOR_PROTOCOL_VERSION {
            return Err(SelectorError::new(
                SelectorErrorCode::IncompatibleVersion,
                format!(
                    "selector protocol {} is not supported (this selector speaks {SELECTOR_PROTOCOL_VERSION})",
                    self.version
                ),
            ));
        }
        match &self.op {
            SelectorOp::Select(q) => q.check(),
            SelectorOp::Nodes(_) | SelectorOp::Services | SelectorOp::Stats => Ok(()),
            SelectorOp::Unknown { tag } => Err(SelectorError::new(
                SelectorErrorCode::Unsupported,
                format!("operation {tag} is not supported by this selector; upgrade it"),
            )),
        }
    }
}

/// The envelope of every response from a selector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectorResponse {
    /// The id of the request this answers (0 when it could not be read).
    pub id: u64,
    /// The outcome.
    pub result: Result<SelectorReply, SelectorError>,
}

crate::tagged::tagged_enum! {
    /// An operation a selector performs. Any authenticated caller may ask.
    pub enum SelectorOp {
        /// Choose nodes for a job.
        1 => Select(SelectQuery),
        /// List the live nodes.
        2 => Nodes(NodesQuery),
        /// List the live selectors and account services.
        3 => Services,
        /// The selector's counters (datagrams accepted and dropped by
        /// reason, nodes known, selects served).
        4 => Stats,
    }
}

crate::tagged::tagged_enum! {
    /// What a selector answers to a successful operation.
    pub enum SelectorReply {
        /// The chosen nodes, best first.
        1 => Selected(Vec<NodeView>),
        /// Live nodes.
        2 => Nodes(NodeList),
        /// Live selectors and account services.
        3 => Services(Vec<ServiceView>),
        /// The selector's counters.
        4 => Stats(SelectorStats),
    }
}

/// "Choose `count` nodes by `policy`."
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectQuery {
    /// How many nodes (1..=[`MAX_SELECT`]).
    pub count: u32,
    /// Policy name (`lowest-price`, `least-loaded`, `random`, `history`, ...).
    pub policy: String,
    /// Only nodes whose price (micro-credits per minute) is at most this.
    pub max_price: Option<i64>,
    /// Names of nodes not to choose.
    pub exclude: Vec<String>,
    /// The job's expected CPU time on a speed-1.0 node, milliseconds
    /// (`history` needs it; other policies use it to report predictions).
    pub expected_cpu_ms: Option<u64>,
}

impl SelectQuery {
    /// `count` nodes by `policy`, no other condition.
    pub fn new(count: u32, policy: &str) -> SelectQuery {
        SelectQuery {
            count,
            policy: policy.into(),
            max_price: None,
            exclude: Vec::new(),
            expected_cpu_ms: None,
        }
    }

    fn check(&self) -> Result<(), SelectorError> {
        let bad = |m: String| Err(SelectorError::new(SelectorErrorCode::BadRequest, m));
        if self.count == 0 || self.count > MAX_SELECT {
            return bad(format!(
                "asked for {} nodes; ask for 1 to {MAX_SELECT}",
                self.count
            ));
        }
        if self.policy.is_empty() || self.policy.len() > MAX_POLICY {
            return bad(format!(
                "policy name of {} bytes; give one of 1 to {MAX_POLICY}",
                self.policy.len()
            ));
        }
        if let Some(p) = self.max_price
            && p < 0
        {
            return bad(format!("price cap {p} is negative"));
        }
        if self.exclude.len() > MAX_EXCLUDE {
            return bad(format!(
                "{} excluded nodes; at most {MAX_EXCLUDE}",
                self.exclude.len()
            ));
        }
        if let Some(n) = self.exclude.iter().find(|n| n.len() > MAX_NAME) {
            return bad(format!(
                "excluded node name of {} bytes; names are at most {MAX_NAME}",
                n.len()
            ));
        }
        Ok(())
    }
}

/// "List the live nodes."
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodesQuery {
    /// Predict each node's completion of a job of this CPU length (ms).
    pub expected_cpu_ms: Option<u64>,
}

/// A node as a selector knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeView {
    /// Its name (the certificate must name it).
    pub name: String,
    /// Its announced TLS address.
    pub addr: SocketAddr,
    /// Its announced market state.
    pub status: NodeStatus,
    /// Idle CPUs as the selector counts them, times 1000.
    pub idle_milli: u32,
    /// Its speed in thousandths, when it sent an availability summary.
    pub speed_milli: Option<u32>,
    /// Predicted completion of the expected CPU length, ms (when a length
    /// was given and the node's summary allows a prediction).
    pub predicted_ms: Option<u64>,
    /// Age of its last announcement, ms.
    pub age_ms: u64,
}

/// A listing of live nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeList {
    /// Live nodes known (may be more than listed).
    pub total: u64,
    /// At most [`MAX_LISTED`] of them, by name.
    #[serde(deserialize_with = "crate::limits::listed")]
    pub nodes: Vec<NodeView>,
}

/// What a selector counted since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectorStats {
    /// Announcements accepted.
    pub accepted: u64,
    /// Datagrams dropped as malformed.
    pub malformed: u64,
    /// Datagrams dropped as oversized.
    pub oversized: u64,
    /// Announcements dropped as from a foreign cluster (or outside the
    /// selector's name suffix or networks).
    pub foreign_cluster: u64,
    /// Announcements dropped as stale (not newer than the one held).
    pub stale: u64,
    /// Announcements of new senders dropped because the table was full.
    pub table_full: u64,
    /// Senders forgotten after their window.
    pub forgotten: u64,
    /// Live nodes known now.
    pub nodes: u64,
    /// Live selectors and account services known now.
    pub services: u64,
    /// Select requests answered with nodes.
    pub selects: u64,
}

impl SelectorStats {
    /// The datagrams dropped, by reason (the values of the selector's
    /// `reason` metric label), in the one order every view shows them.
    ///
    /// ```
    /// let s = proto::select::SelectorStats { stale: 2, ..Default::default() };
    /// assert_eq!(s.dropped()[3], ("stale", 2));
    /// assert_eq!(s.dropped().iter().map(|d| d.1).sum::<u64>(), 2);
    /// ```
    pub fn dropped(&self) -> [(&'static str, u64); 5] {
        [
            ("malformed", self.malformed),
            ("oversized", self.oversized),
            ("foreign_cluster", self.foreign_cluster),
            ("stale", self.stale),
            ("table_full", self.table_full),
        ]
    }
}

crate::tagged::code_enum! {
    /// What kind of service a [`ServiceView`] is.
    pub enum ServiceKind {
        /// A selector (vexecd).
        1 => Selector,
        /// The account service (accountd).
        2 => Account,
        /// The batch queue (batchd).
        3 => Batch,
    }
}

/// A selector, account service or batch queue as a selector knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceView {
    /// Which service.
    pub kind: ServiceKind,
    /// Its name (the certificate must name it).
    pub name: String,
    /// Its announced TLS address.
    pub addr: SocketAddr,
    /// Age of its last announcement, ms.
    pub age_ms: u64,
}

crate::tagged::code_enum! {
    /// Why a selector refused.
    pub enum SelectorErrorCode {
        /// The request is malformed or out of range.
        1 => BadRequest,
        /// Fewer qualifying nodes than asked for.
        2 => NotEnoughNodes,
        /// No such policy.
        3 => UnknownPolicy,
        /// The policy needs the job's expected CPU length.
        4 => NeedsLength,
        /// The operation is not known to this selector.
        5 => Unsupported,
        /// No common protocol version.
        6 => IncompatibleVersion,
        /// The selector is overloaded; try another.
        7 => Busy,
    }
}

/// A selector's refusal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct SelectorError {
    /// What kind of refusal.
    pub code: SelectorErrorCode,
    /// A sentence for the user.
    pub message: String,
}

impl SelectorError {
    /// A refusal.
    pub fn new(code: SelectorErrorCode, message: impl Into<String>) -> SelectorError {
        SelectorError {
            code,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_round_trip() {
        let req = SelectorRequest::new(9, SelectorOp::Stats);
        assert!(req.check().is_ok());
        let bytes = postcard::to_allocvec(&req).unwrap();
        assert_eq!(
            postcard::from_bytes::<SelectorRequest>(&bytes).unwrap(),
            req
        );
        let stats = SelectorStats {
            accepted: 10,
            malformed: 2,
            stale: 1,
            nodes: 7,
            selects: 3,
            ..SelectorStats::default()
        };
        let resp = SelectorResponse {
            id: 9,
            result: Ok(SelectorReply::Stats(stats)),
        };
        let bytes = postcard::to_allocvec(&resp).unwrap();
        assert_eq!(
            postcard::from_bytes::<SelectorResponse>(&bytes).unwrap(),
            resp
        );
    }
}
