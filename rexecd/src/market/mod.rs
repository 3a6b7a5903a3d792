//! The market on this node: bids checked where they are enforced, CPU metered every
//! tick, charges accrued under the node's policy and sent to accountd through the debit
//! journal, kernel weights kept at what the bids (and, closed loop, the measured
//! shares) say, bandwidth caps at the model's allocations or single-threaded jobs
//! confined to CPUs while contended (closed loop), and owners who run dry dropped to
//! bid 0.
//!
//! - [`book`]: the market state, the one source of truth for it (pure computation).
//! - [`control`]: the closed-loop share controller's law.
//! - [`placer`]: the thread that confines placed jobs to their CPUs on schedule.
//! - [`credit`]: balance checks against accountd, with a short cache, and claims of
//!   signed batch ranks.
//! - [`meters`]: what the market counts as it works, for the metrics.
//! - `engine`: the engine task and its metering tick.
//!
//! [`Market`] is the handle sessions use; one engine task owns the kernel weights
//! (every write happens there, in order, on a blocking thread), runs the metering
//! ticks, sends debits and reads their receipts.

pub mod book;
pub mod control;
pub mod credit;
mod engine;
pub mod idle;
pub mod meters;
pub mod placer;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use clients::account::LearntAddress;
use ledger_client::debit::{DebitClient, DebitClientConfig, Settlement};
use ledger_client::journal::Charge;
use money::Bid;
use proto::account::{Debit, DebitKey, ErrorCode as AccountCode, MeterInterval};
use proto::node::{ErrorCode, ErrorReply, JobId};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

use crate::cgroup::{CpuQuota, JobCgroups, weights_for_tickets};
use crate::config::market_table::LedgerConfig;
use crate::config::{MarketConfig, ShareControl};
use crate::control::Control;
use book::{Book, Key, RankSample};
use credit::Credit;

/// Why the market could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MarketError {
    /// The debit journal could not be opened.
    #[error("{0}")]
    Journal(#[from] ledger_client::journal::JournalError),
    /// The journal's directory could not be created.
    #[error("cannot create the debit journal's directory {dir}: {source}")]
    JournalDir {
        /// The directory.
        dir: std::path::PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
}

enum Request {
    /// Write the weights the book says now; answer when they are written.
    Rebalance(Option<oneshot::Sender<()>>),
    /// Stop the engine.
    Stop,
}

/// Node-monotonic microseconds (`CLOCK_MONOTONIC`) for an [`Instant`].
#[derive(Debug, Clone, Copy)]
struct MonoClock {
    base: Instant,
    base_us: u64,
}

impl MonoClock {
    fn new() -> MonoClock {
        let base = Instant::now();
        let base_us = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
            .map(|t| {
                let d = Duration::from(t);
                u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
            })
            .unwrap_or(0);
        MonoClock { base, base_us }
    }

    fn micros(&self, at: Instant) -> u64 {
        let d = at.saturating_duration_since(self.base);
        self.base_us
            .saturating_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }
}

/// One rank as `ListJobs` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankView {
    /// Owner.
    pub owner: String,
    /// Bid asked for, micro-credits per minute.
    pub bid: Bid,
    /// Bid in force.
    pub effective_bid: Bid,
    /// Runnable threads at the last sample.
    pub runnable: u32,
    /// Model allocation, milli-CPUs.
    pub model_milli: u64,
    /// Measured over the last window, milli-CPUs.
    pub measured_milli: u64,
    /// CPU used so far (at the last sample), nanoseconds.
    pub usage_ns: u64,
    /// Charged so far, micro-credits.
    pub charged: i64,
}

/// The node's market; see the module docs.
pub struct Market {
    node: String,
    cfg: MarketConfig,
    book: Mutex<Book>,
    cgroups: JobCgroups,
    credit: Credit,
    debits: Option<DebitClient>,
    requests: mpsc::UnboundedSender<Request>,
    seq: AtomicU64,
    clock: MonoClock,
    engine: Mutex<Option<JoinHandle<()>>>,
    changed: Arc<Notify>,
    learnt: Option<LearntAddress>,
    meters: meters::MarketMeters,
    /// Reads the idle time of the node's CPUs.
    idle_clock: idle::IdleClock,
    /// Its reading at the last tick.
    idle_last: Mutex<Option<idle::IdleReading>>,
    /// Confines single-threaded jobs to CPUs (`share_control = "closed"` only).
    placer: Mutex<Option<placer::Placer>>,
}

