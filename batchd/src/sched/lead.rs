//! The decision loop under the lease ([`crate::lease`]): an instance that does
//! not lead runs no loop (it serves submissions and queries from the store);
//! once it takes the lease it reads the whole queue back from the store, as a
//! restart does, and runs the loop ([`super::run`]) at the lease's epoch, which
//! then settles the jobs the store says were running ([`super::recover`]) just
//! as after a restart. When the lease is lost (another instance took it, or it
//! could not be renewed in time) the loop stops at once and the instance waits
//! to lead again. On SQLite the lease is held from the start, at epoch 0, and
//! nothing is read again.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::Command;
use crate::Shared;
use crate::store::Location;

/// How often a follower reads the queue again (at least every `tick`).
pub const FOLLOWER_REFRESH: std::time::Duration = std::time::Duration::from_secs(1);

async fn read_back(
    shared: &Arc<Shared>,
) -> Result<Result<crate::store::Loaded, crate::store::StoreError>, tokio::task::JoinError> {
    let reader = shared.clone();
    tokio::task::spawn_blocking(move || reader.reader.load()).await
}

/// The leader's view of the other instances' submissions: when the store holds
/// more jobs than the live queue, the jobs it lacks are read and added, in the
/// store's order, numbered after the queue's own (the numbers order arrivals
/// in memory only).
pub(super) async fn merge_arrivals(shared: &Arc<Shared>) {
    let counter = shared.clone();
    let stored = tokio::task::spawn_blocking(move || counter.reader.job_count()).await;
    let Ok(Ok(stored)) = stored else {
        return;
    };
    if stored == shared.lock_queue().jobs.len() {
        return;
    }
    let Ok(Ok(loaded)) = read_back(shared).await else {
        return;
    };
    let (mut read, _) = crate::queue::Queue::from_loaded(loaded, shared.cfg.tick);
    let mut q = shared.lock_queue();
    let order: Vec<u64> = read.in_order().map(|j| j.rec.id).collect();
    let mut added = 0;
    for id in order {
        if q.jobs.contains_key(&id) {
            continue;
        }
        if let Some(mut job) = read.jobs.remove(&id) {
            job.rec.seq = q.take_seq();
            q.insert(job);
            added += 1;
        }
    }
    if added > 0 {
        tracing::info!(
            added,
            "jobs submitted through other instances joined the queue"
        );
    }
}

/// Runs the decision loop whenever this instance leads, until `shutdown`.
pub async fn lead(
    shared: Arc<Shared>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    shutdown: impl std::future::Future,
) {
    tokio::pin!(shutdown);
    let shared_db = matches!(shared.cfg.location, Location::Postgres(_));
    loop {
        let epoch = tokio::select! {
            _ = &mut shutdown => return,
            e = shared.lease.acquired() => e,
            // A follower's answers come from its memory: read the queue again.
            _ = tokio::time::sleep(FOLLOWER_REFRESH.max(shared.cfg.tick)), if shared_db => {
                if let Ok(Ok(loaded)) = read_back(&shared).await {
                    *shared.lock_queue() = crate::queue::Queue::from_loaded(loaded, shared.cfg.tick).0;
                }
                continue;
            }
        };
        if shared_db {
            let took = std::time::Instant::now();
            match read_back(&shared).await {
                Ok(Ok(loaded)) => {
                    let (queue, debits) = crate::queue::Queue::from_loaded(loaded, shared.cfg.tick);
                    tracing::info!(
                        epoch,
                        jobs = queue.jobs.len(),
                        read_ms = took.elapsed().as_millis() as u64,
                        "leading: the queue read back"
                    );
                    *shared.lock_queue() = queue;
                    for d in debits {
                        let _ = shared.journal.send(d);
                    }
                }
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "cannot read the queue back; not leading yet");
                    tokio::time::sleep(shared.cfg.tick).await;
                    continue;
                }
                Err(e) => {
                    tracing::error!(error = %e, "cannot read the queue back; not leading yet");
                    continue;
                }
            }
            shared.store.set_fence(&shared.lease.queue, epoch);
        }
        let mut stopping = false;
        {
            let ended = async {
                tokio::select! {
                    _ = &mut shutdown => stopping = true,
                    _ = shared.lease.lost(epoch) => {}
                }
            };
            super::run(shared.clone(), &mut commands, epoch, ended).await;
        }
        if stopping {
            return;
        }
        tracing::warn!(epoch, "no longer leading: the decision loop stopped");
    }
}
