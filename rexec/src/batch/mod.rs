//! The batch commands: `rexec submit` signs a job and hands it to the cluster's
//! queue (batchd); `rexec queue`, `cancel`, `output` and `wait` follow it there.
//!
//! Module map (their command line is [`crate::cli::batch`]):
//! - [`worth`]: what a job is worth: a rate, the batch paper's value and
//!   deadline, or a utility spec or file.
//! - [`job`]: the job spec built from the command line and this process, checked
//!   and signed with the user's key.
//! - [`link`]: finding the queue and calling it; what its refusals mean for the
//!   exit status.
//! - [`services`]: the queue as a selector knows it, without a `[batch]` address.
//! - [`script`]: batch scripts, their `#REXEC` directives and the rule that
//!   makes a program one.
//! - [`submit`]: `rexec submit`.
//! - [`list`]: `rexec queue` and `rexec cancel`.
//! - [`follow`]: `rexec output` and `rexec wait`, by polling.
//! - [`history`]: `rexec history`, the record of ended jobs.
//! - [`when`]: local times and aligned columns for the listings.

pub mod follow;
pub mod history;
pub mod job;
pub mod link;
pub mod list;
pub mod script;
pub mod services;
pub mod submit;
pub mod when;
pub mod worth;

use crate::cli::batch::{BatchArgs, BatchCommand};

use crate::exit::Error;

/// Run a batch command; `Ok` holds the exit status.
pub async fn run(args: BatchArgs) -> Result<i32, Error> {
    let config = crate::reach::load(args.config.as_deref())?;
    match &args.command {
        BatchCommand::Submit(a) => submit::run(a, &config).await.map(|()| 0),
        BatchCommand::Queue(a) => list::queue(a, &config).await.map(|()| 0),
        BatchCommand::Cancel(a) => list::cancel(a, &config).await.map(|()| 0),
        BatchCommand::Output(a) => follow::output(a, &config).await,
        BatchCommand::Wait(a) => follow::wait(a, &config).await,
        BatchCommand::History(a) => history::history(a, &config).await.map(|()| 0),
    }
}
