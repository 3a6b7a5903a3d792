//! Messages between nodes, users, admins and the account service (accountd).
//!
//! Every request travels in an [`AccountRequest`] envelope that carries the
//! protocol version ([`ACCOUNT_PROTOCOL_VERSION`]) and a request id the server
//! echoes in its [`AccountResponse`]. The operation itself is an [`AccountOp`];
//! the answer is either an [`AccountReply`] or an [`AccountError`] with a typed
//! [`ErrorCode`].
//!
//! Money is always `i64` micro-credits (1 credit = 1 000 000). Ledger amounts
//! are signed effects on a balance: a debit is stored as a negative amount, a
//! grant or a refund as a positive one.
//!
//! [`AccountOp`] and [`AccountReply`] are tagged message enums and
//! [`ErrorCode`], [`EntryKind`] and [`ReportBy`] are code enums (see
//! [`crate::tagged`]): tags and codes are append-only, and a tag or code this
//! build does not know decodes to `Unknown` instead of failing, so a newer
//! client gets a clear `Unsupported` answer from an older server.
//!
//! ```
//! use proto::account::*;
//! let req = AccountRequest::new(7, AccountOp::Balance(BalanceQuery { user: None }));
//! assert_eq!(req.version, ACCOUNT_PROTOCOL_VERSION);
//! let key = DebitKey { node: "n1".into(), job: "j42".into(), seq: 3 };
//! assert_eq!(key.to_string(), "n1/j42/3");
//! ```

use serde::{Deserialize, Serialize};

/// Version of the account-service protocol spoken by this build.
pub const ACCOUNT_PROTOCOL_VERSION: u16 = 1;

pub use crate::ledger::{
    ChargeReceipt, Debit, DebitKey, EntryKind, LedgerEntry, MeterInterval, ReportRow,
};
pub use crate::limits::MAX_HISTORY_PAGE;

/// Most debits one [`AccountOp::Debits`] frame may carry; accountd refuses a
/// frame with more (or none) as [`ErrorCode::Malformed`]. Chosen so that a
/// frame of the largest valid debits (every name at its 64-byte limit, every
/// number at its longest) still fits in
/// [`crate::limits::MAX_ACCOUNT_REQUEST`].
pub const MAX_DEBITS_PER_FRAME: usize = 64;

/// The outcome of one debit of a [`AccountOp::Debits`] frame: the receipt, or
/// the error that debit alone would have got.
pub type ChargeOutcome = Result<ChargeReceipt, AccountError>;

/// The envelope of every request sent to accountd.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountRequest {
    /// Protocol version the sender speaks ([`ACCOUNT_PROTOCOL_VERSION`]).
    pub version: u16,
    /// Chosen by the sender, echoed in the response.
    pub id: u64,
    /// What to do.
    pub op: AccountOp,
}

impl AccountRequest {
    /// A request at the current protocol version.
    pub fn new(id: u64, op: AccountOp) -> Self {
        AccountRequest {
            version: ACCOUNT_PROTOCOL_VERSION,
            id,
            op,
        }
    }
}

/// The envelope of every response from accountd.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountResponse {
    /// The id of the request this answers (0 when the request could not be read).
    pub id: u64,
    /// The outcome.
    pub result: Result<AccountReply, AccountError>,
}

/// A node giving back part of what it charged for a job (an over-charge it found).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refund {
    /// Idempotency key of the refund itself (same job, its own sequence number).
    pub key: DebitKey,
    /// The user who is paid back.
    pub user: String,
    /// Micro-credits to give back; at most what the node has net charged for the job.
    pub amount: i64,
    /// Why (kept in the ledger).
    pub reason: String,
}

crate::tagged::code_enum! {
    /// How a report groups the charges.
    pub enum ReportBy {
        /// One row per user.
        1 => User,
        /// One row per node.
        2 => Node,
        /// One row per UTC day (`YYYY-MM-DD`).
        3 => Day,
    }
}

/// Ask for a user's balance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalanceQuery {
    /// Whose balance; `None` for the caller.
    pub user: Option<String>,
}

/// Ask for one page of a user's ledger entries, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HistoryQuery {
    /// Whose history; `None` for the caller.
    pub user: Option<String>,
    /// Only entries at or after this time (UTC microseconds since the epoch).
    pub since_us: Option<i64>,
    /// Only entries before this time (UTC microseconds since the epoch).
    pub until_us: Option<i64>,
    /// Only entries with an id greater than this (paging cursor).
    pub after_id: Option<i64>,
    /// Most entries wanted (capped at [`MAX_HISTORY_PAGE`]).
    pub limit: u32,
}

