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
    request.bid = 2_500_000;
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
        ("/bin/sleep", 2_500_000)
    );

    let mut own = d.user().await;
    assert_eq!(list(own.recv_after(ToNode::ListJobs).await).len(), 1);

    let mut other = d.client(Role::User, "daemon").await;
    assert!(list(other.recv_after(ToNode::ListJobs).await).is_empty());
    let kill = ToNode::Kill(Kill {
        job,
        signal: Signal::Kill,
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
    let out = owner.outcome().await;
    assert!(matches!(
        out.status(),
        ExitStatus::Signaled {
            signal: Signal::Kill,
            ..
        }
    ));
    assert_nothing_left(&d, &[started.pid as i32]).await;
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
    high.bid = 4_000_000;
    a.start(high).await;
    let mut b = d.user().await;
    let mut low = launch(&["/bin/sleep", "300"]);
    low.bid = 1_000_000;
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
