//! Admin requests: listing and killing jobs; a user sees and kills only their own.

use certs::Role;
use proto::node::{ErrorCode, ExitStatus, FromNode, Kill, Signal, ToNode};

use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admins_list_and_kill_any_job_users_only_their_own() {
    if !can_run("admin") {
        return;
    }
    let d = Daemon::start("admin", &[]);
    let mut owner = d.user().await;
    let mut request = launch(&["/bin/sleep", "300"]);
    request.bid = money::Bid::new(2_500_000).unwrap();
    let job = request.job;
    let started = owner.start(request).await;

    let list = |reply: Option<FromNode>| match reply {
        Some(FromNode::Jobs(list)) => list.jobs,
        other => panic!("expected Jobs, got {other:?}"),
    };
    let mut admin = d.client(Role::Admin, "ops").await;
    let jobs = list(admin.recv_after(ToNode::ListJobs).await);
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(
        (jobs[0].job, jobs[0].rank, jobs[0].user.as_str()),
        (job, 0, USER)
    );
    assert_eq!(
        (jobs[0].program.as_str(), jobs[0].bid),
        ("/bin/sleep", money::Bid::new(2_500_000).unwrap())
    );

    let mut own = d.user().await;
    assert_eq!(list(own.recv_after(ToNode::ListJobs).await).len(), 1);

    let mut other = d.client(Role::User, "daemon").await;
    assert!(list(other.recv_after(ToNode::ListJobs).await).is_empty());
    let kill = ToNode::Kill(Kill {
        job,
        signal: Signal::Kill,
        epoch: 0,
    });
    match other.recv_after(kill.clone()).await {
        Some(FromNode::Error(e)) => assert_eq!(e.code, ErrorCode::NoSuchJob),
        reply => panic!("expected NoSuchJob, got {reply:?}"),
    }
    assert!(!is_dead(started.pid as i32));

    let mut node = d.client(Role::Node, "n2").await;
    match node.recv_after(ToNode::ListJobs).await {
        Some(FromNode::Error(e)) => assert_eq!(e.code, ErrorCode::NotAuthorized),
        reply => panic!("expected NotAuthorized, got {reply:?}"),
    }

    match admin.recv_after(kill).await {
        Some(FromNode::Killed(k)) => assert_eq!((k.job, k.ranks), (job, 1)),
        reply => panic!("expected Killed, got {reply:?}"),
    }
    ended_by_sigkill(&d, &mut owner, started.pid as i32).await;
    assert!(list(admin.recv_after(ToNode::ListJobs).await).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bids_become_cpu_weights() {
    if !can_run("weights") {
        return;
    }
    let d = Daemon::start("weights", &[]);
    let mut a = d.user().await;
    let mut high = launch(&["/bin/sleep", "300"]);
    high.bid = money::Bid::from_credits(4);
    a.start(high).await;
    let mut b = d.user().await;
    let mut low = launch(&["/bin/sleep", "300"]);
    low.bid = money::Bid::from_credits(1);
    b.start(low).await;
    let dirs = d.job_cgroups();
    assert_eq!(dirs.len(), 2);
    let base = cpu_dir(&d.parent).unwrap();
    let weight = |dir: &str| {
        let v1 = base.join(dir).join("cpu.shares");
        let path = if v1.exists() {
            v1
        } else {
            base.join(dir).join("cpu.weight")
        };
        std::fs::read_to_string(path)
            .unwrap()
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let (w1, w2) = (weight(&dirs[0]), weight(&dirs[1]));
    assert_eq!(w1, 4 * w2, "weights {w1} and {w2}");
    a.send(ToNode::Signal(Signal::Kill)).await;
    a.outcome().await;
    b.send(ToNode::Signal(Signal::Kill)).await;
    b.outcome().await;
    assert_nothing_left(&d, &[]).await;
}

/// The typed admin calls of the node client (`clients::node`, what `rexec jobs`,
/// `rexec bid`, `rexec kill` and batchd's recovery use) against a real rexecd:
/// the list, a new bid given as money, and the kill, each with its typed answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_client_lists_rebids_and_kills_with_typed_calls() {
    if !can_run("admin_typed") {
        return;
    }
    static AGENT: clients::node::Agent = clients::node::Agent {
        name: "rexecd admin test",
        on_notice: |_, _| {},
    };
    let d = Daemon::start("admin_typed", &[]);
    let mut owner = d.user().await;
    let request = launch(&["/bin/sleep", "300"]);
    let job = request.job;
    let started = owner.start(request).await;

    // One admin request per session, as rexec asks.
    let connector = certs::connector(&pki().tls_paths(Role::User, USER)).unwrap();
    let session = || async {
        let timeout = std::time::Duration::from_secs(30);
        clients::node::Session::open(&AGENT, &connector, NODE, &d.addr, timeout)
            .await
            .unwrap_or_else(|e| panic!("no session with rexecd: {e}"))
    };
    let list = session().await.list_jobs().await.unwrap();
    let listed: Vec<_> = list.jobs.iter().map(|j| (j.job, j.rank)).collect();
    assert_eq!(listed, [(job, 0)], "{list:?}");

    let rebid = session()
        .await
        .rebid(job, money::Bid::from_credits(3))
        .await
        .unwrap();
    assert_eq!(
        (rebid.job, rebid.ranks, rebid.bid),
        (job, 1, money::Bid::from_credits(3))
    );
    let list = session().await.list_jobs().await.unwrap();
    assert_eq!(list.jobs[0].bid, money::Bid::from_credits(3), "{list:?}");

    // A negative bid, as a client that does not check it sends it (`Rebid` is tag 10):
    // it never decodes as a bid; the node refuses it as a bid, in credits, and the
    // session goes on.
    let mut raw = session().await;
    raw.framed
        .send(&(10u16, (job, -1_000_000i64)))
        .await
        .unwrap();
    match raw.framed.recv::<FromNode>().await.unwrap() {
        Some(FromNode::Error(e)) => {
            assert_eq!(e.code, ErrorCode::BadBid, "{e:?}");
            assert!(
                e.message.starts_with(&format!("node {NODE}: "))
                    && e.message.contains("-1 credits per minute"),
                "{e:?}"
            );
        }
        other => panic!("expected a BadBid refusal, got {other:?}"),
    }
    let list = raw.list_jobs().await.unwrap();
    assert_eq!(list.jobs[0].bid, money::Bid::from_credits(3), "{list:?}");

    let killed = session().await.kill(job, Signal::Kill).await.unwrap();
    assert_eq!((killed.job, killed.ranks), (job, 1));
    ended_by_sigkill(&d, &mut owner, started.pid as i32).await;
    // A job that is gone: the node says so, typed.
    match session().await.kill(job, Signal::Kill).await {
        Err(clients::node::SessionError::Refused(e)) => assert_eq!(e.code, ErrorCode::NoSuchJob),
        other => panic!("expected NoSuchJob, got {other:?}"),
    }
}

/// The owner's session reports its rank killed by SIGKILL, and nothing of it is left.
async fn ended_by_sigkill(d: &Daemon, owner: &mut Client, pid: i32) {
    let out = owner.outcome().await;
    assert!(matches!(
        out.status(),
        ExitStatus::Signaled {
            signal: Signal::Kill,
            ..
        }
    ));
    assert_nothing_left(d, &[pid]).await;
}
