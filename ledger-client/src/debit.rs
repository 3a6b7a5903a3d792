//! The node side of charging: [`DebitClient`] takes charges from rexecd,
//! writes each to the [`Journal`] (fsynced) before anything is sent, and a
//! background task delivers them to accountd in order, retrying with
//! exponential backoff while accountd is unreachable or busy. A charge leaves
//! the journal only when accountd has applied it (or refused it for good, for
//! example an unknown user: that is reported, not retried forever).
//!
//! When several charges are pending (a backlog after accountd was away, or one
//! per rank each interval), up to [`FRAME`] of the oldest debits go in one
//! `Debits` frame and their outcomes are settled together, in order, with one
//! journal write; an accountd that predates `Debits` gets them one by one.
//!
//! With several accountd instances configured, a connection goes to whichever
//! answers, the one that answered last first, so a node's charges fail over to
//! another instance silently when one dies (an instance that refuses at once costs
//! nothing, one that does not answer at most [`clients::instances::FAILOVER_DIAL`]).
//!
//! Across restarts: a new `DebitClient` on the same journal resends whatever
//! was pending. A charge that reached accountd but whose answer was lost is
//! sent again and answered as a duplicate, so it is applied exactly once.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clients::account::LearntAddress;
use clients::instances::Instances;
use proto::account::{ChargeReceipt, ErrorCode};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

use crate::journal::{Charge, Journal, JournalError, Outcome};

/// How a [`DebitClient`] reaches accountd and keeps its journal.
#[derive(Clone)]
pub struct DebitClientConfig {
    /// The journal file.
    pub journal: PathBuf,
    /// accountd's address (`host:port`).
    pub server: String,
    /// Further accountd instances (`host:port`), tried in turn when `server` cannot
    /// be reached; the one that answered last is tried first
    /// ([`clients::instances::Instances`]).
    pub others: Vec<String>,
    /// When set, the address is read from here at each connection attempt and
    /// `server` is not used (accountd found from its announcements); while it
    /// holds nothing, charges wait in the journal as when accountd is down.
    pub learnt: Option<LearntAddress>,
    /// Name in accountd's certificate (usually `accountd`).
    pub server_name: String,
    /// The node's TLS client (a `node` certificate).
    pub connector: TlsConnector,
    /// First retry delay.
    pub backoff_min: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
    /// Limit for connecting and for each request.
    pub timeout: Duration,
}

impl DebitClientConfig {
    /// A config with the usual retry settings (100 ms doubling to 5 s, 10 s timeout).
    pub fn new(journal: PathBuf, server: String, connector: TlsConnector) -> Self {
        DebitClientConfig {
            journal,
            server,
            others: Vec::new(),
            learnt: None,
            server_name: clients::account::DEFAULT_SERVER_NAME.to_string(),
            connector,
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            timeout: Duration::from_secs(10),
        }
    }
}

/// What happened to a charge, reported on the settlement channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    /// accountd applied it (now or before: `receipt.duplicate`).
    Applied {
        /// The charge.
        charge: Charge,
        /// accountd's receipt (`balance_now` lets rexecd drop a bid to zero).
        receipt: ChargeReceipt,
    },
    /// accountd refused it for good; it will not be retried.
    Refused {
        /// The charge.
        charge: Charge,
        /// Why.
        code: ErrorCode,
        /// accountd's message.
        message: String,
    },
}

/// Sends a node's charges to accountd through a durable journal.
pub struct DebitClient {
    journal: Arc<Mutex<Journal>>,
    path: PathBuf,
    wake: Arc<Notify>,
    unreported: Arc<watch::Sender<usize>>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

fn lock(j: &Mutex<Journal>) -> std::sync::MutexGuard<'_, Journal> {
    j.lock().unwrap_or_else(|e| e.into_inner())
}

impl DebitClient {
    /// Opens the journal and starts delivering what is pending in it.
    /// Settlements arrive on the returned channel (drop it if not needed).
    pub async fn start(
        cfg: DebitClientConfig,
    ) -> Result<(DebitClient, mpsc::UnboundedReceiver<Settlement>), JournalError> {
        let path = cfg.journal.clone();
        let path_for_errors = cfg.journal.clone();
        let journal = tokio::task::spawn_blocking(move || Journal::open(&path))
            .await
            .map_err(|e| JournalError::Io {
                path: cfg.journal.clone(),
                source: std::io::Error::other(e),
            })??;
        let unreported = Arc::new(watch::Sender::new(journal.pending_len()));
        let journal = Arc::new(Mutex::new(journal));
        let wake = Arc::new(Notify::new());
        let (stop_tx, stop_rx) = watch::channel(false);
        let (stx, srx) = mpsc::unbounded_channel();
        let instances = Instances::new(
            std::iter::once(cfg.server.clone())
                .chain(cfg.others.iter().cloned())
                .collect(),
        );
        let sender = sender::Sender {
            cfg,
            instances,
            journal: journal.clone(),
            wake: wake.clone(),
            unreported: unreported.clone(),
            settled: stx,
            stop: stop_rx,
        };
        let task = tokio::spawn(sender.run());
        Ok((
            DebitClient {
                journal,
                path: path_for_errors,
                wake,
                unreported,
                stop: stop_tx,
                task,
            },
            srx,
        ))
    }

