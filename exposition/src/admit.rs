//! Which connections the endpoint keeps: at most [`MAX_CONNECTIONS`](crate::MAX_CONNECTIONS)
//! at once, and when a new one arrives at the limit, the oldest connection still
//! waiting for (or trickling) its request head is shed to make room. A connection
//! whose request is being answered is never shed; a new connection finding every
//! place taken by such answers is closed at once.
//!
//! A scraper sends its request head in one write, so its connection spends
//! microseconds in the sheddable state; slow or idle clients spend their whole life
//! there and are the ones that go first.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

/// One admitted connection's state, shared between the table and its task.
#[derive(Debug, Default)]
pub(crate) struct Admitted {
    answering: AtomicBool,
    shed: Notify,
}

impl Admitted {
    /// Its request head has arrived: it is being answered and no longer sheddable.
    pub(crate) fn answering(&self) {
        self.answering.store(true, Ordering::Relaxed);
    }

    /// Completes when the table sheds this connection to make room.
    pub(crate) async fn shed(&self) {
        self.shed.notified().await
    }
}

/// The live connections, oldest first.
#[derive(Debug)]
pub(crate) struct Admission {
    limit: usize,
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    next: u64,
    live: BTreeMap<u64, Arc<Admitted>>,
}

/// A place in the table; dropping it gives the place back.
#[derive(Debug)]
pub(crate) struct Ticket {
    id: u64,
    admission: Arc<Admission>,
    /// The connection's state.
    pub(crate) state: Arc<Admitted>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.lock().live.remove(&self.id);
    }
}

impl Admission {
    /// A table of at most `limit` connections.
    pub(crate) fn new(limit: usize) -> Arc<Admission> {
        Arc::new(Admission {
            limit,
            table: Mutex::new(Table::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // The table holds no invariant a panicking holder could break halfway.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for a new connection, shedding the oldest one not being answered if
    /// the table is full; `None` if every place is answering a request.
    pub(crate) fn admit(self: &Arc<Admission>) -> Option<Ticket> {
        let mut table = self.lock();
        if table.live.len() >= self.limit {
            let oldest = table
                .live
                .iter()
                .find(|(_, c)| !c.answering.load(Ordering::Relaxed))
                .map(|(id, _)| *id)?;
            if let Some(shed) = table.live.remove(&oldest) {
                // notify_one keeps the wake-up if the task is not waiting yet.
                shed.shed.notify_one();
            }
        }
        let id = table.next;
        table.next += 1;
        let state = Arc::new(Admitted::default());
        table.live.insert(id, Arc::clone(&state));
        Some(Ticket {
            id,
            admission: Arc::clone(self),
            state,
        })
    }

    /// How many connections hold a place.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().live.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_oldest_waiting_connection_is_shed_and_answers_are_kept() {
        let admission = Admission::new(3);
        let a = admission.admit().unwrap();
        let b = admission.admit().unwrap();
        let c = admission.admit().unwrap();
        a.state.answering();
        // Full: b is the oldest not answering.
        let d = admission.admit().unwrap();
        assert_eq!(admission.len(), 3);
        tokio::time::timeout(std::time::Duration::from_secs(1), b.state.shed())
            .await
            .expect("b is told to go");
        drop(b);
        assert_eq!(
            admission.len(),
            3,
            "a shed ticket gives back no place twice"
        );
        c.state.answering();
        d.state.answering();
        assert!(admission.admit().is_none(), "every place is answering");
        drop(a);
        assert!(admission.admit().is_some());
    }
}
