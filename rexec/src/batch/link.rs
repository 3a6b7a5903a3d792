//! The connection to the batch queue: where it is (the `[batch]` table, else
//! what a selector knows, see [`super::services`]), one [`BatchClient`] that reconnects when a call
//! fails in a way worth retrying (to the next of the queue's instances when one
//! cannot be reached, silently: see [`clients::instances`]), and what each
//! failure means for the exit
//! status: the queue refusing the job as the market would (no credit, wider
//! than the market, a bad signature) is 254; a request it cannot take (no
//! such job, not yours, malformed) is 2; a queue that cannot be reached,
//! or fails, is 255.

use std::time::Duration;

use clients::batch::{BatchClient, ClientError};
use clients::instances::Instances;
use clients::rpc::RpcError;
use proto::batch::{BatchErrorCode, BatchOp, BatchReply};
use tokio::time::Instant;
use tokio_rustls::TlsConnector;

use crate::config::Config;
use crate::exit::Error;

/// Time limit of the connection and of each call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How long polling commands (`wait`, `output --follow`) keep trying a queue
/// that cannot be reached before giving up (a restarting queue comes back
/// well within it).
pub const PATIENCE: Duration = Duration::from_secs(60);

/// What a failed queue call means to the user, by the rule in the module docs.
///
/// ```
/// use clients::rpc::RpcError;
/// use proto::batch::{BatchError, BatchErrorCode as C};
/// use rexec::exit::Class;
/// let server = |c| RpcError::Server(BatchError::new(c, "no"));
/// assert_eq!(rexec::batch::link::error(server(C::NoCredit)).class(), Class::Refused);
/// assert_eq!(rexec::batch::link::error(server(C::NoSuchJob)).class(), Class::Usage);
/// assert_eq!(rexec::batch::link::error(server(C::Storage)).class(), Class::Failed);
/// ```
pub fn error(e: ClientError) -> Error {
    use BatchErrorCode as C;
    match e {
        RpcError::Server(b) => match b.code {
            C::NoCredit | C::TooWide | C::BadSignature | C::OverCeiling => {
                Error::Refused(b.message)
            }
            C::NoSuchJob | C::Forbidden | C::Malformed => Error::Usage(b.message),
            _ => Error::Failed(b.message),
        },
        other => Error::Failed(other.to_string()),
    }
}

/// The queue's addresses (its instances, in the order to try them) and
/// certificate name, by the rule in the module docs.
pub async fn locate(
    config: &Config,
    connector: &TlsConnector,
) -> Result<(Vec<String>, String), Error> {
    let configured = config.batch.addresses();
    if !configured.is_empty() {
        return Ok((configured.to_vec(), config.batch.server_name().to_string()));
    }
    if let Some((addr, name)) = super::services::find_queue(config, connector).await? {
        return Ok((vec![addr], name));
    }
    Err(Error::Usage(format!(
        "no batch queue known: {} has no [batch] table with an address, and no selector knows \
         of a queue; add [batch] address = \"host:port\" of the queue (batchd)",
        config.path.display()
    )))
}

/// A connection to the queue that is made again when it breaks.
pub struct Queue {
    connector: TlsConnector,
    instances: Instances,
    name: String,
    client: Option<BatchClient>,
}

impl Queue {
    /// Finds the queue and connects to it.
    pub async fn open(config: &Config) -> Result<Queue, Error> {
        let connector = crate::reach::connector(config)?;
        let (addresses, name) = locate(config, &connector).await?;
        let mut q = Queue {
            connector,
            instances: Instances::new(addresses),
            name,
            client: None,
        };
        q.connect().await.map_err(error)?;
        Ok(q)
    }

    async fn connect(&mut self) -> Result<&mut BatchClient, ClientError> {
        let client = match self.client.take() {
            Some(c) => c,
            None => {
                self.instances
                    .connect(&self.connector, &self.name, CALL_TIMEOUT)
                    .await?
            }
        };
        Ok(self.client.insert(client))
    }

    /// One call; a connection that failed is dropped, to be made again by the
    /// next call.
    pub async fn call(&mut self, op: BatchOp) -> Result<BatchReply, ClientError> {
        let result = match self.connect().await {
            Ok(c) => c.call(op).await,
            Err(e) => Err(e),
        };
        if matches!(&result, Err(e) if !matches!(e, RpcError::Server(_))) {
            self.client = None;
        }
        result
    }

    /// A call retried every second while it fails in a retryable way, for at
    /// most [`PATIENCE`] in a row; `note` hears the first failure.
    pub async fn call_patiently(
        &mut self,
        op: BatchOp,
        note: &dyn Fn(&str),
    ) -> Result<BatchReply, Error> {
        let give_up = Instant::now() + PATIENCE;
        let mut said = false;
        loop {
            match self.call(op.clone()).await {
                Ok(reply) => return Ok(reply),
                Err(e) if e.is_retryable() && Instant::now() < give_up => {
                    if !said {
                        note(&format!("{e}; trying again for up to {PATIENCE:?}"));
                        said = true;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => return Err(error(e)),
            }
        }
    }

    /// The error for an answer of the wrong kind to `asked`.
    pub fn wrong_reply(&self, asked: &'static str, got: &BatchReply) -> Error {
        let addr = self.client.as_ref().map_or("?", |c| c.addr());
        Error::Failed(format!(
            "batchd at {addr} answered {} to a {asked}",
            got.name()
        ))
    }
}
