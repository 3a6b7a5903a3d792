//! `LaunchSigned`: a queue starting one rank of a user's signed batch job. In order,
//! and refused at the first failure with nothing started: the checks of
//! [`crate::signed::admit`] (queue, signature, attempt, rank, bid within the signed
//! rate), the user as for a `Launch` (allowed, exists, not root unless allowed), a
//! rank this node started before, then the claim at
//! accountd and the node's own marker. Then the rank runs exactly as a `Launch` of
//! the spec's user would, without a terminal, metered and weighted at the queue's
//! bid capped at `max_rate`, but not charged by this node (the queue charges it).
//! When its program exits, its end is recorded for accountd before the queue hears
//! the `Exit` ([`crate::signed::ends`]). A job that carries its script runs a
//! private copy of it, removed when the rank ends ([`crate::signed::script`]).

use std::sync::Arc;
use std::time::SystemTime;

use certs::PeerIdentity;
use proto::batch::SignedLaunch;
use proto::node::{ErrorCode, ErrorReply, Launch};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use super::job::Job;
use super::launch::{check_allowed, create, internal, resolve_user, run_or_refuse};
use super::{Reader, Shared, Writer};
use crate::control::Control;
use crate::signed::script::ScriptFile;
use crate::signed::{Admitted, admit};

/// Handles `LaunchSigned` to the end of the session.
pub(super) async fn launch<S>(
    shared: Arc<Shared>,
    peer: PeerIdentity,
    request: SignedLaunch,
    reader: Reader<S>,
    writer: Writer<S>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (control_tx, control_rx) = mpsc::channel(crate::registry::CONTROL_QUEUE);
    let (launch, started) = match prepare(&shared, &peer, request, control_tx).await {
        Ok((launch, job)) => (launch, Ok(job)),
        Err((launch, reply)) => (launch, Err(reply)),
    };
    run_or_refuse(shared, &peer, &launch, started, reader, writer, control_rx).await;
}

type Refused = (Launch, ErrorReply);

/// Checks, claims, records and spawns; returns the rank as a launch either way
/// (for the log), with the running job or the refusal.
async fn prepare(
    shared: &Arc<Shared>,
    peer: &PeerIdentity,
    request: SignedLaunch,
    control: mpsc::Sender<Control>,
) -> Result<(Launch, Job), Refused> {
    let unverified = unverified_launch(&request);
    let epoch = request.epoch;
    let (sh, from) = (Arc::clone(shared), peer.clone());
    let admitted =
        tokio::task::spawn_blocking(move || admit(&sh.config, &from, &request, SystemTime::now()))
            .await
            .map_err(|e| internal(format!("cannot check the signed job: {e}")))
            .and_then(|r| r)
            .map_err(|reply| (unverified, reply))?;
    let launch = admitted.launch.clone();
    if let Err(reply) = fence(shared, peer, epoch) {
        tracing::warn!(queue = %peer, job = %launch.job, epoch, "{}", reply.message);
        return Err((launch, reply));
    }
    match checked_start(shared, &peer.name, &admitted, control).await {
        Ok(job) => {
            tracing::info!(queue = %peer, user = %admitted.job.user, job = %launch.job,
                attempt = admitted.attempt, rank = launch.rank, "signed batch rank started");
            Ok((launch, job))
        }
        Err(reply) => Err((launch, reply)),
    }
}

/// Fencing ([`crate::signed::fence`]): a queue's request carrying lease `epoch`
/// is refused when the node has seen a higher epoch from that queue. Only a
/// configured queue's epoch counts; anyone else's requests are not fenced.
pub(super) fn fence(shared: &Shared, peer: &PeerIdentity, epoch: u64) -> Result<(), ErrorReply> {
    if peer.role != certs::Role::Service || !shared.config.batch.queues.contains(&peer.name) {
        return Ok(());
    }
    shared.fences.admit(&peer.name, epoch).map_err(|e| {
        let code = match e {
            crate::signed::fence::Fenced::Stale { .. } => ErrorCode::Fenced,
            crate::signed::fence::Fenced::Record { .. } => ErrorCode::Internal,
        };
        ErrorReply::new(code, format!("node {}: {e}", shared.config.name))
    })
}

/// What the log names for a signed launch that did not verify (its spec unread).
fn unverified_launch(request: &SignedLaunch) -> Launch {
    Launch {
        job: proto::node::JobId(0),
        rank: request.rank,
        nranks: 0,
        bid: request.bid,
        argv: Vec::new(),
        env: Vec::new(),
        cwd: None,
        terminal: None,
        options: Default::default(),
    }
}

/// The checks after the signature: user, bid, replay, claim, marker; then the rank.
async fn checked_start(
    shared: &Arc<Shared>,
    queue: &str,
    admitted: &Admitted,
    control: mpsc::Sender<Control>,
) -> Result<Job, ErrorReply> {
    let node = &shared.config.name;
    let user_name = &admitted.job.user;
    check_allowed(&shared.config, user_name)?;
    let user = resolve_user(shared, user_name).await?;
    // A script is written first: a node that cannot write it claims nothing.
    let (launch, script) = with_script(admitted, &user, node).await?;
    let market = shared.registry.market();
    let bid = market.batch_rate(admitted.launch.bid);
    let replayed = || {
        let c = admitted.claim();
        ErrorReply::new(
            ErrorCode::NotAuthorized,
            format!(
                "node {node}: replayed signed job refused: rank {} of attempt {} of job {} was \
                 already started on this node",
                c.rank, c.attempt, c.job
            ),
        )
    };
    let started = shared.started.clone();
    let (check, a) = (started.clone(), admitted.clone());
    if blocking(move || Ok(check.contains(&a))).await? {
        return Err(replayed());
    }
    market.claim(admitted.claim()).await?;
    let a = admitted.clone();
    let recorded = blocking(move || {
        started
            .record(&a)
            .map_err(|e| internal(format!("cannot record the started rank: {e}")))
    })
    .await?;
    if !recorded {
        return Err(replayed());
    }
    let mut job = create(
        shared,
        &launch,
        user,
        None,
        bid,
        control,
        Some(queue),
        false,
    )
    .await?;
    job.signed_end = Some(admitted.end());
    job.script = script;
    Ok(job)
}

/// The rank to start: the admitted launch, or, for a job that carries its script,
/// the launch running that script's private copy (kept until the rank ends; see
/// [`crate::signed::script`]).
async fn with_script(
    admitted: &Admitted,
    user: &crate::spawn::JobUser,
    node: &str,
) -> Result<(Launch, Option<ScriptFile>), ErrorReply> {
    let mut launch = admitted.launch.clone();
    let Some(bytes) = admitted.job.terms.script.clone() else {
        return Ok((launch, None));
    };
    let c = admitted.claim();
    let tag = format!("{}-{}-{}-{}", c.user, c.job, c.attempt, c.rank);
    let (name, owner, node_name) = (launch.argv[0].clone(), user.clone(), node.to_string());
    let file = blocking(move || {
        ScriptFile::write(&std::env::temp_dir(), &tag, &name, &bytes, &owner).map_err(|e| {
            internal(format!(
                "node {node_name}: cannot write the job's script to a private file: {e}"
            ))
        })
    })
    .await?;
    launch.argv[0] = file.path().to_string_lossy().into_owned();
    Ok((launch, Some(file)))
}

/// Runs file work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ErrorReply> + Send + 'static,
) -> Result<T, ErrorReply> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| internal(format!("a blocking task failed: {e}")))?
}
