//! A node restarted with a non-empty journal settles it exactly once.

use std::time::Duration;

use accountd::debit::{DebitClient, DebitClientConfig, Settlement};
use accountd::journal::Charge;
use certs::Role;
use proto::account::*;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_restarted_with_a_full_journal_settles_it_exactly_once() {
    let d = Accountd::start().await;
    d.admin(&["create", "alice", "--initial", "50"]).ok();
    d.admin(&["create", "bob", "--initial", "50"]).ok();
    let journal = d.dir.path().join("node.journal");
    let connector = d.connector(Role::Node, "n1");
    // A dead address (held, so no other test's server can appear there):
    // nothing is delivered, everything stays journaled.
    let held = unused_port();
    let dead = held.local_addr().unwrap().to_string();
    let mut cfg = DebitClientConfig::new(journal.clone(), dead, connector.clone());
    cfg.backoff_min = Duration::from_millis(10);
    let (first, _rx) = DebitClient::start(cfg.clone()).await.unwrap();
    let charges: Vec<Charge> = (0..40u64)
        .map(|s| {
            Charge::Debit(debit(
                "n1",
                "j9",
                s,
                if s % 2 == 0 { "alice" } else { "bob" },
                100_000 + s as i64,
            ))
        })
        .collect();
    for c in &charges {
        first.charge(c.clone()).await.unwrap();
    }
    // The same key twice is one charge.
    first.charge(charges[0].clone()).await.unwrap();
    assert_eq!(first.pending(), 40);
    tokio::time::sleep(Duration::from_millis(100)).await;
    first.shutdown().await;

    // Some of them did reach accountd before the node died (the answers were lost).
    let mut direct = d.client(Role::Node, "n1").await;
    for c in &charges[..5] {
        direct.call(c.to_op()).await.unwrap();
    }
    assert_eq!(d.entry_count(), 2 + 5);

    // The journal kept all 40 across the restart. (Read from the file: once
    // the new client starts, its sender may settle some before we could look.)
    assert_eq!(
        accountd::journal::Journal::open(&journal)
            .unwrap()
            .pending_len(),
        40
    );
    // The node comes back, now able to reach accountd.
    cfg.server = d.addr.clone();
    let (second, mut rx) = DebitClient::start(cfg.clone()).await.unwrap();
    assert!(second.wait_settled(Duration::from_secs(30)).await);
    let mut dup = 0;
    let mut applied = 0;
    while let Ok(s) = rx.try_recv() {
        let Settlement::Applied { receipt, .. } = s else {
            panic!("{s:?}")
        };
        applied += 1;
        dup += receipt.duplicate as usize;
    }
    assert_eq!((applied, dup), (40, 5));
    second.shutdown().await;
    assert_eq!(d.entry_count(), 2 + 40);
    let total: i64 = charges
        .iter()
        .map(|c| {
            if let Charge::Debit(d) = c {
                d.amount
            } else {
                0
            }
        })
        .sum();
    assert_eq!(d.balance("alice") + d.balance("bob"), 100 * C - total);

    // A third start finds nothing to send and sends nothing.
    let (third, _rx) = DebitClient::start(cfg).await.unwrap();
    assert_eq!(third.pending(), 0);
    tokio::time::sleep(Duration::from_millis(100)).await;
    third.shutdown().await;
    assert_eq!(d.entry_count(), 2 + 40);
    assert!(d.admin(&["audit"]).ok().starts_with("audit passed"));
}

