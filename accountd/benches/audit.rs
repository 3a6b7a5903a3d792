//! The audit's rate and memory as the ledger grows: a ledger is built with
//! the store's own code ([`ledger`], 16 accounts, the rest debits) to a
//! quarter, a half and all of `AUDIT_ENTRIES` entries (default 1,000,000),
//! and at each size the real `accountctl audit --anchors FILE --ledger
//! CONFIG` (the audit run on the database itself) is timed and its peak
//! resident memory (`VmHWM`, sampled until it exits) printed, with the slope
//! of peak memory per million entries between the smallest and the largest.
//!
//! `AUDIT_POSTGRES=1` also copies each size into a real PostgreSQL server of
//! the benchmark's own (`testhost::postgres`) with `accountctl migrate`
//! and audits it there (printing the migration's own time and peak memory,
//! which no longer grows with the ledger either). The target: a 10-million-entry ledger
//! audited in at most 64 MB on both backends; `AUDIT_ENTRIES=10000000`
//! measures that directly (slowly). Run with `cargo bench -p accountd --bench
//! audit`.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use peak::sampled;
use testhost::postgres as pgserver;

#[path = "support/ledger.rs"]
mod ledger;
#[path = "support/peak.rs"]
mod peak;

use accountd::store::lite::LiteWriter;
use accountd::store::schema;
use certs::Role;
use certs::testing::TestPki;

const ACCOUNTCTL: &str = env!("CARGO_BIN_EXE_accountctl");
const TARGET_KIB: u64 = 64 * 1024;

/// Runs the offline audit of the ledger `config` names: seconds, peak KiB.
fn audit(config: &Path, anchors: &Path, entries: u64) -> (f64, u64) {
    let (secs, peak, out) = sampled(
        Command::new(ACCOUNTCTL)
            .arg("audit")
            .arg("--anchors")
            .arg(anchors)
            .arg("--ledger")
            .arg(config),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains(&format!("{entries} entries")),
        "the audit failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (secs, peak)
}

fn report(backend: &str, entries: u64, (secs, peak): (f64, u64)) {
    println!(
        "{backend:>10} {entries:>10} entries: audited in {secs:6.1} s ({:>9.0} entries/s), peak RSS {:6.1} MiB{}",
        entries as f64 / secs,
        peak as f64 / 1024.0,
        if peak <= TARGET_KIB {
            ""
        } else {
            "  (over the 64 MiB target)"
        }
    );
}

fn slope(backend: &str, first: (u64, u64), last: (u64, u64)) {
    let per_million =
        (last.1 as f64 - first.1 as f64) / 1024.0 / ((last.0 - first.0) as f64 / 1_000_000.0);
    println!(
        "{backend:>10} peak RSS slope: {per_million:+.2} MiB per million entries ({:.1} MiB at {}, {:.1} MiB at {})",
        first.1 as f64 / 1024.0,
        first.0,
        last.1 as f64 / 1024.0,
        last.0
    );
}

fn main() {
    let total: u64 = std::env::var("AUDIT_ENTRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let on_pg = std::env::var("AUDIT_POSTGRES").is_ok_and(|v| v == "1");
    let pki = TestPki::new();
    let ca = pki.tls_paths(Role::Service, "accountd").ca;
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = dir.path().join("ledger.db");
    let anchors = dir.path().join("anchors");
    std::fs::write(&anchors, "").unwrap();
    let lite_conf = dir.path().join("lite.toml");
    std::fs::write(&lite_conf, format!("database = {db:?}\nca = {ca:?}\n")).unwrap();
    let mut w = LiteWriter(schema::open_writer(&db, true).expect("open the ledger"));
    let pg = on_pg.then(pgserver::Postgres::start);
    let mut done = 0;
    let mut lite = Vec::new();
    let mut post = Vec::new();
    for entries in [total / 4, total / 2, total] {
        let built = Instant::now();
        ledger::fill(&mut w, done, entries).expect("build the ledger");
        println!(
            "built {entries} entries on SQLite ({:.0} entries/s)",
            (entries - done) as f64 / built.elapsed().as_secs_f64()
        );
        done = entries;
        let m = audit(&lite_conf, &anchors, entries);
        report("SQLite", entries, m);
        lite.push((entries, m.1));
        if let Some(pg) = &pg {
            let name = format!("ledger{entries}");
            pg.create_db(&name);
            let pg_conf = dir.path().join(format!("{name}.toml"));
            std::fs::write(
                &pg_conf,
                format!(
                    "ca = {ca:?}\n[store]\npostgres = \"{}\"\n",
                    pg.conninfo(&name)
                ),
            )
            .unwrap();
            let (secs, peak, moved) = sampled(
                Command::new(ACCOUNTCTL)
                    .args(["migrate", "--from"])
                    .arg(&lite_conf)
                    .arg("--to")
                    .arg(&pg_conf),
            );
            assert!(moved.status.success(), "migrate: {moved:?}");
            println!(
                "   migrate {entries:>10} entries into PostgreSQL in {secs:6.1} s ({:>9.0} entries/s), peak RSS {:6.1} MiB",
                entries as f64 / secs,
                peak as f64 / 1024.0
            );
            let m = audit(&pg_conf, &anchors, entries);
            report("PostgreSQL", entries, m);
            post.push((entries, m.1));
            if entries < total {
                pg.psql("postgres", &format!("DROP DATABASE {name}"));
            }
        }
    }
    slope("SQLite", lite[0], lite[lite.len() - 1]);
    if !post.is_empty() {
        slope("PostgreSQL", post[0], post[post.len() - 1]);
    }
}
