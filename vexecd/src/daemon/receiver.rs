//! The receiving task: every datagram heard on the group or the unicast
//! port goes into the node table (decoding and validation are the table's;
//! whatever is bad is dropped and counted there), and the table forgets
//! senders once a period. A held move of a live node goes to the prover
//! ([`super::prove`]). Nothing a datagram holds can end the task; a
//! failing socket is logged (rate-limited) and read again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use discovery::net::Receiver;
use proto::announce::Announcement;

use super::prove::Claims;
use super::stats::Shared;
use crate::table::DropReason;

/// Pause after a receive error, so a broken socket cannot spin.
const ERROR_PAUSE: Duration = Duration::from_millis(50);
/// At most one warning about receive errors per this interval.
const ERROR_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Hear announcements until dropped; expire the table every `period`.
pub async fn run(receiver: Receiver, shared: Arc<Shared>, claims: Claims, period: Duration) {
    let mut expire = tokio::time::interval(period);
    expire.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_warning: Option<Instant> = None;
    let mut unlogged = 0u64;
    loop {
        tokio::select! {
            heard = receiver.recv() => match heard {
                Ok(h) => {
                    // Decoded before the lock, so selects wait only for
                    // the table update itself.
                    let decoded = Announcement::decode(&h.bytes);
                    let now = Instant::now();
                    let outcome = shared.write().ingest_decoded(decoded, Some(h.from.ip()), now);
                    if let Err(d) = outcome {
                        if d.reason == DropReason::Unproven {
                            claims.offer(&shared);
                        }
                        tracing::debug!(from = %h.from, reason = ?d.reason, error = ?d.error, "datagram dropped");
                    }
                }
                Err(e) => {
                    unlogged += 1;
                    if last_warning.is_none_or(|t| t.elapsed() >= ERROR_LOG_INTERVAL) {
                        tracing::warn!(errors = unlogged, "cannot receive announcements: {e}");
                        last_warning = Some(Instant::now());
                        unlogged = 0;
                    }
                    tokio::time::sleep(ERROR_PAUSE).await;
                }
            },
            _ = expire.tick() => {
                let gone = shared.write().expire(Instant::now());
                if gone > 0 {
                    tracing::debug!(gone, "senders forgotten after their window");
                }
            }
        }
    }
}
