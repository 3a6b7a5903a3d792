//! The coordinator's rules on rank events and signals, checked on a job
//! whose ranks are bare queues (what the writers would send is read back).

use std::sync::Arc;

use proto::node::{Exit, ExitStatus, Signal, ToNode};
use tokio::sync::mpsc;

use super::Job;
use crate::clock::Pause;
use crate::rank::RankLink;
use crate::rank_msg::{Control, RankEvent};
use crate::signals::Caught;

type Queues = Vec<mpsc::UnboundedReceiver<Control>>;

fn job(n: u32, kill_on_bad_exit: bool) -> (Job, Queues) {
    let mut links = Vec::new();
    let mut queues = Vec::new();
    for rank in 0..n {
        let (control, rx) = mpsc::unbounded_channel();
        let (stdin, _) = mpsc::channel(1);
        links.push(RankLink {
            rank,
            node: format!("n{}", rank + 1),
            control,
            stdin,
            reader: tokio::spawn(async {}),
        });
        queues.push(rx);
    }
    let job = Job::new(links, Arc::new(Pause::new()), false, kill_on_bad_exit);
    (job, queues)
}

fn exited(rank: u32, status: ExitStatus) -> RankEvent {
    let exit = Exit {
        status,
        cpu_nanos: 0,
        charged: 0,
    };
    RankEvent::Exited { rank, exit }
}

/// The signals queued for a rank so far.
fn sent(q: &mut mpsc::UnboundedReceiver<Control>) -> Vec<Signal> {
    let mut out = Vec::new();
    while let Ok(c) = q.try_recv() {
        if let Control::Send(ToNode::Signal(s)) = c {
            out.push(s);
        }
    }
    out
}

#[tokio::test]
async fn a_non_zero_exit_is_remembered_but_aborts_nothing_by_default() {
    let (mut job, mut q) = job(2, false);
    job.on_rank(exited(1, ExitStatus::Code(3)));
    job.on_rank(exited(0, ExitStatus::Code(4)));
    assert_eq!(job.first_bad, Some(3), "the first to finish wins");
    assert!(job.aborting.is_none());
    assert!(sent(&mut q[0]).is_empty());
}

#[tokio::test]
async fn kill_on_bad_exit_aborts_the_others() {
    let (mut job, mut q) = job(3, true);
    job.on_rank(exited(2, ExitStatus::Code(1)));
    assert!(job.aborting.is_some());
    assert_eq!(sent(&mut q[0]), [Signal::Kill]);
    assert_eq!(sent(&mut q[1]), [Signal::Kill]);
    assert!(
        sent(&mut q[2]).is_empty(),
        "the rank that ended is not signalled"
    );
}

#[tokio::test]
async fn a_rank_killed_by_a_signal_aborts_and_sets_128_plus_n() {
    let (mut job, mut q) = job(2, false);
    let killed = ExitStatus::Signaled {
        signal: Signal::Segv,
        core_dumped: true,
    };
    job.on_rank(exited(0, killed));
    assert_eq!(job.first_bad, Some(139));
    assert_eq!(sent(&mut q[1]), [Signal::Kill]);
    // The aborted rank's own SIGKILL does not change the status.
    let kill = ExitStatus::Signaled {
        signal: Signal::Kill,
        core_dumped: false,
    };
    job.on_rank(exited(1, kill));
    assert_eq!(job.first_bad, Some(139));
}

#[tokio::test]
async fn a_lost_node_counts_as_255_and_aborts() {
    let (mut job, mut q) = job(2, false);
    job.on_rank(RankEvent::Failed {
        rank: 1,
        why: "lost connection: the node closed it".into(),
    });
    assert_eq!(job.first_bad, Some(255));
    assert_eq!(sent(&mut q[0]), [Signal::Kill]);
}

#[tokio::test]
async fn one_sigint_is_forwarded_and_two_within_a_second_abort_with_130() {
    let (mut job, mut q) = job(2, false);
    job.on_signal(Caught::Int).await;
    assert_eq!(sent(&mut q[0]), [Signal::Int]);
    assert_eq!(sent(&mut q[1]), [Signal::Int]);
    assert!(job.aborting.is_none());
    job.on_signal(Caught::Int).await;
    assert_eq!(job.forced, Some(130));
    assert_eq!(sent(&mut q[0]), [Signal::Kill]);
    assert_eq!(sent(&mut q[1]), [Signal::Kill]);
}

#[tokio::test]
async fn other_signals_are_forwarded_to_the_ranks_still_running() {
    let (mut job, mut q) = job(3, false);
    job.on_rank(exited(0, ExitStatus::Code(0)));
    job.on_signal(Caught::Forward(Signal::Usr1)).await;
    assert!(sent(&mut q[0]).is_empty());
    assert_eq!(sent(&mut q[1]), [Signal::Usr1]);
    assert_eq!(sent(&mut q[2]), [Signal::Usr1]);
    // A rank that then dies of the signal the user sent is no surprise (no
    // message), but whatever else runs is still aborted.
    let usr1 = ExitStatus::Signaled {
        signal: Signal::Usr1,
        core_dumped: false,
    };
    job.on_rank(exited(1, usr1));
    assert_eq!(job.first_bad, Some(138));
    assert_eq!(sent(&mut q[2]), [Signal::Kill]);
}
