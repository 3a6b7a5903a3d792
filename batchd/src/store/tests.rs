//! The store's own checks, each on both backends: what is committed comes
//! back after a reopen, a duplicate id is refused alone in its group, output
//! reads by offset, the debit journal keeps what accountd has not taken, and
//! ranks' usage sums up.

use super::testdb::{TestDb, both_async};
use super::*;
use proto::batch::SignedJob;

fn record(seq: i64, id: u64) -> JobRecord {
    JobRecord::queued(
        seq,
        id,
        "alice".into(),
        std::sync::Arc::new(SignedJob {
            spec: vec![1, 2, 3],
            signature: vec![4],
            cert: vec![5],
        }),
        1000 + seq,
    )
}

/// A new store at `at` holding job 7.
async fn with_job_7(at: &Location) -> Store {
    let (store, _) = Store::open_at(at, 64, 5).unwrap();
    store
        .write(Write::Insert(Box::new(record(0, 7))))
        .await
        .unwrap();
    store
}

both_async! {
    workers = 2;
#[test]
async fn an_array_is_stored_once_and_its_tasks_come_back_with_it(kind: Kind) {
    let db = TestDb::new(kind);
    let at = db.location();
    let store = with_job_7(&at).await;
    let signed = record(0, 0).signed;
    let tasks: Vec<JobRecord> = (0..3)
        .map(|i| {
            let mut t = record(1 + i, 1000 + 1 + 2 * i as u64);
            t.array = Some((1000, 2 * i as u32));
            t
        })
        .collect();
    let array = |id: u64, tasks: Vec<JobRecord>| ArrayRecord {
        id,
        user: "alice".into(),
        signed: signed.clone(),
        submitted_ms: 9,
        tasks,
    };
    store
        .write(Write::InsertArray(Box::new(array(1000, tasks.clone()))))
        .await
        .unwrap();
    // A task id that exists refuses the whole array.
    let clash = vec![record(4, 2000), record(5, 7)];
    let dup = store
        .write(Write::InsertArray(Box::new(array(2000, clash))))
        .await;
    assert!(matches!(dup, Err(StoreError::Duplicate(2000))), "{dup:?}");
    store
        .write(Write::Insert(Box::new(record(6, 8))))
        .await
        .unwrap();
    let mut done = tasks[1].clone();
    done.state = JobState::Cancelled;
    store.write(Write::UpdateMany(vec![done])).await.unwrap();
    store.close();
    let (_, loaded) = Store::open_at(&at, 64, 5).unwrap();
    type Row = (u64, Option<(u64, u32)>, JobState);
    let got: Vec<Row> = loaded
        .jobs
        .iter()
        .map(|j| (j.id, j.array, j.state))
        .collect();
    assert_eq!(
        got,
        [
            (7, None, JobState::Queued),
            (1001, Some((1000, 0)), JobState::Queued),
            (1003, Some((1000, 2)), JobState::Cancelled),
            (1005, Some((1000, 4)), JobState::Queued),
            (8, None, JobState::Queued),
        ]
    );
    assert!(loaded.jobs.iter().all(|j| *j.signed == *signed));
    let sigs = db.text("SELECT count(*) FROM jobs WHERE length(signed) > 0");
    assert_eq!(sigs, "2", "the tasks' rows hold no signature");
}

#[test]
async fn who_pays_for_a_job_and_an_array_comes_back_after_a_reopen(kind: Kind) {
    let db = TestDb::new(kind);
    let at = db.location();
    let (store, _) = Store::open_at(&at, 64, 5).unwrap();
    let chem = Payer {
        account: Some("chem".into()),
        max_cost: Some(1_500_000),
    };
    let mut single = record(0, 7);
    single.payer = Some(chem.clone());
    store.write(Write::Insert(Box::new(single))).await.unwrap();
    // No payer recorded: the job follows its signed terms.
    store
        .write(Write::Insert(Box::new(record(1, 8))))
        .await
        .unwrap();
    let personal = Payer::default();
    let tasks: Vec<JobRecord> = (0..2)
        .map(|i| {
            let mut t = record(2 + i, 1000 + 1 + i as u64);
            t.array = Some((1000, i as u32));
            t.payer = Some(personal.clone());
            t
        })
        .collect();
    store
        .write(Write::InsertArray(Box::new(ArrayRecord {
            id: 1000,
            user: "alice".into(),
            signed: record(0, 0).signed,
            submitted_ms: 9,
            tasks,
        })))
        .await
        .unwrap();
    store.close();
    let (store, loaded) = Store::open_at(&at, 64, 5).unwrap();
    let payers: Vec<(u64, Option<Payer>)> =
        loaded.jobs.iter().map(|j| (j.id, j.payer.clone())).collect();
    assert_eq!(
        payers,
        [
            (7, Some(chem)),
            (8, None),
            (1001, Some(personal.clone())),
            (1002, Some(personal)),
        ]
    );
    assert_eq!(db.text("SELECT count(*) FROM job_payer"), "2", "one row per signed job");
    store.close();
}

#[test]
async fn committed_jobs_come_back_and_duplicates_are_refused_alone(kind: Kind) {
    let db = TestDb::new(kind);
    let at = db.location();
    let (store, loaded) = Store::open_at(&at, 64, 5).unwrap();
    assert_eq!(loaded.epoch_ms, 5);
    assert!(loaded.jobs.is_empty());
    let writes = (0..50).map(|i| store.write(Write::Insert(Box::new(record(i, 100 + i as u64)))));
    for r in futures_join(writes).await {
        r.unwrap();
    }
    let dup = store.write(Write::Insert(Box::new(record(99, 100)))).await;
    assert!(matches!(dup, Err(StoreError::Duplicate(100))), "{dup:?}");
    let mut r = record(3, 103);
    r.state = JobState::Finished;
    r.attempts = 1;
    r.nodes = vec!["n1".into(), "n2".into()];
    r.exit = Some(ExitStatus::Code(3));
    r.charged = 42;
    store
        .write(Write::Update(Box::new(r.clone())))
        .await
        .unwrap();
    for (off, data) in [(0u64, b"hello ".to_vec()), (6, b"world".to_vec())] {
        store
            .write(Write::Output {
                id: 103,
                stream: 1,
                offset: off,
                data,
            })
            .await
            .unwrap();
    }
    store.close();
    let (store, loaded) = Store::open_at(&at, 64, 99).unwrap();
    assert_eq!(loaded.epoch_ms, 5, "the epoch is kept");
    assert_eq!(loaded.jobs.len(), 50);
    assert_eq!(loaded.jobs[3], r);
    assert_eq!(loaded.output, vec![(103, 11, 0)]);
    let reader = Reader::open_at(&at).unwrap();
    assert_eq!(reader.output(103, 1, 3, 100).unwrap(), b"lo world");
    assert_eq!(reader.output(103, 1, 0, 4).unwrap(), b"hell");
    assert!(reader.output(103, 2, 0, 4).unwrap().is_empty());
    store.close();
}

#[test]
async fn recorded_debits_stay_in_the_journal_until_delivered_or_refused(kind: Kind) {
    let db = TestDb::new(kind);
    let at = db.location();
    let store = with_job_7(&at).await;
    let debit = |seq: u64| PendingDebit {
        job: 7,
        seq,
        user: "alice".into(),
        account: (seq == 2).then(|| "chem".to_string()),
        amount: 1_000 * seq as i64,
        start_us: seq * 1_000_000,
        end_us: (seq + 1) * 1_000_000,
    };
    let mut rec = record(0, 7);
    for seq in 1..=3 {
        rec.charged += 1_000 * seq as i64;
        rec.charge_seq = seq;
        store
            .write(Write::Charge(Box::new(rec.clone()), Box::new(debit(seq))))
            .await
            .unwrap();
    }
    store
        .write(Write::Delivered { job: 7, seq: 1 })
        .await
        .unwrap();
    store
        .write(Write::Refused {
            job: 7,
            seq: 3,
            why: "no such user".into(),
        })
        .await
        .unwrap();
    store.close();
    // After a restart: the charged total and the one debit still owed.
    let (store, loaded) = Store::open_at(&at, 64, 99).unwrap();
    assert_eq!(loaded.jobs[0].charged, 6_000);
    assert_eq!(loaded.jobs[0].charge_seq, 3);
    assert_eq!(loaded.debits, vec![debit(2)]);
    store.close();
    // The refused one is kept, marked, for an admin to see.
    let why = db.text("SELECT refused FROM debits WHERE job = 7 AND seq = 3");
    assert_eq!(why, "no such user");
}

#[test]
async fn a_jobs_usage_sums_its_ranks_cpu_and_knows_its_peak_only_from_every_rank(kind: Kind) {
    let db = TestDb::new(kind);
    let at = db.location();
    let (store, _) = Store::open_at(&at, 8, 1).unwrap();
    for w in [
        rank(1, 0, 0, 1500, Some(4 << 20)),
        rank(1, 0, 1, 500, Some(9 << 20)),
        // A second attempt's rank adds its CPU time too.
        rank(1, 1, 0, 250, Some(1 << 20)),
        rank(2, 0, 0, 100, Some(1 << 20)),
        rank(2, 0, 1, 100, None),
    ] {
        store.write(w).await.unwrap();
    }
    // A repeated report of one rank replaces it.
    store
        .write(rank(1, 0, 1, 500, Some(9 << 20)))
        .await
        .unwrap();
    let reader = Reader::open_at(&at).unwrap();
    let used = reader.jobs_usage(&[1, 2, 3]).unwrap();
    assert_eq!(used.len(), 3);
    assert_eq!(
        used[&1],
        JobUsage {
            cpu_nanos: Some(2_250_000_000),
            peak_memory: Some(9 << 20)
        }
    );
    assert_eq!(
        used[&2],
        JobUsage {
            cpu_nanos: Some(200_000_000),
            peak_memory: None
        }
    );
    assert_eq!(used[&3], JobUsage::default());
    assert!(reader.jobs_usage(&[]).unwrap().is_empty());
    store.close();
}

#[test]
async fn a_failing_write_is_refused_alone_and_its_group_is_kept(kind: Kind) {
    let db = TestDb::new(kind);
    let at = db.location();
    let store = with_job_7(&at).await;
    // An update the database refuses (a check added behind the store's back)
    // fails by itself; the writes sharing its group commit are kept.
    db.exec(
        "CREATE TRIGGER no_nine BEFORE UPDATE ON jobs WHEN NEW.attempts = 9
         BEGIN SELECT RAISE(ABORT, 'nine'); END",
        "ALTER TABLE jobs ADD CONSTRAINT no_nine CHECK (attempts <> 9)",
    );
    let mut bad = record(0, 7);
    bad.attempts = 9;
    let mut good = record(0, 7);
    good.attempts = 2;
    let writes = vec![
        store.write(Write::Insert(Box::new(record(1, 8)))),
        store.write(Write::Update(Box::new(bad))),
        store.write(Write::Insert(Box::new(record(2, 9)))),
    ];
    let results = futures_join(writes.into_iter()).await;
    assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
    assert!(results[1].is_err(), "{results:?}");
    store.write(Write::Update(Box::new(good))).await.unwrap();
    store.close();
    let (_, loaded) = Store::open_at(&at, 64, 5).unwrap();
    let ids: Vec<(u64, u32)> = loaded.jobs.iter().map(|j| (j.id, j.attempts)).collect();
    assert_eq!(ids, [(7, 2), (8, 0), (9, 0)]);
}
}

fn rank(job: u64, attempt: u32, rank: u32, cpu_ms: u64, peak: Option<u64>) -> Write {
    Write::RankUsage(Box::new(RankUsage {
        job,
        attempt,
        rank,
        node: format!("n{rank}"),
        cpu_nanos: cpu_ms * 1_000_000,
        peak_memory: peak,
        ended_ms: 7,
    }))
}

pub(super) async fn futures_join<F: std::future::Future>(
    fs: impl Iterator<Item = F>,
) -> Vec<F::Output> {
    // Drive them together so they share group commits; a future that finished is
    // never polled again.
    let mut pending: Vec<Option<std::pin::Pin<Box<F>>>> = fs.map(|f| Some(Box::pin(f))).collect();
    let mut out: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for (slot, result) in pending.iter_mut().zip(out.iter_mut()) {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        *result = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => done = false,
                }
            }
        }
        if done {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    out.into_iter().flatten().collect()
}
