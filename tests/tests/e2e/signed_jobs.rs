//! Signed batch jobs on real nodes with a real accountd: a queue (a `service`
//! certificate named `batchd`) starts a rank of a job the user signed; the rank runs
//! as that user, its output and exit come back, and the node does not charge it.
//! Forged, altered, replayed (to the same node and to another), expired,
//! out-of-attempts, unclaimable (accountd down) and revoked jobs, and signed
//! launches from anyone but the queue, are each refused in one line naming the reason, with no process, no job cgroup
//! and, where the refusal comes before it, no claim in the ledger.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use certs::jobsign::{self, JobSigner};
use certs::testing::TestPki;
use certs::{Role, TlsPaths};
use clients::account::{AccountClient, ClientError};
use money::MICROS_PER_CREDIT as C;
use proto::account::{Claim, ErrorCode as AccountCode};
use proto::batch::{JobSpec, SignedJob, SignedLaunch, Worth};
use proto::node::{ErrorCode, ExitStatus, FromNode, JobId, Kill, Rebid, Signal, ToNode};
use rexec_tests::cluster::{ClusterOptions, TEST_USER};
use rexec_tests::market::{MarketCluster, MarketOptions, RawSession};
use rexec_tests::procs::MARK_VAR;
use rexec_tests::wait_until;

use crate::market_checks::{nothing_created, refused};

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A one-rank job of the test user, bidding 2 credits a minute, valid ten minutes.
fn spec(m: &MarketCluster, id: u64, argv: &[&str]) -> JobSpec {
    let t = now_s();
    JobSpec {
        id: JobId(id),
        user: TEST_USER.into(),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            (MARK_VAR.into(), m.mark.clone()),
        ],
        cwd: None,
        width: 1,
        length_s: 10,
        worth: Worth::Rate(2 * C),
        priority: 0,
        max_attempts: 1,
        signed_at: t,
        expires_at: t + 600,
        array: None,
        after: Vec::new(),
        options: Default::default(),
    }
}

/// `spec` signed with the key of `paths`, whoever `spec.user` is.
fn sign_with(paths: &TlsPaths, spec: &JobSpec) -> SignedJob {
    let signer = JobSigner::load(paths).unwrap();
    jobsign::sign(spec, signer.key(), signer.cert()).unwrap()
}

/// The test user's own signature.
fn signed(m: &MarketCluster, spec: &JobSpec) -> SignedJob {
    JobSigner::load(&m.pki.tls_paths(Role::User, TEST_USER))
        .unwrap()
        .sign(spec)
        .unwrap()
}

/// Rank 0 of attempt `attempt` at `bid`, sent by (`role`, `name`) to `node`.
/// A market of one node, `n1`, otherwise as `options` say.
fn one_node(options: MarketOptions) -> MarketCluster {
    MarketCluster::start(MarketOptions {
        cluster: ClusterOptions {
            nodes: 1,
            ..ClusterOptions::default()
        },
        ..options
    })
}

fn send(
    m: &MarketCluster,
    node: &str,
    from: (Role, &str),
    job: &SignedJob,
    attempt: u32,
    bid: i64,
) -> (RawSession, FromNode) {
    send_launch(m, node, from, launch(node, job, attempt, bid))
}

/// Rank 0 of `job` on `node` alone, at lease epoch 0.
fn launch(node: &str, job: &SignedJob, attempt: u32, bid: i64) -> SignedLaunch {
    SignedLaunch {
        job: job.clone(),
        attempt,
        rank: 0,
        bid: money::Bid::new(bid).expect("a test's queue bids zero or more"),
        nodes: vec![node.to_string()],
        started_ms: 0,
        array_index: None,
        kill_wait_ms: None,
        epoch: 0,
    }
}

fn send_launch(
    m: &MarketCluster,
    node: &str,
    from: (Role, &str),
    launch: SignedLaunch,
) -> (RawSession, FromNode) {
    let mut s = RawSession::open_as(m, node, from.0, from.1);
    let answer = s.send(ToNode::LaunchSigned(launch));
    (s, answer)
}

