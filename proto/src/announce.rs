//! The multicast announcement: one UDP datagram in which a node, a selector
//! (vexecd) or the account service (accountd) says who it is, where to reach
//! it and, for a node, what its CPUs cost right now.
//!
//! Layout: the 4 magic bytes `RXMA`, one version byte ([`ANNOUNCE_VERSION`]),
//! then the postcard encoding of [`Announcement`]. A datagram is at most
//! [`MAX_DATAGRAM`] bytes (it must fit one packet on any path). Decoding
//! refuses anything else with a typed [`AnnounceError`] and never panics.
//!
//! Announcements are hints, not identity: whoever connects to the announced
//! address must still check the certificate names the announced `name`.
//! A sender picks a new, larger `incarnation` each time it starts (its start
//! time in Unix microseconds does) and counts `seq` up from 0 within an
//! incarnation, so receivers can drop stale or replayed datagrams with
//! [`Announcement::supersedes`]. A layout change bumps the version byte;
//! during a transition a sender may send both versions.
//!
//! Every announcement names its `cluster`, so two clusters may share a
//! group and port (or a selector its unicast port) without mixing. A node
//! may attach the compact summary of its weekly availability profile
//! (`summary`, at most [`MAX_SUMMARY`] bytes, laid out by vexecd's
//! `profile::summary`); this crate carries it as opaque bytes.
//!
//! Version history: 1 had no cluster, idle CPUs, free memory or summary; 2 had
//! no charging rate or contention flag (a receiver could not tell what a node
//! charges from its price).
//!
//! ```
//! use proto::announce::*;
//! let a = Announcement {
//!     cluster: DEFAULT_CLUSTER.into(),
//!     name: "node7".into(),
//!     addr: "10.0.0.7:7400".parse().unwrap(),
//!     incarnation: 1_700_000_000_000_000,
//!     seq: 42,
//!     period_ms: 1000,
//!     kind: Kind::Node(NodeStatus {
//!         cpus: 8, price: 3_000_000, charging: 3_000_000, contended: true,
//!         running_jobs: 2, runnable: 9, load_milli: 8_700, idle_milli: 0, free_mem_mib: 30_000,
//!     }),
//!     summary: None,
//! };
//! let datagram = a.encode().unwrap();
//! assert!(datagram.len() <= MAX_DATAGRAM);
//! assert_eq!(Announcement::decode(&datagram), Ok(a));
//! assert_eq!(Announcement::decode(b"junk"), Err(AnnounceError::WrongMagic));
//! assert_eq!(Announcement::decode(&datagram[..20]), Err(AnnounceError::Truncated));
//! ```

use std::net::{Ipv4Addr, SocketAddr};

use serde::{Deserialize, Serialize};

/// First bytes of every announcement.
pub const MAGIC: [u8; 4] = *b"RXMA";

/// Layout version this build writes and reads.
pub const ANNOUNCE_VERSION: u8 = 3;

/// Largest datagram sent or accepted, in bytes.
pub const MAX_DATAGRAM: usize = 1200;

/// Longest `name`, in bytes (a DNS name fits).
pub const MAX_NAME: usize = 253;

/// Longest `cluster`, in bytes.
pub const MAX_CLUSTER: usize = 64;

/// Cluster name used when none is configured.
pub const DEFAULT_CLUSTER: &str = "rexec";

/// Longest availability summary carried, in bytes.
pub const MAX_SUMMARY: usize = 600;

/// Suggested multicast group (organisation-local scope, RFC 2365).
pub const DEFAULT_GROUP: Ipv4Addr = Ipv4Addr::new(239, 255, 77, 1);

/// Suggested UDP port for announcements.
pub const DEFAULT_PORT: u16 = 7477;

const HEADER: usize = MAGIC.len() + 1;

/// One announcement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Announcement {
    /// The cluster the sender belongs to (receivers ignore other clusters).
    pub cluster: String,
    /// The sender's name, as in its certificate.
    pub name: String,
    /// TCP address where the sender accepts TLS connections. An IPv6
    /// address travels without flow info or scope id, so announce a global
    /// or unique-local address, not a link-local one.
    pub addr: SocketAddr,
    /// Grows each time the sender starts.
    pub incarnation: u64,
    /// Counts announcements within one incarnation.
    pub seq: u64,
    /// How often the sender announces, in milliseconds, at least 1
    /// (receivers forget a sender after missing a few periods).
    pub period_ms: u32,
    /// What the sender is, with what only that kind reports.
    pub kind: Kind,
    /// A node's availability summary (opaque here; only nodes send one).
    pub summary: Option<Vec<u8>>,
}

/// What kind of service announces itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// A node running rexecd, with its market state.
    Node(NodeStatus),
    /// A selector (vexecd).
    Selector,
    /// The account service (accountd).
    Account,
    /// The batch queue (batchd). Appended without a version bump: a receiver
    /// older than it drops these datagrams as malformed and keeps every other.
    Batch,
}

/// A node's market state at the time of the announcement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeStatus {
    /// CPUs jobs may use (at least 1).
    pub cpus: u32,
    /// The node's price: the sum of the bids competing on it (its runnable
    /// ranks' bids in force), micro-credits per minute, whether or not they pay.
    pub price: i64,
    /// What its ranks pay together right now, micro-credits per minute: 0
    /// while charging does not apply (a rank alone, or idle CPUs under the
    /// `contention` policy). Not a price: see `stride::node_market`.
    pub charging: i64,
    /// Whether the node is contended (its runnable demand exceeds its CPUs).
    pub contended: bool,
    /// Jobs (ranks) running.
    pub running_jobs: u32,
    /// Runnable threads of those jobs (their CPU demand).
    pub runnable: u32,
    /// One-minute load average times 1000.
    pub load_milli: u32,
    /// CPUs left idle over the last announcement period, times 1000
    /// (measured by the node: its CPUs less the CPU time used by anything).
    pub idle_milli: u32,
    /// Memory available for new work, MiB.
    pub free_mem_mib: u64,
}