    /// Records a charge durably and queues it for delivery. When this returns
    /// Ok the charge will reach accountd exactly once, even if the node
    /// restarts. A charge whose key is already pending is not recorded twice.
    pub async fn charge(&self, c: Charge) -> Result<(), JournalError> {
        // The journal lock is only ever taken off the async threads (a holder
        // may be in the middle of an fsync).
        let j = self.journal.clone();
        let path = self.path.clone();
        let unreported = self.unreported.clone();
        tokio::task::spawn_blocking(move || {
            let mut j = lock(&j);
            let new = j.record(c)?;
            if new {
                // Counted under the journal lock, so before the sender can see it.
                unreported.send_modify(|n| *n += 1);
            }
            Ok::<_, JournalError>(())
        })
        .await
        .map_err(|e| JournalError::Io {
            path,
            source: std::io::Error::other(e),
        })??;
        self.wake.notify_one();
        Ok(())
    }

    /// The largest sequence number among the charges not yet settled (a node starts
    /// numbering past it).
    pub fn max_pending_seq(&self) -> Option<u64> {
        lock(&self.journal)
            .pending()
            .iter()
            .map(|c| c.key().seq)
            .max()
    }

    /// The charges not yet settled, oldest first.
    pub fn pending_charges(&self) -> Vec<Charge> {
        lock(&self.journal).pending()
    }

    /// Charges not yet settled.
    pub fn pending(&self) -> usize {
        lock(&self.journal).pending_len()
    }

    /// Charges journaled whose settlement has not been reported yet: read without
    /// the journal's lock (which may be held across an fsync), for metrics.
    pub fn unsettled(&self) -> usize {
        *self.unreported.borrow()
    }

    /// Waits until every charge has been settled and its settlement reported
    /// on the channel, at most `limit`; true if drained.
    pub async fn wait_settled(&self, limit: Duration) -> bool {
        let mut rx = self.unreported.subscribe();
        matches!(
            tokio::time::timeout(limit, rx.wait_for(|n| *n == 0)).await,
            Ok(Ok(_))
        )
    }

    /// Stops delivering; what is pending stays in the journal for next time.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        self.wake.notify_one();
        let _ = self.task.await;
    }
}

/// Records charges' outcomes in the journal (one write and fsync for the lot),
/// then reports each on `settled`, in order, and counts it off `unreported`. Fails
/// only when the outcomes could not be recorded (the charges stay pending and are
/// sent again); a compaction that fails after they were recorded is a warning,
/// and the settlements are reported all the same, so that
/// [`DebitClient::wait_settled`] completes.
async fn settle(
    journal: &Arc<Mutex<Journal>>,
    path: &std::path::Path,
    outcomes: Vec<(Charge, Outcome)>,
    settled: &mpsc::UnboundedSender<Settlement>,
    unreported: &watch::Sender<usize>,
) -> Result<(), JournalError> {
    if outcomes.is_empty() {
        return Ok(());
    }
    let j = journal.clone();
    let (outcomes, compaction) = tokio::task::spawn_blocking(move || {
        let r = lock(&j).settle_many(&outcomes);
        r.map(|c| (outcomes, c))
    })
    .await
    .map_err(|e| JournalError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    })??;
    if let Some(e) = compaction {
        tracing::warn!(error = %e, "cannot compact the debit journal (the settlement is recorded; \
            compaction is tried again at the next one)");
    }
    let n = outcomes.len();
    for (charge, outcome) in outcomes {
        let event = match outcome {
            Outcome::Applied(receipt) => Settlement::Applied { charge, receipt },
            Outcome::Refused(code, message) => {
                tracing::error!(key = %charge.key(), user = charge.user(), "accountd refused a charge for good: {message}");
                Settlement::Refused {
                    charge,
                    code,
                    message,
                }
            }
        };
        let _ = settled.send(event);
    }
    unreported.send_modify(|u| *u = u.saturating_sub(n));
    Ok(())
}

mod sender;
pub use sender::FRAME;
#[cfg(test)]
mod tests;
