//! The reading side on PostgreSQL ([`PgReader`]): a thread with its own
//! connection, since the synchronous client must not run on the daemon's async
//! runtime; a connection the server ended is made again at the next use.

use std::collections::HashMap;
use std::sync::Mutex;

use postgres::Client;

use super::{connect, load, pg_error};
use crate::store::{JobUsage, Loaded, PgConfig, StoreError, usage};

type ReadJob = Box<dyn FnOnce(Result<&mut Client, StoreError>) + Send>;

/// The reading side on PostgreSQL: a thread with its own connection.
pub struct PgReader {
    tx: Mutex<std::sync::mpsc::Sender<ReadJob>>,
}

impl PgReader {
    /// Connects and starts the reading thread.
    pub fn open(cfg: &PgConfig) -> Result<PgReader, StoreError> {
        let cfg = cfg.clone();
        let (tx, rx) = std::sync::mpsc::channel::<ReadJob>();
        let (first_tx, first_rx) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("batchd-reader".into())
            .spawn(move || {
                // Connected here: the synchronous client must not run on an
                // async task's thread.
                let mut client = match connect(&cfg) {
                    Ok(c) => {
                        let _ = first_tx.send(Ok(()));
                        Some(c)
                    }
                    Err(e) => {
                        let _ = first_tx.send(Err(e));
                        return;
                    }
                };
                for job in rx {
                    if client.as_ref().is_some_and(Client::is_closed) {
                        client = None;
                    }
                    if client.is_none() {
                        client = connect(&cfg).ok();
                    }
                    match client.as_mut() {
                        Some(c) => job(Ok(c)),
                        None => job(Err(StoreError::Postgres(
                            "no connection to PostgreSQL; retry shortly".into(),
                        ))),
                    }
                }
            })
            .map_err(StoreError::Thread)?;
        first_rx.recv().map_err(|_| StoreError::Closed)??;
        Ok(PgReader { tx: Mutex::new(tx) })
    }

    fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, postgres::Error> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.call_store(move |c| f(c).map_err(|e| pg_error(&e)))
    }

    fn call_store<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (rtx, rrx) = std::sync::mpsc::sync_channel(1);
        let job: ReadJob = Box::new(move |c| {
            let _ = rtx.send(c.and_then(f));
        });
        self.tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(job)
            .map_err(|_| StoreError::Closed)?;
        rrx.recv().map_err(|_| StoreError::Closed)?
    }

    /// The chunks `(offset, data)` of `stream` of job `id` reaching past `from`.
    pub(in crate::store) fn output(
        &self,
        id: u64,
        stream: u8,
        from: u64,
    ) -> Result<Vec<(i64, Vec<u8>)>, StoreError> {
        self.call(move |c| {
            Ok(c.query(
                r#"SELECT "offset", data FROM output WHERE job = $1 AND stream = $2
                   AND "offset" + octet_length(data) > $3 ORDER BY "offset""#,
                &[&(id as i64), &i64::from(stream), &(from as i64)],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
        })
    }

    /// The whole queue, as [`load`] reads it.
    pub(in crate::store) fn load(&self) -> Result<Loaded, StoreError> {
        self.call_store(load)
    }

    /// How many jobs the store holds.
    pub(in crate::store) fn job_count(&self) -> Result<usize, StoreError> {
        self.call(|c| {
            let n: i64 = c.query_one("SELECT COUNT(*) FROM jobs", &[])?.get(0);
            Ok(n as usize)
        })
    }

    /// What the ranks of each job of `ids` used (every id present), in one query.
    pub(in crate::store) fn jobs_usage(
        &self,
        ids: &[u64],
    ) -> Result<HashMap<u64, JobUsage>, StoreError> {
        let ids: Vec<i64> = ids.iter().map(|&i| i as i64).collect();
        self.call(move |c| {
            let mut out: HashMap<u64, JobUsage> = ids
                .iter()
                .map(|&i| (i as u64, JobUsage::default()))
                .collect();
            for r in c.query(usage::USAGES_SQL_PG, &[&ids])? {
                let job: i64 = r.get(0);
                let row = (r.get(1), r.get(2), r.get(3), r.get(4));
                out.insert(job as u64, usage::usage_of(Some(row)));
            }
            Ok(out)
        })
    }
}