fn queue_sends(m: &MarketCluster, node: &str, job: &SignedJob) -> FromNode {
    send(m, node, (Role::Service, "batchd"), job, 0, 2 * C).1
}

/// Whether some node holds the claim on rank 0 of attempt 0 of `spec` (asked by
/// claiming it as node `probe`: a key nobody claimed is taken by the probe, so ask
/// once per key, after the node has answered).
fn claimed(m: &MarketCluster, spec: &JobSpec, job: &SignedJob) -> bool {
    let probe = m.pki.tls_paths(Role::Node, "probe");
    let claim = Claim {
        user: spec.user.clone(),
        job: spec.id,
        attempt: 0,
        rank: 0,
        digest: jobsign::digest(&job.spec),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let connector = certs::connector(&probe).unwrap();
        let addr = &m.accountd.addr;
        let mut client =
            AccountClient::connect(addr, &connector, "accountd", Duration::from_secs(5))
                .await
                .unwrap();
        match client.claim(claim).await {
            Ok(()) => false,
            Err(ClientError::Server(e))
                if matches!(
                    e.code,
                    AccountCode::AlreadyClaimed | AccountCode::KeyConflict
                ) =>
            {
                true
            }
            Err(e) => panic!("probe claim failed: {e}"),
        }
    })
}

/// Refused with `code` naming `needles`, nothing started, nothing claimed.
fn refused_before_claim(
    m: &MarketCluster,
    what: &str,
    answer: FromNode,
    code: ErrorCode,
    needles: &[&str],
    spec: &JobSpec,
    job: &SignedJob,
) {
    let message = refused(answer, code, needles);
    nothing_created(m, what);
    assert!(
        !claimed(m, spec, job),
        "{what}: claimed in the ledger ({message})"
    );
}

#[test]
fn a_signed_rank_runs_once_as_its_user_uncharged_and_replays_are_refused() {
    if !rexec_tests::can_run(
        "a_signed_rank_runs_once_as_its_user_uncharged_and_replays_are_refused",
    ) {
        return;
    }
    // Under `paper` every rank pays while another runs beside it: the plain rank
    // below is charged, so an uncharged batch rank is the node's choice.
    let m = MarketCluster::start(MarketOptions {
        cluster: ClusterOptions {
            nodes: 2,
            ..ClusterOptions::default()
        },
        ..MarketOptions::paper_with_one_second_ticks()
    });
    let mut plain = RawSession::open(&m, "n1", TEST_USER);
    let answer = plain.launch(&m, 0xa1, 2 * C, &["sleep", "3"]);
    assert!(matches!(answer, FromNode::Started(_)), "{answer:?}");
    let plain = std::thread::spawn(move || plain.until_exit());

    let batch = spec(
        &m,
        0xb1,
        &[
            "sh",
            "-c",
            "id -un; echo \"$REXEC_RANK/$REXEC_NRANKS/$REXEC_NODES/$REXEC_JOB\"; echo to-stderr >&2; sleep 3; exit 3",
        ],
    );
    let job = signed(&m, &batch);
    let (mut q, answer) = send(&m, "n1", (Role::Service, "batchd"), &job, 0, 2 * C);
    assert!(
        matches!(answer, FromNode::Started(_)),
        "{answer:?}\n{}",
        m.logs()
    );
    let frames = q.until_exit();
    let plain = plain.join().unwrap();

    let text = |pick: fn(&FromNode) -> Option<&[u8]>| -> String {
        frames
            .iter()
            .filter_map(pick)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect()
    };
    let out = text(|f| match f {
        FromNode::Stdout(c) => Some(c.as_ref()),
        _ => None,
    });
    let err = text(|f| match f {
        FromNode::Stderr(c) => Some(c.as_ref()),
        _ => None,
    });
    // The rank's own variables, as an interactive rank has them.
    assert_eq!(
        out,
        format!("{TEST_USER}\n0/1/n1/00000000000000b1\n"),
        "{frames:?}"
    );
    assert_eq!(err, "to-stderr\n");
    let Some(FromNode::Exit(exit)) = frames.last() else {
        panic!("no Exit: {frames:?}");
    };
    assert_eq!(exit.status, ExitStatus::Code(3));
    assert_eq!(exit.charged, 0, "the node charged a batch rank");
    let Some(FromNode::Exit(plain_exit)) = plain.last() else {
        panic!("no Exit for the plain rank: {plain:?}");
    };
    assert!(
        plain_exit.charged > 0,
        "the plain rank beside it paid nothing"
    );
    let plain_debited = wait_until(Duration::from_secs(15), || {
        !m.debits_of("00000000000000a1").is_empty()
    });
    assert!(plain_debited.is_some(), "the plain rank was never debited");
    assert_eq!(
        m.debits_of("00000000000000b1"),
        vec![],
        "a batch rank was debited"
    );

    // The same start again, to the same node (after its rank ended) and to another.
    let answer = queue_sends(&m, "n1", &job);
    refused(
        answer,
        ErrorCode::NotAuthorized,
        &["replayed", "already started on this node"],
    );
    nothing_created(&m, "a replay to the same node");
    let answer = queue_sends(&m, "n2", &job);
    refused(
        answer,
        ErrorCode::NotAuthorized,
        &["replayed", "already started by node n1"],
    );
    nothing_created(&m, "a replay to another node");
    assert!(claimed(&m, &batch, &job), "the rank's claim is gone");
}