#[tokio::test]
async fn a_charge_for_an_unknown_user_is_refused_once_and_leaves_the_journal() {
    let d = Accountd::start().await;
    let mut cfg = DebitClientConfig::new(
        d.dir.path().join("j"),
        d.addr.clone(),
        d.connector(Role::Node, "n1"),
    );
    cfg.backoff_min = Duration::from_millis(10);
    let (c, mut rx) = DebitClient::start(cfg).await.unwrap();
    c.charge(Charge::Debit(debit("n1", "j", 1, "ghost", C)))
        .await
        .unwrap();
    assert!(c.wait_settled(Duration::from_secs(10)).await);
    match rx.recv().await.unwrap() {
        Settlement::Refused { code, message, .. } => {
            assert_eq!(code, ErrorCode::UnknownUser);
            assert!(message.contains("accountctl create ghost"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    c.shutdown().await;
    assert_eq!(d.entry_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debit_client_outlives_an_idle_timeout_without_delay() {
    let d = Accountd::start_with(&["--idle-timeout", "1"]).await;
    d.admin(&["create", "alice", "--initial", "5"]).ok();
    let mut cfg = DebitClientConfig::new(
        d.dir.path().join("j"),
        d.addr.clone(),
        d.connector(Role::Node, "n1"),
    );
    // A long backoff would show up as a slow second charge.
    cfg.backoff_min = Duration::from_secs(20);
    let (c, _rx) = DebitClient::start(cfg).await.unwrap();
    c.charge(Charge::Debit(debit("n1", "j", 1, "alice", C)))
        .await
        .unwrap();
    assert!(c.wait_settled(Duration::from_secs(10)).await);
    // accountd closes the idle connection after 1 s (with room for a slow
    // machine: the point is a charge sent on a connection already closed).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    c.charge(Charge::Debit(debit("n1", "j", 2, "alice", C)))
        .await
        .unwrap();
    // Well under the 20 s backoff, with room for a loaded machine.
    assert!(
        c.wait_settled(Duration::from_secs(10)).await,
        "the charge waited for a backoff"
    );
    c.shutdown().await;
    assert_eq!(d.balance("alice"), 3 * C);
}

#[tokio::test]
async fn shutdown_is_prompt_while_accountd_hangs() {
    let d = Accountd::start().await;
    // Something that accepts TCP and then says nothing at all.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let (accepted_tx, mut accepted) = tokio::sync::mpsc::unbounded_channel();
    let _hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            held.push(s);
            let _ = accepted_tx.send(());
        }
    });
    let journal = d.dir.path().join("j");
    let cfg = DebitClientConfig::new(journal.clone(), addr, d.connector(Role::Node, "n1"));
    let (c, _rx) = DebitClient::start(cfg).await.unwrap();
    c.charge(Charge::Debit(debit("n1", "j", 1, "alice", C)))
        .await
        .unwrap();
    // The client is connected and waiting for a handshake that never comes.
    tokio::time::timeout(Duration::from_secs(20), accepted.recv())
        .await
        .expect("the client never connected")
        .unwrap();
    let t = std::time::Instant::now();
    c.shutdown().await;
    // Prompt: well under the 10 s handshake and request time limits it
    // would otherwise wait for, with room for a loaded machine.
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "shutdown took {:?}",
        t.elapsed()
    );
    assert_eq!(
        accountd::journal::Journal::open(&journal)
            .unwrap()
            .pending_len(),
        1,
        "the charge is kept"
    );
}

// A node process killed with SIGKILL while it is writing charges: the test
// re-runs itself (this test binary, only this test) as the node, with
// `ACCOUNTD_IT_CHILD_JOURNAL` set, which makes that run the child (see
// `node_child_streams_debits`); it reads which charges the child reported as
// journalled, kills it, and replays its journal with a new DebitClient. The
// child is not a test of its own: it cannot be run, and pass, alone.

/// Set (to the journal path) only in the child process.
const CHILD_JOURNAL: &str = "ACCOUNTD_IT_CHILD_JOURNAL";
const CHILD_ADDR: &str = "ACCOUNTD_IT_CHILD_ADDR";
const CHILD_CA: &str = "ACCOUNTD_IT_CHILD_CA";
const CHILD_CERT: &str = "ACCOUNTD_IT_CHILD_CERT";
const CHILD_KEY: &str = "ACCOUNTD_IT_CHILD_KEY";
const CHILD_CRL: &str = "ACCOUNTD_IT_CHILD_CRL";
/// The child's node name (its certificate and its keys) and job.
const CHILD_NODE: &str = "n7";
const CHILD_JOB: &str = "killed";
/// More charges than the child can journal before the parent kills it.
const CHILD_STREAM: u64 = 1_000_000;
/// What the child prints after `charge()` returned for sequence number N.
const JOURNALLED: &str = "journalled ";

fn child_user(seq: u64) -> &'static str {
    if seq.is_multiple_of(2) {
        "alice"
    } else {
        "bob"
    }
}

fn child_amount(seq: u64) -> i64 {
    1_000 + ((seq * 37) % 1_000) as i64
}

/// The child: a node streaming debits as fast as its journal takes them, and
/// printing each sequence number once the charge is durably journalled. It never
/// returns: the parent kills it, and a stream that ends first fails it.
async fn node_child_streams_debits(journal: std::ffi::OsString) {
    let var = |name: &str| std::env::var_os(name).unwrap_or_else(|| panic!("{name} is not set"));
    let tls = certs::TlsPaths {
        ca: var(CHILD_CA).into(),
        cert: var(CHILD_CERT).into(),
        key: var(CHILD_KEY).into(),
        crl: std::env::var_os(CHILD_CRL).map(Into::into),
    };
    let addr = var(CHILD_ADDR).into_string().unwrap();
    let mut cfg = DebitClientConfig::new(journal.into(), addr, certs::connector(&tls).unwrap());
    cfg.backoff_min = Duration::from_millis(20);
    cfg.backoff_max = Duration::from_millis(200);
    let (c, _rx) = DebitClient::start(cfg).await.unwrap();
    for seq in 0..CHILD_STREAM {
        c.charge(Charge::Debit(debit(
            CHILD_NODE,
            CHILD_JOB,
            seq,
            child_user(seq),
            child_amount(seq),
        )))
        .await
        .unwrap();
        // One write per line (stdout is line-buffered), after the fsync.
        println!("{JOURNALLED}{seq}");
    }
    c.wait_settled(Duration::from_secs(600)).await;
    panic!("the child node streamed all {CHILD_STREAM} debits before the parent killed it");
}

/// Kills the child process if the test fails before it does.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Debits of the child's job in the ledger: (seq, count, sum of amounts).
fn child_ledger_rows(d: &Accountd) -> Vec<(u64, i64, i64)> {
    let db = d.db();
    let mut stmt = db
        .prepare(
            "SELECT seq, COUNT(*), SUM(amount) FROM entries
             WHERE kind = 'debit' AND node = ?1 AND job = ?2 GROUP BY seq ORDER BY seq",
        )
        .unwrap();
    stmt.query_map([CHILD_NODE, CHILD_JOB], |r| {
        Ok((r.get::<_, i64>(0)? as u64, r.get(1)?, r.get(2)?))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_while_journalling_settles_every_journalled_debit_exactly_once() {
    use std::io::BufRead;
    use std::os::unix::process::ExitStatusExt;

    if let Some(journal) = std::env::var_os(CHILD_JOURNAL) {
        return node_child_streams_debits(journal).await;
    }
    let started = std::time::Instant::now();
    let d = Accountd::start().await;
    d.admin(&["create", "alice", "--initial", "1000"]).ok();
    d.admin(&["create", "bob", "--initial", "1000"]).ok();
    let journal = d.dir.path().join("killed-node.journal");
    let tls = d.tls(Role::Node, CHILD_NODE);
    let child_name = format!(
        "{}::a_node_killed_while_journalling_settles_every_journalled_debit_exactly_once",
        module_path!().split_once("::").map_or("", |(_, m)| m)
    );
    let child_log = d.dir.path().join("child.stderr");
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", &child_name, "--nocapture", "--test-threads=1"])
        .env(CHILD_JOURNAL, &journal)
        .env(CHILD_ADDR, &d.addr)
        .env(CHILD_CA, &tls.ca)
        .env(CHILD_CERT, &tls.cert)
        .env(CHILD_KEY, &tls.key)
        .env_remove(CHILD_CRL)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&child_log).unwrap());
    if let Some(crl) = &tls.crl {
        cmd.env(CHILD_CRL, crl);
    }
    let mut child = KillOnDrop(cmd.spawn().unwrap());
    let stdout = child.0.stdout.take().unwrap();
    // Reads every complete line the child wrote, up to its death (the pipe's
    // end). The harness's "test NAME ... " precedes the first one on its line.
    let reader = std::thread::spawn(move || {
        let mut out = std::io::BufReader::new(stdout);
        let mut seqs = Vec::new();
        let mut line = String::new();
        while out.read_line(&mut line).unwrap_or(0) > 0 && line.ends_with('\n') {
            if let Some((_, seq)) = line.trim_end().split_once(JOURNALLED) {
                seqs.push(seq.parse::<u64>().unwrap());
            }
            line.clear();
        }
        seqs
    });

    // Kill it once accountd has applied a few of its debits: by then the
    // child is well into its stream, with more charges journalled than sent.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let threshold = 5 + (nanos % 40) as usize;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let in_ledger_at_kill = loop {
        let n = child_ledger_rows(&d).len();
        if n >= threshold {
            break n;
        }
        if let Some(status) = child.0.try_wait().unwrap() {
            panic!(
                "the child node exited ({status}) before the kill: {}",
                std::fs::read_to_string(&child_log).unwrap_or_default()
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "only {n} of the child's debits reached the ledger in 60 s: {}",
            std::fs::read_to_string(&child_log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    child.0.kill().unwrap();
    let status = child.0.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "{status}");
    let printed = reader.join().unwrap();
    assert!(
        printed.iter().copied().eq(0..printed.len() as u64),
        "the child journalled in order, each charge once"
    );
    let printed = printed.len() as u64;
    assert!(
        printed < CHILD_STREAM,
        "the child finished its stream before the kill"
    );

    // The node comes back on the same journal and replays what was pending.
    let mut cfg = DebitClientConfig::new(
        journal.clone(),
        d.addr.clone(),
        d.connector(Role::Node, CHILD_NODE),
    );
    cfg.backoff_min = Duration::from_millis(20);
    cfg.backoff_max = Duration::from_millis(200);
    let (node, mut rx) = DebitClient::start(cfg).await.unwrap();
    let pending_at_restart = node.pending();
    assert!(
        node.wait_settled(Duration::from_secs(120)).await,
        "{} charges still pending after 120 s",
        node.pending()
    );
    node.shutdown().await;
    let (mut applied, mut duplicates) = (0, 0);
    while let Ok(s) = rx.try_recv() {
        let Settlement::Applied { receipt, .. } = s else {
            panic!("{s:?}")
        };
        applied += 1;
        duplicates += usize::from(receipt.duplicate);
    }
    assert_eq!(
        applied, pending_at_restart,
        "each pending charge settled once"
    );
    assert_eq!(
        accountd::journal::Journal::open(&journal)
            .unwrap()
            .pending_len(),
        0,
        "the journal is empty"
    );

    // The ledger holds each journalled debit exactly once: every one the
    // child printed, and possibly the one it journalled but had not printed
    // when it died; nothing else, nothing twice.
    let rows = child_ledger_rows(&d);
    for &(seq, count, sum) in &rows {
        assert_eq!(count, 1, "debit {seq} is in the ledger {count} times");
        assert_eq!(
            sum.abs(),
            child_amount(seq),
            "debit {seq} has the wrong amount"
        );
    }
    let seqs: Vec<u64> = rows.iter().map(|r| r.0).collect();
    assert!(
        seqs.iter().copied().eq(0..printed) || seqs.iter().copied().eq(0..=printed),
        "the child printed 0..{printed}, the ledger has {} debits from {:?} to {:?}",
        seqs.len(),
        seqs.first(),
        seqs.last()
    );
    for user in ["alice", "bob"] {
        let charged: i64 = seqs
            .iter()
            .filter(|&&s| child_user(s) == user)
            .map(|&s| child_amount(s))
            .sum();
        assert_eq!(d.balance(user), 1000 * C - charged, "balance of {user}");
    }
    assert_eq!(d.entry_count(), 2 + seqs.len() as i64);
    assert!(d.admin(&["audit"]).ok().starts_with("audit passed"));
    eprintln!(
        "killed at {in_ledger_at_kill} in the ledger, {printed} printed as journalled, \
         {pending_at_restart} pending at restart ({duplicates} answered as duplicates), \
         {} in the ledger at the end; {:?} in all",
        seqs.len(),
        started.elapsed()
    );
}
