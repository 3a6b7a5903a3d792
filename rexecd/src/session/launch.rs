//! Turning a `Launch` into a running rank: authorise the peer (user certificates only,
//! allowed users, no root unless configured), validate the request, register the rank,
//! create its cgroup, and spawn the program inside it as the user — with pipes, or with
//! a pseudo-terminal when the client asked for one. Any failure answers `Error` and
//! leaves nothing behind: the cgroup is destroyed and the rank unregistered. A signed
//! batch rank (`signed`) takes its own checks, then the same [`create`] path.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;

use certs::{PeerIdentity, Role};
use proto::node::{ErrorCode, ErrorReply, FromNode, Launch};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use super::job::{self, Job};
use super::{Reader, Shared, Writer};
use crate::control::Control;
use crate::pty::{Pty, PtyMaster};
use crate::registry::{RegistryError, Slot};
use crate::spawn::{
    DirReport, JobChild, JobCommand, JobStdio, JobUser, SessionMode, SpawnError, SpawnPolicy,
};
use crate::sys::ProcessId;

/// Handles `Launch` (or, with `pmi`, `LaunchPmi`) to the end of the session.
pub(super) async fn launch<S>(
    shared: Arc<Shared>,
    peer: PeerIdentity,
    request: Launch,
    reader: Reader<S>,
    writer: Writer<S>,
    pmi: bool,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (control_tx, control_rx) = mpsc::channel(crate::registry::CONTROL_QUEUE);
    let started = prepare(&shared, &peer, &request, control_tx, pmi, None, None).await;
    run_or_refuse(shared, &peer, &request, started, reader, writer, control_rx).await;
}

/// Handles `LaunchCapped` to the end of the session: as `launch`, charged to the
/// project it names (its owner a member, checked as a balance is), under the
/// job's spending ceiling (see [`prepare`]).
pub(super) async fn launch_capped<S>(
    shared: Arc<Shared>,
    peer: PeerIdentity,
    request: proto::node::CappedLaunch,
    reader: Reader<S>,
    writer: Writer<S>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (control_tx, control_rx) = mpsc::channel(crate::registry::CONTROL_QUEUE);
    let started = match request.validate() {
        Err(proto::node::LaunchError::NegativeCeiling(c)) => Err(ErrorReply::new(
            ErrorCode::BadRequest,
            format!(
                "node {}: a spending ceiling of {} credits is negative; give 0 or more",
                shared.config.name,
                money::format_credits(c)
            ),
        )),
        _ => {
            prepare(
                &shared,
                &peer,
                &request.launch,
                control_tx,
                request.pmi,
                request.account.as_deref(),
                request.max_cost,
            )
            .await
        }
    };
    run_or_refuse(
        shared,
        &peer,
        &request.launch,
        started,
        reader,
        writer,
        control_rx,
    )
    .await;
}

/// Runs a prepared rank to the end of the session, or answers why it was refused.
pub(super) async fn run_or_refuse<S>(
    shared: Arc<Shared>,
    peer: &PeerIdentity,
    request: &Launch,
    started: Result<Job, ErrorReply>,
    reader: Reader<S>,
    mut writer: Writer<S>,
    control: mpsc::Receiver<Control>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    match started {
        Ok(job) => {
            shared.meters.launched();
            job::run(shared, job, reader, writer, control).await
        }
        Err(reply) => {
            shared.meters.refused(reply.code);
            tracing::info!(%peer, job = %request.job, rank = request.rank,
                code = ?reply.code, message = %reply.message, "launch refused");
            let _ = writer.send(&FromNode::Error(reply)).await;
            let _ = writer.shutdown().await;
        }
    }
}

/// Checks, registers and spawns; on success the program runs, charged to
/// project `account` when one is named (`rexec -A`), else to the owner's
/// default project or personal account. The job's spending ceiling is the
/// lower of `max_cost` (`rexec --max-cost`) and the paying project's ceiling
/// per job; the rank's share of it is entered in the market before the
/// program runs a tick (see [`crate::market::Market::set_ceiling`]).
async fn prepare(
    shared: &Arc<Shared>,
    peer: &PeerIdentity,
    request: &Launch,
    control: mpsc::Sender<Control>,
    pmi: bool,
    account: Option<&str>,
    max_cost: Option<i64>,
) -> Result<Job, ErrorReply> {
    authorize(shared, peer, request)?;
    let user = resolve_user(shared, &peer.name).await?;
    // The bid is checked here, where it is enforced: max_rate and the payer's credit
    // (the owner's, or the project's it charges as a member).
    let bid = request.bid;
    let payer = shared
        .registry
        .market()
        .check_payer(user.name(), account, bid)
        .await?;
    let job = create(
        shared,
        request,
        user,
        payer.project.as_deref(),
        bid,
        control,
        None,
        pmi,
    )
    .await?;
    if let Some(c) = proto::project::job_ceiling(max_cost, payer.max_cost_per_job) {
        let share = proto::node::rank_share(c, request.rank, request.nranks);
        shared
            .registry
            .market()
            .set_ceiling((request.job, request.rank), share);
    }
    Ok(job)
}

