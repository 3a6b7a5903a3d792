//! The records behind the scheduler: client ids and views, departure tokens, errors, the
//! per-client state and the heap entry ordered by (pass, id).

use std::fmt;

/// The virtual time of one quantum for a client holding one ticket (2^64).
pub const STRIDE1: i128 = 1 << 64;

/// The most tickets one client may hold in the scheduler (2^32; strides stay at least 2^32).
pub const MAX_CLIENT_TICKETS: u64 = 1 << 32;

/// A client's name; ties between equal passes go to the lower id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(pub u64);

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "client {}", self.0)
    }
}

/// Why the scheduler refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchedError {
    /// A scheduler needs at least one CPU.
    #[error("a stride scheduler needs at least one CPU")]
    NoCpus,
    /// The client is already scheduled.
    #[error("{0} is already scheduled; leave before joining again")]
    Duplicate(ClientId),
    /// The client is not scheduled.
    #[error("{0} is not scheduled")]
    Unknown(ClientId),
    /// The scheduler already holds [`super::MAX_CLIENTS`] clients.
    #[error("{0} cannot join: the scheduler is full")]
    Full(ClientId),
    /// Tickets out of range.
    #[error("{id} asked for {tickets} tickets; use 1 to {MAX_CLIENT_TICKETS}")]
    Tickets {
        /// The client.
        id: ClientId,
        /// The refused ticket count.
        tickets: u64,
    },
}

/// A client that left: what it needs to come back with neither windfall nor loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Departed {
    pub(super) id: ClientId,
    pub(super) tickets: u64,
    pub(super) remain: i128,
}

impl Departed {
    /// The client's id.
    pub fn id(&self) -> ClientId {
        self.id
    }
    /// The tickets it held.
    pub fn tickets(&self) -> u64 {
        self.tickets
    }
    /// Its pass minus the global pass when it left.
    pub fn remain(&self) -> i128 {
        self.remain
    }
}

/// A read-only view of one client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientView {
    /// The client's id.
    pub id: ClientId,
    /// Tickets held.
    pub tickets: u64,
    /// Runnable threads (zero: asleep).
    pub demand: u32,
    /// Quanta received since it joined (a CPU for one quantum counts one).
    pub received: u64,
}

#[derive(Clone, Debug)]
pub(super) struct Client {
    pub(super) id: ClientId,
    pub(super) tickets: u64,
    pub(super) stride: i128,
    /// Valid while runnable (demand > 0).
    pub(super) pass: i128,
    /// Valid while asleep (demand == 0).
    pub(super) remain: i128,
    pub(super) demand: u32,
    pub(super) used: u32,
    pub(super) received: u64,
}

/// A dispatch queue entry; the lowest (pass, id) runs first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) pass: i128,
    pub(super) id: u64,
    pub(super) slot: u32,
}

impl Entry {
    /// Whether `self` runs before `other`: lower pass, then lower id.
    #[inline]
    pub(super) fn before(&self, other: &Entry) -> bool {
        self.pass < other.pass || (self.pass == other.pass && self.id < other.id)
    }
}

pub(super) fn stride_of(id: ClientId, tickets: u64) -> Result<i128, SchedError> {
    if tickets == 0 || tickets > MAX_CLIENT_TICKETS {
        return Err(SchedError::Tickets { id, tickets });
    }
    Ok(STRIDE1 / i128::from(tickets))
}

pub(super) fn view(c: &Client) -> ClientView {
    ClientView {
        id: c.id,
        tickets: c.tickets,
        demand: c.demand,
        received: c.received,
    }
}
