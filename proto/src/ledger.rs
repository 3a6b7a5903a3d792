//! The account service's ledger records, named by both of its protocols
//! ([`crate::account`] for users and nodes, [`crate::project`] for projects):
//! a node's [`Debit`] and its [`ChargeReceipt`], one [`LedgerEntry`], one
//! [`ReportRow`]. Money is `i64` micro-credits, signed as in
//! [`crate::account`].

use serde::{Deserialize, Serialize};

/// Idempotency key of a node's debit or refund: unique per (node, job, sequence).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DebitKey {
    /// The node's name; must equal the name in the node's certificate.
    pub node: String,
    /// The job id on that node.
    pub job: String,
    /// Sequence number of the charge within the job, chosen by the node.
    pub seq: u64,
}

impl std::fmt::Display for DebitKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.node, self.job, self.seq)
    }
}

/// The metering interval a charge covers, in the node's monotonic clock (microseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MeterInterval {
    /// Start of the interval, node-monotonic microseconds.
    pub start_us: u64,
    /// End of the interval, node-monotonic microseconds (>= start).
    pub end_us: u64,
}

/// A charge a node asks accountd to take from a user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Debit {
    /// Idempotency key; a repeat with the same key changes nothing.
    pub key: DebitKey,
    /// The user who pays.
    pub user: String,
    /// Micro-credits to take; must be positive and within the server's limit.
    pub amount: i64,
    /// Rank of the job's process the charge is for.
    pub rank: u32,
    /// The metering interval charged.
    pub interval: MeterInterval,
    /// CPU time the rank used in the interval, microseconds (for reports).
    pub cpu_us: u64,
}

/// The result of a debit or refund.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChargeReceipt {
    /// Ledger entry id of the charge.
    pub entry_id: i64,
    /// Signed amount stored in the ledger (negative for a debit).
    pub amount: i64,
    /// The user's balance right after this entry (the first result, also on a repeat).
    pub balance_after: i64,
    /// The user's balance now (equals `balance_after` unless this is a repeat).
    pub balance_now: i64,
    /// True when the key had been seen before and nothing changed.
    pub duplicate: bool,
}

crate::tagged::code_enum! {
    /// Kind of a ledger entry.
    pub enum EntryKind {
        /// Credits given by an admin (also the initial grant of a new account).
        1 => Grant,
        /// A signed correction by an admin.
        2 => Adjust,
        /// CPU charged by a node.
        3 => Debit,
        /// An over-charge given back by a node.
        4 => Refund,
    }
}

impl EntryKind {
    /// The lower-case name used in the database and on screen.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Grant => "grant",
            EntryKind::Adjust => "adjust",
            EntryKind::Debit => "debit",
            EntryKind::Refund => "refund",
            EntryKind::Unknown(_) => "unknown",
        }
    }

    /// Parses [`EntryKind::as_str`] back.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "grant" => EntryKind::Grant,
            "adjust" => EntryKind::Adjust,
            "debit" => EntryKind::Debit,
            "refund" => EntryKind::Refund,
            _ => return None,
        })
    }
}

/// One row of the append-only ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// Entry id (increasing).
    pub id: i64,
    /// Wall-clock UTC time it was written, microseconds since the epoch.
    pub at_us: i64,
    /// Whose balance it changed.
    pub user: String,
    /// Signed micro-credits.
    pub amount: i64,
    /// What kind of entry.
    pub kind: EntryKind,
    /// The idempotency key (debits and refunds).
    pub key: Option<DebitKey>,
    /// Rank charged (debits).
    pub rank: Option<u32>,
    /// Metering interval (debits).
    pub interval: Option<MeterInterval>,
    /// CPU microseconds (debits).
    pub cpu_us: Option<u64>,
    /// Who wrote it: `role:name` of the certificate.
    pub actor: String,
    /// Why (grants, adjusts, refunds).
    pub reason: Option<String>,
    /// Balance right after this entry.
    pub balance_after: i64,
}

/// One row of a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportRow {
    /// The user, node or day.
    pub key: String,
    /// Net micro-credits charged (debits minus refunds).
    pub charged: i64,
    /// CPU microseconds metered.
    pub cpu_us: u64,
    /// Distinct jobs charged.
    pub jobs: u64,
}
