//! The jobs running on this node: one entry per rank, keyed by job id and rank, holding
//! the owner, the job cgroup, the process group and a control channel to the session
//! that runs it. Registering a rank also enters it in the node's [`Market`] (which owns
//! bids, metering and the CPU weights); dropping its [`Slot`] takes it out.
//!
//! Admin requests go through here too: [`Registry::list`] shows a user their own ranks
//! and an admin all of them; [`Registry::signal`] forwards a signal to every matching
//! rank's session, which delivers it (or, for `KILL`, destroys the rank's cgroup).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use certs::{PeerIdentity, Role};
use proto::node::{JobId, Launch, Signal};
use tokio::sync::mpsc;

use crate::cgroup::JobCgroups;
use crate::control::Control;
use crate::market::Market;
use crate::sys::ProcessId;

/// How many controls may wait for one rank's session. The queue is fed only by
/// [`Registry::signal`] (admin `Kill` requests; a client's own `Signal` and `Resize`
/// frames are handled in its session loop and never queued), but a peer repeating
/// `Kill` while the rank's loop is busy must not grow rexecd's memory: past this many,
/// further signals for that rank are dropped and not counted as delivered.
pub const CONTROL_QUEUE: usize = 32;

/// Why a rank could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The same rank of the same job is already running here.
    #[error("rank {rank} of job {job} is already running on this node")]
    Duplicate {
        /// The job.
        job: JobId,
        /// The rank.
        rank: u32,
    },
    /// The user already runs as many ranks here as the node allows.
    #[error(
        "user {user} already runs {limit} ranks on this node, its limit (max_ranks_per_user); \
         wait for some to end or use another node"
    )]
    UserLimit {
        /// The user.
        user: String,
        /// The limit.
        limit: usize,
    },
    /// Another user owns a job with this id.
    #[error("job id {job} is in use by another user on this node; pick a new job id")]
    NotOwner {
        /// The job.
        job: JobId,
    },
}

/// One running rank's identity (its market state is in the [`Market`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankInfo {
    /// Job id.
    pub job: JobId,
    /// Rank.
    pub rank: u32,
    /// Ranks in the job.
    pub nranks: u32,
    /// Unix user it runs as.
    pub owner: String,
    /// argv\[0\].
    pub program: String,
    /// The job cgroup's id.
    pub cgroup: u64,
    /// Milliseconds since it started.
    pub age_millis: u64,
    /// The queue that started it, for a rank of a signed batch job (charged by the
    /// queue, not here); `None` for a user's own launch.
    pub queue: Option<String>,
}

#[derive(Debug)]
struct Entry {
    info: RankInfo,
    started: Instant,
    pgid: Option<ProcessId>,
    control: mpsc::Sender<Control>,
}

#[derive(Debug, Default)]
struct Inner {
    next_cgroup: u64,
    ranks: HashMap<(JobId, u32), Entry>,
}

/// The node's running ranks.
#[derive(Debug)]
pub struct Registry {
    inner: Mutex<Inner>,
    cgroups: JobCgroups,
    market: Arc<Market>,
    max_ranks_per_user: usize,
}

/// A registered rank; dropping it removes the rank and re-balances the weights.
#[derive(Debug)]
pub struct Slot {
    registry: Arc<Registry>,
    key: (JobId, u32),
    cgroup: u64,
}

impl Registry {
    /// An empty registry over rexecd's job cgroups and market, with no limit on ranks
    /// per user.
    pub fn new(cgroups: JobCgroups, market: Arc<Market>) -> Registry {
        Registry {
            inner: Mutex::new(Inner::default()),
            cgroups,
            market,
            max_ranks_per_user: usize::MAX,
        }
    }

    /// The node's market.
    pub fn market(&self) -> &Arc<Market> {
        &self.market
    }

    /// The same registry, refusing a user's rank while `limit` of theirs run.
    pub fn with_max_ranks_per_user(self, limit: usize) -> Registry {
        Registry {
            max_ranks_per_user: limit,
            ..self
        }
    }

