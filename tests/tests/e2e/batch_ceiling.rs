//! The spending ceiling of a batch job, `rexec submit --max-cost C`, signed with
//! the job: the queue refuses a job whose worst case (rate × width × length) is
//! above C, and stops one whose charges reach C, in state COST_LIMIT, as `rexec
//! queue --ended` and `rexec wait` show; the ledger holds C at most, and at least
//! C less one decision period's charge.

use std::path::PathBuf;
use std::time::Duration;

use proto::batch::JobState;
use rexec_tests::batch::{BatchMarket, BatchOptions};
use rexec_tests::cluster::TEST_USER;

const LIMIT: Duration = Duration::from_secs(30);

/// The test user's client configuration with the queue in `[batch]`.
pub(crate) fn batch_config(m: &BatchMarket) -> PathBuf {
    let base = &m.market.config;
    let text = std::fs::read_to_string(base).expect("client config");
    let path = base.with_extension("ceiling.toml");
    let table = format!("[batch]\naddress = \"{}\"\n", m.batchd.addr);
    std::fs::write(&path, format!("{text}{table}")).expect("cannot write the client config");
    path
}

#[test]
fn a_batch_job_over_its_ceiling_is_refused_and_one_reaching_it_is_stopped_at_it() {
    if !rexec_tests::can_run(
        "a_batch_job_over_its_ceiling_is_refused_and_one_reaching_it_is_stopped_at_it",
    ) {
        return;
    }
    let m = BatchMarket::start(BatchOptions::default());
    let config = batch_config(&m);
    let rexec = |args: &[&str]| m.market.rexec().config(&config).args(args).run();

    // 60 credits per CPU-minute on 1 processor for 2 s: a worst case of 2 credits.
    let submit = |length: &str| {
        rexec(&[
            "submit",
            "--max-cost",
            "1.5",
            "-r",
            "60",
            "--length",
            length,
            "sleep",
            "1000",
        ])
    };
    let over = submit("2s");
    assert_eq!(over.code, Some(254), "{over:?}");
    assert_eq!(over.stderr.lines().count(), 1, "{over:?}");
    assert!(
        over.stderr.contains("worst case, 2 credits")
            && over.stderr.contains("spending ceiling of 1.5 credits"),
        "{over:?}"
    );
    assert!(
        m.call(proto::batch::BatchOp::Queue(proto::batch::QueueQuery {
            user: None,
            ended: true,
            expand: false,
        }))
        .is_ok_and(|r| matches!(r, proto::batch::BatchReply::Queue(q) if q.is_empty())),
        "a refused job was queued"
    );

    // A worst case of 1 credit under a ceiling of 1.5: it runs on past its length
    // (it sleeps) and is stopped when its charges reach 1.5 credits.
    let before = m.market.accountd.balance(TEST_USER);
    let ok = submit("1s");
    assert_eq!(ok.code, Some(0), "{ok:?}");
    let job = ok.out().trim().to_string();
    let id = u64::from_str_radix(&job, 16).expect("a job id");
    let done = m.wait_for(id, LIMIT, |e| e.state == JobState::CostLimit);
    let ceiling = 1_500_000i64;
    // One decision period (500 ms) at 1 credit a second.
    let period = 500_000i64;
    assert!(
        (ceiling - period..=ceiling).contains(&done.charged),
        "charged {} micro-credits under a ceiling of {ceiling}: {done:?}",
        done.charged
    );
    // The ledger holds what the queue charged, and no more comes.
    let delivered = rexec_tests::wait_until(LIMIT, || {
        before - m.market.accountd.balance(TEST_USER) == done.charged
    });
    assert!(
        delivered.is_some(),
        "the ledger shows {} charged, the queue {}",
        before - m.market.accountd.balance(TEST_USER),
        done.charged
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(before - m.market.accountd.balance(TEST_USER), done.charged);

    // As the user sees it.
    let listing = rexec(&["queue", "--ended"]);
    assert_eq!(listing.code, Some(0), "{listing:?}");
    let row = listing
        .out()
        .lines()
        .find(|l| l.starts_with(&job))
        .map(str::to_string)
        .unwrap_or_default();
    assert!(row.contains("COST_LIMIT"), "{listing:?}");
    let wait = rexec(&["wait", &job]);
    assert_ne!(wait.code, Some(0), "{wait:?}");
    assert!(
        wait.stderr.contains("COST_LIMIT") && wait.stderr.contains("spending ceiling"),
        "{wait:?}"
    );
}
