//! What accountctl's ledger listings show: the columns of a ledger entry (a
//! debit's node, job, rank and CPU time beside the amount and the balance
//! after it) and of a report row, with amounts in credits to six decimals and
//! CPU time in seconds or minutes. [`super::format`] lays the rows out.
//!
//! A batch charge is a debit by the queue (actor `service:NAME`): its `node`
//! is the queue's name and its `job` the batch job's id (16 hex digits, as
//! `rexec submit` printed it). It charges the whole job for an interval, not
//! one rank's metered CPU, so its `rank` and CPU columns are left empty.

use money::format_credits_fixed;
use proto::account::{LedgerEntry, ReportRow};

use super::format::{Cell, Format, render};
use crate::time::format_time;

/// Formats CPU microseconds as minutes with three decimals, truncated (integer arithmetic).
///
/// ```
/// assert_eq!(accountd::ctl::render::cpu_minutes(90_000_000), "1.500");
/// ```
pub fn cpu_minutes(cpu_us: u64) -> String {
    let milli_minutes = cpu_us / 60_000;
    format!("{}.{:03}", milli_minutes / 1000, milli_minutes % 1000)
}

/// One entry as (column, text, is_number) triples, in a fixed order.
fn entry_fields(e: &LedgerEntry) -> Vec<Cell> {
    let opt = |v: Option<String>| v.unwrap_or_default();
    let per_rank = !is_batch_charge(e);
    let rank = e.rank.filter(|_| per_rank);
    let cpu_us = e.cpu_us.filter(|_| per_rank);
    vec![
        ("id", e.id.to_string(), true),
        ("time", format_time(e.at_us), false),
        ("user", e.user.clone(), false),
        ("kind", e.kind.as_str().to_string(), false),
        ("amount", format_credits_fixed(e.amount), true),
        ("balance", format_credits_fixed(e.balance_after), true),
        ("node", opt(e.key.as_ref().map(|k| k.node.clone())), false),
        ("job", opt(e.key.as_ref().map(|k| k.job.clone())), false),
        ("seq", opt(e.key.as_ref().map(|k| k.seq.to_string())), true),
        ("rank", opt(rank.map(|r| r.to_string())), true),
        (
            "interval_start_us",
            opt(e.interval.map(|i| i.start_us.to_string())),
            true,
        ),
        (
            "interval_end_us",
            opt(e.interval.map(|i| i.end_us.to_string())),
            true,
        ),
        ("cpu_us", opt(cpu_us.map(|c| c.to_string())), true),
        ("cpu_s", opt(cpu_us.map(cpu_seconds)), true),
        ("actor", e.actor.clone(), false),
        ("reason", opt(e.reason.clone()), false),
    ]
}

/// Whether `e` is a batch queue's charge: a debit made by a service (the only
/// services that may debit are batch queues), rather than by a node.
///
/// ```
/// let mut e = accountd::ctl::render::example_entry();
/// assert!(!accountd::ctl::render::is_batch_charge(&e));
/// e.actor = "service:batchd".into();
/// assert!(accountd::ctl::render::is_batch_charge(&e));
/// ```
pub fn is_batch_charge(e: &LedgerEntry) -> bool {
    e.kind == proto::account::EntryKind::Debit && e.actor.starts_with("service:")
}

/// A node's debit, for examples.
#[doc(hidden)]
pub fn example_entry() -> LedgerEntry {
    LedgerEntry {
        id: 7,
        at_us: 0,
        user: "alice".into(),
        amount: -1_500_000,
        kind: proto::account::EntryKind::Debit,
        key: Some(proto::account::DebitKey {
            node: "n1".into(),
            job: "j,1".into(),
            seq: 3,
        }),
        rank: Some(0),
        interval: Some(proto::account::MeterInterval {
            start_us: 1,
            end_us: 2,
        }),
        cpu_us: Some(60_000_000),
        actor: "node:n1".into(),
        reason: Some("say \"hi\"".into()),
        balance_after: 500_000,
    }
}

/// Formats CPU microseconds as seconds with three decimals, truncated.
///
/// ```
/// assert_eq!(accountd::ctl::render::cpu_seconds(1_234_567), "1.234");
/// ```
pub fn cpu_seconds(cpu_us: u64) -> String {
    format!("{}.{:03}", cpu_us / 1_000_000, cpu_us / 1000 % 1000)
}

/// Columns of an entry the table leaves out: monotonic interval ends mean
/// nothing to a reader, and the CPU time shows in seconds (`cpu_s`). JSON and
/// CSV keep every column.
const TABLE_HIDES: [&str; 3] = ["interval_start_us", "interval_end_us", "cpu_us"];

