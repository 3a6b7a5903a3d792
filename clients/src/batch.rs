//! The batch queue (batchd) client: [`BatchClient`] is one connection to the queue
//! (the server's certificate must be the `service` certificate named `batchd`, or
//! whatever name is configured), used by `rexec submit`, `queue`, `cancel`,
//! `output` and `wait`, and by the tests.
//!
//! ```
//! use clients::batch::ClientError;
//! use proto::batch::{BatchError, BatchErrorCode};
//! let e: ClientError = clients::rpc::RpcError::Server(BatchError::new(BatchErrorCode::NoCredit, "no"));
//! assert!(!e.is_retryable());
//! ```

use proto::DEFAULT_MAX_FRAME;
use proto::batch::{BatchError, BatchOp, BatchReply, BatchRequest, BatchResponse};

use crate::rpc::{Client, Protocol, RpcError};

/// The certificate name the queue's server certificate carries by default.
pub const DEFAULT_SERVER_NAME: &str = "batchd";

/// The batch protocol of `proto::batch`.
#[derive(Debug)]
pub enum Batch {}

impl Protocol for Batch {
    const SERVICE: &'static str = "batchd";
    const MAX_REPLY: usize = DEFAULT_MAX_FRAME;
    const MAX_REQUEST: usize = DEFAULT_MAX_FRAME;
    type Op = BatchOp;
    type Request = BatchRequest;
    type Response = BatchResponse;
    type Reply = BatchReply;
    type Refusal = BatchError;

    fn request(id: u64, op: BatchOp) -> BatchRequest {
        BatchRequest::new(id, op)
    }

    fn response(r: BatchResponse) -> (u64, Result<BatchReply, BatchError>) {
        (r.id, r.result)
    }
}

/// An open connection to the queue.
pub type BatchClient = Client<Batch>;

/// Why a queue call failed.
pub type ClientError = RpcError<BatchError>;

impl RpcError<BatchError> {
    /// Whether sending the same request again later may succeed: every failure but
    /// the queue's final refusal (storage trouble and overload excepted).
    pub fn is_retryable(&self) -> bool {
        use proto::batch::BatchErrorCode::{Storage, Unavailable};
        match self {
            RpcError::Server(e) => matches!(e.code, Storage | Unavailable),
            _ => true,
        }
    }
}
