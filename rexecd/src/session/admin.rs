//! Admin requests on a session: `ListJobs` (a user sees their own ranks, an admin all,
//! each with its market state), `Kill` (signal every rank of a job the caller may see;
//! `KILL` destroys the ranks' cgroups) and `Rebid` (change the bid of a job's ranks,
//! checked as a launch is). A queue (a service certificate named in `[batch] queues`)
//! may list and kill the signed ranks it started, nothing else; other node and
//! service certificates are refused.

use certs::{PeerIdentity, Role};
use proto::limits::MAX_JOBS;
use proto::node::{
    ErrorCode, ErrorReply, FromNode, JobInfo, JobList, Kill, Killed, Rebid, Rebidded,
};

use super::Shared;

/// Longest program name shown in a job list.
const MAX_PROGRAM: usize = 256;

/// Whether `peer` may ask: users and admins always; a configured queue when
/// `queue_may` (listing and killing the ranks it started).
fn check_role(shared: &Shared, peer: &PeerIdentity, queue_may: bool) -> Result<(), FromNode> {
    if matches!(peer.role, Role::User | Role::Admin) || (queue_may && is_queue(shared, peer)) {
        return Ok(());
    }
    let what = match queue_may {
        true => "list or kill jobs",
        false => "change a job's bid",
    };
    Err(FromNode::Error(ErrorReply::new(
        ErrorCode::NotAuthorized,
        format!(
            "only user and admin certificates (and, for its own ranks, a queue of [batch] queues) \
             may {what} on node {}; this is a {} certificate",
            shared.config.name, peer.role
        ),
    )))
}

/// Whether `peer` is a queue this node takes signed launches from.
fn is_queue(shared: &Shared, peer: &PeerIdentity) -> bool {
    peer.role == Role::Service && shared.config.batch.queues.contains(&peer.name)
}

/// Answers `ListJobs`.
pub(super) fn list(shared: &Shared, peer: &PeerIdentity) -> FromNode {
    if let Err(refusal) = check_role(shared, peer, true) {
        return refusal;
    }
    let ranks = shared.registry.list(peer);
    // A queue's ranks are known by who started them, which only the registry
    // holds: the join below keeps the market's entries of the ranks listed.
    let queue = is_queue(shared, peer);
    let (market, node) = shared
        .registry
        .market()
        .list(|owner| queue || crate::registry::visible(peer, owner));
    let market: std::collections::HashMap<_, _> = market.into_iter().collect();
    let mut jobs: Vec<JobInfo> = ranks
        .into_iter()
        .filter_map(|r| {
            // A rank registered a moment ago may not be in the market yet, or one
            // leaving already out of it: list what both know.
            let m = market.get(&(r.job, r.rank))?;
            let mut program = r.program;
            if program.len() > MAX_PROGRAM {
                let mut end = MAX_PROGRAM;
                while !program.is_char_boundary(end) {
                    end -= 1;
                }
                program.truncate(end);
            }
            Some(JobInfo {
                job: r.job,
                rank: r.rank,
                nranks: r.nranks,
                user: r.owner,
                program,
                bid: m.bid,
                effective_bid: m.effective_bid,
                runnable: m.runnable,
                model_milli_cpus: u32::try_from(m.model_milli).unwrap_or(u32::MAX),
                measured_milli_cpus: u32::try_from(m.measured_milli).unwrap_or(u32::MAX),
                cpu_nanos: m.usage_ns,
                charged: m.charged,
                age_millis: r.age_millis,
            })
        })
        .collect();
    let truncated = jobs.len() > MAX_JOBS;
    jobs.truncate(MAX_JOBS);
    FromNode::Jobs(JobList {
        jobs,
        truncated,
        cpus: node.cpus,
        price: node.price.micros_per_minute(),
        contended: node.contended,
    })
}

/// Answers `Rebid`: the new bid for every rank of the job the caller may see, after
/// the checks a launch gets (`max_rate`, the owner's balance).
pub(super) async fn rebid(shared: &Shared, peer: &PeerIdentity, rebid: &Rebid) -> FromNode {
    if let Err(refusal) = check_role(shared, peer, false) {
        return refusal;
    }
    let market = shared.registry.market();
    let done = market
        .rebid(rebid.job, rebid.bid, |owner| {
            crate::registry::visible(peer, owner)
        })
        .await;
    match done {
        Ok((0, _)) => FromNode::Error(no_such_job(shared, peer, rebid.job)),
        Ok((ranks, bid)) => {
            tracing::info!(%peer, job = %rebid.job, %bid, ranks, "re-bid");
            FromNode::Rebidded(Rebidded {
                job: rebid.job,
                ranks,
                bid,
            })
        }
        Err(reply) => {
            tracing::info!(%peer, job = %rebid.job, message = %reply.message, "re-bid refused");
            FromNode::Error(reply)
        }
    }
}

fn no_such_job(shared: &Shared, peer: &PeerIdentity, job: proto::node::JobId) -> ErrorReply {
    let whose = if peer.role == Role::Admin {
        ""
    } else {
        " of yours"
    };
    ErrorReply::new(
        ErrorCode::NoSuchJob,
        format!(
            "no job {job}{whose} is running on node {}",
            shared.config.name
        ),
    )
}

/// Answers `Kill`.
pub(super) fn kill(shared: &Shared, peer: &PeerIdentity, kill: &Kill) -> FromNode {
    if let Err(refusal) = check_role(shared, peer, true) {
        return refusal;
    }
    if let Err(refusal) = super::signed::fence(shared, peer, kill.epoch) {
        return FromNode::Error(refusal);
    }
    // A queue killing its own signed ranks settles a run it will start again.
    let queue = peer.role == Role::Service && shared.config.batch.queues.contains(&peer.name);
    let ranks = if queue && kill.signal == proto::node::Signal::Kill {
        shared
            .registry
            .control(peer, kill.job, crate::control::Control::Withdraw)
    } else {
        shared.registry.signal(peer, kill.job, kill.signal)
    };
    tracing::info!(%peer, job = %kill.job, signal = %kill.signal, ranks, "kill request");
    if ranks == 0 {
        return FromNode::Error(no_such_job(shared, peer, kill.job));
    }
    FromNode::Killed(Killed {
        job: kill.job,
        ranks,
    })
}
