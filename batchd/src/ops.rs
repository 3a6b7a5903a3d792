//! What the queue answers to each [`BatchOp`], and who may ask: `Submit` only a
//! `user` certificate for its own jobs; `Queue`, `History`, `Status`, `Output` and
//! `Cancel` a job's owner or an admin. Every refusal is a [`BatchError`] of one
//! line saying what to do.

use certs::{PeerIdentity, Role};
use proto::batch::{
    BATCH_PROTOCOL_VERSION, BatchError, BatchErrorCode as Code, BatchOp, BatchReply, BatchRequest,
    MAX_QUEUE_LIST, OutputChunk, OutputQuery, QueueQuery, SignedJob, Submitted,
};

use crate::Shared;
use crate::ops::access::whose;
use crate::queue::{Job, cost_estimate, no_such};
use crate::store::{JobRecord, StoreError, Write};

pub(crate) mod access;

/// Most output bytes of one stream in one answer.
pub const OUTPUT_CHUNK: usize = 256 * 1024;

fn err(code: Code, message: impl Into<String>) -> BatchError {
    BatchError::new(code, message)
}

fn storage(e: StoreError) -> BatchError {
    match e {
        StoreError::Duplicate(id) => err(
            Code::Duplicate,
            format!("job {id:016x} was submitted before; submit it again under a new id"),
        ),
        other => err(
            Code::Storage,
            format!("the queue could not record it: {other}; retry"),
        ),
    }
}

/// Answers one request from `peer`.
pub async fn handle(
    shared: &Shared,
    peer: &PeerIdentity,
    req: BatchRequest,
) -> Result<BatchReply, BatchError> {
    if req.version != BATCH_PROTOCOL_VERSION {
        return Err(err(
            Code::UnsupportedVersion,
            format!(
                "batch protocol version {} is not spoken here (batchd speaks {BATCH_PROTOCOL_VERSION}); upgrade the older side",
                req.version
            ),
        ));
    }
    match req.op {
        BatchOp::Submit(signed) => {
            let submitted = submit(shared, peer, signed).await;
            shared.metrics.submitted(submitted.is_ok());
            submitted
        }
        BatchOp::Queue(q) => queue(shared, peer, q),
        BatchOp::Status(id) => {
            let q = shared.lock_queue();
            q.owned(peer, id)?;
            Ok(BatchReply::Status(
                q.entry(id.0).ok_or_else(|| no_such(id))?,
            ))
        }
        BatchOp::Cancel(id) => crate::sched::cancel(shared, peer, id)
            .await
            .map(BatchReply::Cancelled),
        BatchOp::Output(q) => output(shared, peer, q).await,
        BatchOp::History(q) => crate::history::list(shared, peer, q),
        BatchOp::Unknown { tag } => Err(err(
            Code::Unsupported,
            format!("this batchd does not know operation {tag}; upgrade batchd"),
        )),
        _ => Err(err(
            Code::Unsupported,
            "this batchd does not handle that operation",
        )),
    }
}

