//! The node table: every announcement datagram goes through
//! [`NodeTable::ingest`], which keeps the newest announcement of each sender
//! heard within the window (by default three of the sender's announcement
//! periods) and drops, and counts by [`DropReason`], whatever is malformed,
//! oversized, from a foreign cluster, stale (not newer than what is known,
//! see [`Announcement::supersedes`]) or beyond the table's size limit. No
//! bytes make it panic. Time is passed in; nothing here reads a clock.
//!
//! Nodes are kept apart from the other services (selectors, the account
//! service), which are kept only so clients can find them; a service is
//! known by its kind, name and address together, because several selectors
//! may share one certificate name (`vexecd`) and must not replace, or be
//! dropped as stale against, each other. Nodes live in a
//! dense array with a name index, and what selection reads of each (its
//! [`Hot`] record) sits in a parallel array of small records, so a select
//! over 10,000 nodes scans half a megabyte rather than chasing pointers.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proto::announce::{AnnounceError, Announcement, Kind, NodeStatus};

use crate::profile::summary::Summary;

mod cluster;
mod counters;

pub use cluster::{ClusterFilter, Network};
pub use counters::{Accepted, Counters, DropReason, Dropped};

/// How the table behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableConfig {
    /// A sender is forgotten after this many of its periods without an
    /// announcement.
    pub window_periods: u32,
    /// Longest period believed (a sender claiming more is aged as if it
    /// announced this often), so a forged huge period cannot pin an entry.
    pub max_period: Duration,
    /// Most senders kept; a new sender beyond this is dropped.
    pub max_entries: usize,
    /// Which cluster to listen to.
    pub cluster: ClusterFilter,
    /// Whether a live node's move to another address or incarnation waits for
    /// proof: the announcement is held ([`NodeTable::take_unproven`]) and the
    /// node stays listed where it was until the caller proves the claim and
    /// hands it back ([`NodeTable::ingest_proven`]). The daemon proves by a TLS
    /// handshake with the node's certificate; a simulation trusts every move.
    pub prove_moves: bool,
}

impl Default for TableConfig {
    fn default() -> Self {
        TableConfig {
            window_periods: 3,
            max_period: Duration::from_secs(30),
            max_entries: 100_000,
            cluster: ClusterFilter::default(),
            prove_moves: false,
        }
    }
}

/// Most announcements held awaiting proof; more are dropped (and offered again by
/// the node's next announcement).
pub const MAX_UNPROVEN: usize = 256;

/// Whether `new` moves the node `old` announced: another address or incarnation.
pub fn moves(old: &Announcement, new: &Announcement) -> bool {
    old.addr != new.addr || old.incarnation != new.incarnation
}

/// One sender as known to the table.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its newest announcement.
    pub announcement: Announcement,
    /// When that announcement arrived.
    pub heard: Instant,
    /// Where the datagram came from, when known.
    pub source: Option<IpAddr>,
    /// The node's availability summary, when one was given.
    pub summary: Option<Arc<Summary>>,
}

impl Entry {
    /// The node's market state (`None` for selectors and the account service).
    pub fn status(&self) -> Option<&NodeStatus> {
        match &self.announcement.kind {
            Kind::Node(s) => Some(s),
            _ => None,
        }
    }

    /// Seconds since the announcement arrived.
    pub fn age(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.heard)
    }
}

/// Idle CPUs of a node as announced, in thousandths: the smaller of what it
/// measured idle on its own CPUs over its last period and its CPUs less its
/// market jobs' runnable threads (so a node that has just taken work, which
/// announces at once, is not counted idle until its measurement catches up).
/// The load average is left out: it is the whole machine's, and a node may
/// own only some of the machine's CPUs.
pub fn idle_milli(s: &NodeStatus) -> u32 {
    s.cpus
        .saturating_mul(1000)
        .saturating_sub(s.runnable.saturating_mul(1000))
        .min(s.idle_milli)
}