#[test]
fn forged_altered_expired_spent_unclaimable_or_misdelivered_signed_jobs_start_nothing() {
    if !rexec_tests::can_run(
        "forged_altered_expired_spent_unclaimable_or_misdelivered_signed_jobs_start_nothing",
    ) {
        return;
    }
    let mut m = one_node(MarketOptions::default());
    let argv = ["sleep", "100"];

    // Sent by the user herself, or by a service that is not the queue.
    let s = spec(&m, 0xc1, &argv);
    let j = signed(&m, &s);
    let answer = send(&m, "n1", (Role::User, TEST_USER), &j, 0, 0).1;
    refused_before_claim(
        &m,
        "from a user",
        answer,
        ErrorCode::NotAuthorized,
        &["not a queue", "user"],
        &s,
        &j,
    );
    let s = spec(&m, 0xc2, &argv);
    let j = signed(&m, &s);
    let answer = send(&m, "n1", (Role::Service, "vexecd"), &j, 0, 0).1;
    refused_before_claim(
        &m,
        "from vexecd",
        answer,
        ErrorCode::NotAuthorized,
        &["not a queue"],
        &s,
        &j,
    );

    // Forged: bob signs a job that runs as the test user; bob's key under the
    // test user's certificate; a certificate from another cluster's CA.
    let s = spec(&m, 0xc3, &argv);
    let j = sign_with(&m.pki.tls_paths(Role::User, "bob"), &s);
    let answer = queue_sends(&m, "n1", &j);
    refused_before_claim(
        &m,
        "bob's job",
        answer,
        ErrorCode::NotAuthorized,
        &["signed by user \"bob\""],
        &s,
        &j,
    );
    let s = spec(&m, 0xc4, &argv);
    let j = SignedJob {
        cert: signed(&m, &s).cert,
        ..sign_with(&m.pki.tls_paths(Role::User, "bob"), &s)
    };
    let answer = queue_sends(&m, "n1", &j);
    refused_before_claim(
        &m,
        "bob's key",
        answer,
        ErrorCode::NotAuthorized,
        &["bad signature"],
        &s,
        &j,
    );
    let other = TestPki::with_cluster("other").unwrap();
    let s = spec(&m, 0xc5, &argv);
    let j = sign_with(&other.tls_paths(Role::User, TEST_USER), &s);
    let answer = queue_sends(&m, "n1", &j);
    refused_before_claim(
        &m,
        "another CA",
        answer,
        ErrorCode::NotAuthorized,
        &["not issued by this cluster's CA"],
        &s,
        &j,
    );

    // Altered after signing: another program.
    let s = spec(&m, 0xc6, &["true"]);
    let mut j = signed(&m, &s);
    let at = j.spec.windows(4).position(|w| w == b"true").unwrap();
    j.spec[at..at + 4].copy_from_slice(b"yes\0");
    let answer = queue_sends(&m, "n1", &j);
    refused_before_claim(
        &m,
        "an altered job",
        answer,
        ErrorCode::NotAuthorized,
        &["bad signature"],
        &s,
        &j,
    );

    // Expired; a start past max_attempts.
    let mut s = spec(&m, 0xc7, &argv);
    s.signed_at -= 3600;
    s.expires_at = now_s() - 1;
    let j = signed(&m, &s);
    let answer = queue_sends(&m, "n1", &j);
    refused_before_claim(
        &m,
        "an expired job",
        answer,
        ErrorCode::NotAuthorized,
        &["expired"],
        &s,
        &j,
    );
    let s = spec(&m, 0xc8, &argv);
    let j = signed(&m, &s);
    let answer = send(&m, "n1", (Role::Service, "batchd"), &j, 1, 2 * C).1;
    refused_before_claim(
        &m,
        "attempt 1 of 1",
        answer,
        ErrorCode::BadRequest,
        &["max_attempts 1"],
        &s,
        &j,
    );

    // Without accountd no claim can be made, so nothing starts.
    let s = spec(&m, 0xca, &argv);
    let j = signed(&m, &s);
    m.accountd.kill9();
    let answer = queue_sends(&m, "n1", &j);
    refused(
        answer,
        ErrorCode::AccountUnavailable,
        &["cannot claim", "nothing was started"],
    );
    nothing_created(&m, "no accountd");
    m.accountd.restart();
    assert!(!claimed(&m, &s, &j), "claimed without accountd");

    // Revoked: the node reads the CRL as it is now, no SIGHUP needed.
    let s = spec(&m, 0xc9, &argv);
    let j = signed(&m, &s);
    m.pki.revoke(Role::User, TEST_USER).unwrap();
    let answer = queue_sends(&m, "n1", &j);
    refused_before_claim(
        &m,
        "a revoked user",
        answer,
        ErrorCode::NotAuthorized,
        &["revoked"],
        &s,
        &j,
    );
}

