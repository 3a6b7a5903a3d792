//! The batch commands as a user types them: `rexec submit`, `queue`,
//! `cancel`, `output` and `wait`, and the refusals, each one line with its
//! documented exit status.
//!
//! The first scenarios need no queue: what the client itself refuses (a bad
//! utility spec, a deadline before the length, a certificate that cannot sign,
//! no queue configured) exits 2 before anything is sent, and a queue that
//! cannot be reached exits 255. The others run the batch market of
//! [`rexec_tests::batch`] (nodes, accountd, vexecd, batchd) and type the
//! commands against it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use certs::Role;
use certs::testing::TestPki;
use rexec_tests::batch::{BatchMarket, BatchOptions};
use rexec_tests::cluster::{TEST_USER, bin};
use rexec_tests::rexec::Outcome;

const LIMIT: Duration = Duration::from_secs(30);

/// The real `rexec` with `config`, and what it printed.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn rexec(config: &Path, args: &[&str]) -> Ran {
    let out = Command::new(bin("rexec"))
        .env("REXEC_CONFIG", config)
        .env_remove("REXEC_CA")
        .env_remove("REXEC_CERT")
        .env_remove("REXEC_KEY")
        .env_remove("REXEC_CRL")
        .args(args)
        .output()
        .expect("cannot run rexec");
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

impl std::fmt::Debug for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\nstdout: {}\nstderr: {}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Exactly one line on stderr, `rexec: ` first, holding `want`; nothing on stdout.
fn one_line(r: &Ran, code: i32, want: &str) {
    assert_eq!(r.code, Some(code), "{r:?}");
    assert_eq!(r.stderr.lines().count(), 1, "one line: {r:?}");
    assert!(r.stderr.starts_with("rexec: "), "{r:?}");
    assert!(r.stderr.contains(want), "{want:?} in {r:?}");
    assert!(r.stdout.is_empty(), "{r:?}");
}

/// A client configuration for `role` `name` of `pki`, with `extra` appended.
fn config(pki: &TestPki, dir: &Path, role: Role, name: &str, extra: &str) -> PathBuf {
    let tls = pki.tls_paths(role, name);
    let text = format!(
        "ca = {:?}\ncert = {:?}\nkey = {:?}\nmax_rate = \"100\"\n{extra}",
        tls.ca, tls.cert, tls.key
    );
    let path = dir.join(format!("client-{role}-{name}.toml"));
    std::fs::write(&path, text).expect("cannot write the client config");
    path
}

/// A loopback port nobody listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

#[test]
fn what_the_client_refuses_exits_2_in_one_line_before_anything_is_sent() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    // The queue's address is a closed port: reaching for it would exit 255.
    let batch = format!("[batch]\naddress = \"127.0.0.1:{}\"\n", closed_port());
    let alice = config(&pki, dir.path(), Role::User, "alice", &batch);
    let submit = |extra: &[&str]| {
        let mut args = vec!["submit", "-n", "2", "--length", "2h"];
        args.extend_from_slice(extra);
        args.push("true");
        rexec(&alice, &args)
    };
    one_line(
        &submit(&["--utility", "0:50,2h:lots,6h:0"]),
        2,
        "--utility: breakpoint 2 `2h:lots`: `lots` is not an amount",
    );
    one_line(
        &submit(&["--utility", "0:50,6h:0,2h:10"]),
        2,
        "2h is not after the breakpoint before (6h)",
    );
    one_line(
        &submit(&["--value", "50", "--deadline", "1h"]),
        2,
        "--deadline 1h must be later than --length (2h)",
    );
    let file = dir.path().join("worth.txt");
    std::fs::write(&file, "# value\n0:50\n2h:fifty\n").unwrap();
    one_line(
        &submit(&["--utility", &format!("@{}", file.display())]),
        2,
        "breakpoint 2 `2h:fifty`",
    );
    // A bid over max_rate is the market's refusal, found here: 254.
    one_line(&submit(&["-r", "101"]), 254, "max_rate = 100");

    // Only a user can sign a job.
    let admin = config(&pki, dir.path(), Role::Admin, "root-admin", &batch);
    let r = rexec(&admin, &["submit", "--length", "1m", "true"]);
    one_line(&r, 2, "only a user certificate can sign a job");

    // No [batch] address and no selector to ask: say what to add.
    let nowhere = config(&pki, dir.path(), Role::User, "bob", "");
    let r = rexec(&nowhere, &["queue"]);
    one_line(&r, 2, "add [batch] address = \"host:port\"");
}