/// What selection reads of a node, packed together.
#[derive(Debug, Clone)]
pub struct Hot {
    /// Forgotten after this instant (last heard plus the window).
    pub deadline: Instant,
    /// Announced price.
    pub price: i64,
    /// Announced CPUs.
    pub cpus: u32,
    /// Announced load average times 1000.
    pub load_milli: u32,
    /// Idle CPUs in thousandths (see [`idle_milli`]).
    pub idle_milli: u32,
    /// Speed in thousandths (1000 without a summary).
    pub speed_milli: u32,
    /// A hash of the name: the last tie-break, the same on every selector.
    pub name_hash: u64,
    /// The availability summary, when given.
    pub summary: Option<Arc<Summary>>,
}

fn speed_milli(s: &Summary) -> u32 {
    (s.speed() * 1000.0).round() as u32
}

fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The node table.
#[derive(Debug, Clone)]
pub struct NodeTable {
    config: TableConfig,
    index: HashMap<String, usize>,
    entries: Vec<Entry>,
    hot: Vec<Hot>,
    services: HashMap<(u8, String, SocketAddr), Entry>,
    unproven: Vec<(Announcement, Option<IpAddr>)>,
    counters: Counters,
}

fn service_tag(kind: &Kind) -> u8 {
    match kind {
        Kind::Node(_) => 0,
        Kind::Selector => 1,
        Kind::Account => 2,
        Kind::Batch => 3,
    }
}