/// Node `node`'s refusal of a bid that cannot be one (negative: a frame holding one does
/// not decode, `proto::FrameError::BadBid`), with its own code so that a client can tell
/// it from a malformed request.
pub fn refuse_bid(node: &str, e: &money::BidError) -> ErrorReply {
    let text = format!("node {node}: {e} (a zero bid runs on CPU no bidding job wants)");
    ErrorReply::new(ErrorCode::BadBid, text)
}

impl std::fmt::Debug for Market {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Market")
            .field("node", &self.node)
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

/// The debit client's settings for `ledger`: its journal, its accountd instances
/// (the first, then the others in turn), their certificate name, and the node's
/// certificate `connector`.
pub fn debit_config(ledger: &LedgerConfig, connector: TlsConnector) -> DebitClientConfig {
    let mut addresses = ledger.addresses.iter().cloned();
    let mut dc = DebitClientConfig::new(
        ledger.journal.clone(),
        addresses.next().unwrap_or_default(),
        connector,
    );
    dc.others = addresses.collect();
    dc.server_name = ledger.server_name.clone();
    dc
}

impl Market {
    /// Opens the journal (when a ledger is configured) and starts the engine. The
    /// `connector` (a node certificate) is used for accountd.
    pub async fn start(
        node: &str,
        cfg: MarketConfig,
        cgroups: JobCgroups,
        connector: Option<TlsConnector>,
    ) -> Result<Arc<Market>, MarketError> {
        let ledger = cfg.ledger.clone().zip(connector);
        // No address configured: accountd is learnt from its announcements.
        let learnt = ledger
            .as_ref()
            .filter(|(l, _)| l.addresses.is_empty())
            .map(|_| LearntAddress::new());
        let (debits, settlements) = match &ledger {
            Some((l, connector)) => {
                ensure_journal_dir(&l.journal)?;
                let mut dc = debit_config(l, connector.clone());
                dc.learnt = learnt.clone();
                let (client, rx) = DebitClient::start(dc).await?;
                log_replay(&l.journal, &client.pending_charges());
                (Some(client), Some(rx))
            }
            None => {
                tracing::warn!(
                    "no accountd configured ([market] accountd): jobs are metered and their \
                     charges shown, but nobody is charged and balances are not checked"
                );
                (None, None)
            }
        };
        let first_seq = next_seq_floor(debits.as_ref());
        let cfg_cpu_set = cfg.cpu_set.clone();
        let (tx, rx) = mpsc::unbounded_channel();
        let placer = (cfg.share_control == ShareControl::Closed)
            .then(|| {
                let cpus = match cgroups.cpus() {
                    Some(set) => set.iter().collect(),
                    None => crate::sys::affinity::own_cpus(),
                };
                placer::Placer::start(cgroups.clone(), cpus)
                    .inspect_err(|e| tracing::warn!(error = %e, "cannot start the placer: contended single-threaded jobs are capped instead"))
                    .ok()
            })
            .flatten();
        let market = Arc::new(Market {
            node: node.to_string(),
            credit: Credit::new(node, ledger, learnt.clone(), cfg.balance_cache),
            book: Mutex::new(Book::new(cfg.cpus, cfg.policy)),
            cfg,
            cgroups,
            debits,
            requests: tx,
            seq: AtomicU64::new(first_seq),
            clock: MonoClock::new(),
            engine: Mutex::new(None),
            changed: Arc::new(Notify::new()),
            learnt,
            meters: Default::default(),
            idle_clock: idle::IdleClock::new(cfg_cpu_set),
            idle_last: Mutex::new(None),
            placer: Mutex::new(placer),
        });
        let engine = tokio::spawn(Arc::clone(&market).run(rx, settlements));
        *market.engine.lock().unwrap_or_else(|e| e.into_inner()) = Some(engine);
        tracing::info!(node, cpus = market.cfg.cpus, policy = %market.cfg.policy,
            share_control = %market.cfg.share_control, "market open");
        Ok(market)
    }