#[test]
fn a_queue_that_cannot_be_reached_exits_255_in_one_line() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let port = closed_port();
    let batch = format!("[batch]\naddress = \"127.0.0.1:{port}\"\n");
    let alice = config(&pki, dir.path(), Role::User, "alice", &batch);
    let at = format!("batchd at 127.0.0.1:{port}");
    let r = rexec(&alice, &["submit", "--length", "1m", "-r", "1", "true"]);
    one_line(&r, 255, &at);
    for args in [
        &["queue"][..],
        &["cancel", "00000000000000ab"],
        &["output", "ab"],
        &["wait", "ab"],
    ] {
        one_line(&rexec(&alice, args), 255, &at);
    }
    // A job id that is not one is a usage error, found first.
    one_line(&rexec(&alice, &["wait", "not-a-job"]), 2, "not-a-job");
}

/// The test user's client configuration of `m`, with the queue in `[batch]`.
fn batch_config(m: &BatchMarket) -> PathBuf {
    let text = std::fs::read_to_string(&m.market.config).expect("client config");
    let path = m.market.dir.path().join("client-batch.toml");
    let table = format!("[batch]\naddress = \"{}\"\n", m.batchd.addr);
    std::fs::write(&path, format!("{text}{table}")).expect("cannot write the client config");
    path
}

/// The batch market with `o` and the test user's configuration naming its
/// queue; `None` where `test` cannot run.
fn start(test: &str, o: BatchOptions) -> Option<(BatchMarket, PathBuf)> {
    if !rexec_tests::can_run(test) {
        return None;
    }
    let m = BatchMarket::start(o);
    let config = batch_config(&m);
    Some((m, config))
}

/// `rexec ARGS` as the test user against `m`'s queue.
fn batch(m: &BatchMarket, config: &Path, args: &[&str]) -> Outcome {
    m.market.rexec().config(config).args(args).run()
}

/// The job id `rexec submit` printed: 16 hex digits alone on stdout.
fn job_id(out: &Outcome) -> String {
    assert_eq!(out.code, Some(0), "{out:?}");
    let text = out.out();
    let id = text.trim_end_matches('\n');
    assert!(
        id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()) && !id.contains('\n'),
        "one job id alone on stdout: {out:?}"
    );
    id.to_string()
}

/// The row of `job` in a `rexec queue` listing, as words.
fn row(listing: &str, job: &str) -> Option<Vec<String>> {
    listing
        .lines()
        .find(|l| l.starts_with(job))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
}