/// Registers the rank (one a `queue` started is not charged by this node; one with
/// an `account` is charged to that project), creates its cgroup and spawns the
/// program in it as `user` (with a PMI channel when `pmi`); on failure nothing is
/// left behind.
#[allow(clippy::too_many_arguments)]
pub(super) async fn create(
    shared: &Arc<Shared>,
    request: &Launch,
    user: JobUser,
    account: Option<&str>,
    bid: money::Bid,
    control: mpsc::Sender<Control>,
    queue: Option<&str>,
    pmi: bool,
) -> Result<Job, ErrorReply> {
    let mem = shared
        .config
        .memory
        .for_rank(request.options.mem_bytes, &shared.config.name)?;
    let slot = shared
        .registry
        .register(request, user.name(), account, bid, control, queue)
        .map_err(|e| {
            let code = match e {
                RegistryError::UserLimit { .. } => ErrorCode::Busy,
                _ => ErrorCode::BadRequest,
            };
            ErrorReply::new(code, format!("node {}: {e}", shared.config.name))
        })?;
    let cgroups = shared.registry.cgroups().clone();
    let id = slot.cgroup();
    let created = tokio::task::spawn_blocking(move || {
        cgroups.create_job(id)?;
        mem.map_or(Ok(()), |bytes| cgroups.set_memory_limit(id, bytes))
    })
    .await;
    match created {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            super::end::destroy(shared, id).await;
            return Err(internal(format!(
                "node {}: cannot create the job cgroup: {e}",
                shared.config.name
            )));
        }
        Err(e) => return Err(internal(format!("cannot create the job cgroup: {e}"))),
    }
    // Weights first, so the program's first instruction already runs at its share.
    shared.registry.market().rebalance().await;
    match spawn(shared, request, &user, &slot, pmi).await {
        Ok((child, pty, notice, channel)) => {
            let mut job = Job::new(request, user, slot, child, pty);
            job.mem_limit = mem;
            job.notice = notice;
            job.pmi = channel;
            Ok(job)
        }
        Err(reply) => {
            super::end::destroy(shared, id).await;
            Err(reply)
        }
    }
}

pub(super) fn internal(message: String) -> ErrorReply {
    ErrorReply::new(ErrorCode::Internal, message)
}

/// Whether the peer may launch this request at all.
fn authorize(shared: &Shared, peer: &PeerIdentity, request: &Launch) -> Result<(), ErrorReply> {
    let config = &shared.config;
    if peer.role != Role::User {
        return Err(ErrorReply::new(
            ErrorCode::NotAuthorized,
            format!(
                "only user certificates may launch jobs; this is a {} certificate",
                peer.role
            ),
        ));
    }
    request
        .validate()
        .map_err(|e| ErrorReply::new(ErrorCode::BadRequest, format!("bad launch request: {e}")))?;
    check_allowed(config, &peer.name)
}

/// Whether `user` may run jobs here at all (`allowed_users`).
pub(super) fn check_allowed(config: &crate::config::Config, user: &str) -> Result<(), ErrorReply> {
    if let Some(allowed) = &config.allowed_users
        && !allowed.iter().any(|u| u == user)
    {
        return Err(ErrorReply::new(
            ErrorCode::NotAuthorized,
            format!(
                "user {user} may not run jobs on node {}; ask its admin to add the user to allowed_users",
                config.name
            ),
        ));
    }
    Ok(())
}

/// Who the job runs as: the Unix user the certificate names (looked up off the async
/// threads, since NSS may ask the network).
pub(super) async fn resolve_user(shared: &Shared, name: &str) -> Result<JobUser, ErrorReply> {
    let policy = SpawnPolicy {
        allow_root: shared.config.allow_root,
    };
    let owned = name.to_string();
    let resolved = tokio::task::spawn_blocking(move || JobUser::resolve(&owned, policy))
        .await
        .map_err(|e| internal(format!("cannot look up user {name}: {e}")))?;
    let node = &shared.config.name;
    resolved.map_err(|e| {
        let code = match e {
            SpawnError::UnknownUser { .. } => ErrorCode::UnknownUser,
            SpawnError::RootRefused { .. } => ErrorCode::NotAuthorized,
            _ => ErrorCode::Internal,
        };
        ErrorReply::new(code, format!("node {node}: {e}"))
    })
}

/// A spawned program, its terminal, a notice for the client when it runs in another
/// directory than the one asked for, and rexecd's end of its PMI channel.
type Spawned = (
    JobChild,
    Option<PtyMaster>,
    Option<String>,
    Option<std::os::unix::net::UnixStream>,
);

