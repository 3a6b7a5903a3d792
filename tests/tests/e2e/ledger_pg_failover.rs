//! Failover between two accountd on one PostgreSQL by their announcements: both
//! announce on a loopback group of the test's own; a node's real listener
//! (`rexecd::announce::accountd::listen`) feeds its real debit client, which
//! streams journaled debits. The instance the node follows (the one started last)
//! is killed with SIGKILL: the node moves to the other within the documented
//! silence of three periods, and back when the killed one restarts. Every debit
//! lands exactly once and the audit passes.

use std::time::{Duration, Instant};

use certs::Role;
use certs::testing::TestPki;
use clients::account::LearntAddress;
use discovery::config::DiscoveryConfig;
use discovery::net::Receiver;
use ledger_client::debit::{DebitClient, DebitClientConfig};
use ledger_client::journal::Charge;
use rexec_tests::accountd::stream_debit;
use rexec_tests::market::Accountd;
use rexec_tests::postgres::Postgres;
use rexecd::announce::accountd::{SILENT_PERIODS, Wanted, listen};

const DEBITS: u64 = 90;
const C: i64 = 1_000_000;
const PERIOD: Duration = Duration::from_millis(200);
const CLUSTER: &str = "e2e-failover";

fn debit(seq: u64) -> Charge {
    stream_debit("n1", "failover", "u1", seq)
}

/// Waits (on a blocking thread's view of the clock) until `learnt` holds `addr`;
/// how long that took.
fn until_learnt(learnt: &LearntAddress, addr: &str, within: Duration) -> Option<Duration> {
    let start = Instant::now();
    rexec_tests::wait_until(within, || learnt.get().as_deref() == Some(addr))
        .map(|_| start.elapsed())
}

#[test]
fn a_node_moves_to_the_other_accountd_when_the_one_it_follows_dies() {
    if !rexec_tests::can_run("ledger_pg_failover::a_node_moves") {
        return;
    }
    let pki = TestPki::new();
    let pg = Postgres::start();
    pg.create_db("ledger");
    let channel = testhost::net::channel();
    let table = format!(
        "[discovery]\ncluster = \"{CLUSTER}\"\ngroup = \"{}\"\nport = {}\n\
         interface = \"127.0.0.1\"\nttl = 0\nperiod = \"{}ms\"\n",
        channel.group,
        channel.port,
        PERIOD.as_millis()
    );
    let config = format!("[store]\npostgres = \"{}\"\n{table}", pg.conninfo("ledger"));
    let a = Accountd::start_with_config(&pki, config.clone());
    // Started last: the larger incarnation, the one a node follows.
    let mut b = Accountd::start_with_config(&pki, config);
    a.admin(&["create", "u1", "--initial", "1000"]).ok();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let learnt = LearntAddress::new();
    let net = DiscoveryConfig {
        cluster: CLUSTER.into(),
        group: channel.group,
        port: channel.port,
        interface: "127.0.0.1".parse().unwrap(),
        ttl: 0,
        period: PERIOD,
        ..DiscoveryConfig::default()
    };
    let journal = tempfile::tempdir().unwrap();
    let client = rt.block_on(async {
        let receiver = Receiver::bind(&net, None).expect("cannot join the group");
        let wanted = Wanted {
            cluster: CLUSTER.into(),
            name: "accountd".into(),
        };
        tokio::spawn(listen(receiver, wanted, learnt.clone()));
        let tls = certs::connector(&pki.tls_paths(Role::Node, "n1")).unwrap();
        let mut cfg = DebitClientConfig::new(journal.path().join("n1.journal"), String::new(), tls);
        cfg.learnt = Some(learnt.clone());
        cfg.backoff_max = Duration::from_millis(300);
        DebitClient::start(cfg).await.unwrap().0
    });
    assert!(
        until_learnt(&learnt, &b.addr, Duration::from_secs(20)).is_some(),
        "the node never followed the newest accountd ({}); it has {:?}",
        b.addr,
        learnt.get()
    );
    let send = |range: std::ops::Range<u64>| {
        rt.block_on(async {
            for seq in range {
                client.charge(debit(seq)).await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    send(0..30);
    b.kill9();
    let moved = until_learnt(&learnt, &a.addr, Duration::from_secs(20));
    let window = PERIOD * SILENT_PERIODS;
    eprintln!("moved to the surviving accountd after {moved:?} (silence window {window:?})");
    assert!(
        moved.is_some_and(|t| t <= window + Duration::from_secs(5)),
        "the node stayed with the dead accountd: {:?}",
        learnt.get()
    );
    send(30..60);
    b.restart();
    assert!(
        until_learnt(&learnt, &b.addr, Duration::from_secs(20)).is_some(),
        "the node did not take the restarted accountd back: {:?}",
        learnt.get()
    );
    send(60..DEBITS);
    rt.block_on(async {
        assert!(
            client.wait_settled(Duration::from_secs(60)).await,
            "the journal still holds {} charges",
            client.pending()
        );
    });
    let count = pg.psql(
        "ledger",
        "SELECT COUNT(*) FROM entries WHERE kind = 'debit'",
    );
    assert_eq!(count, DEBITS.to_string(), "every debit once");
    let paid: i64 = (0..DEBITS as i64).map(|s| 1_000 + s).sum();
    assert_eq!(a.balance("u1"), 1000 * C - paid);
    // Both instances wrote: the charges sent while b was down went through a.
    let audit = a.admin(&["audit"]);
    assert!(audit.ok().starts_with("audit passed"), "{audit:?}");
}
