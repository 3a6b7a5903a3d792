//! Delivering the queue's debits to accountd. The decision loop records each
//! debit in the store's journal ([`crate::store::debits`]) together with the
//! job's new charged total, then hands it here. One task delivers them in order,
//! retrying each until accountd answers (backing off from 0.2 s to 30 s, so an
//! accountd down for hours is tried every half minute), and writes the answer
//! back: delivered (the row goes) or refused (the row stays, marked, and the
//! reason is logged). A queue killed before a debit is delivered finds it in the
//! journal at its next start; the debit's key makes a repeat change nothing.

use std::sync::Arc;
use std::time::Duration;

use proto::account::MeterInterval;
use proto::node::JobId;
use tokio::sync::mpsc;

use crate::Shared;
use crate::store::{PendingDebit, Write};

/// First wait after a failed delivery.
const FIRST_RETRY: Duration = Duration::from_millis(200);

/// Longest wait between two tries of one debit.
const LONGEST_RETRY: Duration = Duration::from_secs(30);

/// Where recorded debits go to be delivered.
pub type Sender = mpsc::UnboundedSender<PendingDebit>;

/// Delivers `pending` (read back from the store), then whatever arrives on `rx`,
/// until the channel closes.
pub async fn deliver(
    shared: Arc<Shared>,
    pending: Vec<PendingDebit>,
    mut rx: mpsc::UnboundedReceiver<PendingDebit>,
) {
    if !pending.is_empty() {
        tracing::info!(
            debits = pending.len(),
            "delivering debits recorded before the restart"
        );
    }
    for d in pending {
        deliver_one(&shared, d).await;
    }
    while let Some(d) = rx.recv().await {
        deliver_one(&shared, d).await;
    }
}

/// Tries `d` until accountd answers, then records the answer.
async fn deliver_one(shared: &Shared, d: PendingDebit) {
    let interval = MeterInterval {
        start_us: d.start_us,
        end_us: d.end_us,
    };
    let mut wait = FIRST_RETRY;
    let mut tries = 0u32;
    let outcome = loop {
        match shared
            .ledger
            .debit(
                &d.user,
                d.account.as_deref(),
                d.job,
                d.seq,
                d.amount,
                interval,
            )
            .await
        {
            Ok(()) => break None,
            Err(e) if !e.is_retryable() => break Some(e.to_string()),
            Err(e) => {
                tries += 1;
                // Said once when it starts failing, then every ten tries.
                if tries == 1 || tries.is_multiple_of(10) {
                    tracing::warn!(job = %JobId(d.job), seq = d.seq, tries, error = %e,
                        "debit not delivered yet; it stays in the journal and is retried");
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(LONGEST_RETRY);
            }
        }
    };
    let write = match outcome {
        None => Write::Delivered {
            job: d.job,
            seq: d.seq,
        },
        Some(why) => {
            tracing::error!(job = %JobId(d.job), seq = d.seq, amount = d.amount, user = %d.user,
                error = %why, "accountd refused a debit; it stays in the journal marked refused");
            Write::Refused {
                job: d.job,
                seq: d.seq,
                why,
            }
        }
    };
    if let Err(e) = shared.store.write(write).await {
        tracing::error!(job = %JobId(d.job), seq = d.seq, error = %e,
            "cannot record the debit's delivery; it is sent again at the next start");
    }
}
