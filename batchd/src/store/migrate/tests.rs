//! The migration both ways: a queue of 100,000 jobs (single jobs and the tasks
//! of arrays, in every state, with output, journal debits and rank usage) goes
//! from SQLite to PostgreSQL and back to SQLite, and all three canonical dumps
//! are equal; the queue PostgreSQL loads is the one SQLite loads; a target
//! that holds a queue is refused; a changed row is found.

use std::sync::Arc;
use std::time::Instant;

use proto::batch::{JobState, SignedJob};
use proto::node::ExitStatus;

use super::*;
use crate::store::testdb::{Kind, TestDb};
use crate::store::tests::futures_join;
use crate::store::{ArrayRecord, JobRecord, PendingDebit, RankUsage, Store, Write};

/// Single jobs; the rest of the 100,000 are tasks of arrays.
const SINGLE: u64 = 40_000;
/// Tasks per array.
const TASKS: u64 = 1_000;
const TOTAL: u64 = 100_000;

fn signed(n: u64) -> Arc<SignedJob> {
    Arc::new(SignedJob {
        spec: n.to_le_bytes().repeat(8),
        signature: vec![(n % 251) as u8; 64],
        cert: vec![7; 32],
    })
}

/// A change of every tenth job: each state, its nodes, exit and charges.
fn changed(mut j: JobRecord, n: u64) -> JobRecord {
    let states = [
        JobState::Running,
        JobState::Finished,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Held,
    ];
    j.state = states[(n / 10) as usize % states.len()];
    j.attempts = (n % 3) as u32 + 1;
    j.started_ms = Some(2_000 + n as i64);
    j.ended_ms = (j.state != JobState::Running).then_some(3_000 + n as i64);
    j.nodes = vec![format!("n{}", n % 3), format!("n{}", n % 5)];
    j.charged = n as i64 * 17;
    j.charge_seq = n % 4;
    j.done_ms = n as i64;
    j.exit = (j.state == JobState::Finished).then_some(ExitStatus::Code((n % 7) as i32));
    j.reason = (j.state == JobState::Held).then(|| format!("held {n}"));
    j.truncated = n % 2;
    j
}

/// Fills the SQLite queue at `at` through the store, as the daemon writes it.
async fn fill(at: &Location) {
    let (store, _) = Store::open_at(at, 1024, 1_234).unwrap();
    let mut seq = 0i64;
    let mut records = Vec::new();
    let mut writes = Vec::new();
    let mut id = 1u64;
    let rounds = (TOTAL - SINGLE) / TASKS;
    for round in 0..rounds {
        // Single jobs, then an array, in turn.
        for _ in SINGLE * round / rounds..SINGLE * (round + 1) / rounds {
            let r = JobRecord::queued(seq, id, format!("u{}", id % 13), signed(id), 1_000 + seq);
            seq += 1;
            id += 1;
            records.push(r.clone());
            writes.push(Write::Insert(Box::new(r)));
        }
        let tasks: Vec<JobRecord> = (0..TASKS)
            .map(|i| {
                let mut t = JobRecord::queued(
                    seq + i as i64,
                    id + 1 + i,
                    format!("u{}", id % 13),
                    signed(id),
                    1_000 + seq,
                );
                t.array = Some((id, i as u32));
                t
            })
            .collect();
        records.extend(tasks.iter().cloned());
        writes.push(Write::InsertArray(Box::new(ArrayRecord {
            id,
            user: format!("u{}", id % 13),
            signed: signed(id),
            submitted_ms: 1_000 + seq,
            tasks,
        })));
        seq += TASKS as i64;
        id += TASKS + 1;
    }
    for (n, r) in records.iter().enumerate().filter(|(n, _)| n % 10 == 0) {
        let n = n as u64;
        let j = changed(r.clone(), n);
        writes.push(match n % 30 {
            0 => Write::Charge(
                Box::new(j.clone()),
                Box::new(PendingDebit {
                    job: j.id,
                    seq: j.charge_seq,
                    user: j.user.clone(),
                    account: n.is_multiple_of(60).then(|| "chem".to_string()),
                    amount: j.charged,
                    start_us: n,
                    end_us: n + 5,
                }),
            ),
            _ => Write::Update(Box::new(j)),
        });
        if n.is_multiple_of(50) {
            writes.push(Write::Output {
                id: r.id,
                stream: 1 + (n % 2) as u8,
                offset: 0,
                data: format!("output of {n}\n").into_bytes(),
            });
            writes.push(Write::RankUsage(Box::new(RankUsage {
                job: r.id,
                attempt: 0,
                rank: (n % 4) as u32,
                node: "n1".into(),
                cpu_nanos: n * 1_000,
                peak_memory: n.is_multiple_of(100).then_some(n << 10),
                ended_ms: 5_000,
            })));
        }
        if n.is_multiple_of(90) {
            writes.push(Write::Refused {
                job: r.id,
                seq: n % 4,
                why: format!("refused {n}"),
            });
        }
    }
    for chunk in writes.chunks(2_000) {
        let results = futures_join(chunk.iter().map(|w| store.write(w.clone()))).await;
        for r in results {
            r.unwrap();
        }
    }
    store.close();
}

