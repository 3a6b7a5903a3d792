//! `rexec history` against a live queue: each field of an ended job checked
//! against what the job itself measured (its wall time with `date`, its CPU time
//! from `/proc/self/stat` of its shell) and what the queue and the ledger say it
//! was charged; a job exiting 7 and one whose program is missing; `--since`,
//! `-u` and `--format`; another user sees none of it; and the queue's aggregate
//! utility metric is the sum of what the listing says each job achieved.

use std::net::SocketAddr;
use std::time::Duration;

use certs::Role;
use proto::batch::{BatchErrorCode, BatchOp, BatchReply};
use proto::history::HistoryQuery;
use rexec_tests::batch::BatchOptions;
use rexec_tests::cluster::TEST_USER;

use super::live::{batch, job_id, start_with, with_queue};
use super::one_line_in;

const LIMIT: Duration = Duration::from_secs(60);

/// What each rank's shell holds in memory on purpose, bytes (the string `m`).
const HELD_BYTES: f64 = 16_000_000.0;

/// Each rank first holds [`HELD_BYTES`] in a shell variable, then spins for 3 s of
/// wall time in its own shell, then says how long it ran (ms) and the CPU time its
/// shell and the `date`s it waited for used (clock ticks, then ticks per second).
const SPIN: &str = "m=$(head -c 16000000 /dev/zero | tr '\\0' x); s=$(date +%s%N); \
    while [ $(( $(date +%s%N) - s )) -lt 3000000000 ]; do \
    j=0; while [ $j -lt 20000 ]; do j=$((j+1)); done; done; \
    e=$(date +%s%N); echo wall_ms $(( (e - s) / 1000000 )); \
    awk '{print \"cpu_ticks\", $14 + $15 + $16 + $17}' /proc/$$/stat; \
    echo hz $(getconf CLK_TCK); \
    awk '/VmHWM/ {print \"hwm_kb\", $2}' /proc/$$/status";

/// The rows of a `rexec history` listing as maps from column to cell.
fn rows(listing: &str) -> Vec<Vec<(String, String)>> {
    let mut lines = listing.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap_or_else(|| panic!("no header: {listing:?}"))
        .split_whitespace()
        .map(str::to_string)
        .collect();
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(cells.len(), header.len(), "{listing}");
            header
                .iter()
                .cloned()
                .zip(cells.iter().map(|c| c.to_string()))
                .collect()
        })
        .collect()
}

/// The cell `col` of `job`'s row.
fn cell(rows: &[Vec<(String, String)>], job: &str, col: &str) -> String {
    let row = rows
        .iter()
        .find(|r| r[0].1 == job)
        .unwrap_or_else(|| panic!("no row of {job} in {rows:?}"));
    row.iter()
        .find(|(h, _)| h == col)
        .unwrap_or_else(|| panic!("no column {col} in {row:?}"))
        .1
        .clone()
}

fn seconds(text: &str) -> f64 {
    text.parse()
        .unwrap_or_else(|_| panic!("{text:?} is not seconds"))
}

/// Sum of every `key N` line of `out`, and how many there were.
fn summed(out: &str, key: &str) -> (i64, usize) {
    let values: Vec<i64> = out
        .lines()
        .filter_map(|l| l.strip_prefix(key)?.trim().parse().ok())
        .collect();
    (values.iter().sum(), values.len())
}

