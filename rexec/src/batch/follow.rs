//! `rexec output JOB` and `rexec wait JOB`: following a job through the
//! queue by polling.
//!
//! `output` reads the job's kept stdout and stderr from the start, a frame at a
//! time, writing stdout to stdout (or to `-o FILE`) and stderr to stderr, until
//! it has read all there is; with `--follow`, it polls every [`POLL`] until the
//! job has ended and every byte is read. The queue keeps a limited number of
//! bytes per job (see the queue's documentation); when it dropped some,
//! `output` says how many on stderr at the end.
//!
//! `wait` asks for the job's state every [`POLL`] until it has ended, and exits
//! as `rexec` would have: the job's own status (`128+N` for signal N) when it
//! finished, 253 when it was cancelled or failed without a status of its own
//! (saying why on stderr). A queue that cannot be reached at the start is a
//! failure (255) at once; once connected, a queue that stops answering (as
//! while it restarts) is asked again every second for up to
//! [`super::link::PATIENCE`] in a row before either gives up (255).

use std::io::Write;
use std::time::Duration;

use proto::batch::{BatchOp, BatchReply, JobState, OutputQuery, QueueEntry};

use super::link::Queue;
use super::list::{ended, parse_job, state_name};
use crate::cli::batch::{OutputArgs, WaitArgs};
use crate::config::Config;
use crate::exit::{BROKEN_PIPE, Error};
use crate::say;

/// How often `wait` and `output --follow` ask the queue.
pub const POLL: Duration = Duration::from_secs(1);

/// `rexec output`; `Ok` holds the exit status (141 when stdout's reader went away).
pub async fn output(args: &OutputArgs, config: &Config) -> Result<i32, Error> {
    let job = parse_job(&args.job)?;
    let mut out: Box<dyn Write> =
        match &args.file {
            Some(path) => Box::new(std::fs::File::create(path).map_err(|e| {
                Error::Usage(format!("-o {}: cannot create it: {e}", path.display()))
            })?),
            None => Box::new(std::io::stdout()),
        };
    let mut q = Queue::open(config).await?;
    let mut query = OutputQuery {
        job,
        stdout_from: 0,
        stderr_from: 0,
    };
    let truncated = loop {
        let chunk = match q
            .call_patiently(BatchOp::Output(query.clone()), &say)
            .await?
        {
            BatchReply::Output(c) => c,
            other => return Err(q.wrong_reply("Output", &other)),
        };
        let got = chunk.stdout.len() + chunk.stderr.len();
        if let Err(e) = out
            .write_all(chunk.stdout.as_bytes())
            .and_then(|()| out.flush())
        {
            return match (e.kind(), &args.file) {
                (std::io::ErrorKind::BrokenPipe, None) => Ok(BROKEN_PIPE),
                _ => Err(Error::Failed(format!("cannot write the output: {e}"))),
            };
        }
        let _ = std::io::stderr().write_all(chunk.stderr.as_bytes());
        query.stdout_from += chunk.stdout.len() as u64;
        query.stderr_from += chunk.stderr.len() as u64;
        if chunk.complete || (got == 0 && !args.follow) {
            break chunk.truncated;
        }
        if got == 0 {
            tokio::time::sleep(POLL).await;
        }
    };
    if truncated > 0 {
        say(&format!(
            "job {job}: the queue kept only part of its output; {truncated} bytes beyond its \
             per-job limit were dropped"
        ));
    }
    Ok(0)
}

/// `rexec wait`; `Ok` holds the job's exit status.
pub async fn wait(args: &WaitArgs, config: &Config) -> Result<i32, Error> {
    let job = parse_job(&args.job)?;
    let mut q = Queue::open(config).await?;
    loop {
        match q.call_patiently(BatchOp::Status(job), &say).await? {
            BatchReply::Status(e) if ended(e.state) => return outcome(&e),
            BatchReply::Status(_) => tokio::time::sleep(POLL).await,
            other => return Err(q.wrong_reply("Status", &other)),
        }
    }
}

