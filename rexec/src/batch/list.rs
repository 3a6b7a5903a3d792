//! `rexec queue` and `rexec cancel`.
//!
//! `rexec queue` prints one row per job, in the queue's order (running first,
//! then by the policy's order), after `squeue`:
//!
//! ```text
//! JOBID            USER     STATE     POS WIDTH   RATE START                NAME      NODES(REASON)
//! 3f09c2a17b5e4d01 alice    RUNNING     -     4      2 2026-11-25T22:40:03  prog      n1,n2,n3,n4
//! 77b1e0c9a3d24f6e alice    QUEUED      1     2    0.5 ~2026-11-25T23:10:00 sim
//! ```
//!
//! POS is the place among waiting jobs (1 = next); RATE what the job bids or
//! is charged now, credits per CPU-minute; START, in local time, when it
//! started, or with `~` when the policy expects it to start; NODES the nodes
//! its ranks run on (each once, in rank order) while it runs, else the reason
//! it is held or failed, or how it ended. By default the caller's own jobs;
//! `--all` everyone's (for an admin), `--user` one user's, `--ended` jobs that
//! ended too.
//!
//! `rexec cancel JOB...` cancels each job in turn and says on stdout what
//! became of it; a job that could not be cancelled is said on stderr, and the
//! status is then 1 (2 when no job id could even be read).

use proto::batch::{BatchOp, BatchReply, JobState, QueueEntry, QueueQuery};
use proto::node::JobId;

use super::link::{self, Queue};
use crate::cli::batch::{CancelArgs, QueueArgs};
use crate::config::Config;
use crate::exit::Error;
use crate::say;

/// `rexec queue`.
pub async fn queue(args: &QueueArgs, config: &Config) -> Result<(), Error> {
    let user = match (&args.user, args.all) {
        (Some(u), _) => Some(u.clone()),
        (None, true) => None,
        (None, false) => own_name(config),
    };
    let mut q = Queue::open(config).await?;
    let op = BatchOp::Queue(QueueQuery {
        user,
        ended: args.ended,
        expand: args.expand,
    });
    match q.call(op).await.map_err(link::error)? {
        BatchReply::Queue(entries) => {
            print!("{}", table(&entries, &crate::sys::local_offset));
            Ok(())
        }
        other => Err(q.wrong_reply("Queue", &other)),
    }
}

/// The user the configuration's certificate names, if it can be read.
pub(crate) fn own_name(config: &Config) -> Option<String> {
    certs::CertInfo::load(&config.tls.cert)
        .ok()
        .and_then(|c| c.identity)
        .map(|id| id.name)
}

/// `rexec cancel JOB...`.
pub async fn cancel(args: &CancelArgs, config: &Config) -> Result<(), Error> {
    let jobs: Vec<JobId> = args
        .jobs
        .iter()
        .map(|j| parse_job(j))
        .collect::<Result<_, _>>()?;
    let mut q = Queue::open(config).await?;
    let mut failed = false;
    for job in jobs {
        match q.call(BatchOp::Cancel(job)).await {
            Ok(BatchReply::Cancelled(e)) => println!("{}", cancelled(&e)),
            Ok(other) => return Err(q.wrong_reply("Cancel", &other)),
            Err(e) => {
                say(&format!("job {job}: {}", link::error(e)));
                failed = true;
            }
        }
    }
    match failed {
        false => Ok(()),
        true => Err(Error::Incomplete(String::new())),
    }
}

/// A job id as the user typed it: a job or a whole array (16 hex digits), or
/// one task of an array (`ARRAY_INDEX`, as `rexec queue` shows it); an error
/// is a usage error.
///
/// ```
/// use rexec::batch::list::parse_job;
/// use proto::node::JobId;
/// assert_eq!(parse_job("00000000000000ab").unwrap(), JobId(0xab));
/// assert_eq!(parse_job("00000000000000ab_7").unwrap(), JobId(0xab + 8));
/// assert!(parse_job("00000000000000ab_x").is_err());
/// ```
pub fn parse_job(text: &str) -> Result<JobId, Error> {
    let bad = || {
        Error::Usage(format!(
            "{text:?} is not a job id: give the 16 hex digits `rexec submit` printed, \
             or ID_INDEX for one task of an array"
        ))
    };
    let text = text.trim();
    match text.split_once('_') {
        Some((array, index)) => {
            let array = array.parse::<JobId>().map_err(|_| bad())?;
            let index = index.parse::<u32>().map_err(|_| bad())?;
            Ok(proto::batch::array::task_id(array, index))
        }
        None => text.parse::<JobId>().map_err(|_| bad()),
    }
}