    /// The settings.
    pub fn config(&self) -> &MarketConfig {
        &self.cfg
    }

    /// Notified whenever the market's state changes (a rank joins or leaves, a bid
    /// changes, an owner runs dry, the price or demand moves at a tick): the
    /// announcer sends at once.
    pub fn changes(&self) -> Arc<Notify> {
        Arc::clone(&self.changed)
    }

    /// accountd's address as learnt from its announcements; `None` when an address
    /// is configured (or no ledger is used), so nothing is to be learnt.
    pub fn learnt_accountd(&self) -> Option<&LearntAddress> {
        self.learnt.as_ref()
    }

    /// What the market has counted, for metrics.
    pub fn meters(&self) -> &meters::MarketMeters {
        &self.meters
    }

    /// Debits journaled and not yet settled by accountd (0 without a ledger).
    pub fn debits_pending(&self) -> usize {
        self.debits.as_ref().map_or(0, DebitClient::unsettled)
    }

    /// The node's state for announcements: CPUs, price, ranks, runnable demand.
    pub fn status(&self) -> book::MarketStatus {
        self.book().status()
    }

    /// The market state (held briefly: never across an await or a system call).
    pub fn book(&self) -> MutexGuard<'_, Book> {
        // Book updates keep it consistent at every step a panic could interrupt.
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `user` may bid `bid` micro-credits a minute here charged to
    /// `account` (`rexec -A`; `None` for its default project or personal
    /// account): as [`Market::check_bid`], and a member of the project with a
    /// positive balance there. Returns the account to charge, with the project's
    /// spending ceiling per job.
    pub async fn check_payer(
        &self,
        user: &str,
        account: Option<&str>,
        bid: Bid,
    ) -> Result<credit::Payer, ErrorReply> {
        self.check_rate(bid)?;
        self.credit.payer(user, account, bid).await
    }

    /// Whether `user` may bid `bid` micro-credits a minute here: within `max_rate`, and
    /// (when positive) with a positive balance.
    pub async fn check_bid(&self, user: &str, bid: Bid) -> Result<(), ErrorReply> {
        self.check_rate(bid)?;
        self.credit.check(user, bid).await
    }

    /// A signed batch rank's weight: its queue's bid, capped at `max_rate`. The queue
    /// charges the rank, not this node, so the cap only bounds the share it takes here;
    /// refusing it would fail a job whose utility bids high for reasons of its own.
    pub fn batch_rate(&self, bid: Bid) -> Bid {
        bid.min(self.cfg.max_rate)
    }

    /// Whether `bid` is a bid this node takes: within `max_rate` (a [`Bid`] is never
    /// negative; a negative one from the network never decodes, see [`refuse_bid`]).
    pub fn check_rate(&self, bid: Bid) -> Result<(), ErrorReply> {
        let node = &self.node;
        if bid > self.cfg.max_rate {
            let max = self.cfg.max_rate.micros_per_minute();
            let default = Bid::from_credits(crate::config::market_table::DEFAULT_MAX_RATE_CREDITS);
            let (before, after) = if self.cfg.max_rate == default {
                (
                    "the default max_rate of",
                    " (this node's configuration sets none)",
                )
            } else {
                ("the max_rate of", " set in this node's configuration")
            };
            return Err(ErrorReply::new(
                ErrorCode::BadBid,
                format!(
                    "node {node}: a bid of {} credits per minute is above {before} {} credits \
                     per minute{after}; bid less",
                    money::format_credits(bid.micros_per_minute()),
                    money::format_credits(max)
                ),
            ));
        }
        Ok(())
    }

    /// Claims a signed batch rank at accountd (see [`credit::Credit::claim`]).
    pub async fn claim(&self, claim: proto::account::Claim) -> Result<(), ErrorReply> {
        self.credit.claim(claim).await
    }

