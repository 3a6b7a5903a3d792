//! The account (accountd) client: [`AccountClient`] is one connection to accountd
//! (the server's certificate must be the `service` certificate named `accountd`, or
//! whatever name is configured), used by `accountctl`, rexecd's credit check and its
//! claims of signed batch ranks ([`AccountClient::claim`]), the
//! node's debit delivery (`ledger_client::debit`), the benchmark and the tests.
//! [`LearntAddress`] is accountd's address as learnt from its announcements.
//!
//! ```
//! use clients::account::{ClientError, no_address};
//! use proto::account::{AccountError, ErrorCode};
//! assert!(no_address().is_retryable());
//! assert!(!ClientError::Server(AccountError::new(ErrorCode::Forbidden, "no")).is_retryable());
//! assert!(no_address().to_string().starts_with("no accountd known"));
//! ```

use std::sync::{Arc, RwLock};

use proto::DEFAULT_MAX_FRAME;
use proto::account::{
    AccountError, AccountOp, AccountReply, AccountRequest, AccountResponse, ChargeOutcome, Claim,
    Debit,
};

use crate::rpc::{Client, Protocol, RpcError};

/// The certificate name accountd's server certificate carries by default.
pub const DEFAULT_SERVER_NAME: &str = "accountd";

/// The account protocol of `proto::account`.
#[derive(Debug)]
pub enum Account {}

impl Protocol for Account {
    const SERVICE: &'static str = "accountd";
    const MAX_REPLY: usize = DEFAULT_MAX_FRAME;
    const MAX_REQUEST: usize = DEFAULT_MAX_FRAME;
    type Op = AccountOp;
    type Request = AccountRequest;
    type Response = AccountResponse;
    type Reply = AccountReply;
    type Refusal = AccountError;

    fn request(id: u64, op: AccountOp) -> AccountRequest {
        AccountRequest::new(id, op)
    }

    fn response(r: AccountResponse) -> (u64, Result<AccountReply, AccountError>) {
        (r.id, r.result)
    }
}

/// An open connection to accountd.
pub type AccountClient = Client<Account>;

impl Client<Account> {
    /// Node: claims one start of a signed batch rank. `Ok` means this node may start
    /// it (also when this node had claimed it before with the same digest: a retry);
    /// `AlreadyClaimed` and `KeyConflict` come back as [`RpcError::Server`].
    pub async fn claim(&mut self, claim: Claim) -> Result<(), ClientError> {
        match self.call(AccountOp::Claim(claim)).await? {
            AccountReply::Claimed => Ok(()),
            other => Err(self.wrong_reply("Claim", other.name())),
        }
    }

    /// Node: several debits in one frame (1 to
    /// [`proto::account::MAX_DEBITS_PER_FRAME`]), one outcome per debit in order,
    /// each what a `Debit` of its own would have got. An accountd that predates
    /// the operation answers [`RpcError::Server`] with `Unsupported`; an answer
    /// with another number of outcomes is [`RpcError::WrongReply`] (retryable).
    pub async fn debits(&mut self, debits: Vec<Debit>) -> Result<Vec<ChargeOutcome>, ClientError> {
        let sent = debits.len();
        match self.call(AccountOp::Debits(debits)).await? {
            AccountReply::Charges(outcomes) if outcomes.len() == sent => Ok(outcomes),
            AccountReply::Charges(_) => {
                Err(self.wrong_reply("Debits", "Charges with another number of outcomes"))
            }
            other => Err(self.wrong_reply("Debits", other.name())),
        }
    }
}

/// Why an accountd call failed.
pub type ClientError = RpcError<AccountError>;

/// The error for "no accountd address is known yet".
pub fn no_address() -> ClientError {
    RpcError::NoAddress {
        service: Account::SERVICE,
    }
}

impl RpcError<AccountError> {
    /// Whether sending the same request again later may succeed: every failure but
    /// accountd's final refusal.
    pub fn is_retryable(&self) -> bool {
        match self {
            RpcError::Server(e) => e.code.is_retryable(),
            _ => true,
        }
    }
}

/// accountd's address as learnt while running (from its announcements), shared by
/// whoever learns it and the clients that connect: each connection attempt reads
/// the address current at that moment. Clones share one value.
#[derive(Debug, Clone, Default)]
pub struct LearntAddress(Arc<RwLock<Option<String>>>);

impl LearntAddress {
    /// Nothing learnt yet.
    pub fn new() -> LearntAddress {
        LearntAddress::default()
    }

    /// The address to dial now, if one is known.
    pub fn get(&self) -> Option<String> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Records the address heard last (`None`: forget it); returns whether it changed.
    pub fn set(&self, addr: Option<String>) -> bool {
        let mut current = self.0.write().unwrap_or_else(|e| e.into_inner());
        if *current == addr {
            return false;
        }
        *current = addr;
        true
    }
}
