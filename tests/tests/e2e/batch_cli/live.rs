//! The batch commands against a live queue: submit, queue, wait, output,
//! cancel, the queue's refusals, the queue found through a selector, and the
//! ledger naming the job.

use std::path::{Path, PathBuf};
use std::time::Duration;

use certs::Role;
use rexec_tests::batch::{BatchMarket, BatchOptions};
use rexec_tests::cluster::TEST_USER;
use rexec_tests::rexec::Outcome;

use super::one_line_in;

const LIMIT: Duration = Duration::from_secs(30);

/// The test user's client configuration of `m`, with the queue in `[batch]`.
fn batch_config(m: &BatchMarket) -> PathBuf {
    with_queue(m, &m.market.config)
}

/// A copy of the client configuration at `base` with the queue in `[batch]`.
pub(super) fn with_queue(m: &BatchMarket, base: &Path) -> PathBuf {
    let text = std::fs::read_to_string(base).expect("client config");
    let path = base.with_extension("batch.toml");
    let table = format!("[batch]\naddress = \"{}\"\n", m.batchd.addr);
    std::fs::write(&path, format!("{text}{table}")).expect("cannot write the client config");
    path
}

/// The batch market with `o` and the test user's configuration naming its
/// queue; `None` where `test` cannot run.
pub(super) fn start(test: &str, o: BatchOptions) -> Option<(BatchMarket, PathBuf)> {
    start_with(test, || o)
}

/// As [`start`], with the options made only once `test` may run (making them may
/// take a port, which needs root's counter file).
pub(super) fn start_with(
    test: &str,
    options: impl FnOnce() -> BatchOptions,
) -> Option<(BatchMarket, PathBuf)> {
    if !rexec_tests::can_run(test) {
        return None;
    }
    let m = BatchMarket::start(options());
    let config = batch_config(&m);
    Some((m, config))
}

/// `rexec ARGS` as the test user against `m`'s queue.
pub(super) fn batch(m: &BatchMarket, config: &Path, args: &[&str]) -> Outcome {
    m.market.rexec().config(config).args(args).run()
}