/// The columns of an entry in format `fmt`.
fn entry_columns(e: &LedgerEntry, fmt: Format) -> Vec<Cell> {
    let mut row = entry_fields(e);
    if fmt == Format::Table {
        row.retain(|(k, _, _)| !TABLE_HIDES.contains(k));
    }
    row
}

/// Renders ledger entries: for each debit its node, job, rank and CPU time
/// beside the amount and the balance after it.
pub fn render_entries(entries: &[LedgerEntry], fmt: Format) -> String {
    let rows: Vec<_> = entries.iter().map(|e| entry_columns(e, fmt)).collect();
    let header: Vec<&str> = match rows.first() {
        Some(r) => r.iter().map(|c| c.0).collect(),
        None => entry_columns(
            &LedgerEntry {
                id: 0,
                at_us: 0,
                user: String::new(),
                amount: 0,
                kind: proto::account::EntryKind::Grant,
                key: None,
                rank: None,
                interval: None,
                cpu_us: None,
                actor: String::new(),
                reason: None,
                balance_after: 0,
            },
            fmt,
        )
        .iter()
        .map(|c| c.0)
        .collect(),
    };
    render(rows, &header, fmt)
}

/// Renders report rows; `by` names the first column.
pub fn render_report(rows: &[ReportRow], by: &'static str, fmt: Format) -> String {
    let header = [by, "charged", "cpu_minutes", "jobs"];
    let rows = rows
        .iter()
        .map(|r| {
            vec![
                (by, r.key.clone(), false),
                ("charged", format_credits_fixed(r.charged), true),
                ("cpu_minutes", cpu_minutes(r.cpu_us), true),
                ("jobs", r.jobs.to_string(), true),
            ]
        })
        .collect();
    render(rows, &header, fmt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::account::*;

    fn entry() -> LedgerEntry {
        example_entry()
    }

    #[test]
    fn csv_quotes_and_json_escapes() {
        let csv = render_entries(&[entry()], Format::Csv);
        assert!(
            csv.starts_with("id,time,user,kind,amount,balance,"),
            "{csv}"
        );
        assert!(
            csv.contains(",\"j,1\",") && csv.contains("\"say \"\"hi\"\"\""),
            "{csv}"
        );
        let json = render_entries(&[entry()], Format::Json);
        assert!(json.contains("\"amount\": -1.500000"), "{json}");
        assert!(json.contains("\"reason\": \"say \\\"hi\\\"\""), "{json}");
        assert_eq!(render_entries(&[], Format::Json), "[]\n");
    }

    #[test]
    fn table_and_report() {
        let t = render_entries(&[entry()], Format::Table);
        assert_eq!(t.lines().count(), 2);
        let header: Vec<&str> = t.lines().next().unwrap().split_whitespace().collect();
        let row: Vec<&str> = t.lines().nth(1).unwrap().split_whitespace().collect();
        let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
        assert_eq!(
            (col("node"), col("job"), col("rank"), col("cpu_s")),
            ("n1", "j,1", "0", "60.000")
        );
        assert!(!header.contains(&"cpu_us"), "{t}");
        let r = render_report(
            &[ReportRow {
                key: "n1".into(),
                charged: 2_000_000,
                cpu_us: 120_000_000,
                jobs: 2,
            }],
            "node",
            Format::Csv,
        );
        assert_eq!(r, "node,charged,cpu_minutes,jobs\nn1,2.000000,2.000,2\n");
    }

    #[test]
    fn a_batch_charge_shows_the_queue_and_the_job_id_without_rank_or_cpu() {
        let mut e = entry();
        e.key = Some(DebitKey {
            node: "batchd".into(),
            job: "3f09c2a17b5e4d01".into(),
            seq: 2,
        });
        e.cpu_us = Some(0);
        e.actor = "service:batchd".into();
        e.reason = None;
        let t = render_entries(&[e.clone()], Format::Table);
        let header: Vec<&str> = t.lines().next().unwrap().split_whitespace().collect();
        let line = t.lines().nth(1).unwrap();
        let row: Vec<&str> = line.split_whitespace().collect();
        let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
        assert_eq!(
            (col("node"), col("job"), col("seq")),
            ("batchd", "3f09c2a17b5e4d01", "2")
        );
        assert!(line.trim_end().ends_with("service:batchd"), "{t}");
        assert_eq!(
            row.len(),
            header.len() - 3,
            "rank, cpu_s, reason empty: {t}"
        );
        let csv = render_entries(&[e], Format::Csv);
        assert!(csv.contains(",batchd,3f09c2a17b5e4d01,2,,"), "{csv}");
    }
}
