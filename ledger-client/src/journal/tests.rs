//! The journal on its own: records, replay, torn tails, damage, compaction, locking.

use super::*;
use proto::account::MeterInterval;
use std::os::unix::fs::PermissionsExt;

pub(crate) fn charge(seq: u64) -> Charge {
    Charge::Debit(Debit {
        key: DebitKey {
            node: "n1".into(),
            job: "j".into(),
            seq,
        },
        user: "alice".into(),
        amount: 10 + seq as i64,
        rank: 0,
        interval: MeterInterval::default(),
        cpu_us: 0,
    })
}

pub(crate) fn applied() -> Outcome {
    Outcome::Applied(ChargeReceipt {
        entry_id: 1,
        amount: -1,
        balance_after: 0,
        balance_now: 0,
        duplicate: false,
    })
}

#[test]
fn pending_charges_survive_reopening_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j");
    let mut j = Journal::open(&p).unwrap();
    for s in 0..5 {
        assert!(j.record(charge(s)).unwrap());
    }
    assert!(
        !j.record(charge(2)).unwrap(),
        "same key twice is one charge"
    );
    j.settle(&charge(1), applied()).unwrap();
    j.settle(
        &charge(3),
        Outcome::Refused(ErrorCode::UnknownUser, "no".into()),
    )
    .unwrap();
    drop(j);
    let j = Journal::open(&p).unwrap();
    assert_eq!(j.pending(), vec![charge(0), charge(2), charge(4)]);
    assert_eq!(j.discarded_tail, 0);
}

#[test]
fn a_torn_tail_is_cut_and_the_rest_kept() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j");
    let mut j = Journal::open(&p).unwrap();
    j.record(charge(0)).unwrap();
    j.record(charge(1)).unwrap();
    let good = j.file_len();
    j.record(charge(2)).unwrap();
    drop(j);
    // Simulate a crash in the middle of writing the third record.
    let f = OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(good + 5).unwrap();
    let mut j = Journal::open(&p).unwrap();
    assert_eq!(j.pending(), vec![charge(0), charge(1)]);
    assert_eq!(j.discarded_tail, 5);
    assert_eq!(std::fs::metadata(&p).unwrap().len(), good);
    j.record(charge(3)).unwrap();
    drop(j);
    assert_eq!(
        Journal::open(&p).unwrap().pending(),
        vec![charge(0), charge(1), charge(3)]
    );
}

#[test]
fn damage_in_the_middle_loses_only_the_damaged_record() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j");
    let mut j = Journal::open(&p).unwrap();
    j.record(charge(0)).unwrap();
    let good = j.file_len() as usize;
    j.record(charge(1)).unwrap();
    j.record(charge(2)).unwrap();
    j.record(charge(3)).unwrap();
    j.settle(&charge(3), applied()).unwrap();
    drop(j);
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[good + 10] ^= 0xff;
    std::fs::write(&p, &bytes).unwrap();

    let j = Journal::open(&p).unwrap();
    assert_eq!(j.pending(), vec![charge(0), charge(2)]);
    assert!(j.damaged_bytes > 0);
    assert_eq!(j.discarded_tail, 0);
    drop(j);
    // The damaged original is kept, private, for the admin to compare.
    let copies: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("j.damaged-"))
        .collect();
    assert_eq!(copies.len(), 1);
    assert_eq!(std::fs::read(copies[0].path()).unwrap(), bytes);
    let mode = copies[0].metadata().unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, JOURNAL_MODE);
    // The journal itself was rewritten clean: it opens without damage.
    let j = Journal::open(&p).unwrap();
    assert_eq!(j.pending(), vec![charge(0), charge(2)]);
    assert_eq!((j.damaged_bytes, j.discarded_tail), (0, 0));
}

#[test]
fn a_torn_tail_holding_a_whole_record_is_cut_not_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j");
    let mut j = Journal::open(&p).unwrap();
    j.record(charge(0)).unwrap();
    drop(j);
    // A record cut short whose bytes happen to contain a complete, valid
    // record: what a crash leaves must never be read as a charge.
    let mut inner = Vec::new();
    encode_record(&Record::Intent(charge(7)), &mut inner).unwrap();
    let mut bytes = std::fs::read(&p).unwrap();
    let good = bytes.len();
    bytes.extend_from_slice(&((inner.len() + 100) as u32).to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.push(0);
    bytes.extend_from_slice(&inner);
    std::fs::write(&p, &bytes).unwrap();
    let j = Journal::open(&p).unwrap();
    assert_eq!(j.pending(), vec![charge(0)]);
    assert_eq!(j.damaged_bytes, 0);
    assert_eq!(j.discarded_tail as usize, bytes.len() - good);
}

#[test]
fn pathological_damage_is_given_up_on_within_a_budget() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j");
    let mut j = Journal::open(&p).unwrap();
    j.record(charge(0)).unwrap();
    drop(j);
    // 1 MiB in which every fourth offset looks like the header of a
    // maximal record, so each of them would cost a 64 KiB checksum.
    let mut bytes = std::fs::read(&p).unwrap();
    for _ in 0..(1 << 18) {
        bytes.extend_from_slice(&[0, 0, 1, 0]);
    }
    std::fs::write(&p, &bytes).unwrap();
    let started = std::time::Instant::now();
    let j = Journal::open(&p).unwrap();
    eprintln!(
        "opened a pathologically damaged journal in {:?}",
        started.elapsed()
    );
    assert_eq!(j.pending(), vec![charge(0)]);
    assert_eq!(j.damaged_bytes, 0, "nothing after the damage checked out");
}