async fn submit(
    shared: &Shared,
    peer: &PeerIdentity,
    signed: SignedJob,
) -> Result<BatchReply, BatchError> {
    if peer.role != Role::User {
        return Err(err(
            Code::Forbidden,
            format!(
                "{} {} may not submit jobs: only user certificates are accepted",
                peer.role, peer.name
            ),
        ));
    }
    let spec = crate::verify::verify(
        &shared.verifier,
        &signed,
        (crate::unix_now_ms() / 1000) as u64,
    )?;
    if spec.user != peer.name {
        return Err(err(
            Code::Forbidden,
            format!(
                "user {} may not submit a job of user {}",
                peer.name, spec.user
            ),
        ));
    }
    // The rest of the spec's sanity (width, attempts, bid, utility) is
    // `certs::jobsign::check_spec`'s, applied by `verify`.
    if spec.length_s == 0 {
        return Err(err(
            Code::Malformed,
            "a batch job needs a length (seconds, at least 1)",
        ));
    }
    let (known, most) = {
        let m = shared.lock_market();
        (m.known, m.procs())
    };
    if !known {
        return Err(err(
            Code::Unavailable,
            "the queue has not heard from the selectors yet; retry in a few seconds",
        ));
    }
    if spec.width > most {
        return Err(err(
            Code::TooWide,
            format!(
                "the job needs {} processors; the market gives the queue at most {most}",
                spec.width
            ),
        ));
    }
    {
        let q = shared.lock_queue();
        if q.jobs.contains_key(&spec.id.0) || q.arrays.contains_key(&spec.id.0) {
            return Err(storage(StoreError::Duplicate(spec.id.0)));
        }
        crate::sched::depend::check_parents(&q, &spec).map_err(|e| {
            err(
                e.code,
                format!(
                    "--after: {}; a job can wait only on your own jobs",
                    e.message
                ),
            )
        })?;
    }
    let cost = cost_estimate(&spec);
    let terms = proto::batch::JobTerms::decode(&signed.spec)
        .map(|(_, t)| t)
        .unwrap_or_default();
    let project = payer_of(shared, &spec.user, terms.account.as_deref()).await?;
    let ceiling = project.as_ref().and_then(|p| p.max_cost_per_job);
    let max_cost = proto::project::job_ceiling(terms.max_cost, ceiling);
    if let Some(max) = max_cost
        && cost > max
    {
        let whose = match (&project, ceiling) {
            (Some(p), Some(c)) if c == max => format!(
                "project {}'s ceiling per job of {} credits (its admin sets it)",
                p.project.as_deref().unwrap_or_default(),
                money::format_credits(max)
            ),
            _ => format!(
                "spending ceiling of {} credits (--max-cost)",
                money::format_credits(max)
            ),
        };
        return Err(err(
            Code::OverCeiling,
            format!(
                "the job's worst case, {} credits (its rate x {} rank(s) x its length), is \
                 above its {whose}; bid less, run shorter or narrower, or raise the ceiling",
                money::format_credits(cost),
                spec.width,
            ),
        ));
    }
    let payer = crate::store::Payer {
        account: project.as_ref().and_then(|p| p.project.clone()),
        max_cost,
    };
    let project = project.filter(|p| p.project.is_some());
    if cost > 0 {
        let balance = match &project {
            Some(p) => p.balance,
            None => shared.ledger.balance(&spec.user).await.map_err(|e| {
                err(
                    Code::Unavailable,
                    format!("cannot check the balance at accountd: {e}; retry"),
                )
            })?,
        };
        if balance < cost {
            return Err(err(
                Code::NoCredit,
                format!(
                    "balance {} credits cannot pay for the job's estimated cost of {} credits",
                    money::format_credits(balance),
                    money::format_credits(cost)
                ),
            ));
        }
    }
    if spec.array.is_some() {
        return submit_array(shared, peer, spec, signed, payer).await;
    }
    let now = crate::unix_now_ms();
    let seq = shared.lock_queue().take_seq();
    let mut rec = JobRecord::queued(seq, spec.id.0, spec.user.clone(), signed.into(), now);
    rec.payer = Some(payer);
    dependent(&mut rec, &spec);
    shared
        .store
        .write(Write::Insert(Box::new(rec.clone())))
        .await
        .map_err(storage)?;
    let id = spec.id;
    // To the policy, a job is submitted when it enters the queue, once
    // committed: a tick during the commit does not see it (the file keeps the
    // time the request arrived, a commit earlier). The time is taken under the
    // queue's lock, so a decision that did not see the job also finds it
    // submitted after its tick.
    let (at_ms, position) = {
        let mut q = shared.lock_queue();
        rec.submitted_ms = crate::unix_now_ms();
        let at_ms = rec.submitted_ms;
        q.insert(Job::new(rec, spec));
        (at_ms, q.waiting_count())
    };
    tracing::info!(job = %id, user = %peer.name, at_ms, "submitted");
    Ok(BatchReply::Submitted(Submitted { job: id, position }))
}

