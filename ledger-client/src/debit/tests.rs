//! Settling without a network: an outcome recorded in the journal is reported, even
//! when the compaction after it fails.

use super::*;
use crate::journal::tests::{applied, charge};

#[tokio::test]
async fn a_failed_compaction_still_reports_the_settlement() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal");
    let mut j = Journal::open(&path).unwrap();
    j.set_compact_at(2048);
    let mut n = 0;
    while j.file_len() <= 2048 {
        j.record(charge(n)).unwrap();
        n += 1;
    }
    // Compaction writes `journal.compacting` first: a directory there makes it fail
    // (a read-only directory would not stop root).
    std::fs::create_dir(path.with_extension("compacting")).unwrap();
    let journal = Arc::new(Mutex::new(j));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let unreported = watch::Sender::new(usize::try_from(n).unwrap());
    for k in 0..n {
        settle(
            &journal,
            &path,
            vec![(charge(k), applied())],
            &tx,
            &unreported,
        )
        .await
        .expect("the settlement is recorded; only compaction fails");
    }
    assert_eq!(*unreported.borrow(), 0, "every settlement counted off");
    for k in 0..n {
        match rx.try_recv() {
            Ok(Settlement::Applied { charge: c, .. }) => assert_eq!(c, charge(k)),
            other => panic!("settlement {k}: {other:?}"),
        }
    }
    let j = lock(&journal);
    assert_eq!(j.pending_len(), 0);
    assert!(j.file_len() > 2048, "compaction cannot have run");
    drop(j);
    drop(journal);
    // What was recorded is what a restart sees.
    assert_eq!(Journal::open(&path).unwrap().pending_len(), 0);
}
