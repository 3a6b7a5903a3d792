//! High availability of the ledger, with real daemons on a real PostgreSQL.
//!
//! - A real node (rexecd) listing two accountd charges a running job and checks a
//!   new one through the second when the first is killed with SIGKILL.
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

#[test]
fn a_real_node_listing_two_accountd_charges_and_checks_through_the_second_when_the_first_dies() {
    use rexec_tests::cluster::{ClusterOptions, TEST_USER};
    use rexec_tests::market::{MarketCluster, MarketOptions, parse_bills};
    if !rexec_tests::can_run("ledger_ha::a_real_node_listing_two_accountd") {
        return;
    }
    let pg = Postgres::start();
    pg.create_db("ledger");
    let mut m = MarketCluster::start(MarketOptions {
        cluster: ClusterOptions {
            nodes: 1,
            ..ClusterOptions::default()
        },
        // Sleeping ranks pay under the paper's rule, every second.
        policy: "paper",
        extra_accountd_config: format!("[store]\npostgres = \"{}\"\n", pg.conninfo("ledger")),
        more_accountd: 1,
        ..MarketOptions::default()
    });
    let limit = Duration::from_secs(60);
    let client = m
        .rexec()
        .args(["-v", "-r", "30", "--nodes", "n1,n1", "sleep", "8"])
        .spawn();
    let mut job = String::new();
    let shown = rexec_tests::wait_until(limit, || {
        let rows = m.jobs().0;
        if let Some(r) = rows.first() {
            job = r.job.clone();
        }
        rows.len() == 2
    });
    assert!(
        shown.is_some(),
        "the job never showed its ranks\n{}",
        m.logs()
    );
    let debits = |d: &Accountd| -> Vec<rexec_tests::market::Entry> {
        d.history(TEST_USER)
            .into_iter()
            .filter(|e| e.kind == "debit" && e.job == job)
            .collect()
    };
    let first = rexec_tests::wait_until(limit, || !debits(&m.accountd).is_empty());
    assert!(first.is_some(), "no debit reached the ledger\n{}", m.logs());
    m.accountd.kill9();
    let killed = Instant::now();
    let second = &m.more_accountd[0];
    let before = debits(second).len();
    // The next debit (one a second per rank) lands through the second instance.
    let landed = rexec_tests::wait_until(limit, || debits(second).len() > before);
    let took = killed.elapsed();
    eprintln!(
        "the node's next debit landed through the second accountd {took:?} after the first died"
    );
    assert!(landed.is_some(), "no debit after the kill\n{}", m.logs());
    assert!(
        took <= FAILOVER + Duration::from_secs(1),
        "debits failed over in {took:?} (one debit interval of 1 s and {FAILOVER:?})"
    );
    // A new job with a positive bid needs a balance check: the second answers.
    std::thread::sleep(Duration::from_millis(1100)); // past balance_cache
    let out = m.rexec().args(["-r", "1", "--nodes", "n1", "true"]).run();
    assert_eq!(out.code, Some(0), "{out:?}\n{}", m.logs());

    let out = client.wait(limit);
    assert_eq!(out.code, Some(0), "{out:?}");
    let bills = parse_bills(&out.stderr);
    let total: i64 = bills.iter().map(|b| b.charged).sum();
    let mut ledger = Vec::new();
    let settled = rexec_tests::wait_until(limit, || {
        ledger = debits(second);
        -ledger.iter().map(|e| e.amount).sum::<i64>() >= total
    });
    assert!(settled.is_some(), "ledger {ledger:?}, bills {bills:?}");
    std::thread::sleep(Duration::from_secs(2));
    let ledger = debits(second);
    let keys: std::collections::BTreeSet<_> = ledger.iter().map(|e| e.key()).collect();
    assert_eq!(keys.len(), ledger.len(), "a debit twice: {ledger:?}");
    assert_eq!(
        -ledger.iter().map(|e| e.amount).sum::<i64>(),
        total,
        "{bills:?}"
    );
    let audit = second.admin(&["audit"]);
    assert!(audit.ok().starts_with("audit passed"), "{audit:?}");
}
