//! High availability of the ledger, with real daemons on a real PostgreSQL.
//!
//! - A node configured with two accountd (`[market] accountd = [a, b]`, read by
//!   rexecd's own config code, no announcements): its real debit client and its
//!   real balance check go to `a`; `a` is killed with SIGKILL and both carry on
//!   through `b` within 2 s, every debit exactly once.
//! - PostgreSQL with a synchronous streaming standby: accountd reaches them through
//!   a multi-host connection string (`target_session_attrs=read-write`); the
//!   primary is killed (`pg_ctl stop -m immediate`), the standby promoted, and
//!   accountd carries on against it with every acknowledged debit present.

use std::time::{Duration, Instant};

use certs::Role;
use certs::testing::TestPki;
use ledger_client::debit::DebitClient;
use ledger_client::journal::Charge;
use rexec_tests::accountd::stream_debit;
use rexec_tests::market::Accountd;
use rexec_tests::postgres::Postgres;
use rexecd::config::market_table::{MarketConfig, MarketFile};

const C: i64 = 1_000_000;
/// The longest a node's charges and checks may stall after an accountd dies.
const FAILOVER: Duration = Duration::from_secs(2);

fn debit(job: &str, seq: u64) -> Charge {
    stream_debit("n1", job, "u1", seq)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Charges `range` one by one and waits until all are settled; how long the
/// settling took after the first charge.
fn charge_and_settle(
    rt: &tokio::runtime::Runtime,
    client: &DebitClient,
    job: &str,
    range: std::ops::Range<u64>,
) -> Duration {
    rt.block_on(async {
        let start = Instant::now();
        for seq in range {
            client.charge(debit(job, seq)).await.unwrap();
        }
        assert!(
            client.wait_settled(Duration::from_secs(60)).await,
            "the journal still holds {} charges",
            client.pending()
        );
        start.elapsed()
    })
}

/// The ledger on `pg` holds the debits of jobs "before" and "after", seq
/// `0..per_job` each, once each; u1's balance is exactly what they took; `d`'s
/// audit passes.
fn each_debit_once(pg: &Postgres, d: &Accountd, per_job: u64) {
    let count = pg.psql(
        "ledger",
        "SELECT COUNT(*) FROM entries WHERE kind = 'debit'",
    );
    assert_eq!(count, (2 * per_job).to_string(), "every debit once");
    let paid: i64 = 2 * (0..per_job as i64).map(|s| 1_000 + s).sum::<i64>();
    assert_eq!(d.balance("u1"), 1000 * C - paid);
    let audit = d.admin(&["audit"]);
    assert!(audit.ok().starts_with("audit passed"), "{audit:?}");
}

#[test]
fn a_node_with_two_accountd_configured_fails_over_within_2s_when_the_first_dies() {
    if !rexec_tests::can_run("ledger_ha::a_node_with_two_accountd") {
        return;
    }
    let pki = TestPki::new();
    let pg = Postgres::start();
    pg.create_db("ledger");
    let config = format!("[store]\npostgres = \"{}\"\n", pg.conninfo("ledger"));
    let mut a = Accountd::start_with_config(&pki, config.clone());
    let b = Accountd::start_with_config(&pki, config);
    a.admin(&["create", "u1", "--initial", "1000"]).ok();
    let journal = tempfile::tempdir().unwrap();
    // The node's own reading of its [market] table.
    let market: MarketFile = toml::from_str(&format!(
        "accountd = [{:?}, {:?}]\njournal = {:?}\nbalance_cache = \"1ms\"\n",
        a.addr,
        b.addr,
        journal.path().join("n1.journal")
    ))
    .unwrap();
    let market = MarketConfig::resolve(market, None).unwrap();
    let ledger = market.ledger.clone().expect("a ledger");
    assert_eq!(ledger.addresses, [a.addr.clone(), b.addr.clone()]);
    let rt = runtime();
    let tls = certs::connector(&pki.tls_paths(Role::Node, "n1")).unwrap();
    let credit = rexecd::market::credit::Credit::new(
        "n1",
        Some((ledger.clone(), tls.clone())),
        None,
        market.balance_cache,
    );
    let bid = money::Bid::from_credits(1);
    let client = rt.block_on(async {
        let cfg = rexecd::market::debit_config(&ledger, tls);
        DebitClient::start(cfg).await.unwrap().0
    });
    charge_and_settle(&rt, &client, "before", 0..20);
    rt.block_on(credit.check("u1", bid))
        .expect("a balance check");

    a.kill9();
    let took = charge_and_settle(&rt, &client, "after", 0..1);
    eprintln!("a debit landed through the second accountd {took:?} after the first died");
    assert!(took <= FAILOVER, "failover of debits took {took:?}");
    let start = Instant::now();
    let checked = rt.block_on(credit.check("u1", bid));
    let took = start.elapsed();
    eprintln!("a balance check answered by the second accountd in {took:?}");
    assert!(checked.is_ok(), "{checked:?}");
    assert!(took <= FAILOVER, "failover of balance checks took {took:?}");
    charge_and_settle(&rt, &client, "after", 1..20);

    // Every debit exactly once, the totals exact, the audit passing.
    each_debit_once(&pg, &b, 20);
    rt.block_on(client.shutdown());
}

#[test]
fn accountd_carries_on_when_the_postgres_standby_is_promoted() {
    if !rexec_tests::can_run("ledger_ha::accountd_carries_on_when_the_postgres_standby") {
        return;
    }
    let pki = TestPki::new();
    let primary = Postgres::start();
    primary.create_db("ledger");
    let standby = Postgres::standby_of(&primary);
    primary.require_synchronous_standby();
    // Both servers in one connection string: the one that takes writes is used.
    let conninfo = format!(
        "host={},{} port={},{} dbname=ledger user=postgres target_session_attrs=read-write",
        primary.socket_dir().display(),
        standby.socket_dir().display(),
        primary.port(),
        standby.port()
    );
    let d = Accountd::start_with_config(&pki, format!("[store]\npostgres = \"{conninfo}\"\n"));
    d.admin(&["create", "u1", "--initial", "1000"]).ok();
    let journal = tempfile::tempdir().unwrap();
    let rt = runtime();
    let client = rt.block_on(async {
        let tls = certs::connector(&pki.tls_paths(Role::Node, "n1")).unwrap();
        let mut cfg = ledger_client::debit::DebitClientConfig::new(
            journal.path().join("n1.journal"),
            d.addr.clone(),
            tls,
        );
        cfg.backoff_max = Duration::from_millis(200);
        DebitClient::start(cfg).await.unwrap().0
    });
    // Acknowledged by accountd, so committed on the primary and on the standby.
    charge_and_settle(&rt, &client, "before", 0..50);

    let crashed = Instant::now();
    primary.crash();
    standby.promote();
    let promoted = crashed.elapsed();
    let took = charge_and_settle(&rt, &client, "after", 0..1) + promoted;
    eprintln!(
        "PostgreSQL primary killed, standby promoted after {promoted:?}; \
         the first debit after it landed {took:?} after the crash"
    );
    charge_and_settle(&rt, &client, "after", 1..50);

    // Nothing acknowledged was lost, nothing doubled; the ledger audits.
    each_debit_once(&standby, &d, 50);
    rt.block_on(client.shutdown());
}
