//! The node side of charging: [`DebitClient`] takes charges from rexecd,
//! writes each to the [`Journal`] (fsynced) before anything is sent, and a
//! background task delivers them to accountd in order, retrying with
//! exponential backoff while accountd is unreachable or busy. A charge leaves
//! the journal only when accountd has applied it (or refused it for good, for
//! example an unknown user: that is reported, not retried forever).
//!
//! Across restarts: a new `DebitClient` on the same journal resends whatever
//! was pending. A charge that reached accountd but whose answer was lost is
//! sent again and answered as a duplicate, so it is applied exactly once.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clients::account::{AccountClient, ClientError, LearntAddress, no_address};
use proto::account::{AccountReply, ChargeReceipt, ErrorCode};
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
        let sender = Sender {
            cfg,
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

struct Sender {
    cfg: DebitClientConfig,
    journal: Arc<Mutex<Journal>>,
    wake: Arc<Notify>,
    unreported: Arc<watch::Sender<usize>>,
    settled: mpsc::UnboundedSender<Settlement>,
    stop: watch::Receiver<bool>,
}

impl Sender {
    async fn run(mut self) {
        let mut conn: Option<AccountClient> = None;
        let mut backoff = self.cfg.backoff_min;
        loop {
            if *self.stop.borrow() {
                return;
            }
            let j = self.journal.clone();
            let next = match tokio::task::spawn_blocking(move || lock(&j).first_pending()).await {
                Ok(next) => next,
                Err(e) => {
                    tracing::error!(error = %e, "cannot read the debit journal; will retry");
                    if self.pause(self.cfg.backoff_max).await {
                        return;
                    }
                    continue;
                }
            };
            let Some(charge) = next else {
                tokio::select! {
                    _ = self.wake.notified() => {}
                    _ = self.stop.changed() => return,
                }
                continue;
            };
            let reused = conn.is_some();
            // Stopping may abandon a request in flight: the charge stays in
            // the journal and a repeat is harmless.
            let mut stop = self.stop.clone();
            let delivered = tokio::select! {
                r = self.deliver(&mut conn, &charge) => r,
                _ = stop.changed() => return,
            };
            match delivered {
                Ok(outcome) => {
                    backoff = self.cfg.backoff_min;
                    if let Err(e) = self.settle(&charge, outcome).await {
                        tracing::error!(error = %e, "cannot write the debit journal; will retry");
                        if self.pause(backoff).await {
                            return;
                        }
                    }
                }
                Err(e) if reused && !matches!(e, ClientError::Server(_)) => {
                    // An idle connection the server closed: reconnect at once.
                    tracing::debug!(error = %e, "connection to accountd lost; reconnecting");
                    conn = None;
                }
                Err(e) => {
                    conn = None;
                    tracing::warn!(key = %charge.key(), error = %e, retry_in = ?backoff, "charge not delivered");
                    if self.pause(backoff).await {
                        return;
                    }
                    backoff = (backoff * 2).min(self.cfg.backoff_max);
                }
            }
        }
    }

    /// Sleeps, or returns true at once when stopping.
    async fn pause(&mut self, d: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(d) => *self.stop.borrow(),
            _ = self.stop.changed() => true,
        }
    }

    async fn deliver(
        &self,
        conn: &mut Option<AccountClient>,
        charge: &Charge,
    ) -> Result<Outcome, ClientError> {
        let c = match conn {
            Some(c) => c,
            None => conn.insert(
                AccountClient::connect(
                    &self.server()?,
                    &self.cfg.connector,
                    &self.cfg.server_name,
                    self.cfg.timeout,
                )
                .await?,
            ),
        };
        match c.call(charge.to_op()).await {
            Ok(AccountReply::Charged(receipt)) => Ok(Outcome::Applied(receipt)),
            Ok(other) => Err(ClientError::Server(proto::account::AccountError::new(
                ErrorCode::Malformed,
                format!("accountd answered a charge with {}", other.name()),
            ))),
            Err(ClientError::Server(e)) if !e.code.is_retryable() => {
                Ok(Outcome::Refused(e.code, e.message))
            }
            Err(e) => Err(e),
        }
    }

    /// The address to dial now.
    fn server(&self) -> Result<String, ClientError> {
        match &self.cfg.learnt {
            Some(learnt) => learnt.get().ok_or_else(no_address),
            None => Ok(self.cfg.server.clone()),
        }
    }

    async fn settle(&self, charge: &Charge, outcome: Outcome) -> Result<(), JournalError> {
        settle(
            &self.journal,
            &self.cfg.journal,
            charge,
            outcome,
            &self.settled,
            &self.unreported,
        )
        .await
    }
}

/// Records a charge's outcome in the journal, then reports it on `settled` and counts
/// it off `unreported`. Fails only when the outcome could not be recorded (the charge
/// stays pending and is sent again); a compaction that fails after the outcome was
/// recorded is a warning, and the settlement is reported all the same, so that
/// [`DebitClient::wait_settled`] completes.
async fn settle(
    journal: &Arc<Mutex<Journal>>,
    path: &std::path::Path,
    charge: &Charge,
    outcome: Outcome,
    settled: &mpsc::UnboundedSender<Settlement>,
    unreported: &watch::Sender<usize>,
) -> Result<(), JournalError> {
    let j = journal.clone();
    let (c, o) = (charge.clone(), outcome.clone());
    let compaction = tokio::task::spawn_blocking(move || lock(&j).settle(&c, o))
        .await
        .map_err(|e| JournalError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(e),
        })??;
    if let Some(e) = compaction {
        tracing::warn!(error = %e, "cannot compact the debit journal (the settlement is recorded; \
            compaction is tried again at the next one)");
    }
    {
        let event = match outcome {
            Outcome::Applied(receipt) => Settlement::Applied {
                charge: charge.clone(),
                receipt,
            },
            Outcome::Refused(code, message) => {
                tracing::error!(key = %charge.key(), user = charge.user(), "accountd refused a charge for good: {message}");
                Settlement::Refused {
                    charge: charge.clone(),
                    code,
                    message,
                }
            }
        };
        let _ = settled.send(event);
        unreported.send_modify(|n| *n = n.saturating_sub(1));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
