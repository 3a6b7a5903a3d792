//! Announcements of a real rexecd with a `[discovery]` table, heard on loopback
//! multicast (group joined on 127.0.0.1, TTL 0, a group and port per test): who and where
//! the node is, its market state at once after a job starts and ends, its
//! availability summary; the availability history across restarts (and a corrupt
//! history file, which must not stop rexecd); a positive bid while accountd is to
//! be learnt and none has been heard.

use std::path::Path;
use std::time::{Duration, Instant};

use discovery::config::DiscoveryConfig;
use discovery::net::Receiver;
use discovery::profile::summary::Summary;
use proto::announce::{Announcement, Kind, NodeStatus};
use proto::node::{ErrorCode, ExitStatus, Signal, ToNode};

use crate::util::*;

const CLUSTER: &str = "announce-tests";

/// The `[discovery]` table of a test on a group and port of its own
/// ([`testhost::net::channel`]), and the same as the receiver's config.
fn discovery(period: &str) -> (String, DiscoveryConfig) {
    let testhost::net::Channel { group, port } = testhost::net::channel();
    let text = format!(
        "[discovery]\ncluster = {CLUSTER:?}\ngroup = \"{group}\"\nport = {port}\n\
         interface = \"127.0.0.1\"\nttl = 0\nperiod = {period:?}\n"
    );
    let file: discovery::config::DiscoveryFile =
        toml::from_str(text.trim_start_matches("[discovery]\n")).unwrap();
    (text, file.resolve().unwrap())
}

/// The next announcement of node `n1` of this cluster heard within `limit`.
async fn next(r: &Receiver, limit: Duration) -> Option<(Announcement, NodeStatus)> {
    let end = tokio::time::Instant::now() + limit;
    loop {
        let heard = tokio::time::timeout_at(end, r.recv()).await.ok()?.unwrap();
        let a = Announcement::decode(&heard.bytes).expect("a valid announcement");
        if a.cluster != CLUSTER || a.name != NODE {
            continue;
        }
        let Kind::Node(status) = a.kind else {
            panic!("a node announced as {:?}", a.kind);
        };
        return Some((a, status));
    }
}

/// Waits for an announcement satisfying `wanted`; returns it and how long it took.
async fn until(
    r: &Receiver,
    limit: Duration,
    seqs: &mut Vec<u64>,
    wanted: impl Fn(&NodeStatus) -> bool,
) -> (NodeStatus, Duration) {
    let start = Instant::now();
    loop {
        let left = limit.saturating_sub(start.elapsed());
        let (a, s) = next(r, left)
            .await
            .unwrap_or_else(|| panic!("no such announcement within {limit:?}; seqs {seqs:?}"));
        seqs.push(a.seq);
        if wanted(&s) {
            return (s, start.elapsed());
        }
    }
}

fn write_config(dir: &Path, text: &str) -> String {
    let path = dir.join("rexecd.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announces_its_market_at_once_on_every_change() {
    if !can_run("announce_market") {
        return;
    }
    // A long period: the announcements after a start and an exit must come from the
    // change, not from the period.
    let (table, net) = discovery("3s");
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("availability");
    let config = write_config(
        dir.path(),
        &format!(
            "{table}[announce]\nhistory_file = {history:?}\nspeed = 1.5\nfind_accountd = false\n\
             [market]\nshare_control = \"open\"\nmeter_interval = \"200ms\"\n"
        ),
    );
    let r = Receiver::bind(&net, None).unwrap();
    let d = Daemon::start(
        "announce",
        &["--config", &config, "--heartbeat-timeout", "10m"],
    );

    let (first, idle) = next(&r, Duration::from_secs(5))
        .await
        .expect("an announcement at start");
    assert_eq!(first.addr.to_string(), d.addr);
    assert_eq!(first.period_ms, 3000);
    let cpus = rexecd::config::market_table::available_cpus();
    assert_eq!((idle.cpus, idle.price, idle.running_jobs), (cpus, 0, 0));
    assert!(idle.idle_milli <= cpus * 1000, "{idle:?}");
    assert!(idle.free_mem_mib > 0, "{idle:?}");
    let summary = Summary::decode(first.summary.as_deref().expect("a summary")).unwrap();
    assert_eq!(summary.speed(), 1.5);
    let mut seqs = vec![first.seq];

    // A job bidding 7 credits a minute: announced within well under the period.
    let mut c = d.user().await;
    let mut request = launch(&["/bin/sh", "-c", "while :; do :; done"]);
    request.bid = money::Bid::from_credits(7);
    c.start(request).await;
    // The job counts at once, with its bid in the price: a rank is assumed
    // runnable from its start until a sample of its cgroup says otherwise (the
    // tick its launch triggers may come before the shell has run at all).
    let (busy, took) = until(&r, Duration::from_secs(2), &mut seqs, |s| {
        s.running_jobs == 1
    })
    .await;
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    eprintln!("start announced {took:?} after Started");
    assert_eq!(busy.price, 7_000_000, "{busy:?}");
    assert!(busy.runnable >= 1, "{busy:?}");

    c.send(ToNode::Signal(Signal::Kill)).await;
    let out = c.outcome().await;
    assert!(
        matches!(out.status(), ExitStatus::Signaled { .. }),
        "{out:?}"
    );
    let (after, took) = until(&r, Duration::from_secs(2), &mut seqs, |s| {
        s.running_jobs == 0
    })
    .await;
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    assert_eq!((after.price, after.runnable), (0, 0), "{after:?}");
    eprintln!("exit announced {took:?} after the Exit frame");
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "sequence numbers must grow: {seqs:?}"
    );
    assert_nothing_left(&d, &[]).await;
}