#[test]
fn damage_in_the_last_record_is_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j");
    let mut j = Journal::open(&p).unwrap();
    j.record(charge(0)).unwrap();
    let good = j.file_len() as usize;
    j.record(charge(1)).unwrap();
    drop(j);
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[good + 10] ^= 0xff;
    std::fs::write(&p, &bytes).unwrap();
    let j = Journal::open(&p).unwrap();
    assert_eq!(j.pending(), vec![charge(0)]);
    assert_eq!(j.damaged_bytes, 0);
    assert_eq!(j.discarded_tail as usize, bytes.len() - good);
}

#[test]
fn foreign_files_are_refused_and_settled_journals_shrink() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("notes.txt");
    std::fs::write(&p, "hello world").unwrap();
    assert!(matches!(
        Journal::open(&p),
        Err(JournalError::NotAJournal { .. })
    ));
    let p = dir.path().join("j");
    let mut j = Journal::open(&p).unwrap();
    j.set_compact_at(4096);
    let mut s = 0;
    while j.file_len() <= 4096 {
        j.record(charge(s)).unwrap();
        s += 1;
    }
    for k in 0..s {
        j.settle(&charge(k), applied()).unwrap();
    }
    assert!(j.file_len() < 4096, "{}", j.file_len());
    assert_eq!(std::fs::metadata(&p).unwrap().len(), j.file_len());
    assert_eq!(j.pending_len(), 0);
    drop(j);
    assert_eq!(Journal::open(&p).unwrap().pending_len(), 0);
}

#[test]
fn compaction_keeps_what_is_pending_across_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j");
    let mut j = Journal::open(&p).unwrap();
    j.set_compact_at(8192);
    let mut s = 0;
    while j.file_len() <= 8192 {
        j.record(charge(s)).unwrap();
        s += 1;
    }
    // Settle all but the last two; the file is rewritten on the way.
    for k in 0..s - 2 {
        j.settle(&charge(k), applied()).unwrap();
    }
    assert!(j.file_len() < 8192, "{}", j.file_len());
    j.record(charge(s)).unwrap();
    drop(j);
    let j = Journal::open(&p).unwrap();
    assert_eq!(j.pending(), vec![charge(s - 2), charge(s - 1), charge(s)]);
    assert!(!p.with_extension("compacting").exists());
    let mode = std::fs::metadata(&p).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "compacted journal mode {:o}", mode & 0o777);
}

#[test]
fn a_new_journal_is_readable_by_its_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j");
    let mut j = Journal::open(&p).unwrap();
    j.record(charge(0)).unwrap();
    let mode = std::fs::metadata(&p).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "journal mode {:o}", mode & 0o777);
}

#[test]
fn a_journal_is_used_by_one_owner_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j");
    let first = Journal::open(&p).unwrap();
    let e = Journal::open(&p).unwrap_err();
    assert!(matches!(e, JournalError::Locked { .. }), "{e}");
    assert!(e.to_string().contains("in use by another process"), "{e}");
    drop(first);
    Journal::open(&p).unwrap();
}

#[test]
fn crc32_matches_the_standard_check_value() {
    // Pins the on-disk format: journals written before keep their checksums.
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
}

#[test]
fn settling_many_at_once_survives_reopening_and_a_torn_write_keeps_the_rest_pending() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j");
    let mut j = Journal::open(&p).unwrap();
    for s in 0..6 {
        j.record(charge(s)).unwrap();
    }
    assert_eq!(j.oldest_pending(2), vec![charge(0), charge(1)]);
    let refused = Outcome::Refused(ErrorCode::UnknownUser, "no".into());
    // A charge not pending (or named twice) is skipped, as by `settle`.
    let many = [
        (charge(0), applied()),
        (charge(1), refused),
        (charge(1), applied()),
        (charge(9), applied()),
        (charge(2), applied()),
    ];
    assert!(j.settle_many(&many).unwrap().is_none());
    assert_eq!(j.pending(), vec![charge(3), charge(4), charge(5)]);
    let before = j.file_len();
    j.settle_many(&[(charge(3), applied()), (charge(4), applied())])
        .unwrap();
    let after = j.file_len();
    drop(j);
    // A crash in the middle of the one write: the first record is whole, the
    // second torn. The first stays settled, the second's charge pending.
    let f = OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(after - 3).unwrap();
    drop(f);
    let j = Journal::open(&p).unwrap();
    assert!(j.discarded_tail > 0 && j.file_len() > before);
    assert_eq!(j.pending(), vec![charge(4), charge(5)]);
}

#[test]
fn a_project_debit_is_journaled_beside_plain_ones_and_sent_as_the_projects() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("j");
    let Charge::Debit(debit) = charge(1) else {
        unreachable!()
    };
    let project = Charge::ProjectDebit(ProjectDebit {
        project: "chem".into(),
        debit,
    });
    let mut j = Journal::open(&p).unwrap();
    assert!(j.record(charge(0)).unwrap());
    assert!(j.record(project.clone()).unwrap());
    assert!(
        !j.record(charge(1)).unwrap(),
        "a project's debit holds its key in the debits' key space"
    );
    drop(j);
    let j = Journal::open(&p).unwrap();
    assert_eq!(j.pending(), vec![charge(0), project.clone()]);
    assert_eq!((project.user(), project.project()), ("alice", Some("chem")));
    assert_eq!(charge(0).project(), None);
    assert!(matches!(
        project.to_op(),
        AccountOp::Project(proto::project::ProjectOp::Debit(d)) if d.project == "chem" && d.debit.user == "alice"
    ));
}