/// Spawns the program inside the (already created) cgroup. The spawn runs on a blocking
/// thread: its thread sleeps until the kernel has loaded the program (`CLONE_VFORK`),
/// which must not hold up other sessions meanwhile.
async fn spawn(
    shared: &Shared,
    request: &Launch,
    user: &JobUser,
    slot: &Slot,
    pmi: bool,
) -> Result<Spawned, ErrorReply> {
    let config = &shared.config;
    let join = shared
        .registry
        .cgroups()
        .join(slot.cgroup())
        .map_err(|e| internal(format!("cannot open the job cgroup: {e}")))?;
    let program = &request.argv[0];
    let mode = match request.terminal {
        Some(_) => SessionMode::NewSessionWithTty,
        None => SessionMode::NewSession,
    };
    let mut command = JobCommand::new(program)
        .args(&request.argv[1..])
        .envs(config.env.job_env(&request.env, user))
        .session(mode)
        .limits(config.job_limits.clone())
        .output_files(
            request.options.stdout.as_ref().map(PathBuf::from),
            request.options.stderr.as_ref().map(PathBuf::from),
        );
    if let Some(cwd) = &request.cwd {
        command = command.cwd(cwd);
    }
    let channel = match pmi {
        true => Some(
            crate::pmi::Channel::open()
                .map_err(|e| internal(format!("cannot open the PMI channel: {e}")))?,
        ),
        false => None,
    };
    if let Some(channel) = &channel {
        command = command
            .envs(channel.env(request))
            .keep_open(channel.child_fd());
    }
    let (stdio, pty) = match request.terminal {
        Some(size) => {
            let pty = Pty::open(size)
                .map_err(|e| internal(format!("cannot open a pseudo-terminal: {e}")))?;
            (JobStdio::Terminal(pty.slave), Some(pty.master))
        }
        None => (JobStdio::Pipes, None),
    };
    // Threads of the blocking pool run inside the runtime, where the child's pipes and
    // pidfd register. The terminal's slave side is closed there once the child runs, so
    // the terminal reports EOF once the job's processes are gone.
    let user_owned = user.clone();
    let spawned = tokio::task::spawn_blocking(move || command.spawn(&user_owned, join, stdio))
        .await
        .map_err(|e| internal(format!("cannot start {}: {e}", request.argv[0])))?;
    let (child, report) = spawned.map_err(|e| match e {
        SpawnError::Start(e) => spawn_error(config, request, user, &e),
        e => ErrorReply::new(ErrorCode::BadRequest, e.to_string()),
    })?;
    if let Some(input) = &child.stdin {
        crate::pump::enlarge_pipe(input.as_fd());
    }
    if let Some(out) = &child.stdout {
        crate::pump::enlarge_pipe(out.as_fd());
    }
    if let Some(err) = &child.stderr {
        crate::pump::enlarge_pipe(err.as_fd());
    }
    if let Some(pid) = child.id() {
        slot.set_pgid(ProcessId(pid as i32));
    }
    let notice = dir_notice(user, &report);
    Ok((
        child,
        pty,
        notice,
        channel.map(crate::pmi::Channel::spawned),
    ))
}

/// The notice telling the client its job runs elsewhere than asked: the wished
/// directory (or, without one, the home directory) could not be entered by the user.
/// The client names the node in front of it.
fn dir_notice(user: &JobUser, report: &DirReport) -> Option<String> {
    let wished = report.candidates().first()?;
    let entered = report.entered()?;
    if entered == wished {
        return None;
    }
    let what = if wished == user.home() {
        "home directory"
    } else {
        "working directory"
    };
    Some(format!(
        "{what} {} does not exist here (or is not accessible to {}); running in {}",
        wished.display(),
        user.name(),
        entered.display()
    ))
}

/// The one-line answer for a failed spawn.
fn spawn_error(
    config: &crate::config::Config,
    request: &Launch,
    user: &JobUser,
    e: &std::io::Error,
) -> ErrorReply {
    let program = &request.argv[0];
    // The directory as the client named it: whether it exists is judged by the job's
    // user at chdir time, not by rexecd (root), which could see more.
    let cwd = match &request.cwd {
        Some(dir) => dir.clone(),
        None => user.home().display().to_string(),
    };
    let node = &config.name;
    let message = match e.kind() {
        std::io::ErrorKind::NotFound => {
            format!("program {program} not found on node {node} (cwd {cwd})")
        }
        std::io::ErrorKind::PermissionDenied => format!(
            "program {program} is not executable by {} on node {node} (cwd {cwd})",
            user.name()
        ),
        _ => format!("cannot start {program} on node {node}: {e}"),
    };
    let files: Vec<&str> = [&request.options.stdout, &request.options.stderr]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    let message = match files.is_empty() {
        true => message,
        false => format!(
            "{message}; or output file {} could not be opened by {} there ({e})",
            files.join(" or "),
            user.name()
        ),
    };
    ErrorReply::new(ErrorCode::SpawnFailed, message)
}