/// Lets the daemon sample for a while, then stops it with SIGTERM.
async fn run_and_stop(d: &mut Daemon) {
    tokio::time::sleep(Duration::from_millis(1200)).await;
    d.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(d.wait_exit(PATIENCE).success(), "log:\n{}", d.log());
}

/// The samples recorded in the history file at `path`.
fn samples(path: &Path) -> u64 {
    let h = discovery::profile::file::load(path).expect("a valid history file");
    h.weeks()
        .flat_map(|w| w.slots.iter())
        .map(|s| u64::from(s.samples))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_survives_restarts_and_a_corrupt_file() {
    if !can_run("announce_history") {
        return;
    }
    let (table, net) = discovery("200ms");
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("state/availability");
    let config = write_config(
        dir.path(),
        &format!("{table}[announce]\nhistory_file = {history:?}\nfind_accountd = false\n"),
    );
    let r = Receiver::bind(&net, None).unwrap();
    let mut d = Daemon::start("announcehist", &["--config", &config]);
    run_and_stop(&mut d).await;
    let first = samples(&history);
    assert!(first >= 3, "{first} samples after 1.2 s at 200 ms");

    d.restart();
    run_and_stop(&mut d).await;
    let second = samples(&history);
    assert!(
        second >= first + 3,
        "{first} samples, then {second}: the restart lost them"
    );
    // The node announced throughout (any announcement of it will do).
    assert!(next(&r, Duration::from_secs(1)).await.is_some());

    std::fs::write(&history, b"RXAH garbage").unwrap();
    d.restart();
    let a = next(&r, Duration::from_secs(5)).await;
    assert!(a.is_some(), "no announcement after a corrupt history");
    run_and_stop(&mut d).await;
    assert!(d.log().contains("kept aside"), "log:\n{}", d.log());
    let kept = std::fs::read_dir(history.parent().unwrap())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("availability.corrupt-")
        })
        .count();
    assert_eq!(kept, 1);
    let fresh = samples(&history);
    assert!(
        (3..first + 10).contains(&fresh),
        "a new history starts ({fresh} samples)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_known_accountd_positive_bids_wait_and_zero_bids_run() {
    if !can_run("announce_no_accountd") {
        return;
    }
    let (table, _) = discovery("500ms");
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("availability");
    let journal = dir.path().join("debits.journal");
    let config = write_config(
        dir.path(),
        &format!(
            "{table}[announce]\nhistory_file = {history:?}\n[market]\njournal = {journal:?}\n"
        ),
    );
    let d = Daemon::start("announcenoacc", &["--config", &config]);
    let mut request = launch(&["/bin/true"]);
    request.bid = money::Bid::from_credits(1);
    let e = d.user().await.refused(request).await;
    assert_eq!(e.code, ErrorCode::NoCredit, "{e:?}");
    assert!(e.message.contains("no accountd known"), "{e:?}");
    let out = run(&d, launch(&["/bin/true"])).await;
    assert_eq!(out.status(), ExitStatus::Code(0), "{out:?}");
}