/// What `rexec cancel` says of a job the queue answered for.
///
/// ```
/// # let mut e = rexec::batch::list::tests_entry();
/// e.state = proto::batch::JobState::Cancelled;
/// assert_eq!(rexec::batch::list::cancelled(&e), "job 00000000000000ab cancelled");
/// e.state = proto::batch::JobState::Finished;
/// assert_eq!(rexec::batch::list::cancelled(&e), "job 00000000000000ab had already ended (FINISHED)");
/// ```
pub fn cancelled(e: &QueueEntry) -> String {
    let job = e
        .array
        .as_ref()
        .map_or_else(|| e.job.to_string(), |a| a.to_string());
    match e.state {
        JobState::Cancelled => format!("job {job} cancelled"),
        s => format!("job {job} had already ended ({})", state_name(s)),
    }
}

/// A state as the table shows it.
pub fn state_name(s: JobState) -> &'static str {
    match s {
        JobState::Queued => "QUEUED",
        JobState::Running => "RUNNING",
        JobState::Suspended => "SUSPENDED",
        JobState::Finished => "FINISHED",
        JobState::Cancelled => "CANCELLED",
        JobState::Failed => "FAILED",
        JobState::Held => "HELD",
        JobState::CostLimit => "COST_LIMIT",
        JobState::Dependent => "DEPENDENT",
        JobState::Timeout => "TIMEOUT",
        JobState::OutOfMemory => "OUT_OF_MEMORY",
        _ => "UNKNOWN",
    }
}

/// The columns of `rexec queue`.
pub const HEADER: [&str; 9] = [
    "JOBID",
    "USER",
    "STATE",
    "POS",
    "WIDTH",
    "RATE",
    "START",
    "NAME",
    "NODES(REASON)",
];

/// The listing as `rexec queue` prints it; `offset` gives the local time
/// zone's offset at an instant (seconds east of UTC).
pub fn table(entries: &[QueueEntry], offset: &dyn Fn(i64) -> Option<i64>) -> String {
    let rows: Vec<[String; 9]> = entries
        .iter()
        .map(|e| {
            [
                e.array
                    .as_ref()
                    .map_or_else(|| e.job.to_string(), |a| a.to_string()),
                e.user.clone(),
                state_name(e.state).to_string(),
                e.position.map_or("-".into(), |p| p.to_string()),
                e.width.to_string(),
                money::format_credits(e.rate),
                start_column(e, offset),
                name_column(&e.program),
                where_column(e),
            ]
        })
        .collect();
    super::when::columns(&HEADER, &rows, &[3, 4, 5])
}

/// START: when it started, or `~` and when the policy expects it to.
fn start_column(e: &QueueEntry, offset: &dyn Fn(i64) -> Option<i64>) -> String {
    match (e.started_at, e.estimated_start) {
        (Some(t), _) => super::when::local_time(t, offset),
        (None, Some(t)) if !ended(e.state) => format!("~{}", super::when::local_time(t, offset)),
        _ => "-".into(),
    }
}

/// NAME: the program's file name, at most 12 characters.
fn name_column(program: &str) -> String {
    let base = program.rsplit('/').next().unwrap_or(program);
    base.chars().take(12).collect()
}

/// NODES(REASON): the nodes while running, else why it waits or how it ended.
fn where_column(e: &QueueEntry) -> String {
    if matches!(e.state, JobState::Running) && !e.nodes.is_empty() {
        let mut distinct: Vec<&str> = Vec::new();
        for n in &e.nodes {
            if !distinct.contains(&n.as_str()) {
                distinct.push(n);
            }
        }
        return distinct.join(",");
    }
    let exit = e.exit.map(|x| match x {
        proto::node::ExitStatus::Code(c) => format!("exit {c}"),
        proto::node::ExitStatus::Signaled { signal, .. } => format!("killed by {signal}"),
    });
    match (exit, &e.reason) {
        (Some(x), Some(r)) => format!("({x}; {r})"),
        (Some(x), None) => format!("({x})"),
        (None, Some(r)) => format!("({r})"),
        (None, None) => String::new(),
    }
}

/// Whether a job in state `s` has ended.
pub fn ended(s: JobState) -> bool {
    s.is_ended()
}

/// An entry for examples and tests: job `ab` of alice, queued first.
#[doc(hidden)]
pub fn tests_entry() -> QueueEntry {
    QueueEntry {
        job: JobId(0xab),
        user: "alice".into(),
        program: "/home/alice/bin/simulate-weather".into(),
        width: 4,
        length_s: 7200,
        state: JobState::Queued,
        position: Some(1),
        rate: 2_500_000,
        estimated_start: Some(1_764_111_600),
        submitted_at: 1_764_100_000,
        started_at: None,
        ended_at: None,
        nodes: Vec::new(),
        attempts: 0,
        charged: 0,
        exit: None,
        reason: None,
        array: None,
    }
}