/// A queue (a `service` certificate of `[batch] queues`) may list and kill the
/// signed ranks it started there, and nothing else: a user's own job is neither
/// listed nor killed, its bid not changed, and a service certificate that is not a
/// queue may not list at all. (A restarted batchd settles its last run this way.)
#[test]
fn a_queue_lists_and_kills_only_the_ranks_it_started() {
    if !rexec_tests::can_run("a_queue_lists_and_kills_only_the_ranks_it_started") {
        return;
    }
    let m = one_node(MarketOptions::paper_with_one_second_ticks());
    let mut plain = RawSession::open(&m, "n1", TEST_USER);
    let answer = plain.launch(&m, 0xd1, 2 * C, &["sleep", "60"]);
    assert!(matches!(answer, FromNode::Started(_)), "{answer:?}");
    let job = signed(&m, &spec(&m, 0xd2, &["sleep", "60"]));
    let (mut q, answer) = send(&m, "n1", (Role::Service, "batchd"), &job, 0, 2 * C);
    assert!(
        matches!(answer, FromNode::Started(_)),
        "{answer:?}\n{}",
        m.logs()
    );

    let mut queue = RawSession::open_as(&m, "n1", Role::Service, "batchd");
    let listed = match queue.send(ToNode::ListJobs) {
        FromNode::Jobs(list) => list.jobs.iter().map(|j| j.job).collect::<Vec<_>>(),
        other => panic!("the queue may list its ranks: {other:?}\n{}", m.logs()),
    };
    assert_eq!(listed, [JobId(0xd2)], "only the queue's own rank");
    let kill = |job| {
        ToNode::Kill(Kill {
            job: JobId(job),
            signal: Signal::Kill,
            epoch: 0,
        })
    };
    match queue.send(kill(0xd1)) {
        FromNode::Error(e) => assert_eq!(e.code, ErrorCode::NoSuchJob, "{e}"),
        other => panic!("a queue killed a user's own job: {other:?}"),
    }
    match queue.send(ToNode::Rebid(Rebid {
        job: JobId(0xd2),
        bid: money::Bid::from_credits(1),
    })) {
        FromNode::Error(e) => assert_eq!(e.code, ErrorCode::NotAuthorized, "{e}"),
        other => panic!("a queue changed a bid: {other:?}"),
    }
    let mut other = RawSession::open_as(&m, "n1", Role::Service, "vexecd");
    match other.send(ToNode::ListJobs) {
        FromNode::Error(e) => assert_eq!(e.code, ErrorCode::NotAuthorized, "{e}"),
        other => panic!("a service that is no queue listed jobs: {other:?}"),
    }
    match other.send(kill(0xd2)) {
        FromNode::Error(e) => assert_eq!(e.code, ErrorCode::NotAuthorized, "{e}"),
        other => panic!("a service that is no queue killed a rank: {other:?}"),
    }

    match queue.send(kill(0xd2)) {
        FromNode::Killed(k) => assert_eq!(k.ranks, 1),
        other => panic!("the queue may kill its own rank: {other:?}"),
    }
    let frames = q.until_exit();
    assert!(
        matches!(
            frames.last(),
            Some(FromNode::Exit(e)) if matches!(e.status, ExitStatus::Signaled { signal: Signal::Kill, .. })
        ),
        "{frames:?}"
    );
    // The user's own job runs on.
    let mut own = RawSession::open(&m, "n1", TEST_USER);
    match own.send(ToNode::ListJobs) {
        FromNode::Jobs(list) => {
            let ids: Vec<_> = list.jobs.iter().map(|j| j.job).collect();
            assert_eq!(ids, [JobId(0xd1)]);
        }
        other => panic!("{other:?}"),
    }
    drop(plain);
}