    /// Records a claimed rank's end at accountd (see [`credit::Credit::record_end`]).
    pub async fn record_end(
        &self,
        end: proto::account::RankEnd,
    ) -> Result<(), credit::EndNotRecorded> {
        self.credit.record_end(end).await
    }

    /// Adds a rank to the market; a `batch` rank is not charged here (its queue
    /// charges it; see [`book::RankState::batch`]); one with an `account` is
    /// charged to that project, for its owner.
    #[allow(clippy::too_many_arguments)]
    pub fn join(
        &self,
        key: Key,
        owner: &str,
        account: Option<&str>,
        cgroup: u64,
        bid: Bid,
        control: mpsc::Sender<Control>,
        batch: bool,
    ) {
        let mut book = self.book();
        book.join(key, owner, cgroup, bid, control, Instant::now());
        if batch {
            book.set_batch(&key);
        }
        if let Some(account) = account {
            book.set_account(&key, account.to_string());
        }
        drop(book);
        self.changed.notify_one();
    }

    /// Sets the most rank `key` may be charged (its share of its job's `--max-cost`);
    /// once its charges reach it, the rank runs at bid 0 and is told once.
    pub fn set_ceiling(&self, key: Key, ceiling: i64) {
        self.book().set_ceiling(&key, ceiling);
    }

    /// Writes the weights the market says now and waits until they are written.
    pub async fn rebalance(&self) {
        let (tx, rx) = oneshot::channel();
        if self.requests.send(Request::Rebalance(Some(tx))).is_ok() {
            let _ = rx.await;
        }
    }

    /// Asks for the weights to be written, without waiting.
    pub fn rebalance_soon(&self) {
        let _ = self.requests.send(Request::Rebalance(None));
    }

    /// Takes a rank whose first process has just exited out of competition (see
    /// [`Book::stop`]); the others' weights and caps follow at once.
    pub fn stop(&self, key: Key) {
        if self.book().stop(&key, Instant::now()) {
            self.changed.notify_one();
            self.rebalance_soon();
        }
    }

    /// Removes a rank whose cgroup used `usage` in all; charges its last moments, sends
    /// its last debit (journaled before this returns) and returns what it was charged in
    /// all. `None` when the rank had already left.
    pub async fn leave(&self, key: Key, usage: Option<Duration>) -> Option<i64> {
        let usage_ns = usage.map(|u| u64::try_from(u.as_nanos()).unwrap_or(u64::MAX));
        let departure = {
            let mut book = self.book();
            let used = book.get(&key).map(|r| {
                let ns = usage_ns.map_or(r.usage_ns, |u| r.usage_ns.max(u));
                (r.owner.clone(), ns)
            });
            let departure = book.leave(&key, usage_ns, Instant::now());
            // Counted under the book's lock, so a scrape sees the rank's CPU either
            // live in the book or among the ended ranks', never both or neither.
            if let (Some(_), Some((owner, ns))) = (&departure, used) {
                self.meters.rank_ended(&owner, ns);
            }
            departure
        };
        let departure = departure?;
        self.changed.notify_one();
        self.rebalance_soon();
        if let Some(d) = departure.debit {
            self.record(d).await;
        }
        Some(departure.charged)
    }

    /// Removes a rank without waiting (for a rank dropped without a proper end); its
    /// last debit is still sent.
    pub fn leave_soon(self: &Arc<Self>, key: Key) {
        if self.book().get(&key).is_none() {
            return;
        }
        let market = Arc::clone(self);
        tokio::spawn(async move {
            market.leave(key, None).await;
        });
    }

