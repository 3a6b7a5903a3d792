//! The audit in bounded memory: the real accountd audits a ledger of N
//! entries and one eight times as long, and its peak resident memory grows
//! by about as much for both. Holding anything per entry (every key, as the
//! audit once did, about 160 bytes each) would make the longer ledger's
//! audit take many megabytes more.

use accountd::store::lite::LiteWriter;
use accountd::store::rows::Writer;
use accountd::store::schema;

use crate::built;
use crate::support::*;

const SMALL: u64 = 20_000;
const LARGE: u64 = 8 * SMALL;
/// How much more the longer ledger's audit may take than the shorter one's.
/// A key map would take about (LARGE - SMALL) * 160 bytes = 21 MiB more.
const SLACK_KIB: u64 = 6 * 1024;

/// How much accountd's peak memory rose while it audited a ledger of `entries`.
async fn audit_growth_kib(entries: u64) -> u64 {
    let mut d = Accountd::start().await;
    d.terminate().await;
    let mut w = LiteWriter(schema::open_writer(&d.db, false).unwrap());
    built::fill(&mut w, 0, entries).unwrap();
    w.close();
    drop(w);
    d.spawn(false).await.unwrap();
    // Settle what starting took before measuring from it.
    d.admin(&["balance", "user0"]).ok();
    let before = status_kib(d.pid(), "VmHWM");
    let out = d.admin(&["audit"]);
    assert!(
        out.ok()
            .contains(&format!("audit passed: 16 accounts, {entries} entries")),
        "{out:?}"
    );
    let after = status_kib(d.pid(), "VmHWM");
    eprintln!("{entries} entries: peak {before} KiB before the audit, {after} KiB after");
    after.saturating_sub(before)
}

#[tokio::test]
async fn auditing_a_ledger_eight_times_longer_takes_no_more_memory() {
    let small = audit_growth_kib(SMALL).await;
    let large = audit_growth_kib(LARGE).await;
    assert!(
        large <= small + SLACK_KIB,
        "auditing {LARGE} entries raised accountd's peak memory by {large} KiB, \
         {SMALL} entries by {small} KiB: the audit keeps something per entry"
    );
}