/// Open an account, optionally with an initial grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateAccount {
    /// The new account's user name.
    pub user: String,
    /// Initial grant in micro-credits (0 for none).
    pub initial: i64,
}

/// Add credits to an account (`Grant`) or correct it up or down (`Adjust`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminEntry {
    /// Whose balance.
    pub user: String,
    /// Micro-credits: positive for a grant, non-zero for an adjustment.
    pub amount: i64,
    /// Why (required, kept in the ledger).
    pub reason: String,
}

/// Ask for totals of charges grouped by user, node or day.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportQuery {
    /// Grouping.
    pub by: ReportBy,
    /// Only entries at or after this time (UTC microseconds).
    pub since_us: Option<i64>,
    /// Only entries before this time (UTC microseconds).
    pub until_us: Option<i64>,
}

crate::tagged::tagged_enum! {
    /// An operation on the ledger. Who may send which is decided by accountd
    /// from the caller's certificate role.
    pub enum AccountOp {
        /// Node: charge a user (idempotent by key).
        1 => Debit(Debit),
        /// Node: give back an over-charge (idempotent by key).
        2 => Refund(Refund),
        /// Balance of a user.
        3 => Balance(BalanceQuery),
        /// A page of a user's ledger.
        4 => History(HistoryQuery),
        /// Admin: open an account.
        5 => CreateAccount(CreateAccount),
        /// Admin: add credits.
        6 => Grant(AdminEntry),
        /// Admin: correct a balance up or down.
        7 => Adjust(AdminEntry),
        /// Admin: charge totals.
        8 => Report(ReportQuery),
        /// Admin: check the ledger's invariants.
        9 => Audit,
        /// Anyone: who does the server think I am (also a cheap liveness check).
        10 => WhoAmI,
        /// Node: claim one start of a signed batch job's rank, once across the
        /// cluster (answered `Claimed`, or `AlreadyClaimed`).
        11 => Claim(Claim),
        /// Anyone: the latest chain head this accountd signed (answered `Head`).
        12 => Head,
        /// Node: several charges at once, 1 to [`MAX_DEBITS_PER_FRAME`], each
        /// treated exactly as a `Debit` of its own (idempotent by key) and
        /// committed together; answered `Charges`, one outcome per debit in
        /// order. An accountd older than this answers `Unsupported`: send
        /// single `Debit`s to it.
        13 => Debits(Vec<Debit>),
        /// Node: the rank it claimed ended (its program exited and the node sent
        /// the rank's `Exit`); answered `Ended`, idempotent. Once every rank of
        /// an attempt has ended, accountd refuses every later claim of the job
        /// ([`ErrorCode::JobEnded`]). An accountd older than this answers
        /// `Unsupported`: the node keeps the record and sends it again later.
        14 => RankEnd(RankEnd),
        /// Project accounts and income ([`crate::project`]).
        20 => Project(crate::project::ProjectOp),
        /// Admin, or a ledger reader (a service certificate named
        /// `ledger-reader` or `ledger-reader-*`): each project's net spend
        /// per hour over the last hours ([`crate::spend`]; answered `Spend`).
        /// An accountd older than this answers `Unsupported`.
        21 => Spend(crate::spend::SpendQuery),
    }
}

/// A node's claim to start rank `rank` of attempt `attempt` of a user's signed
/// batch job ([`crate::batch::SignedLaunch`]). The first claim of a
/// `(user, job, attempt, rank)` wins; any later one, from any node, is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// The job's owner (the signed spec's user).
    pub user: String,
    /// The job's id.
    pub job: crate::node::JobId,
    /// Which start of the job.
    pub attempt: u32,
    /// Which rank.
    pub rank: u32,
    /// SHA-256 of the signed spec bytes: a claim of the same key for a different
    /// spec is refused as a conflict.
    pub digest: [u8; 32],
}

/// A node's record that a rank it claimed ([`Claim`], same key and digest)
/// ended: its program exited and the node reported the exit to the queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankEnd {
    /// The rank's claim, exactly as the node sent it.
    pub claim: Claim,
    /// The job's signed width (ranks per attempt): an attempt has ended when
    /// this many of its ranks have.
    pub width: u32,
}

/// The caller's identity as the server sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Role name (`node`, `user`, `service`, `admin`).
    pub role: String,
    /// Name from the certificate.
    pub name: String,
}