/// Why a datagram is not a valid announcement (or an announcement cannot be sent).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnnounceError {
    /// Longer than [`MAX_DATAGRAM`].
    #[error("announcement of {len} bytes is over the {max}-byte limit")]
    Oversized {
        /// The length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Does not start with [`MAGIC`]: not ours (another program on the group?).
    #[error(
        "datagram is not a rexec announcement (wrong magic bytes); check nothing else uses this group and port"
    )]
    WrongMagic,
    /// A layout version this build does not read.
    #[error(
        "announcement layout version {got} is not supported (this build reads {ANNOUNCE_VERSION}); upgrade the older daemon"
    )]
    WrongVersion {
        /// The version byte received.
        got: u8,
    },
    /// Ends before the announcement does.
    #[error("announcement is truncated")]
    Truncated,
    /// A field is malformed or out of range.
    #[error("announcement field `{field}` is invalid: {reason}")]
    BadField {
        /// Which field (`body` when the encoding itself is broken).
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

fn bad(field: &'static str, reason: impl Into<String>) -> AnnounceError {
    AnnounceError::BadField {
        field,
        reason: reason.into(),
    }
}

impl Announcement {
    /// Check the fields are in range (also done by `encode` and `decode`).
    pub fn validate(&self) -> Result<(), AnnounceError> {
        if self.cluster.is_empty() || self.cluster.len() > MAX_CLUSTER {
            return Err(bad(
                "cluster",
                format!("length {} is not 1..={MAX_CLUSTER}", self.cluster.len()),
            ));
        }
        if self
            .cluster
            .chars()
            .any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(bad("cluster", "contains whitespace or control characters"));
        }
        if self.name.is_empty() || self.name.len() > MAX_NAME {
            return Err(bad(
                "name",
                format!("length {} is not 1..={MAX_NAME}", self.name.len()),
            ));
        }
        if self
            .name
            .chars()
            .any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(bad("name", "contains whitespace or control characters"));
        }
        if self.addr.port() == 0 {
            return Err(bad("addr", "port 0"));
        }
        if self.period_ms == 0 {
            return Err(bad(
                "period_ms",
                "0; a sender announces at least every few seconds",
            ));
        }
        if let Kind::Node(node) = &self.kind {
            if node.cpus == 0 {
                return Err(bad("cpus", "a node has at least one CPU"));
            }
            if node.price < 0 {
                return Err(bad("price", format!("{} is negative", node.price)));
            }
            if node.charging < 0 {
                return Err(bad("charging", format!("{} is negative", node.charging)));
            }
            if node.idle_milli > node.cpus.saturating_mul(1000) {
                return Err(bad(
                    "idle_milli",
                    format!(
                        "{} is more than the node's {} CPUs",
                        node.idle_milli, node.cpus
                    ),
                ));
            }
        }
        if let Some(summary) = &self.summary {
            if !matches!(self.kind, Kind::Node(_)) {
                return Err(bad("summary", "only a node has an availability summary"));
            }
            if summary.len() > MAX_SUMMARY {
                return Err(bad(
                    "summary",
                    format!(
                        "{} bytes is over the {MAX_SUMMARY}-byte limit",
                        summary.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The datagram for this announcement.
    pub fn encode(&self) -> Result<Vec<u8>, AnnounceError> {
        self.validate()?;
        let mut out = Vec::with_capacity(128);
        out.extend_from_slice(&MAGIC);
        out.push(ANNOUNCE_VERSION);
        let out = postcard::to_extend(self, out).map_err(|e| bad("body", e.to_string()))?;
        if out.len() > MAX_DATAGRAM {
            return Err(AnnounceError::Oversized {
                len: out.len(),
                max: MAX_DATAGRAM,
            });
        }
        Ok(out)
    }

    /// Read a datagram.
    pub fn decode(datagram: &[u8]) -> Result<Announcement, AnnounceError> {
        if datagram.len() > MAX_DATAGRAM {
            return Err(AnnounceError::Oversized {
                len: datagram.len(),
                max: MAX_DATAGRAM,
            });
        }
        let magic_seen = datagram.len().min(MAGIC.len());
        if datagram[..magic_seen] != MAGIC[..magic_seen] {
            return Err(AnnounceError::WrongMagic);
        }
        if datagram.len() < HEADER {
            return Err(AnnounceError::Truncated);
        }
        if datagram[MAGIC.len()] != ANNOUNCE_VERSION {
            return Err(AnnounceError::WrongVersion {
                got: datagram[MAGIC.len()],
            });
        }
        let (a, rest): (Announcement, _) =
            postcard::take_from_bytes(&datagram[HEADER..]).map_err(|e| match e {
                postcard::Error::DeserializeUnexpectedEnd => AnnounceError::Truncated,
                e => bad("body", e.to_string()),
            })?;
        if !rest.is_empty() {
            return Err(bad("body", format!("{} bytes after the end", rest.len())));
        }
        a.validate()?;
        Ok(a)
    }

    /// True when `self` is a later announcement from the same sender than
    /// `older` (larger incarnation, or the same incarnation and larger seq).
    pub fn supersedes(&self, older: &Announcement) -> bool {
        (self.incarnation, self.seq) > (older.incarnation, older.seq)
    }
}