impl NodeTable {
    /// An empty table.
    pub fn new(config: TableConfig) -> NodeTable {
        NodeTable {
            config,
            index: HashMap::new(),
            entries: Vec::new(),
            hot: Vec::new(),
            services: HashMap::new(),
            unproven: Vec::new(),
            counters: Counters::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    /// What was accepted and dropped so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// How long a sender stays known after its announcement `a`.
    pub fn window_of(&self, a: &Announcement) -> Duration {
        Duration::from_millis(a.period_ms as u64).min(self.config.max_period)
            * self.config.window_periods
    }

    fn live(&self, e: &Entry, now: Instant) -> bool {
        e.age(now) <= self.window_of(&e.announcement)
    }

    /// Take one datagram received from `source` (when known) at `now`.
    pub fn ingest(
        &mut self,
        datagram: &[u8],
        source: Option<IpAddr>,
        now: Instant,
    ) -> Result<Accepted, Dropped> {
        self.ingest_decoded(Announcement::decode(datagram), source, now)
    }

    /// Take the outcome of [`Announcement::decode`] on a datagram (so a
    /// caller sharing the table can decode before taking its lock); a
    /// decoding error is counted as [`ingest`](NodeTable::ingest) would.
    pub fn ingest_decoded(
        &mut self,
        decoded: Result<Announcement, AnnounceError>,
        source: Option<IpAddr>,
        now: Instant,
    ) -> Result<Accepted, Dropped> {
        match decoded {
            Ok(a) => self.ingest_announcement(a, source, now),
            Err(e) => {
                let reason = match e {
                    AnnounceError::Oversized { .. } => DropReason::Oversized,
                    _ => DropReason::Malformed,
                };
                self.counters.count(reason);
                Err(Dropped {
                    reason,
                    error: Some(e),
                })
            }
        }
    }

    /// Take an announcement already decoded (and so validated).
    pub fn ingest_announcement(
        &mut self,
        a: Announcement,
        source: Option<IpAddr>,
        now: Instant,
    ) -> Result<Accepted, Dropped> {
        let result = self.admit(a, source, now, false);
        match &result {
            Ok(_) => self.counters.stats.accepted += 1,
            Err(d) => self.counters.count(d.reason),
        }
        result
    }

    /// Announcements of live nodes moving to another address or incarnation,
    /// held since the last call because [`TableConfig::prove_moves`] is set, with
    /// the address each came from. At most one per (node, address, incarnation):
    /// the newest.
    pub fn take_unproven(&mut self) -> Vec<(Announcement, Option<IpAddr>)> {
        std::mem::take(&mut self.unproven)
    }

    /// Take an announcement whose move the caller proved: believed as if
    /// `prove_moves` were off (it is still dropped as stale when a newer
    /// announcement of the node arrived meanwhile).
    pub fn ingest_proven(
        &mut self,
        a: Announcement,
        source: Option<IpAddr>,
        now: Instant,
    ) -> Result<Accepted, Dropped> {
        let result = self.admit(a, source, now, true);
        match &result {
            Ok(_) => self.counters.stats.accepted += 1,
            Err(d) => self.counters.count(d.reason),
        }
        result
    }

    fn hold_unproven(&mut self, a: Announcement, source: Option<IpAddr>) {
        let same = |h: &Announcement| h.name == a.name && !moves(h, &a);
        match self.unproven.iter().position(|(h, _)| same(h)) {
            Some(i) if a.supersedes(&self.unproven[i].0) => self.unproven[i] = (a, source),
            Some(_) => {}
            None if self.unproven.len() < MAX_UNPROVEN => self.unproven.push((a, source)),
            None => {}
        }
    }

    fn admit(
        &mut self,
        a: Announcement,
        source: Option<IpAddr>,
        now: Instant,
        proven: bool,
    ) -> Result<Accepted, Dropped> {
        let drop = |reason| {
            Err(Dropped {
                reason,
                error: None,
            })
        };
        if !self.config.cluster.admits(&a, source) {
            return drop(DropReason::ForeignCluster);
        }
        let is_node = matches!(a.kind, Kind::Node(_));
        let known = if is_node {
            self.index.get(&a.name).map(|&i| &self.entries[i])
        } else {
            self.services
                .get(&(service_tag(&a.kind), a.name.clone(), a.addr))
        };
        let summary = match (&a.summary, known) {
            (None, _) => None,
            (Some(raw), Some(old)) if old.announcement.summary.as_ref() == Some(raw) => {
                old.summary.clone()
            }
            (Some(raw), _) => match Summary::decode(raw) {
                Ok(s) => Some(Arc::new(s)),
                Err(e) => {
                    return Err(Dropped {
                        reason: DropReason::Malformed,
                        error: Some(AnnounceError::BadField {
                            field: "summary",
                            reason: e.to_string(),
                        }),
                    });
                }
            },
        };
        let accepted = match known {
            Some(old) if self.live(old, now) => {
                if !a.supersedes(&old.announcement) {
                    return drop(DropReason::Stale);
                }
                if is_node && !proven && self.config.prove_moves && moves(&old.announcement, &a) {
                    self.hold_unproven(a, source);
                    return drop(DropReason::Unproven);
                }
                Accepted::Updated
            }
            // Forgotten (window passed): a restart with a smaller
            // incarnation is believed again.
            Some(_) => Accepted::New,
            None => {
                if self.len() >= self.config.max_entries {
                    self.expire(now);
                    if self.len() >= self.config.max_entries {
                        return drop(DropReason::TableFull);
                    }
                }
                Accepted::New
            }
        };
        let deadline = now + self.window_of(&a);
        if let Kind::Node(status) = a.kind {
            match self.index.get(&a.name) {
                Some(&i) => {
                    // The summary stays across updates of the same sender.
                    let h = &mut self.hot[i];
                    h.deadline = deadline;
                    h.price = status.price;
                    h.cpus = status.cpus;
                    h.load_milli = status.load_milli;
                    h.idle_milli = idle_milli(&status);
                    let e = &mut self.entries[i];
                    // A node may leave its summary out of most
                    // announcements: the last one given stays.
                    let raw = e.announcement.summary.take();
                    e.announcement = a;
                    if e.announcement.summary.is_none() {
                        e.announcement.summary = raw;
                    }
                    e.heard = now;
                    e.source = source;
                    if let Some(s) = summary {
                        h.speed_milli = speed_milli(&s);
                        h.summary = Some(s.clone());
                        e.summary = Some(s);
                    }
                }
                None => {
                    self.index.insert(a.name.clone(), self.entries.len());
                    self.hot.push(Hot {
                        deadline,
                        price: status.price,
                        cpus: status.cpus,
                        load_milli: status.load_milli,
                        idle_milli: idle_milli(&status),
                        speed_milli: summary.as_deref().map_or(1000, speed_milli),
                        name_hash: name_hash(&a.name),
                        summary: summary.clone(),
                    });
                    self.entries.push(Entry {
                        announcement: a,
                        heard: now,
                        source,
                        summary,
                    });
                }
            }
        } else {
            let key = (service_tag(&a.kind), a.name.clone(), a.addr);
            self.services.insert(
                key,
                Entry {
                    announcement: a,
                    heard: now,
                    source,
                    summary: None,
                },
            );
        }
        Ok(accepted)
    }

    /// Attach a node's availability summary (kept across its later
    /// announcements). Returns false when the node is not known.
    pub fn set_summary(&mut self, name: &str, summary: Arc<Summary>) -> bool {
        match self.index.get(name) {
            Some(&i) => {
                self.hot[i].speed_milli = speed_milli(&summary);
                self.hot[i].summary = Some(summary.clone());
                self.entries[i].summary = Some(summary);
                true
            }
            None => false,
        }
    }

    /// Forget every sender not heard within its window; returns how many.
    /// Readers already ignore such senders, so calling this once a period
    /// only bounds memory.
    pub fn expire(&mut self, now: Instant) -> usize {
        let before = self.len();
        let mut i = 0;
        while i < self.hot.len() {
            if self.hot[i].deadline >= now {
                i += 1;
                continue;
            }
            let gone = self.entries.swap_remove(i);
            self.hot.swap_remove(i);
            self.index.remove(&gone.announcement.name);
            if let Some(moved) = self.entries.get(i) {
                self.index.insert(moved.announcement.name.clone(), i);
            }
        }
        let (window_periods, max_period) = (self.config.window_periods, self.config.max_period);
        self.services.retain(|_, e| {
            e.age(now)
                <= Duration::from_millis(e.announcement.period_ms as u64).min(max_period)
                    * window_periods
        });
        let gone = before - self.len();
        self.counters.stats.forgotten += gone as u64;
        gone
    }

    /// Nodes heard within their window, in no particular order.
    pub fn nodes(&self, now: Instant) -> impl Iterator<Item = &Entry> {
        self.entries
            .iter()
            .zip(&self.hot)
            .filter(move |(_, h)| h.deadline >= now)
            .map(|(e, _)| e)
    }

    /// The selection records of live nodes, with their positions (for [`NodeTable::entry`]).
    pub fn hot(&self, now: Instant) -> impl Iterator<Item = (usize, &Hot)> {
        self.hot
            .iter()
            .enumerate()
            .filter(move |(_, h)| h.deadline >= now)
    }

    /// Length of the node array (live or not yet expired).
    pub(crate) fn hot_len(&self) -> usize {
        self.hot.len()
    }

    /// The entry at a position given by [`NodeTable::hot`].
    pub fn entry(&self, position: usize) -> &Entry {
        &self.entries[position]
    }

    /// Position of a node, live or not.
    pub(crate) fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// One node, if heard within its window.
    pub fn node(&self, name: &str, now: Instant) -> Option<&Entry> {
        let &i = self.index.get(name)?;
        (self.hot[i].deadline >= now).then(|| &self.entries[i])
    }

    /// Selectors heard within their window.
    pub fn selectors(&self, now: Instant) -> impl Iterator<Item = &Entry> {
        self.services
            .iter()
            .filter(move |((t, _, _), e)| *t == 1 && self.live(e, now))
            .map(|(_, e)| e)
    }

    /// Account services heard within their window.
    pub fn account_services(&self, now: Instant) -> impl Iterator<Item = &Entry> {
        self.services
            .iter()
            .filter(move |((t, _, _), e)| *t == 2 && self.live(e, now))
            .map(|(_, e)| e)
    }

    /// Batch queues heard within their window.
    pub fn batch_services(&self, now: Instant) -> impl Iterator<Item = &Entry> {
        self.services
            .iter()
            .filter(move |((t, _, _), e)| *t == 3 && self.live(e, now))
            .map(|(_, e)| e)
    }

    /// Senders held (live or not yet expired).
    pub fn len(&self) -> usize {
        self.entries.len() + self.services.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The announced address of a live node.
    pub fn addr_of(&self, name: &str, now: Instant) -> Option<SocketAddr> {
        self.node(name, now).map(|e| e.announcement.addr)
    }
}