/// The metric `name`'s value in a Prometheus exposition.
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn history_shows_what_each_job_measured_was_charged_and_achieved() {
    let mut metrics = None;
    let Some((m, config)) = start_with(
        "history_shows_what_each_job_measured_was_charged_and_achieved",
        || {
            let addr = SocketAddr::from(([127, 0, 0, 1], testhost::net::port()));
            metrics = Some(addr);
            BatchOptions {
                extra_config: format!("\n[metrics]\nlisten = \"{addr}\"\n"),
                ..BatchOptions::default()
            }
        },
    ) else {
        return;
    };
    let metrics = metrics.expect("taken when the market started");
    let run = |config: &std::path::Path, args: &[&str]| {
        m.market
            .rexec()
            .config(config)
            .env("TZ", "UTC")
            .args(args)
            .run()
    };
    // A: two ranks spinning 3 s, 1 credit a CPU-minute for 30 s (a constant utility
    // of 1 credit); B exits 7; C's program is missing.
    let submit = |args: &[&str]| {
        let mut all = vec!["submit", "--length", "30s", "-r", "1"];
        all.extend_from_slice(args);
        job_id(&batch(&m, &config, &all))
    };
    let a = submit(&["-n", "2", "sh", "-c", SPIN]);
    let b = submit(&["sh", "-c", "exit 7"]);
    let c = submit(&["/no/such/program"]);
    for (job, code) in [(&a, 0), (&b, 7)] {
        let out = batch(&m, &config, &["wait", job]);
        assert_eq!(out.code, Some(code), "{out:?}\n{}", m.batchd.log());
    }
    let out = batch(&m, &config, &["wait", &c]);
    assert_ne!(out.code, Some(0), "{out:?}");

    let out = run(&config, &["history"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let listing = out.out();
    let r = rows(&listing);
    eprintln!("rexec history:\n{listing}");
    assert_eq!(r.len(), 3, "{listing}");

    // A: what its ranks measured.
    let output = batch(&m, &config, &["output", &a]).out();
    let (wall_ms, ranks) = summed(&output, "wall_ms");
    let (ticks, _) = summed(&output, "cpu_ticks");
    let (hz, _) = summed(&output, "hz");
    assert_eq!(ranks, 2, "{output}");
    let measured_cpu = ticks as f64 / (hz as f64 / 2.0);
    let longest_wall = output
        .lines()
        .filter_map(|l| l.strip_prefix("wall_ms ")?.parse::<f64>().ok())
        .fold(0.0, f64::max)
        / 1000.0;
    assert!(wall_ms >= 6000, "{output}");
    eprintln!("job {a} measured: {output}");
    let cpu = seconds(&cell(&r, &a, "CPU"));
    assert!(
        (cpu - measured_cpu).abs() <= 0.25,
        "history says {cpu} CPU seconds, the ranks measured {measured_cpu}:\n{listing}\n{output}"
    );
    let elapsed = seconds(&cell(&r, &a, "ELAPSED"));
    assert!(
        elapsed >= longest_wall - 0.01 && elapsed <= longest_wall + 2.0,
        "history says {elapsed} s elapsed, the longest rank measured {longest_wall} s:\n{listing}"
    );
    assert!(cpu <= 2.0 * elapsed + 0.1, "{listing}");
    assert_eq!(cell(&r, &a, "STATE"), "FINISHED");
    assert_eq!(cell(&r, &a, "EXIT"), "0");
    // Without a memory controller for the ranks, unknown, not made up; with one, at
    // least what each rank's shell held on purpose. Not its VmHWM: that counts the
    // shared pages of sh and libc, which the kernel charged to whichever cgroup
    // first read them, not to this rank's.
    let mem = cell(&r, &a, "MAXMEM");
    let hwm_kb = output
        .lines()
        .filter_map(|l| l.strip_prefix("hwm_kb ")?.parse::<f64>().ok())
        .fold(0.0, f64::max);
    assert!(hwm_kb > 0.0, "{output}");
    let peak_kb = match mem.split_at(mem.len().saturating_sub(1)) {
        (n, "K") => n.parse::<f64>().ok(),
        (n, "M") => n.parse::<f64>().ok().map(|m| m * 1024.0),
        (n, "G") => n.parse::<f64>().ok().map(|g| g * 1024.0 * 1024.0),
        _ => None,
    };
    assert!(
        mem == "-" || peak_kb.is_some_and(|p| p * 1024.0 >= HELD_BYTES && p <= 4.0 * hwm_kb),
        "MAXMEM {mem} against {HELD_BYTES} bytes held and a shell's own peak of {hwm_kb} kB:\n{listing}"
    );
    assert_eq!(cell(&r, &a, "UTILITY"), "1", "{listing}");
    // The start, end and submit columns follow each other.
    let (sub, st, end) = (
        cell(&r, &a, "SUBMIT"),
        cell(&r, &a, "START"),
        cell(&r, &a, "END"),
    );
    assert!(sub <= st && st < end, "{listing}");

    // B: finished with exit 7, and achieved its utility all the same.
    assert_eq!(cell(&r, &b, "STATE"), "FINISHED");
    assert_eq!(cell(&r, &b, "EXIT"), "7");
    assert_eq!(cell(&r, &b, "UTILITY"), "0.5", "{listing}");
    // C: failed, nothing ran, nothing achieved.
    assert_eq!(cell(&r, &c, "STATE"), "FAILED");
    assert_eq!(cell(&r, &c, "EXIT"), "-");
    assert_eq!(cell(&r, &c, "CPU"), "-");
    assert_eq!(cell(&r, &c, "UTILITY"), "0");

    // Credits: what the queue says it charged, and what reached the ledger.
    for job in [&a, &b, &c] {
        let charged = m.status(u64::from_str_radix(job, 16).unwrap()).charged;
        assert_eq!(
            cell(&r, job, "CHARGED"),
            money::format_credits(charged),
            "{listing}"
        );
        if charged > 0 {
            let reached = rexec_tests::wait_until(LIMIT, || {
                -m.market
                    .debits_of(job)
                    .iter()
                    .map(|d| d.amount)
                    .sum::<i64>()
                    == charged
            });
            assert!(reached.is_some(), "{job}: {:?}", m.market.debits_of(job));
        }
    }
    assert!(cell(&r, &a, "CHARGED") != "0", "{listing}");

    // --since: a job ending after the cut is listed, the three before it are not.
    let cut_s = now_ms() / 1000 + 1;
    assert!(rexec_tests::wait_until(LIMIT, || now_ms() >= cut_s * 1000 + 50).is_some());
    let d = submit(&["true"]);
    assert_eq!(batch(&m, &config, &["wait", &d]).code, Some(0));
    let cut = discovery::clock::date_time(cut_s).unwrap();
    let out = run(
        &config,
        &["history", "--since", &cut, "--format", "jobid,state"],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    let listed = rows(&out.out());
    assert_eq!(listed.len(), 1, "{out:?}");
    assert_eq!(cell(&listed, &d, "STATE"), "FINISHED", "{out:?}");
    assert_eq!(listed[0].len(), 2, "{out:?}");
    let out = run(&config, &["history", "--since", "1h"]);
    assert_eq!(rows(&out.out()).len(), 4, "{out:?}");
    let out = run(&config, &["history", "--format", "jobid,bogus"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    one_line_in(&out.stderr, "unknown field \"bogus\"");

    // Another user sees none of it, and may not ask for it.
    let mallory = |user: Option<&str>| {
        m.call_as(
            Role::User,
            "mallory",
            BatchOp::History(HistoryQuery {
                user: user.map(str::to_string),
                since_ms: None,
            }),
        )
    };
    assert!(
        matches!(mallory(None), Ok(BatchReply::History(v)) if v.is_empty()),
        "{:?}",
        mallory(None)
    );
    match mallory(Some(TEST_USER)) {
        Err(clients::rpc::RpcError::Server(e)) => {
            assert_eq!(e.code, BatchErrorCode::Forbidden, "{e:?}")
        }
        other => panic!("mallory read {TEST_USER}'s history: {other:?}"),
    }
    let out = run(&config, &["history", "-u", "mallory"]);
    assert_ne!(out.code, Some(0), "{out:?}");
    one_line_in(&out.stderr, "may list only their own jobs");
    // An admin names the user; without -u, an admin's own (none).
    let admin = with_queue(&m, &m.market.client_config(Role::Admin, "ops"));
    let out = run(&admin, &["history", "-u", TEST_USER, "--format", "jobid"]);
    assert_eq!(rows(&out.out()).len(), 4, "{out:?}");
    let out = run(&admin, &["history"]);
    assert_eq!(out.out().lines().count(), 1, "{out:?}");

    // The aggregate utility the queue exports is the sum of what each job achieved.
    let (code, text) = rexec_tests::prometheus::get(metrics, "/metrics").unwrap();
    assert_eq!(code, 200);
    assert_eq!(
        metric(&text, "rexec_batch_utility_achieved_credits"),
        2.0,
        "1 + 0.5 + 0 + 0.5:\n{text}"
    );
    assert_eq!(metric(&text, "rexec_batch_utility_max_credits"), 2.5);
}
