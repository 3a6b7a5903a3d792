//! The delivery task behind a [`super::DebitClient`]: takes the oldest pending
//! charges from the journal, sends them to accountd, settles what accountd
//! answered, and retries with backoff while it cannot.
//!
//! Many to a frame: when two or more debits head the journal, up to [`FRAME`]
//! of them go in one `Debits` request, and their outcomes are settled in order
//! with one journal write. An outcome accountd could not decide for good (a
//! retryable error) stops the settling there: that debit and the ones after it
//! stay pending and are sent again (answered as duplicates if some were
//! applied after all). A refund, or a lone debit, goes alone as before. An
//! accountd that refuses the frame itself (an older one answers
//! `Unsupported`) gets single debits on that connection from then on.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use clients::account::{AccountClient, ClientError, no_address};
use clients::instances::Instances;
use proto::account::{AccountError, AccountReply, Debit, ErrorCode};
use proto::project::ProjectReply;
use tokio::sync::{Notify, mpsc, watch};

use super::{DebitClientConfig, Settlement, lock, settle};
use crate::journal::{Charge, Journal, Outcome};

/// Most charges sent in one `Debits` frame (at most
/// [`proto::account::MAX_DEBITS_PER_FRAME`]).
pub const FRAME: usize = 64;

const _: () = assert!(FRAME >= 2 && FRAME <= proto::account::MAX_DEBITS_PER_FRAME);

/// An open connection, and whether accountd takes `Debits` on it.
struct Conn {
    client: AccountClient,
    frames: bool,
}

/// What one request settled: the outcomes decided for good, in journal order,
/// and the retryable error that stopped the rest, if any.
struct Delivered {
    settled: Vec<(Charge, Outcome)>,
    stopped: Option<ClientError>,
}

pub(super) struct Sender {
    pub(super) cfg: DebitClientConfig,
    /// The configured instances (`server`, then `others`).
    pub(super) instances: Instances,
    pub(super) journal: Arc<Mutex<Journal>>,
    pub(super) wake: Arc<Notify>,
    pub(super) unreported: Arc<watch::Sender<usize>>,
    pub(super) settled: mpsc::UnboundedSender<Settlement>,
    pub(super) stop: watch::Receiver<bool>,
}