crate::tagged::tagged_enum! {
    /// What accountd answers to a successful operation.
    pub enum AccountReply {
        /// A debit or refund was applied (or had been applied before: `duplicate`).
        1 => Charged(ChargeReceipt),
        /// A user's balance.
        2 => Balance(AccountBalance),
        /// A page of ledger entries.
        3 => History(HistoryPage),
        /// An entry written by a grant or an adjustment.
        4 => Entry(EntryReceipt),
        /// An account was created.
        5 => Created(AccountBalance),
        /// Report rows.
        6 => Report(Vec<ReportRow>),
        /// Audit result.
        7 => Audit(AuditReport),
        /// The caller's identity.
        8 => WhoAmI(Identity),
        /// Answer to `Claim`: this node may start the rank.
        9 => Claimed,
        /// Answer to `Head`: the latest signed chain head, `None` when this
        /// accountd signs none (no `[store] anchors`) or has not yet.
        10 => Head(Option<SignedHead>),
        /// Answer to `Debits`: one outcome per debit, in the order sent.
        11 => Charges(Vec<ChargeOutcome>),
        /// Answer to `RankEnd`: the end is recorded (now or before).
        12 => Ended,
        /// Answer to `Project`.
        20 => Project(crate::project::ProjectReply),
        /// Answer to `Spend`.
        21 => Spend(crate::spend::HourlySpend),
    }
}

/// A chain head signed by accountd: the ledger's entry `id` carried hash
/// `hash` at `at_us`. The signature (ECDSA P-256 SHA-256, ASN.1, by the key
/// of `cert`) covers `"rexec-ledger-anchor-v1\0"`, the id and time as 8 bytes
/// big-endian, and the hash; the same as a line of accountd's anchors file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedHead {
    /// The last entry's id.
    pub id: i64,
    /// Its chain hash (32 bytes).
    pub hash: Vec<u8>,
    /// When it was signed, UTC microseconds.
    pub at_us: i64,
    /// The signature.
    pub signature: Vec<u8>,
    /// The signer's certificate, DER.
    pub cert: Vec<u8>,
}

/// A user's balance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountBalance {
    /// The user.
    pub user: String,
    /// Micro-credits (may be negative after debits).
    pub balance: i64,
}

/// The result of an admin write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryReceipt {
    /// Ledger entry id.
    pub entry_id: i64,
    /// The user's balance after it.
    pub balance_after: i64,
}

/// A page of history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryPage {
    /// Entries, oldest first (at most [`MAX_HISTORY_PAGE`]).
    #[serde(deserialize_with = "crate::limits::history")]
    pub entries: Vec<LedgerEntry>,
    /// Cursor for the next page (`after_id`), or `None` at the end.
    pub next_after: Option<i64>,
}

/// The outcome of an audit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditReport {
    /// Accounts checked.
    pub accounts: u64,
    /// Entries checked.
    pub entries: u64,
    /// Everything found wrong (empty when the ledger is sound).
    pub problems: Vec<AuditProblem>,
}

/// One thing an audit found wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditProblem {
    /// What is wrong, in one line.
    pub what: String,
    /// The user involved, if any.
    pub user: Option<String>,
    /// Ids of the entries involved.
    pub entry_ids: Vec<i64>,
}

/// Why an operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountError {
    /// Machine-readable class.
    pub code: ErrorCode,
    /// One line for a person, saying what to do.
    pub message: String,
}