/// The account `user`'s job pays from, as accountd resolves it: `asked` (`-A`,
/// signed), whose member `user` must be (refused otherwise, also while
/// accountd cannot be asked), else the user's default project. With none
/// asked, an accountd that cannot tell (unreachable, predating projects, no
/// account) leaves the personal account, as before projects: its balance is
/// checked as it always was.
async fn payer_of(
    shared: &Shared,
    user: &str,
    asked: Option<&str>,
) -> Result<Option<proto::project::ChargedAccount>, BatchError> {
    match (shared.ledger.resolve(user, asked).await, asked) {
        (Ok(a), _) => Ok(Some(a)),
        (Err(_), None) => Ok(None),
        (Err(clients::rpc::RpcError::Server(e)), Some(_)) if !e.code.is_retryable() => {
            Err(err(Code::NoCredit, e.message))
        }
        (Err(e), Some(project)) => Err(err(
            Code::Unavailable,
            format!("cannot check project {project} at accountd: {e}; retry"),
        )),
    }
}

/// A job with dependencies starts `Dependent`, saying on what.
fn dependent(rec: &mut JobRecord, spec: &proto::batch::JobSpec) {
    if !spec.after.is_empty() {
        rec.state = proto::batch::JobState::Dependent;
        rec.reason = Some(crate::sched::depend::waiting_reason(&spec.after));
    }
}

/// Queues every task of an array in one write (see [`crate::arrays`]).
async fn submit_array(
    shared: &Shared,
    peer: &PeerIdentity,
    spec: proto::batch::JobSpec,
    signed: SignedJob,
    payer: crate::store::Payer,
) -> Result<BatchReply, BatchError> {
    let count = spec.array.map_or(0, |a| a.count());
    let first_seq = {
        let mut q = shared.lock_queue();
        let first = q.next_seq;
        q.next_seq += i64::from(count);
        first
    };
    let mut array = crate::arrays::tasks(&spec, signed.into(), first_seq, crate::unix_now_ms());
    for t in &mut array.tasks {
        dependent(t, &spec);
        t.payer = Some(payer.clone());
    }
    {
        let q = shared.lock_queue();
        if let Some(t) = array.tasks.iter().find(|t| q.jobs.contains_key(&t.id)) {
            return Err(storage(StoreError::Duplicate(t.id)));
        }
    }
    shared
        .store
        .write(Write::InsertArray(Box::new(array.clone())))
        .await
        .map_err(storage)?;
    let id = spec.id;
    let spec = std::sync::Arc::new(spec);
    // Submitted when it enters the queue, once committed (as a single job).
    let (at_ms, position) = {
        let mut q = shared.lock_queue();
        let at_ms = crate::unix_now_ms();
        let position = q.waiting_count() + 1;
        for mut t in array.tasks.drain(..) {
            t.submitted_ms = at_ms;
            q.insert(Job::new(t, spec.clone()));
        }
        (at_ms, position)
    };
    tracing::info!(job = %id, user = %peer.name, tasks = count, at_ms, "array submitted");
    Ok(BatchReply::Submitted(Submitted { job: id, position }))
}

fn queue(shared: &Shared, peer: &PeerIdentity, q: QueueQuery) -> Result<BatchReply, BatchError> {
    let user = whose(peer, q.user.as_ref())?;
    let list = shared
        .lock_queue()
        .list(user.as_deref(), q.ended, q.expand, MAX_QUEUE_LIST);
    Ok(BatchReply::Queue(list))
}

async fn output(
    shared: &Shared,
    peer: &PeerIdentity,
    q: OutputQuery,
) -> Result<BatchReply, BatchError> {
    let (ended, out, truncated) = {
        let queue = shared.lock_queue();
        let j = queue.owned(peer, q.job)?;
        (j.ended(), j.out, j.rec.truncated)
    };
    let id = q.job.0;
    let read = |stream: u8, from: u64| {
        shared
            .reader
            .output(id, stream, from, OUTPUT_CHUNK)
            .map_err(|e| {
                err(
                    Code::Storage,
                    format!("cannot read the job's output: {e}; retry"),
                )
            })
    };
    let stdout = read(1, q.stdout_from)?;
    let stderr = read(2, q.stderr_from)?;
    let complete = ended
        && q.stdout_from + stdout.len() as u64 >= out[0]
        && q.stderr_from + stderr.len() as u64 >= out[1];
    Ok(BatchReply::Output(OutputChunk {
        stdout: stdout.into(),
        stderr: stderr.into(),
        complete,
        truncated,
    }))
}