impl Sender {
    pub(super) async fn run(mut self) {
        let mut conn: Option<Conn> = None;
        let mut backoff = self.cfg.backoff_min;
        loop {
            if *self.stop.borrow() {
                return;
            }
            let j = self.journal.clone();
            let pending =
                match tokio::task::spawn_blocking(move || lock(&j).oldest_pending(FRAME)).await {
                    Ok(pending) => pending,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot read the debit journal; will retry");
                        if self.pause(self.cfg.backoff_max).await {
                            return;
                        }
                        continue;
                    }
                };
            if pending.is_empty() {
                tokio::select! {
                    _ = self.wake.notified() => {}
                    _ = self.stop.changed() => return,
                }
                continue;
            }
            let reused = conn.is_some();
            // Stopping may abandon a request in flight: the charges stay in
            // the journal and a repeat is harmless.
            let mut stop = self.stop.clone();
            let delivered = tokio::select! {
                r = self.deliver(&mut conn, &pending) => r,
                _ = stop.changed() => return,
            };
            let failed = match delivered {
                Ok(Delivered { settled, stopped }) => {
                    if let Err(e) = self.settle(settled).await {
                        tracing::error!(error = %e, "cannot write the debit journal; will retry");
                        if self.pause(backoff).await {
                            return;
                        }
                        continue;
                    }
                    match stopped {
                        None => {
                            backoff = self.cfg.backoff_min;
                            continue;
                        }
                        Some(e) => e,
                    }
                }
                Err(e) => e,
            };
            if reused && !matches!(failed, ClientError::Server(_)) {
                // An idle connection the server closed: reconnect at once.
                tracing::debug!(error = %failed, "connection to accountd lost; reconnecting");
                conn = None;
                continue;
            }
            conn = None;
            tracing::warn!(key = %pending[0].key(), error = %failed, retry_in = ?backoff, "charge not delivered");
            if self.pause(backoff).await {
                return;
            }
            backoff = (backoff * 2).min(self.cfg.backoff_max);
        }
    }

    /// Sleeps, or returns true at once when stopping.
    async fn pause(&mut self, d: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(d) => *self.stop.borrow(),
            _ = self.stop.changed() => true,
        }
    }

    /// Sends the debits heading `pending` in one frame when there are two or
    /// more and accountd takes frames, else the oldest charge alone.
    async fn deliver(
        &self,
        conn: &mut Option<Conn>,
        pending: &[Charge],
    ) -> Result<Delivered, ClientError> {
        let c = match conn {
            Some(c) => c,
            None => conn.insert(Conn {
                client: self.connect().await?,
                frames: true,
            }),
        };
        let debits: Vec<Debit> = pending
            .iter()
            .map_while(|charge| match charge {
                Charge::Debit(d) if c.frames => Some(d.clone()),
                _ => None,
            })
            .collect();
        if debits.len() >= 2 {
            match c.client.debits(debits).await {
                Ok(outcomes) => return Ok(in_order(pending, outcomes)),
                Err(ClientError::Server(e)) if !e.code.is_retryable() => {
                    tracing::info!(addr = c.client.addr(), error = %e,
                        "accountd does not take many debits to a frame; sending them one by one on this connection");
                    c.frames = false;
                }
                Err(e) => return Err(e),
            }
        }
        let outcome = single(&mut c.client, &pending[0]).await?;
        Ok(Delivered {
            settled: vec![(pending[0].clone(), outcome)],
            stopped: None,
        })
    }

    /// A connection to the learnt address, else to the first configured instance
    /// that answers.
    async fn connect(&self) -> Result<AccountClient, ClientError> {
        let (connector, name, timeout) =
            (&self.cfg.connector, &self.cfg.server_name, self.cfg.timeout);
        match &self.cfg.learnt {
            Some(learnt) => {
                let addr = learnt.get().ok_or_else(no_address)?;
                AccountClient::connect(&addr, connector, name, timeout).await
            }
            None => self.instances.connect(connector, name, timeout).await,
        }
    }

    async fn settle(
        &self,
        outcomes: Vec<(Charge, Outcome)>,
    ) -> Result<(), crate::journal::JournalError> {
        settle(
            &self.journal,
            &self.cfg.journal,
            outcomes,
            &self.settled,
            &self.unreported,
        )
        .await
    }
}

/// Pairs a frame's outcomes with the charges sent, up to the first one that
/// was not decided for good.
fn in_order(pending: &[Charge], outcomes: Vec<proto::account::ChargeOutcome>) -> Delivered {
    let mut settled = Vec::with_capacity(outcomes.len());
    for (charge, outcome) in pending.iter().zip(outcomes) {
        match outcome {
            Ok(receipt) => settled.push((charge.clone(), Outcome::Applied(receipt))),
            Err(e) if e.code.is_retryable() => {
                return Delivered {
                    settled,
                    stopped: Some(ClientError::Server(e)),
                };
            }
            Err(e) => settled.push((charge.clone(), Outcome::Refused(e.code, e.message))),
        }
    }
    Delivered {
        settled,
        stopped: None,
    }
}

/// Sends one charge on its own.
async fn single(client: &mut AccountClient, charge: &Charge) -> Result<Outcome, ClientError> {
    match client.call(charge.to_op()).await {
        Ok(AccountReply::Charged(receipt))
        | Ok(AccountReply::Project(ProjectReply::Charged(receipt))) => {
            Ok(Outcome::Applied(receipt))
        }
        Ok(other) => Err(ClientError::Server(AccountError::new(
            ErrorCode::Malformed,
            format!("accountd answered a charge with {}", other.name()),
        ))),
        Err(ClientError::Server(e)) if !e.code.is_retryable() => {
            Ok(Outcome::Refused(e.code, e.message))
        }
        Err(e) => Err(e),
    }
}
