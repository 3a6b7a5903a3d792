//! What a job used and paid, as the client shows it: the per-node summary of
//! `rexec -v` (CPU seconds and credits charged, summed from each rank's
//! `Exit`), and the credit notices, which every rank of a job receives but
//! the user should read once.
//!
//! A user's credit is one balance in the ledger, so when it runs dry every
//! node says so to every rank; [`CreditNotices`] lets the first
//! out-of-credit notice through and drops the rest until credit is restored,
//! and the same for the restored notice; the spending ceiling's notice
//! (`--max-cost`) passes once. Other notices pass untouched.

use std::sync::Mutex;

use proto::node::{Exit, NoticeKind};

/// CPU nanoseconds as seconds with two decimals (truncated): `3.21`.
///
/// ```
/// assert_eq!(rexec::bill::cpu_seconds(3_219_000_000), "3.21");
/// ```
pub fn cpu_seconds(nanos: u64) -> String {
    format!("{}.{:02}", nanos / 1_000_000_000, nanos / 10_000_000 % 100)
}

/// Whether the job is out of credit as far as the user has been told.
#[derive(Debug, Default)]
pub struct CreditNotices {
    dry: Mutex<bool>,
    capped: std::sync::atomic::AtomicBool,
}

impl CreditNotices {
    /// Whether a notice of `kind` should be shown: an out-of-credit notice
    /// only when the user has not been told already, a restored notice only
    /// after an out-of-credit one; every other kind always.
    ///
    /// ```
    /// use proto::node::NoticeKind;
    /// let n = rexec::bill::CreditNotices::default();
    /// assert!(!n.admit(NoticeKind::CreditRestored));
    /// assert!(n.admit(NoticeKind::OutOfCredit));
    /// assert!(!n.admit(NoticeKind::OutOfCredit));
    /// assert!(n.admit(NoticeKind::CreditRestored));
    /// assert!(n.admit(NoticeKind::Info));
    /// assert!(n.admit(NoticeKind::CostLimit));
    /// assert!(!n.admit(NoticeKind::CostLimit));
    /// ```
    pub fn admit(&self, kind: NoticeKind) -> bool {
        if kind == NoticeKind::CostLimit {
            // Every rank reaches its share of the ceiling in turn: say it once.
            return !self.capped.swap(true, std::sync::atomic::Ordering::Relaxed);
        }
        let mut dry = self.dry.lock().unwrap_or_else(|e| e.into_inner());
        match kind {
            NoticeKind::OutOfCredit => !std::mem::replace(&mut *dry, true),
            NoticeKind::CreditRestored => std::mem::replace(&mut *dry, false),
            _ => true,
        }
    }
}

/// What the ranks on one node used and paid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeBill {
    /// The node.
    pub node: String,
    /// Ranks that reported an exit there.
    pub ranks: u32,
    /// CPU time, nanoseconds.
    pub cpu_nanos: u64,
    /// Charged, micro-credits.
    pub charged: i64,
}

impl std::fmt::Display for NodeBill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "node {}: {} rank(s), {} CPU seconds, charged {} credits",
            self.node,
            self.ranks,
            cpu_seconds(self.cpu_nanos),
            money::format_credits(self.charged)
        )
    }
}

/// Sums the exits per node, nodes in the order they first appear.
///
/// ```
/// use proto::node::{Exit, ExitStatus};
/// let exit = |cpu, charged| Exit { status: ExitStatus::Code(0), cpu_nanos: cpu, charged };
/// let bills = rexec::bill::per_node([("n1", exit(1_500_000_000, 250_000)),
///     ("n2", exit(0, 0)), ("n1", exit(500_000_000, 1_000_000))]);
/// assert_eq!(bills[0].to_string(), "node n1: 2 rank(s), 2.00 CPU seconds, charged 1.25 credits");
/// assert_eq!(bills[1].to_string(), "node n2: 1 rank(s), 0.00 CPU seconds, charged 0 credits");
/// ```
pub fn per_node<'a>(exits: impl IntoIterator<Item = (&'a str, Exit)>) -> Vec<NodeBill> {
    let mut bills: Vec<NodeBill> = Vec::new();
    for (node, exit) in exits {
        let i = match bills.iter().position(|b| b.node == node) {
            Some(i) => i,
            None => {
                bills.push(NodeBill {
                    node: node.to_string(),
                    ranks: 0,
                    cpu_nanos: 0,
                    charged: 0,
                });
                bills.len() - 1
            }
        };
        let b = &mut bills[i];
        b.ranks += 1;
        b.cpu_nanos = b.cpu_nanos.saturating_add(exit.cpu_nanos);
        b.charged = b.charged.saturating_add(exit.charged);
    }
    bills
}