#[test]
fn a_queue_of_100000_jobs_goes_to_postgresql_and_back_identical() {
    let source = TestDb::new(Kind::Lite);
    let pg = TestDb::new(Kind::Pg);
    let back = TestDb::new(Kind::Lite);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(fill(&source.location()));
    let original = dump(&source.location()).unwrap();
    assert_eq!(original.rows("jobs").len() as u64, TOTAL);
    assert!(original.rows("arrays").len() >= 50);
    assert!(!original.rows("output").is_empty() && !original.rows("rank_usage").is_empty());
    assert!(
        original
            .rows("debits")
            .iter()
            .any(|r| r[6] != crate::store::dump::Val::Null)
    );

    let t = Instant::now();
    let there = migrate(&source.location(), &pg.location()).unwrap();
    let to_pg = t.elapsed();
    let t = Instant::now();
    let back_again = migrate(&pg.location(), &back.location()).unwrap();
    let to_lite = t.elapsed();
    eprintln!(
        "migrated {} jobs ({} arrays): SQLite -> PostgreSQL {to_pg:?}, PostgreSQL -> SQLite {to_lite:?}",
        there.jobs, there.arrays
    );
    assert_eq!(there, back_again);
    assert_eq!(there.jobs as u64, TOTAL);

    let on_pg = dump(&pg.location()).unwrap();
    let returned = dump(&back.location()).unwrap();
    assert_eq!(original.first_difference(&on_pg), None);
    assert_eq!(original.first_difference(&returned), None);
    assert!(original == returned);

    // What the daemon loads from each is the same queue, epoch included.
    let load = |at: &Location| {
        let (store, loaded) = Store::open_at(at, 8, 99).unwrap();
        store.close();
        loaded
    };
    let (a, b) = (load(&source.location()), load(&pg.location()));
    assert_eq!(a.epoch_ms, 1_234);
    assert_eq!(
        (a.epoch_ms, &a.jobs, &a.output, &a.debits),
        (b.epoch_ms, &b.jobs, &b.output, &b.debits)
    );

    // A target holding a queue is refused, and is left as it was.
    let again = migrate(&source.location(), &pg.location());
    assert!(matches!(again, Err(MigrateError::NotEmpty(_))), "{again:?}");
    assert_eq!(dump(&pg.location()).unwrap(), on_pg);

    // One changed value is found by the comparison.
    back.exec(
        "UPDATE jobs SET charged = charged + 1 WHERE seq = 77777",
        "",
    );
    let diff = original.first_difference(&dump(&back.location()).unwrap());
    assert!(
        diff.as_deref().is_some_and(|d| d.contains("table jobs")),
        "{diff:?}"
    );
}
