//! The registry against a fake cgroup v1 tree: registration rules, visibility, signal
//! forwarding, and the weights the market writes when ranks come and go.

use std::fs;
use std::path::Path;

use certs::{PeerIdentity, Role};
use proto::node::{JobId, Launch, Signal};
use tokio::sync::mpsc;

use super::*;
use crate::cgroup::detect::V1Mounts;
use crate::cgroup::{Hierarchy, ParentName};

/// Job cgroups over a fake v1 tree under `base`.
pub(crate) fn fake_cgroups(base: &Path) -> JobCgroups {
    for h in ["cpu", "cpuacct"] {
        fs::create_dir_all(base.join(h)).unwrap();
    }
    let mounts = V1Mounts {
        cpu: base.join("cpu"),
        cpuacct: Some(base.join("cpuacct")),
        pids: None,
        freezer: None,
        memory: None,
        cpuset: None,
    };
    JobCgroups::open(Hierarchy::V1(mounts), &ParentName::new("rexec-t").unwrap()).unwrap()
}

/// A registry over fake cgroups with an open-loop market and no ledger.
async fn registry_at(base: &Path) -> Registry {
    let cgroups = fake_cgroups(base);
    let cfg = crate::config::MarketConfig {
        share_control: crate::config::ShareControl::Open,
        cpus: 2,
        ..Default::default()
    };
    let market = crate::market::Market::start("n1", cfg, cgroups.clone(), None)
        .await
        .unwrap();
    Registry::new(cgroups, market)
}

impl Registry {
    /// Registers at the launch's own bid.
    fn reg(
        self: &Arc<Self>,
        launch: &Launch,
        owner: &str,
        control: mpsc::Sender<Control>,
    ) -> Result<Slot, RegistryError> {
        self.register(launch, owner, None, launch.bid, control, None)
    }
}

fn launch(job: u64, rank: u32, credits: u32) -> Launch {
    Launch {
        job: JobId(job),
        rank,
        nranks: 2,
        bid: money::Bid::from_credits(credits),
        argv: vec!["/bin/prog".into()],
        env: Vec::new(),
        cwd: None,
        terminal: None,
        options: Default::default(),
    }
}

fn peer(role: Role, name: &str) -> PeerIdentity {
    PeerIdentity::new(role, name).unwrap()
}

/// Empties the `cpu.shares` of cgroup `id` (fake files are not truncated on write).
fn clear_weight(base: &Path, id: u64) {
    let dir = base.join("cpu/rexec-t").join(format!("job-{id}"));
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("cpu.shares"), "").unwrap();
}

fn weight(base: &Path, id: u64) -> u64 {
    let path = base
        .join("cpu/rexec-t")
        .join(format!("job-{id}/cpu.shares"));
    fs::read_to_string(path).unwrap().trim().parse().unwrap()
}

#[tokio::test]
async fn duplicates_and_foreign_job_ids_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Arc::new(registry_at(dir.path()).await);
    let (tx, _rx) = mpsc::channel(CONTROL_QUEUE);
    let first = registry.reg(&launch(1, 0, 0), "ann", tx.clone()).unwrap();
    let dup = registry
        .reg(&launch(1, 0, 0), "ann", tx.clone())
        .unwrap_err();
    assert_eq!(
        dup,
        RegistryError::Duplicate {
            job: JobId(1),
            rank: 0
        }
    );
    let foreign = registry
        .reg(&launch(1, 1, 0), "bob", tx.clone())
        .unwrap_err();
    assert_eq!(foreign, RegistryError::NotOwner { job: JobId(1) });
    let second = registry.reg(&launch(1, 1, 0), "ann", tx).unwrap();
    assert_ne!(first.cgroup(), second.cgroup());
    assert_eq!(registry.len(), 2);
    drop((first, second));
    assert!(registry.is_empty());
    // The market lets them go too.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !registry.market().book().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(registry.market().book().is_empty());
}

#[tokio::test]
async fn users_see_and_signal_only_their_own_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Arc::new(registry_at(dir.path()).await);
    let (ann_tx, mut ann_rx) = mpsc::channel(CONTROL_QUEUE);
    let (bob_tx, mut bob_rx) = mpsc::channel(CONTROL_QUEUE);
    let _a = registry
        .reg(&launch(1, 0, 0), "ann", ann_tx.clone())
        .unwrap();
    let _b = registry.reg(&launch(1, 1, 0), "ann", ann_tx).unwrap();
    let _c = registry.reg(&launch(2, 0, 0), "bob", bob_tx).unwrap();

    let ann = peer(Role::User, "ann");
    let listed: Vec<(JobId, u32)> = registry
        .list(&ann)
        .iter()
        .map(|r| (r.job, r.rank))
        .collect();
    assert_eq!(listed, vec![(JobId(1), 0), (JobId(1), 1)]);
    assert_eq!(registry.list(&peer(Role::Admin, "ops")).len(), 3);
    assert!(registry.list(&peer(Role::Node, "n2")).is_empty());

    assert_eq!(registry.signal(&ann, JobId(2), Signal::Kill), 0);
    assert!(bob_rx.try_recv().is_err());
    assert_eq!(registry.signal(&ann, JobId(1), Signal::Int), 2);
    assert_eq!(ann_rx.try_recv(), Ok(Control::Signal(Signal::Int)));
    assert_eq!(ann_rx.try_recv(), Ok(Control::Signal(Signal::Int)));
    assert_eq!(
        registry.signal(&peer(Role::Admin, "ops"), JobId(2), Signal::Term),
        1
    );
    assert_eq!(bob_rx.try_recv(), Ok(Control::Signal(Signal::Term)));
}