    /// Changes the bid of `job`'s ranks that `may` allows, after the same checks as a
    /// launch (for each owner). Returns how many ranks took the new bid.
    pub async fn rebid(
        &self,
        job: JobId,
        bid: Bid,
        may: impl Fn(&str) -> bool,
    ) -> Result<(u32, Bid), ErrorReply> {
        // Each owner with the account its ranks charge (a project's, or its own).
        let owners: Vec<(String, Option<String>)> = {
            let book = self.book();
            let mut o: Vec<(String, Option<String>)> = book
                .ranks()
                .filter(|((id, _), r)| *id == job && may(&r.owner))
                .map(|(_, r)| (r.owner.clone(), r.account.clone()))
                .collect();
            o.sort();
            o.dedup();
            o
        };
        if owners.is_empty() {
            return Ok((0, Bid::ZERO));
        }
        for (owner, account) in &owners {
            match account {
                None => self.check_bid(owner, bid).await?,
                Some(_) => drop(self.check_payer(owner, account.as_deref(), bid).await?),
            };
        }
        let (count, restored) = self.book().rebid(job, bid, |r| may(&r.owner));
        if count > 0 {
            self.changed.notify_one();
        }
        for control in restored {
            let _ = control.try_send(book::restored_notice(&self.node, bid));
        }
        self.rebalance().await;
        Ok((count, bid))
    }

    /// Ranks `visible` lets the caller see, with the node's state.
    pub fn list(&self, visible: impl Fn(&str) -> bool) -> (Vec<(Key, RankView)>, book::NodeView) {
        let book = self.book();
        let ranks = book
            .ranks()
            .filter(|(_, r)| visible(&r.owner))
            .map(|(k, r)| {
                (
                    *k,
                    RankView {
                        owner: r.owner.clone(),
                        bid: r.bid,
                        effective_bid: r.effective_bid(),
                        runnable: r.demand,
                        model_milli: r.model_milli,
                        measured_milli: r.measured_milli(),
                        usage_ns: r.usage_ns,
                        charged: r.meter.total(),
                    },
                )
            })
            .collect();
        (ranks, book.node())
    }

    /// Stops the engine and gives accountd up to `grace` to acknowledge what is
    /// pending (the rest stays in the journal for the next start).
    pub async fn shutdown(&self, grace: Duration) {
        let _ = self.requests.send(Request::Stop);
        let engine = self.engine.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(engine) = engine {
            let _ = engine.await;
        }
        if let Some(d) = &self.debits
            && !d.wait_settled(grace).await
        {
            tracing::warn!(
                pending = d.pending(),
                "accountd has not acknowledged every charge; they stay in the journal"
            );
        }
    }
}

/// Says once, at start, what the journal held that accountd has not acknowledged yet
/// (it is sent again now); nothing when it held nothing.
fn log_replay(journal: &std::path::Path, pending: &[Charge]) {
    if pending.is_empty() {
        return;
    }
    let (mut debits, mut debited, mut refunds, mut refunded) = (0usize, 0i64, 0usize, 0i64);
    for c in pending {
        match c {
            Charge::Debit(_) | Charge::ProjectDebit(_) => {
                debits += 1;
                debited = debited.saturating_add(c.amount());
            }
            Charge::Refund(_) => {
                refunds += 1;
                refunded = refunded.saturating_add(c.amount());
            }
        }
    }
    tracing::info!(
        journal = %journal.display(),
        debits,
        credits = %money::format_credits(debited),
        refunds,
        refunded = %money::format_credits(refunded),
        "replaying the debit journal: charges accountd has not acknowledged are sent again"
    );
}

/// Creates the journal's directory (mode 0700: the journal names users and what they
/// were charged) when it does not exist yet.
fn ensure_journal_dir(journal: &std::path::Path) -> Result<(), MarketError> {
    use std::os::unix::fs::DirBuilderExt;
    let Some(dir) = journal.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| MarketError::JournalDir {
            dir: dir.to_path_buf(),
            source,
        })
}

/// The first debit sequence number of this run: past every pending one in the journal
/// and at least the wall clock in microseconds, so a restarted node never reuses a key
/// (a node issues far fewer than a million debits a second).
fn next_seq_floor(debits: Option<&DebitClient>) -> u64 {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX / 2))
        .unwrap_or(0);
    let pending = debits.map_or(0, |d| d.max_pending_seq().map_or(0, |s| s + 1));
    wall.max(pending)
}