/// The job id `rexec submit` printed: 16 hex digits alone on stdout.
pub(super) fn job_id(out: &Outcome) -> String {
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
    // An admin sees both with --all, and has no jobs of their own.
    let admin = with_queue(&m, &m.market.client_config(Role::Admin, "ops"));
    let out = batch(&m, &admin, &["queue", "--all"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let listing = out.out();
    assert!(
        row(&listing, &first).is_some() && row(&listing, &second).is_some(),
        "{listing}"
    );
    let out = batch(&m, &admin, &["queue"]);
    assert_eq!(out.out().lines().count(), 1, "{out:?}");

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
fn refusals_exit_254_in_one_line_and_a_payable_utility_is_queued() {
    let Some((m, config)) = start(
        "refusals_exit_254_in_one_line_and_a_payable_utility_is_queued",
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
    // Nothing of those was queued. A utility the balance can pay, from a file,
    // is; and without a [batch] address, the queue is the one the selector
    // knows of.
    let file = m.market.dir.path().join("worth.txt");
    std::fs::write(
        &file,
        "# worth 5 credits within the hour\n0:5\n1h:5, 2h:0\n",
    )
    .unwrap();
    let utility = format!("@{}", file.display());
    let out = batch(
        &m,
        &config,
        &[
            "submit",
            "--length",
            "1m",
            "--utility",
            &utility,
            "sleep",
            "1",
        ],
    );
    let job = job_id(&out);
    let text = std::fs::read_to_string(&m.market.config).expect("client config");
    let via = m.market.dir.path().join("client-via-selector.toml");
    let table = format!("[selectors]\nvexecd = \"{}\"\n", m.vexecd.addr);
    std::fs::write(&via, format!("{text}{table}")).expect("cannot write the client config");
    let found = rexec_tests::wait_until(LIMIT, || {
        let out = batch(&m, &via, &["queue", "--ended"]);
        let listing = out.out();
        out.code == Some(0) && listing.lines().count() == 2 && row(&listing, &job).is_some()
    });
    assert!(
        found.is_some(),
        "{:?}",
        batch(&m, &via, &["queue", "--ended"])
    );
}

/// An option rexec does not know, before the program, is a usage error naming it:
/// nothing is queued (the old client queued `--bogus` as the program, a job that
/// failed three times, or complained that `--length` was missing) and nothing runs on
/// a node (`rexec --bogus hostname` ran a program named `--bogus`). After the program
/// the same word is the program's, in a batch job and in a run.
#[test]
fn an_unknown_option_before_the_program_queues_and_runs_nothing() {
    let Some((m, config)) = start(
        "an_unknown_option_before_the_program_queues_and_runs_nothing",
        BatchOptions::default(),
    ) else {
        return;
    };
    for args in [
        &["submit", "--length", "10s", "--bogus", "/bin/true"][..],
        &["submit", "--bogus", "--length", "10s", "/bin/true"],
        &["--bogus", "hostname"],
        &["-n", "2", "--bogus", "hostname"],
    ] {
        let out = batch(&m, &config, args);
        assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
        one_line_in(&out.stderr, "unknown option --bogus");
        assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
    }
    let out = batch(&m, &config, &["queue", "--ended"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.out().lines().count(), 1, "only the heading: {out:?}");
    assert!(
        m.market.marked(&[]).is_empty(),
        "nothing ran on a node: {out:?}"
    );

    let out = batch(
        &m,
        &config,
        &["submit", "--length", "10s", "/bin/echo", "--bogus"],
    );
    let job = job_id(&out);
    let out = batch(&m, &config, &["wait", &job]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let out = batch(&m, &config, &["output", &job]);
    assert_eq!(out.out(), "--bogus\n", "{out:?}");
    let out = batch(&m, &config, &["/bin/echo", "--bogus", "-l"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.out(), "--bogus -l\n", "{out:?}");
}

/// A job whose program the nodes do not have fails at once, the node's reason in
/// `rexec wait` and `rexec queue --ended`, and takes no node out of service: a job
/// as wide as the whole market, submitted right after, starts at the next tick
/// (before, each refusal counted as a lost node, kept out for 10 s).
#[test]
fn a_missing_program_fails_only_its_own_job_and_stalls_no_one() {
    let Some((m, config)) = start(
        "a_missing_program_fails_only_its_own_job_and_stalls_no_one",
        BatchOptions {
            nodes: 3,
            ..BatchOptions::default()
        },
    ) else {
        return;
    };
    let bad = job_id(&batch(
        &m,
        &config,
        &["submit", "--length", "30s", "./no-such-program"],
    ));
    let out = batch(&m, &config, &["wait", &bad]);
    assert_ne!(out.code, Some(0), "{out:?}");
    one_line_in(&out.stderr, "program ./no-such-program not found on node n");
    assert!(out.stderr.contains("failed"), "{out:?}");
    let listing = batch(&m, &config, &["queue", "--ended"]).out();
    let r = row(&listing, &bad).unwrap_or_else(|| panic!("{bad} in {listing}"));
    assert_eq!(r[2], "FAILED", "{listing}");
    assert!(listing.contains("not found on node n"), "{listing}");
    let entry = m.status(u64::from_str_radix(&bad, 16).unwrap());
    assert_eq!(entry.attempts, 1, "failed at its first refusal: {entry:?}");

    // Every processor of the market (3 nodes of 2), at once.
    let asked = std::time::Instant::now();
    let wide = job_id(&batch(
        &m,
        &config,
        &["submit", "-n", "6", "--length", "30s", "sleep", "1"],
    ));
    let wide = u64::from_str_radix(&wide, 16).unwrap();
    m.wait_for(wide, LIMIT, |e| e.state != proto::batch::JobState::Queued);
    let waited = asked.elapsed();
    eprintln!("the whole-market job left the queue {waited:?} after its submission");
    // The next 500 ms tick, with room for a loaded machine; a node kept out of
    // service would hold it 10 s.
    assert!(
        waited < Duration::from_secs(4),
        "the whole-market job waited {waited:?}\n{}",
        m.batchd.log()
    );
    let done = m.wait_for(wide, LIMIT, |e| e.state == proto::batch::JobState::Finished);
    assert_eq!(
        done.exit,
        Some(proto::node::ExitStatus::Code(0)),
        "{done:?}"
    );
}

/// A copy of the client configuration at `base` naming the queue by `addresses`.
fn with_queues(base: &Path, addresses: &[String]) -> PathBuf {
    let text = std::fs::read_to_string(base).expect("client config");
    let path = base.with_extension("queues.toml");
    let table = format!("[batch]\naddress = {addresses:?}\n");
    std::fs::write(&path, format!("{text}{table}")).expect("cannot write the client config");
    path
}

#[test]
fn the_batch_commands_fail_over_past_dead_and_silent_queues_within_2s() {
    let Some((m, direct)) = start(
        "the_batch_commands_fail_over_past_dead_and_silent_queues_within_2s",
        BatchOptions::default(),
    ) else {
        return;
    };
    // A queue that died (its port refuses) and one whose host vanished (the
    // connection is accepted by the kernel and nothing ever answers), before
    // the live one.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap().to_string();
    drop(dead);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap().to_string();
    let listed = with_queues(
        &m.market.config,
        &[dead_addr, silent_addr, m.batchd.addr.clone()],
    );
    let timed = |config: &Path, args: &[&str]| {
        let start = std::time::Instant::now();
        let out = batch(&m, config, args);
        (out, start.elapsed())
    };
    let (out, alone) = timed(&direct, &["queue"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let (out, through) = timed(&listed, &["queue"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stderr.is_empty(), "failing over is silent: {out:?}");
    let extra = through.saturating_sub(alone);
    eprintln!("rexec queue: {alone:?} to the live queue, {through:?} past a dead and a silent one");
    assert!(
        extra <= Duration::from_secs(2),
        "failing over took {extra:?} more"
    );

    let (out, took) = timed(&listed, &["submit", "--length", "30s", "-r", "1", "true"]);
    let job = job_id(&out);
    eprintln!("rexec submit past a dead and a silent queue: {took:?}");
    let out = batch(&m, &listed, &["wait", &job]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let out = batch(&m, &direct, &["queue", "--ended"]);
    assert!(row(&out.out(), &job).is_some(), "{out:?}");
    drop(silent);
}