#[tokio::test]
async fn a_queue_sees_and_signals_only_the_ranks_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Arc::new(registry_at(dir.path()).await);
    let (own_tx, mut own_rx) = mpsc::channel(CONTROL_QUEUE);
    let (queued_tx, mut queued_rx) = mpsc::channel(CONTROL_QUEUE);
    let (other_tx, mut other_rx) = mpsc::channel(CONTROL_QUEUE);
    let bid = money::Bid::new(0).unwrap();
    // ann's own launch, a rank batchd started for ann, one another queue started.
    let _own = registry.reg(&launch(1, 0, 0), "ann", own_tx).unwrap();
    let _queued = registry
        .register(
            &launch(2, 0, 0),
            "ann",
            None,
            bid,
            queued_tx,
            Some("batchd"),
        )
        .unwrap();
    let _other = registry
        .register(&launch(3, 0, 0), "ann", None, bid, other_tx, Some("q2"))
        .unwrap();

    let queue = peer(Role::Service, "batchd");
    let listed: Vec<JobId> = registry.list(&queue).iter().map(|r| r.job).collect();
    assert_eq!(listed, vec![JobId(2)]);
    assert_eq!(registry.signal(&queue, JobId(1), Signal::Kill), 0);
    assert_eq!(registry.signal(&queue, JobId(3), Signal::Kill), 0);
    assert!(own_rx.try_recv().is_err() && other_rx.try_recv().is_err());
    assert_eq!(registry.signal(&queue, JobId(2), Signal::Kill), 1);
    assert_eq!(queued_rx.try_recv(), Ok(Control::Signal(Signal::Kill)));
    // The owner still sees every rank of theirs, whoever started it.
    assert_eq!(registry.list(&peer(Role::User, "ann")).len(), 3);
}

#[tokio::test]
async fn weights_follow_the_bids_of_the_running_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    let registry = Arc::new(registry_at(base).await);
    let (tx, _rx) = mpsc::channel(CONTROL_QUEUE);
    let high = registry.reg(&launch(1, 0, 4), "ann", tx.clone()).unwrap();
    let low = registry.reg(&launch(2, 0, 1), "bob", tx.clone()).unwrap();
    let (h, l) = (high.cgroup(), low.cgroup());
    clear_weight(base, h);
    clear_weight(base, l);
    registry.market().rebalance().await;
    assert_eq!((weight(base, h), weight(base, l)), (262_144, 65_536));

    // When the high bidder leaves, the low one is alone and gets the top weight.
    drop(high);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while weight(base, l) != 262_144 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(weight(base, l), 262_144);

    // A zero bid beside a positive one gets the smallest weight.
    let zero = registry.reg(&launch(3, 0, 0), "eve", tx).unwrap();
    clear_weight(base, zero.cgroup());
    registry.market().rebalance().await;
    assert_eq!((weight(base, l), weight(base, zero.cgroup())), (262_144, 2));
}

#[tokio::test]
async fn a_flood_of_signals_cannot_grow_a_ranks_control_queue() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Arc::new(registry_at(dir.path()).await);
    let (tx, mut rx) = mpsc::channel(CONTROL_QUEUE);
    let _a = registry.reg(&launch(1, 0, 0), "ann", tx).unwrap();
    let ann = peer(Role::User, "ann");
    let delivered: u32 = (0..CONTROL_QUEUE * 4)
        .map(|_| registry.signal(&ann, JobId(1), Signal::Int))
        .sum();
    assert_eq!(delivered as usize, CONTROL_QUEUE);
    let mut queued = 0;
    while rx.try_recv().is_ok() {
        queued += 1;
    }
    assert_eq!(queued, CONTROL_QUEUE);
    // Once the session has drained its queue, signals get through again.
    assert_eq!(registry.signal(&ann, JobId(1), Signal::Term), 1);
    assert_eq!(rx.try_recv(), Ok(Control::Signal(Signal::Term)));
}

#[tokio::test]
async fn a_user_at_the_rank_limit_is_refused_until_one_ends() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Arc::new(registry_at(dir.path()).await.with_max_ranks_per_user(2));
    let (tx, _rx) = mpsc::channel(CONTROL_QUEUE);
    let a = registry.reg(&launch(1, 0, 0), "ann", tx.clone()).unwrap();
    let _b = registry.reg(&launch(1, 1, 0), "ann", tx.clone()).unwrap();
    let refused = registry
        .reg(&launch(2, 0, 0), "ann", tx.clone())
        .unwrap_err();
    assert_eq!(
        refused,
        RegistryError::UserLimit {
            user: "ann".into(),
            limit: 2
        }
    );
    assert!(
        refused.to_string().contains("max_ranks_per_user"),
        "{refused}"
    );
    // Other users have their own count.
    let _c = registry.reg(&launch(3, 0, 0), "bob", tx.clone()).unwrap();
    drop(a);
    let _d = registry.reg(&launch(2, 0, 0), "ann", tx).unwrap();
}
