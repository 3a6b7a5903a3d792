//! Admin requests on a session: `ListJobs` (a user sees their own ranks, an admin all)
//! and `Kill` (signal every rank of a job the caller may see; `KILL` destroys the ranks'
//! cgroups). Node and service certificates are refused.

use certs::{PeerIdentity, Role};
use proto::limits::MAX_JOBS;
use proto::node::{ErrorCode, ErrorReply, FromNode, JobInfo, JobList, Kill, Killed};

use super::Shared;

/// Longest program name shown in a job list.
const MAX_PROGRAM: usize = 256;

fn check_role(shared: &Shared, peer: &PeerIdentity) -> Result<(), FromNode> {
    if matches!(peer.role, Role::User | Role::Admin) {
        return Ok(());
    }
    Err(FromNode::Error(ErrorReply::new(
        ErrorCode::NotAuthorized,
        format!(
            "only user and admin certificates may list or kill jobs on node {}; this is a {} certificate",
            shared.config.name, peer.role
        ),
    )))
}

/// Answers `ListJobs`.
pub(super) async fn list(shared: &Shared, peer: &PeerIdentity) -> FromNode {
    if let Err(refusal) = check_role(shared, peer) {
        return refusal;
    }
    let mut ranks = shared.registry.list(peer);
    let truncated = ranks.len() > MAX_JOBS;
    ranks.truncate(MAX_JOBS);
    let cgroups = shared.registry.cgroups().clone();
    let sampled = tokio::task::spawn_blocking(move || {
        ranks
            .into_iter()
            .map(|r| {
                let sample = cgroups.sample(r.cgroup).ok();
                let mut program = r.program;
                if program.len() > MAX_PROGRAM {
                    let mut end = MAX_PROGRAM;
                    while !program.is_char_boundary(end) {
                        end -= 1;
                    }
                    program.truncate(end);
                }
                JobInfo {
                    job: r.job,
                    rank: r.rank,
                    nranks: r.nranks,
                    user: r.owner,
                    program,
                    bid: r.bid,
                    effective_bid: r.bid,
                    runnable: sample.map_or(0, |s| s.runnable),
                    cpu_nanos: sample
                        .map_or(0, |s| u64::try_from(s.usage.as_nanos()).unwrap_or(u64::MAX)),
                    charged: 0,
                    age_millis: r.age_millis,
                }
            })
            .collect::<Vec<_>>()
    })
    .await;
    match sampled {
        Ok(jobs) => FromNode::Jobs(JobList { jobs, truncated }),
        Err(e) => FromNode::Error(ErrorReply::new(
            ErrorCode::Internal,
            format!("cannot list jobs: {e}"),
        )),
    }
}

/// Answers `Kill`.
pub(super) fn kill(shared: &Shared, peer: &PeerIdentity, kill: &Kill) -> FromNode {
    if let Err(refusal) = check_role(shared, peer) {
        return refusal;
    }
    let ranks = shared.registry.signal(peer, kill.job, kill.signal);
    tracing::info!(%peer, job = %kill.job, signal = %kill.signal, ranks, "kill request");
    if ranks == 0 {
        let whose = if peer.role == Role::Admin {
            ""
        } else {
            " of yours"
        };
        return FromNode::Error(ErrorReply::new(
            ErrorCode::NoSuchJob,
            format!(
                "no job {}{whose} is running on node {}",
                kill.job, shared.config.name
            ),
        ));
    }
    FromNode::Killed(Killed {
        job: kill.job,
        ranks,
    })
}
