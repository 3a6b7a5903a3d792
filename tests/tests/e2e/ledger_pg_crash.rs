//! Two accountd on one PostgreSQL while 8 journaled nodes stream debits
//! through them: one accountd is killed with SIGKILL and restarted twice
//! (its nodes deliver to the other meanwhile, as they would after hearing
//! only the other's announcements), and PostgreSQL itself is restarted once.
//! Afterwards the ledger holds every debit exactly once, every balance equals
//! its entries and the audit (chain included) passes.

use std::sync::Arc;
use std::time::Duration;

use certs::Role;
use certs::testing::TestPki;
use clients::account::LearntAddress;
use ledger_client::debit::{DebitClient, DebitClientConfig};
use ledger_client::journal::Charge;
use rexec_tests::accountd::stream_debit;
use rexec_tests::market::Accountd;
use rexec_tests::postgres::Postgres;

const NODES: usize = 8;
const PER_NODE: u64 = 80;
const C: i64 = 1_000_000;

fn debit(node: usize, seq: u64) -> Charge {
    stream_debit(&format!("n{node}"), "stream", &format!("u{node}"), seq)
}

#[test]
fn debits_survive_sigkill_of_one_accountd_twice_and_a_postgres_restart() {
    if !rexec_tests::can_run("ledger_pg_crash::debits_survive") {
        return;
    }
    let pki = TestPki::new();
    let pg = Postgres::start();
    pg.create_db("ledger");
    let config = format!("[store]\npostgres = \"{}\"\n", pg.conninfo("ledger"));
    let mut a = Accountd::start_with_config(&pki, config.clone());
    let b = Accountd::start_with_config(&pki, config);
    for n in 0..NODES {
        a.admin(&["create", &format!("u{n}"), "--initial", "1000"])
            .ok();
    }
    let journals = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    // Nodes 0..4 start on `a`, the others on `b`.
    let learnt: Vec<LearntAddress> = (0..NODES)
        .map(|n| {
            let l = LearntAddress::new();
            l.set(Some(if n < NODES / 2 { &a.addr } else { &b.addr }.clone()));
            l
        })
        .collect();
    let clients: Vec<Arc<DebitClient>> = rt.block_on(async {
        let mut out = Vec::new();
        for (n, l) in learnt.iter().enumerate() {
            let tls = certs::connector(&pki.tls_paths(Role::Node, &format!("n{n}"))).unwrap();
            let mut cfg = DebitClientConfig::new(
                journals.path().join(format!("n{n}.journal")),
                String::new(),
                tls,
            );
            cfg.learnt = Some(l.clone());
            cfg.backoff_max = Duration::from_millis(500);
            let (c, _settled) = DebitClient::start(cfg).await.unwrap();
            out.push(Arc::new(c));
        }
        out
    });
    let streams: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(n, c)| {
            let c = c.clone();
            rt.spawn(async move {
                for seq in 0..PER_NODE {
                    c.charge(debit(n, seq)).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
            })
        })
        .collect();
    let pause = |ms| std::thread::sleep(Duration::from_millis(ms));
    for round in 0..2 {
        pause(400);
        a.kill9();
        // Its nodes now hear only `b`.
        for l in &learnt[..NODES / 2] {
            l.set(Some(b.addr.clone()));
        }
        pause(400);
        a.restart();
        for l in &learnt[..NODES / 2] {
            l.set(Some(a.addr.clone()));
        }
        if round == 0 {
            pause(300);
            pg.stop();
            pause(300);
            pg.restart();
        }
    }
    rt.block_on(async {
        for s in streams {
            s.await.unwrap();
        }
        for c in &clients {
            assert!(
                c.wait_settled(Duration::from_secs(120)).await,
                "a node's journal still holds {} charges",
                c.pending()
            );
        }
    });
    let count = pg.psql(
        "ledger",
        "SELECT COUNT(*) FROM entries WHERE kind = 'debit'",
    );
    assert_eq!(
        count,
        (NODES as u64 * PER_NODE).to_string(),
        "every debit once"
    );
    let keys = pg.psql(
        "ledger",
        "SELECT COUNT(DISTINCT idem_key) FROM entries WHERE kind = 'debit'",
    );
    assert_eq!(keys, count, "no key twice");
    let per_node: i64 = (0..PER_NODE as i64).map(|s| 1_000 + s).sum();
    for n in 0..NODES {
        assert_eq!(b.balance(&format!("u{n}")), 1000 * C - per_node, "u{n}");
    }
    let audit = b.admin(&["audit"]);
    assert!(audit.ok().starts_with("audit passed"), "{audit:?}");
    // `b` lived through the PostgreSQL restart: each of its two connections
    // (writer, reader) logs the loss at most once.
    let log = std::fs::read_to_string(b.log()).unwrap_or_default();
    let lost = log.matches("lost the connection to PostgreSQL").count();
    assert!((1..=2).contains(&lost), "{lost} losses logged:\n{log}");
}
