//! Charges survive crashes exactly once: accountd killed with SIGKILL while
//! nodes meter, then restarted, ends with the ledger holding exactly what the
//! ranks were charged; rexecd killed with SIGKILL mid-job, then restarted,
//! delivers the charges it had journaled, each once.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ledger_client::journal::{Charge, Journal};
use rexec_tests::cluster::ClusterOptions;
use rexec_tests::market::{Entry, MarketCluster, MarketOptions, parse_bills};
use rexec_tests::wait_until;

const LIMIT: Duration = Duration::from_secs(60);

fn market(nodes: usize) -> MarketCluster {
    MarketCluster::start(MarketOptions {
        cluster: ClusterOptions {
            nodes,
            ..ClusterOptions::default()
        },
        // Sleeping ranks pay under the paper's rule, and cost the machine nothing.
        policy: "paper",
        ..MarketOptions::default()
    })
}

/// Every key appears once among `debits`.
fn keys_unique(debits: &[Entry]) -> BTreeSet<(String, String, Option<u64>)> {
    let keys: BTreeSet<_> = debits.iter().map(Entry::key).collect();
    assert_eq!(
        keys.len(),
        debits.len(),
        "a key was applied twice: {debits:?}"
    );
    keys
}

/// Waits until metering is under way: the ledger holds a debit of `job`.
fn metering(m: &MarketCluster, job: &str) {
    let debited = wait_until(LIMIT, || !m.debits_of(job).is_empty());
    assert!(
        debited.is_some(),
        "no debit of {job} reached the ledger\n{}",
        m.logs()
    );
}

fn audit_passes(m: &MarketCluster) {
    let audit = m.accountd.admin(&["audit"]);
    assert!(audit.ok().starts_with("audit passed"), "{audit:?}");
}

fn job_of(m: &MarketCluster, ranks: usize) -> String {
    let mut job = None;
    wait_until(LIMIT, || {
        let rows = m.jobs().0;
        if rows.len() == ranks {
            job = Some(rows[0].job.clone());
        }
        job.is_some()
    });
    job.unwrap_or_else(|| panic!("the job never showed {ranks} ranks\n{}", m.logs()))
}

#[test]
fn accountd_killed_during_metering_gets_every_charge_exactly_once() {
    if !rexec_tests::can_run("accountd_killed_during_metering_gets_every_charge_exactly_once") {
        return;
    }
    let mut m = market(2);
    let client = m
        .rexec()
        .args(["-v", "-r", "30", "--nodes", "n1,n1,n2,n2", "sleep", "8"])
        .spawn();
    let job = job_of(&m, 4);
    metering(&m, &job);
    m.accountd.kill9();
    std::thread::sleep(Duration::from_millis(2500));
    m.accountd.restart();
    let out = client.wait(LIMIT);
    assert_eq!(out.code, Some(0), "{out:?}");
    let bills = parse_bills(&out.stderr);
    assert_eq!(bills.len(), 2, "{out:?}");
    for b in &bills {
        // Two ranks at 30 a minute for about 8 s: about 8 credits.
        assert!(
            (5_000_000..=9_000_000).contains(&b.charged),
            "node {} charged {}",
            b.node,
            b.charged
        );
    }
    let total: i64 = bills.iter().map(|b| b.charged).sum();

    let mut debits = Vec::new();
    let settled = wait_until(LIMIT, || {
        debits = m.debits_of(&job);
        -debits.iter().map(|e| e.amount).sum::<i64>() >= total
    });
    assert!(
        settled.is_some(),
        "ledger has {debits:?}, the ranks were charged {total}\n{}",
        m.logs()
    );
    // Nothing arrives twice, later or now.
    std::thread::sleep(Duration::from_secs(2));
    let debits = m.debits_of(&job);
    keys_unique(&debits);
    eprintln!(
        "charged {total} micro-credits in {} debits, accountd down for 2.5 s of 8",
        debits.len()
    );
    assert_eq!(-debits.iter().map(|e| e.amount).sum::<i64>(), total);
    for b in &bills {
        let on_node: i64 = debits
            .iter()
            .filter(|e| e.node == b.node)
            .map(|e| -e.amount)
            .sum();
        assert_eq!(on_node, b.charged, "node {}", b.node);
    }
    audit_passes(&m);
}

#[test]
fn rexecd_killed_mid_job_delivers_what_it_journaled_exactly_once() {
    if !rexec_tests::can_run("rexecd_killed_mid_job_delivers_what_it_journaled_exactly_once") {
        return;
    }
    let mut m = market(1);
    let client = m
        .rexec()
        .args(["-r", "30", "--nodes", "n1,n1", "sleep", "1000"])
        .spawn();
    let job = job_of(&m, 2);
    metering(&m, &job);
    // With accountd away, the next charges can only wait in the journal.
    m.accountd.kill9();
    std::thread::sleep(Duration::from_millis(2500));
    m.crash("n1");
    let out = client.wait(LIMIT);
    assert_eq!(out.code, Some(255), "{out:?}");

    let pending: BTreeMap<_, i64> = {
        let journal = Journal::open(&m.journal("n1")).expect("the journal opens");
        journal
            .pending()
            .into_iter()
            .filter_map(|c| match c {
                Charge::Debit(d) if d.key.job == job => {
                    Some(((d.key.node, d.key.job, Some(d.key.seq)), d.amount))
                }
                _ => None,
            })
            .collect()
    };
    assert!(!pending.is_empty(), "nothing was pending in the journal");

    m.accountd.restart();
    let before: BTreeSet<_> = keys_unique(&m.debits_of(&job));
    m.restart("n1");
    let delivered = wait_until(LIMIT, || {
        let keys: BTreeSet<_> = m.debits_of(&job).iter().map(Entry::key).collect();
        pending.keys().all(|k| keys.contains(k))
    });
    assert!(
        delivered.is_some(),
        "journaled charges never reached the ledger: {pending:?}\n{}",
        m.logs()
    );
    std::thread::sleep(Duration::from_secs(2));
    let debits = m.debits_of(&job);
    let after = keys_unique(&debits);
    let expected: BTreeSet<_> = before
        .union(&pending.keys().cloned().collect())
        .cloned()
        .collect();
    assert_eq!(
        after, expected,
        "the ledger holds other charges than journaled"
    );
    for e in &debits {
        if let Some(amount) = pending.get(&e.key()) {
            assert_eq!(-e.amount, *amount, "{e:?}");
        }
    }
    eprintln!(
        "debits before the crash {}, pending in the journal {}, in the ledger after {}",
        before.len(),
        pending.len(),
        after.len()
    );
    audit_passes(&m);
}
