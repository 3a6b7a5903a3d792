//! Opening the queue's store at its [`Location`]: the backend it names (a SQLite
//! file through [`Lite`], PostgreSQL through [`PgWriter`]), read back, with the
//! writer thread started over it. Above both backends and the writer, so that
//! neither needs the other.

use super::pg::PgWriter;
use super::writer::{Backend, Lite, Store};
use super::{Loaded, Location, StoreError};

impl Store {
    /// Opens (creating the schema when missing) the queue at `at`, reads it
    /// back, and starts the writer thread.
    pub fn open_at(
        at: &Location,
        max_batch: usize,
        now_ms: i64,
    ) -> Result<(Store, Loaded), StoreError> {
        let (backend, loaded): (Box<dyn Backend>, Loaded) = match at {
            Location::Sqlite(path) => {
                let (lite, loaded) = Lite::open(path, now_ms)?;
                (Box::new(lite), loaded)
            }
            Location::Postgres(cfg) => {
                // The synchronous client runs its own runtime: never on the
                // caller's (an async task's) thread.
                let opened = std::thread::scope(|s| {
                    s.spawn(|| PgWriter::open(cfg, now_ms))
                        .join()
                        .unwrap_or_else(|p| std::panic::resume_unwind(p))
                });
                let (w, loaded) = opened?;
                (Box::new(w), loaded)
            }
        };
        Ok((Store::start(backend, at, max_batch)?, loaded))
    }
}