impl AccountError {
    /// Builds an error.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        AccountError {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for AccountError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AccountError {}

crate::tagged::code_enum! {
    /// Machine-readable error classes (append only).
    pub enum ErrorCode {
        /// The request's protocol version is not spoken by the server.
        1 => UnsupportedVersion,
        /// The caller's role may not do this.
        2 => Forbidden,
        /// The request could not be decoded or a field is out of range.
        3 => Malformed,
        /// No account for that user.
        4 => UnknownUser,
        /// The account exists already.
        5 => AccountExists,
        /// An amount is zero, negative where it must be positive, over the limit, or overflows.
        6 => InvalidAmount,
        /// The key was used before with different content.
        7 => KeyConflict,
        /// A refund larger than what the node charged for the job.
        8 => RefundTooLarge,
        /// The ledger could not be written or read; retry later.
        9 => Storage,
        /// The server is shutting down or overloaded; retry later.
        10 => Unavailable,
        /// The operation is not known to this server (sent by a newer client).
        11 => Unsupported,
        /// The answer would exceed the frame limit; ask for less.
        12 => TooLarge,
        /// The batch rank was claimed before (by this node or another).
        13 => AlreadyClaimed,
        /// A claim of a job one of whose attempts has already ended on every
        /// rank: a finished job never starts again.
        14 => JobEnded,
    }
}

impl ErrorCode {
    /// Whether a client should retry the same request later.
    pub fn is_retryable(self) -> bool {
        matches!(self, ErrorCode::Storage | ErrorCode::Unavailable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_page_holds_at_most_max_history_page_entries() {
        let entry = LedgerEntry {
            id: 1,
            at_us: 0,
            user: "alice".into(),
            amount: -1,
            kind: EntryKind::Debit,
            key: None,
            rank: None,
            interval: None,
            cpu_us: None,
            actor: "node:n1".into(),
            reason: None,
            balance_after: 0,
        };
        let page = |n: u32| HistoryPage {
            entries: vec![entry.clone(); n as usize],
            next_after: None,
        };
        let full = postcard::to_stdvec(&page(MAX_HISTORY_PAGE)).unwrap();
        assert_eq!(
            postcard::from_bytes::<HistoryPage>(&full).unwrap(),
            page(MAX_HISTORY_PAGE)
        );
        let over = postcard::to_stdvec(&page(MAX_HISTORY_PAGE + 1)).unwrap();
        assert!(postcard::from_bytes::<HistoryPage>(&over).is_err());
    }

    #[test]
    fn request_round_trips_through_postcard() {
        let req = AccountRequest::new(
            9,
            AccountOp::Debit(Debit {
                key: DebitKey {
                    node: "n1".into(),
                    job: "j".into(),
                    seq: 1,
                },
                user: "alice".into(),
                amount: 1_500_000,
                rank: 2,
                interval: MeterInterval {
                    start_us: 10,
                    end_us: 20,
                },
                cpu_us: 10,
            }),
        );
        let bytes = postcard::to_stdvec(&req).unwrap();
        let back: AccountRequest = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, req);
    }

    /// The largest valid debit: every name at 64 bytes, every number at its
    /// longest encoding.
    fn largest_debit(seq: u64) -> Debit {
        let name = "n".repeat(64);
        Debit {
            key: DebitKey {
                node: name.clone(),
                job: name.clone(),
                seq: u64::MAX - seq,
            },
            user: name,
            amount: i64::MIN,
            rank: u32::MAX,
            interval: MeterInterval {
                start_us: u64::MAX,
                end_us: u64::MAX,
            },
            cpu_us: u64::MAX,
        }
    }

    #[test]
    fn a_full_frame_of_the_largest_debits_fits_the_request_limit() {
        let debits = (0..MAX_DEBITS_PER_FRAME as u64)
            .map(largest_debit)
            .collect();
        let req = AccountRequest::new(u64::MAX, AccountOp::Debits(debits));
        let bytes = postcard::to_stdvec(&req).unwrap();
        assert!(
            bytes.len() <= crate::limits::MAX_ACCOUNT_REQUEST,
            "{} bytes",
            bytes.len()
        );
        assert_eq!(postcard::from_bytes::<AccountRequest>(&bytes).unwrap(), req);
    }

    #[test]
    fn charges_round_trip_with_receipts_and_errors_in_order() {
        let receipt = ChargeReceipt {
            entry_id: 4,
            amount: -10,
            balance_after: 90,
            balance_now: 80,
            duplicate: true,
        };
        let resp = AccountResponse {
            id: 2,
            result: Ok(AccountReply::Charges(vec![
                Ok(receipt),
                Err(AccountError::new(ErrorCode::KeyConflict, "differs")),
            ])),
        };
        let bytes = postcard::to_stdvec(&resp).unwrap();
        assert_eq!(
            postcard::from_bytes::<AccountResponse>(&bytes).unwrap(),
            resp
        );
    }

    #[test]
    fn error_response_round_trips() {
        let resp = AccountResponse {
            id: 3,
            result: Err(AccountError::new(ErrorCode::Forbidden, "no")),
        };
        let bytes = postcard::to_stdvec(&resp).unwrap();
        let back: AccountResponse = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, resp);
        assert!(!ErrorCode::Forbidden.is_retryable());
        assert!(ErrorCode::Storage.is_retryable());
    }

    #[test]
    fn unknown_ops_and_codes_from_newer_peers_decode_as_unknown() {
        let bytes = postcard::to_stdvec(&(1u16, 5u64, (999u16, 0u8))).unwrap();
        let req: AccountRequest = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(req.op, AccountOp::Unknown { tag: 999 });
        let code: ErrorCode = postcard::from_bytes(&postcard::to_stdvec(&77u16).unwrap()).unwrap();
        assert_eq!(code, ErrorCode::Unknown(77));
        assert!(!code.is_retryable());
    }

    #[test]
    fn entry_kind_names_round_trip() {
        for k in [
            EntryKind::Grant,
            EntryKind::Adjust,
            EntryKind::Debit,
            EntryKind::Refund,
        ] {
            assert_eq!(EntryKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(EntryKind::parse("nope"), None);
    }
}
