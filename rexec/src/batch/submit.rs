//! `rexec submit`: build the job, sign it, hand it to the queue and print its
//! id (16 hex digits, alone on stdout, so `JOB=$(rexec submit ...)` works).
//!
//! Everything that can be checked here is checked before the queue is asked
//! (options, worth, the spec as a node would check it, the key). A call that
//! fails in a way worth retrying is sent again, up to [`ATTEMPTS`] times a
//! second apart; the job's id makes that safe: a queue that already took the
//! job answers `Duplicate`, which a retry counts as success.

use std::time::Duration;

use clients::rpc::RpcError;
use proto::batch::{BatchErrorCode, BatchOp, BatchReply};

use super::job;
use super::link::{self, Queue};
use crate::cli::batch::SubmitArgs;
use crate::config::Config;
use crate::exit::Error;

/// Most times a submission is sent (a queue that has just started answers
/// `Unavailable` until it knows the market, for a few seconds).
pub const ATTEMPTS: u32 = 10;

/// Submit the job `args` describe; prints its id.
pub async fn run(args: &SubmitArgs, config: &Config) -> Result<(), Error> {
    let signer = job::signer(config)?;
    let spec = job::spec(args, signer.user(), config, job::now_secs())?;
    if args.estimate {
        let proto::batch::Worth::Rate(rate) = spec.worth else {
            return Err(Error::Usage(
                "--estimate quotes a bid: give -r RATE (a utility has no rate to quote)".into(),
            ));
        };
        let bid = money::Bid::new(rate).unwrap_or(money::Bid::ZERO);
        let length = Duration::from_secs(spec.length_s);
        let ask = crate::estimate::Ask {
            bid,
            count: spec.width,
            length,
            nodes: None,
            policy: crate::select::DEFAULT_POLICY,
            max_price: None,
            verbose: false,
            account: args.spending.account.as_deref(),
        };
        return crate::estimate::print(config, &ask).await;
    }
    let signed = job::sign(&signer, &spec, args)?;
    let mut queue = Queue::open(config).await?;
    let mut attempt = 1;
    loop {
        match queue.call(BatchOp::Submit(signed.clone())).await {
            Ok(BatchReply::Submitted(s)) => {
                println!("{}", s.job);
                return Ok(());
            }
            Ok(other) => return Err(queue.wrong_reply("Submit", &other)),
            Err(RpcError::Server(e)) if attempt > 1 && e.code == BatchErrorCode::Duplicate => {
                // An earlier attempt reached the queue after all.
                println!("{}", spec.id);
                return Ok(());
            }
            Err(e) if e.is_retryable() && attempt < ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => return Err(refusal(link::error(e))),
        }
    }
}

/// A refusal says it is one.
fn refusal(e: Error) -> Error {
    match e {
        Error::Refused(m) => Error::Refused(format!("the queue refused the job: {m}")),
        Error::Usage(m) => Error::Usage(format!("the queue refused the job: {m}")),
        other => other,
    }
}
