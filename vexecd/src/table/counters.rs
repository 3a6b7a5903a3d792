//! What happened to each datagram: accepted (new or updated sender) or
//! dropped for one [`DropReason`], and the running [`Counters`].

use proto::announce::AnnounceError;

/// Why a datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DropReason {
    /// Not a well-formed announcement (magic, version, encoding, fields).
    Malformed,
    /// Over the datagram size limit.
    Oversized,
    /// From a sender outside the configured cluster.
    ForeignCluster,
    /// Not newer than the announcement already held for that sender.
    Stale,
    /// A new sender while the table is full.
    TableFull,
    /// A live node's move to another address or incarnation, held until proven.
    Unproven,
}

/// A dropped datagram: the reason, and the decoding error when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// Why.
    pub reason: DropReason,
    /// The decoding error, for malformed and oversized datagrams.
    pub error: Option<AnnounceError>,
}

/// What an accepted announcement did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// A sender not known (or forgotten) before.
    New,
    /// A newer announcement of a known sender.
    Updated,
}

/// Counts of what the table did since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Announcements accepted.
    pub accepted: u64,
    /// Dropped as malformed.
    pub malformed: u64,
    /// Dropped as oversized.
    pub oversized: u64,
    /// Dropped as from a foreign cluster.
    pub foreign_cluster: u64,
    /// Dropped as stale.
    pub stale: u64,
    /// Dropped because the table was full.
    pub table_full: u64,
    /// Moves of live nodes held for proof (each proven one is then accepted).
    pub unproven: u64,
    /// Senders forgotten after their window.
    pub forgotten: u64,
}

impl Counters {
    /// All datagrams dropped.
    pub fn dropped(&self) -> u64 {
        self.malformed
            + self.oversized
            + self.foreign_cluster
            + self.stale
            + self.table_full
            + self.unproven
    }

    pub(crate) fn count(&mut self, r: DropReason) {
        let c = match r {
            DropReason::Malformed => &mut self.malformed,
            DropReason::Oversized => &mut self.oversized,
            DropReason::ForeignCluster => &mut self.foreign_cluster,
            DropReason::Stale => &mut self.stale,
            DropReason::TableFull => &mut self.table_full,
            DropReason::Unproven => &mut self.unproven,
        };
        *c += 1;
    }
}