#[test]
fn submit_queue_wait_and_output_as_a_user_types_them() {
    let Some((m, config)) = start(
        "submit_queue_wait_and_output_as_a_user_types_them",
        BatchOptions::default(),
    ) else {
        return;
    };
    let script = "echo out; echo err >&2; sleep 2; exit 3";
    let out = batch(
        &m,
        &config,
        &[
            "submit", "-n", "2", "--length", "30s", "-r", "1", "sh", "-c", script,
        ],
    );
    let job = job_id(&out);
    assert!(out.stderr.is_empty(), "{out:?}");

    let out = batch(&m, &config, &["queue"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let listing = out.out();
    assert!(
        listing.starts_with("JOBID") && listing.contains("NODES(REASON)"),
        "{listing}"
    );
    let r = row(&listing, &job).unwrap_or_else(|| panic!("{job} in {listing}"));
    assert_eq!(
        (r[1].as_str(), r[4].as_str(), r[5].as_str()),
        (TEST_USER, "2", "1"),
        "{listing}"
    );
    assert!(
        ["QUEUED", "RUNNING", "FINISHED"].contains(&r[2].as_str()),
        "{listing}"
    );

    let out = batch(&m, &config, &["wait", &job]);
    assert_eq!(out.code, Some(3), "the job's own status: {out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");

    let out = batch(&m, &config, &["output", &job]);
    assert_eq!(out.code, Some(0), "{out:?}");
    // One line from each rank.
    assert_eq!(out.out(), "out\nout\n", "{out:?}");
    assert_eq!(out.stderr, "err\nerr\n", "{out:?}");

    // -o FILE takes stdout; stderr still comes here.
    let file = m.market.dir.path().join("job.out");
    let out = batch(&m, &config, &["output", &job, "-o", file.to_str().unwrap()]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 2);

    // Ended jobs are listed only with --ended, saying how they ended.
    let out = batch(&m, &config, &["queue"]);
    assert!(row(&out.out(), &job).is_none(), "{out:?}");
    let out = batch(&m, &config, &["queue", "--ended"]);
    let listing = out.out();
    let r = row(&listing, &job).unwrap_or_else(|| panic!("{job} in {listing}"));
    assert_eq!(r[2], "FINISHED", "{listing}");
    assert!(listing.contains("(exit 3)"), "{listing}");
}

#[test]
fn output_follows_a_running_job_and_says_what_the_queue_dropped() {
    let Some((m, config)) = start(
        "output_follows_a_running_job_and_says_what_the_queue_dropped",
        BatchOptions {
            nodes: 1,
            max_output: 1000,
            ..BatchOptions::default()
        },
    ) else {
        return;
    };
    // Three lines a second apart, then 3000 bytes more than the queue keeps.
    let script =
        "for i in 1 2 3; do echo line-$i; sleep 1; done; head -c 3000 /dev/zero | tr '\\0' x";
    let out = batch(
        &m,
        &config,
        &["submit", "--length", "1m", "-r", "1", "sh", "-c", script],
    );
    let job = job_id(&out);
    let out = batch(&m, &config, &["output", "--follow", &job]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let text = out.out();
    assert!(text.starts_with("line-1\nline-2\nline-3\n"), "{out:?}");
    assert_eq!(text.len(), 1000, "the queue keeps 1000 bytes: {out:?}");
    let said = format!("job {job}: the queue kept only part of its output; ");
    one_line_in(&out.stderr, &said);
    // 3021 bytes written, 1000 kept; a run started again (a rank lost on a
    // loaded machine) drops all of its 3021.
    let dropped: u64 = out
        .stderr
        .split(&said)
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a count of bytes: {out:?}"));
    assert_eq!(dropped % 3021, 2021, "{out:?}");
    // wait, after the fact, returns at once with the job's status.
    let out = batch(&m, &config, &["wait", &job]);
    assert_eq!(out.code, Some(0), "{out:?}");

    // The ledger: the queue's charge names the job, the queue as node, no rank.
    let tls = m.market.pki.tls_paths(Role::User, TEST_USER);
    let charged = rexec_tests::wait_until(LIMIT, || {
        let h = m.market.accountd.ctl(&tls, &["history"]);
        h.stdout.lines().any(|l| l.contains(&job))
    });
    let history = m.market.accountd.ctl(&tls, &["history"]);
    assert!(charged.is_some(), "no charge of {job}: {history:?}");
    let header: Vec<&str> = history
        .stdout
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let line = history.stdout.lines().find(|l| l.contains(&job)).unwrap();
    let row: Vec<&str> = line.split_whitespace().collect();
    let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!(
        (col("kind"), col("node"), col("job")),
        ("debit", "batchd", job.as_str()),
        "{history:?}"
    );
    assert!(line.trim_end().ends_with("service:batchd"), "{history:?}");
}

#[test]
fn cancel_dequeues_a_waiting_job_and_wait_says_it_was_cancelled() {
    let Some((m, config)) = start(
        "cancel_dequeues_a_waiting_job_and_wait_says_it_was_cancelled",
        BatchOptions {
            nodes: 1,
            cpus: 1,
            ..BatchOptions::default()
        },
    ) else {
        return;
    };
    let submit = |secs: &str| {
        let out = batch(&m, &config, &["submit", "--length", "1m", "sleep", secs]);
        job_id(&out)
    };
    let first = submit("60");
    let second = submit("1");
    // One processor: the second waits behind the first, first in line.
    let waiting = rexec_tests::wait_until(LIMIT, || {
        let out = batch(&m, &config, &["queue"]);
        let l = out.out();
        row(&l, &first).is_some_and(|r| r[2] == "RUNNING")
            && row(&l, &second).is_some_and(|r| r[2] == "QUEUED" && r[3] == "1")
    });
    assert!(waiting.is_some(), "{}", m.batchd.log());

    let out = batch(&m, &config, &["cancel", &second]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.out(), format!("job {second} cancelled\n"));
    let out = batch(&m, &config, &["wait", &second]);
    assert_eq!(out.code, Some(253), "{out:?}");
    one_line_in(&out.stderr, &format!("job {second} was cancelled"));

    // A running job's ranks are killed; an unknown job is said on stderr, status 1.
    let out = batch(&m, &config, &["cancel", &first, "00000000000000ab"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(out.out(), format!("job {first} cancelled\n"));
    one_line_in(&out.stderr, "job 00000000000000ab: no job 00000000000000ab");
    let out = batch(&m, &config, &["wait", &first]);
    assert_eq!(out.code, Some(253), "{out:?}");
    let gone = rexec_tests::wait_until(LIMIT, || m.market.marked(&[]).is_empty());
    assert!(
        gone.is_some(),
        "the cancelled job's processes are still there"
    );
}

#[test]
fn refused_submissions_exit_254_in_one_line() {
    let Some((m, config)) = start(
        "refused_submissions_exit_254_in_one_line",
        BatchOptions {
            initial: "10",
            ..BatchOptions::default()
        },
    ) else {
        return;
    };
    // No balance for it: 1 credit per CPU-minute on 2 CPUs for an hour.
    let out = batch(
        &m,
        &config,
        &["submit", "-n", "2", "--length", "1h", "-r", "1", "true"],
    );
    assert_eq!(out.code, Some(254), "{out:?}");
    one_line_in(
        &out.stderr,
        "the queue refused the job: balance 10 credits cannot pay for the job's estimated cost of 120 credits",
    );
    assert!(out.stdout.is_empty(), "{out:?}");
    // Wider than the market: 2 nodes of 2 CPUs.
    let out = batch(
        &m,
        &config,
        &["submit", "-n", "5", "--length", "1m", "true"],
    );
    assert_eq!(out.code, Some(254), "{out:?}");
    one_line_in(&out.stderr, "needs 5 processors");
    // A bad utility spec never reaches the queue.
    let out = batch(
        &m,
        &config,
        &["submit", "--length", "1m", "--utility", "1h", "true"],
    );
    assert_eq!(out.code, Some(2), "{out:?}");
    one_line_in(&out.stderr, "--utility: breakpoint 1 `1h`: not TIME:VALUE");
    // Nothing was queued; and without a [batch] address, the queue is the one
    // the selector knows of.
    let text = std::fs::read_to_string(&m.market.config).expect("client config");
    let via = m.market.dir.path().join("client-via-selector.toml");
    let table = format!("[selectors]\nvexecd = \"{}\"\n", m.vexecd.addr);
    std::fs::write(&via, format!("{text}{table}")).expect("cannot write the client config");
    let found = rexec_tests::wait_until(LIMIT, || {
        let out = batch(&m, &via, &["queue", "--ended"]);
        out.code == Some(0) && out.out().lines().count() == 1
    });
    assert!(
        found.is_some(),
        "{:?}",
        batch(&m, &via, &["queue", "--ended"])
    );
}

/// `stderr` is one `rexec: ` line holding `want`.
fn one_line_in(stderr: &str, want: &str) {
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.starts_with("rexec: "), "{stderr:?}");
    assert!(stderr.contains(want), "{want:?} in {stderr:?}");
}
