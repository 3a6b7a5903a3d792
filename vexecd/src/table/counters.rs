//! What happened to each datagram: accepted (new or updated sender) or
//! dropped for one [`DropReason`], and the running [`Counters`].

use proto::announce::AnnounceError;
use proto::select::SelectorStats;

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

/// Counts of what the table did since it started: the counts a selector
/// reports ([`SelectorStats`]: accepted, dropped by reason, forgotten; the
/// table leaves its `nodes`, `services` and `selects` at 0, the daemon fills
/// them in), and the moves held for proof, which only the metrics show.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// What a `Stats` request reports of the table.
    pub stats: SelectorStats,
    /// Moves of live nodes held for proof (each proven one is then accepted).
    pub unproven: u64,
}

impl Counters {
    /// All datagrams dropped.
    pub fn dropped(&self) -> u64 {
        self.stats.dropped().iter().map(|(_, n)| n).sum::<u64>() + self.unproven
    }

    pub(crate) fn count(&mut self, r: DropReason) {
        let s = &mut self.stats;
        let c = match r {
            DropReason::Malformed => &mut s.malformed,
            DropReason::Oversized => &mut s.oversized,
            DropReason::ForeignCluster => &mut s.foreign_cluster,
            DropReason::Stale => &mut s.stale,
            DropReason::TableFull => &mut s.table_full,
            DropReason::Unproven => &mut self.unproven,
        };
        *c += 1;
    }
}