/// Fencing: a queue's launches and kills carry its lease epoch; the node keeps the
/// highest it has seen from the queue, on disk, and refuses anything lower, also
/// after a restart of rexecd. Epochs from anyone but a queue are not fenced.
#[test]
fn a_node_refuses_a_queue_epoch_below_the_highest_it_saw_even_after_a_restart() {
    let name = "a_node_refuses_a_queue_epoch_below_the_highest_it_saw_even_after_a_restart";
    if !rexec_tests::can_run(name) {
        return;
    }
    let mut m = one_node(MarketOptions::paper_with_one_second_ticks());
    let kill = |epoch| {
        ToNode::Kill(Kill {
            job: JobId(0xe9),
            signal: Signal::Kill,
            epoch,
        })
    };
    let code = |answer: FromNode| match answer {
        FromNode::Error(e) => e.code,
        other => panic!("expected a refusal: {other:?}"),
    };
    let mut queue = RawSession::open_as(&m, "n1", Role::Service, "batchd");
    assert_eq!(code(queue.send(kill(5))), ErrorCode::NoSuchJob);
    match queue.send(kill(3)) {
        FromNode::Error(e) => {
            assert_eq!(e.code, ErrorCode::Fenced, "{e}");
            assert!(
                e.message.contains("epoch 3") && e.message.contains("epoch 5"),
                "{e}"
            );
        }
        other => panic!("a stale epoch was obeyed: {other:?}"),
    }
    let job = signed(&m, &spec(&m, 0xe1, &["sleep", "60"]));
    let from = (Role::Service, "batchd");
    let at = |epoch| SignedLaunch {
        epoch,
        ..launch("n1", &job, 0, 2 * C)
    };
    let (_s, answer) = send_launch(&m, "n1", from, at(4));
    assert_eq!(code(answer), ErrorCode::Fenced);
    // A user's epoch is not a queue's: neither fenced nor recorded.
    let mut user = RawSession::open(&m, "n1", TEST_USER);
    assert_eq!(code(user.send(kill(1))), ErrorCode::NoSuchJob);
    drop(queue);
    m.crash("n1");
    m.restart("n1");
    let mut queue = RawSession::open_as(&m, "n1", Role::Service, "batchd");
    assert_eq!(
        code(queue.send(kill(4))),
        ErrorCode::Fenced,
        "forgotten at restart"
    );
    let (_s, answer) = send_launch(&m, "n1", from, at(5));
    assert!(
        matches!(answer, FromNode::Started(_)),
        "{answer:?}\n{}",
        m.logs()
    );
}