/// The exit status of an ended job, by the rule in the module docs (a line
/// on stderr says why when it did not simply exit).
///
/// ```
/// use proto::batch::JobState;
/// use proto::node::ExitStatus;
/// let mut e = rexec::batch::list::tests_entry();
/// e.state = JobState::Finished;
/// e.exit = Some(ExitStatus::Code(3));
/// assert_eq!(rexec::batch::follow::outcome(&e).unwrap(), 3);
/// e.state = JobState::Cancelled;
/// assert_eq!(rexec::batch::follow::outcome(&e).unwrap_err().class().status(), 253);
/// ```
pub fn outcome(e: &QueueEntry) -> Result<i32, Error> {
    let why = e
        .reason
        .as_deref()
        .map_or(String::new(), |r| format!(": {r}"));
    match (e.state, e.exit) {
        (JobState::Cancelled, _) => Err(Error::Unfinished(format!(
            "job {} was cancelled{why}",
            e.job
        ))),
        (JobState::OutOfMemory, _) => Err(Error::Lines {
            lines: vec![format!("job {} ended OUT_OF_MEMORY{why}", e.job)],
            class: crate::exit::Class::OutOfMemory,
        }),
        (JobState::Timeout, _) => Err(Error::Lines {
            lines: vec![format!("job {} ended TIMEOUT{why}", e.job)],
            class: crate::exit::Class::TimedOut,
        }),
        (_, Some(status)) => {
            if let proto::node::ExitStatus::Signaled { signal, .. } = status {
                say(&format!("job {}: killed by {signal}", e.job));
            } else if e.state == JobState::Failed {
                say(&format!("job {} failed{why}", e.job));
            }
            Ok(status.shell_code())
        }
        (s, None) => Err(Error::Unfinished(format!(
            "job {} {}{why}",
            e.job,
            match s {
                JobState::Failed => "failed without running to the end".to_string(),
                other => format!("ended as {}", state_name(other)),
            }
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::list::tests_entry;
    use crate::exit::Class;
    use proto::node::{ExitStatus, Signal};

    fn ended(state: JobState, exit: Option<ExitStatus>, reason: Option<&str>) -> QueueEntry {
        let mut e = tests_entry();
        e.state = state;
        e.exit = exit;
        e.reason = reason.map(str::to_string);
        e
    }

    #[test]
    fn a_finished_job_exits_as_rexec_would() {
        let f = |x| outcome(&ended(JobState::Finished, Some(x), None)).unwrap();
        assert_eq!(f(ExitStatus::Code(0)), 0);
        assert_eq!(f(ExitStatus::Code(42)), 42);
        let killed = ExitStatus::Signaled {
            signal: Signal::Kill,
            core_dumped: false,
        };
        assert_eq!(f(killed), 137);
        let failed = ended(
            JobState::Failed,
            Some(ExitStatus::Code(3)),
            Some("node lost"),
        );
        assert_eq!(outcome(&failed).unwrap(), 3);
    }

    #[test]
    fn limits_exit_with_their_own_status_naming_the_rank_and_node() {
        let why = "rank 1 on node n2 ran out of memory";
        let err = outcome(&ended(
            JobState::OutOfMemory,
            Some(ExitStatus::Signaled {
                signal: Signal::Kill,
                core_dumped: false,
            }),
            Some(why),
        ))
        .unwrap_err();
        assert_eq!(err.class().status(), 252);
        assert_eq!(
            err.to_string(),
            format!("job 00000000000000ab ended OUT_OF_MEMORY: {why}")
        );
        let err = outcome(&ended(JobState::Timeout, None, Some("time limit"))).unwrap_err();
        assert_eq!(err.class().status(), 251);
    }

    #[test]
    fn cancelled_or_failed_without_a_status_is_253_saying_why() {
        let e = ended(JobState::Cancelled, Some(ExitStatus::Code(0)), None);
        let err = outcome(&e).unwrap_err();
        assert_eq!(
            (err.class(), err.class().status()),
            (Class::Unfinished, 253)
        );
        assert_eq!(err.to_string(), "job 00000000000000ab was cancelled");
        let e = ended(JobState::Failed, None, Some("out of attempts"));
        let err = outcome(&e).unwrap_err();
        assert_eq!(err.class(), Class::Unfinished);
        assert_eq!(
            err.to_string(),
            "job 00000000000000ab failed without running to the end: out of attempts"
        );
    }
}