    /// The job cgroups.
    pub fn cgroups(&self) -> &JobCgroups {
        &self.cgroups
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the map half-updated (every
        // update is a single insert or remove), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers rank `launch.rank` of `launch.job` for `owner` at `bid` (already
    /// checked), gives it a fresh cgroup id and enters it in the market (a `batch`
    /// rank, of a signed job, uncharged by this node). Refuses a rank already running,
    /// a job id another user holds, and a rank of a user who already runs the most
    /// ranks allowed. A rank with an `account` is charged to that project.
    pub fn register(
        self: &Arc<Self>,
        launch: &Launch,
        owner: &str,
        account: Option<&str>,
        bid: money::Bid,
        control: mpsc::Sender<Control>,
        queue: Option<&str>,
    ) -> Result<Slot, RegistryError> {
        let batch = queue.is_some();
        let mut inner = self.lock();
        let key = (launch.job, launch.rank);
        if inner.ranks.contains_key(&key) {
            return Err(RegistryError::Duplicate {
                job: launch.job,
                rank: launch.rank,
            });
        }
        if inner
            .ranks
            .iter()
            .any(|(k, e)| k.0 == launch.job && e.info.owner != owner)
        {
            return Err(RegistryError::NotOwner { job: launch.job });
        }
        let running = inner
            .ranks
            .values()
            .filter(|e| e.info.owner == owner)
            .count();
        if running >= self.max_ranks_per_user {
            return Err(RegistryError::UserLimit {
                user: owner.to_string(),
                limit: self.max_ranks_per_user,
            });
        }
        inner.next_cgroup += 1;
        let cgroup = inner.next_cgroup;
        let info = RankInfo {
            job: launch.job,
            rank: launch.rank,
            nranks: launch.nranks,
            owner: owner.to_string(),
            program: launch.argv.first().cloned().unwrap_or_default(),
            cgroup,
            age_millis: 0,
            queue: queue.map(str::to_string),
        };
        let entry = Entry {
            info,
            started: Instant::now(),
            pgid: None,
            control: control.clone(),
        };
        inner.ranks.insert(key, entry);
        // Under the registry's lock, so the market never holds a rank the registry lacks.
        self.market
            .join(key, owner, account, cgroup, bid, control, batch);
        Ok(Slot {
            registry: Arc::clone(self),
            key,
            cgroup,
        })
    }

    /// Ranks visible to `peer`: all for an admin, the user's own for a user, the
    /// ranks a queue started for that queue (see [`visible_rank`]), none for other
    /// roles.
    pub fn list(&self, peer: &PeerIdentity) -> Vec<RankInfo> {
        let inner = self.lock();
        let mut out: Vec<RankInfo> = inner
            .ranks
            .values()
            .filter(|e| visible_rank(peer, &e.info))
            .map(|e| RankInfo {
                age_millis: u64::try_from(e.started.elapsed().as_millis()).unwrap_or(u64::MAX),
                ..e.info.clone()
            })
            .collect();
        out.sort_by_key(|i| (i.job, i.rank));
        out
    }

    /// Forwards `signal` to every rank of `job` visible to `peer`; returns how many
    /// took it (a rank whose control queue is full does not).
    pub fn signal(&self, peer: &PeerIdentity, job: JobId, signal: Signal) -> u32 {
        self.control(peer, job, Control::Signal(signal))
    }

    /// Sends `control` to every rank of `job` that `peer` may see; how many.
    pub fn control(&self, peer: &PeerIdentity, job: JobId, control: Control) -> u32 {
        let signal = &control;
        let inner = self.lock();
        let mut count = 0;
        for ((id, _), entry) in inner.ranks.iter() {
            if *id != job || !visible_rank(peer, &entry.info) {
                continue;
            }
            match entry.control.try_send(control.clone()) {
                Ok(()) => count += 1,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    tracing::warn!(job = %id, ?signal, "rank's control queue is full; request dropped");
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }
        count
    }

    /// Process group ids of every running rank (for diagnostics).
    pub fn process_groups(&self) -> Vec<ProcessId> {
        self.lock().ranks.values().filter_map(|e| e.pgid).collect()
    }

    /// Number of running ranks.
    pub fn len(&self) -> usize {
        self.lock().ranks.len()
    }

    /// True when no rank runs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether `peer` may see (and signal) `rank`: as [`visible`] by its owner, and a
/// service certificate also the signed ranks it started itself as a queue (rexecd
/// let it start them only if it is one of `[batch] queues`). A queue never sees a
/// user's own launches, nor another queue's ranks.
pub fn visible_rank(peer: &PeerIdentity, rank: &RankInfo) -> bool {
    match (&peer.role, &rank.queue) {
        (Role::Service, Some(queue)) => *queue == peer.name,
        _ => visible(peer, &rank.owner),
    }
}

/// Whether `peer` may see (and signal, and re-bid) a rank of `owner`: an admin all,
/// a user their own.
pub fn visible(peer: &PeerIdentity, owner: &str) -> bool {
    match peer.role {
        Role::Admin => true,
        Role::User => peer.name == owner,
        _ => false,
    }
}

impl Slot {
    /// The rank's cgroup id.
    pub fn cgroup(&self) -> u64 {
        self.cgroup
    }

    /// Records the rank's process group once it runs.
    pub fn set_pgid(&self, pgid: ProcessId) {
        if let Some(entry) = self.registry.lock().ranks.get_mut(&self.key) {
            entry.pgid = Some(pgid);
        }
    }
}

impl Slot {
    /// The rank's key.
    pub fn key(&self) -> (JobId, u32) {
        self.key
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.registry.lock().ranks.remove(&self.key);
        // A rank that ended properly has left the market already (with its final
        // usage); anything else leaves now, its last debit still sent.
        self.registry.market.leave_soon(self.key);
    }
}

#[cfg(test)]
pub(crate) mod tests;
