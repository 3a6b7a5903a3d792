//! `accountctl migrate` in bounded memory: the real binary copies a SQLite
//! ledger of N entries and one eight times as long into a real PostgreSQL,
//! and its peak resident memory is about the same for both. Keeping
//! anything per entry (every copied entry's key and charge, as the
//! PostgreSQL writer once did for the whole copy, about 250 bytes each)
//! would make the longer copy take tens of megabytes more.

use accountd::store::lite::LiteWriter;
use accountd::store::rows::Writer;
use accountd::store::schema;

use crate::pgserver::Postgres;
use crate::support::*;
use crate::{built, peak};

const SMALL: u64 = 20_000;
const LARGE: u64 = 8 * SMALL;
/// How much more the longer copy may take than the shorter one's.
/// A key per entry would take about (LARGE - SMALL) * 250 bytes = 33 MiB more.
const SLACK_KIB: u64 = 6 * 1024;

/// Peak memory (KiB) of `accountctl migrate` copying a new SQLite ledger of
/// `entries` into the new database `db` of `pg`.
fn migrate_peak_kib(pg: &Postgres, dir: &std::path::Path, entries: u64) -> u64 {
    let lite = dir.join(format!("ledger{entries}.db"));
    let mut w = LiteWriter(schema::open_writer(&lite, true).unwrap());
    built::fill(&mut w, 0, entries).unwrap();
    w.close();
    drop(w);
    let db = format!("ledger{entries}");
    pg.create_db(&db);
    let from = dir.join(format!("from{entries}.toml"));
    std::fs::write(&from, format!("database = {lite:?}\n")).unwrap();
    let to = dir.join(format!("to{entries}.toml"));
    std::fs::write(
        &to,
        format!("[store]\npostgres = \"{}\"\n", pg.conninfo(&db)),
    )
    .unwrap();
    let (secs, peak, out) = peak::sampled(
        isolated_ctl(dir)
            .args(["migrate", "--from"])
            .arg(&from)
            .arg("--to")
            .arg(&to),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains(&format!("{entries} entries")),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("migrated {entries} entries in {secs:.1} s, peak {peak} KiB");
    peak
}

#[test]
fn migrating_a_ledger_eight_times_longer_takes_no_more_memory() {
    let dir = tempfile::tempdir().unwrap();
    let pg = Postgres::start();
    let small = migrate_peak_kib(&pg, dir.path(), SMALL);
    let large = migrate_peak_kib(&pg, dir.path(), LARGE);
    assert!(
        large <= small + SLACK_KIB,
        "migrating {LARGE} entries into PostgreSQL took {large} KiB at its peak, \
         {SMALL} entries {small} KiB: the copy keeps something per entry"
    );
}
