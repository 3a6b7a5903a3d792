//! The store's own checks: what is committed comes back after a reopen, a
//! duplicate id is refused alone in its group, and output reads by offset.

use super::*;
use proto::batch::SignedJob;

fn record(seq: i64, id: u64) -> JobRecord {
    JobRecord::queued(
        seq,
        id,
        "alice".into(),
        SignedJob {
            spec: vec![1, 2, 3],
            signature: vec![4],
            cert: vec![5],
        },
        1000 + seq,
    )
}

#[tokio::test]
async fn committed_jobs_come_back_and_duplicates_are_refused_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let (store, loaded) = Store::open(&path, 64, 5).unwrap();
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
    let (store, loaded) = Store::open(&path, 64, 99).unwrap();
    assert_eq!(loaded.epoch_ms, 5, "the epoch is kept");
    assert_eq!(loaded.jobs.len(), 50);
    assert_eq!(loaded.jobs[3], r);
    assert_eq!(loaded.output, vec![(103, 11, 0)]);
    let reader = Reader::open(&path).unwrap();
    assert_eq!(reader.output(103, 1, 3, 100).unwrap(), b"lo world");
    assert_eq!(reader.output(103, 1, 0, 4).unwrap(), b"hell");
    assert!(reader.output(103, 2, 0, 4).unwrap().is_empty());
    store.close();
}

async fn futures_join<F: std::future::Future>(fs: impl Iterator<Item = F>) -> Vec<F::Output> {
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
