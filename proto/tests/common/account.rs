//! Proptest strategies for the account-service messages: every
//! [`AccountOp`] and [`AccountReply`] variant, error responses with known and
//! unknown codes, and the nested structs they carry. Only sendable values are
//! produced (never an `Unknown { tag }` message, which cannot be encoded).

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proto::account::*;

use super::text;

pub fn debit_key() -> impl Strategy<Value = DebitKey> {
    (text(), text(), any::<u64>()).prop_map(|(node, job, seq)| DebitKey { node, job, seq })
}

pub fn interval() -> impl Strategy<Value = MeterInterval> {
    (any::<u64>(), any::<u64>()).prop_map(|(start_us, end_us)| MeterInterval { start_us, end_us })
}

pub fn admin_entry() -> impl Strategy<Value = AdminEntry> {
    (text(), any::<i64>(), text()).prop_map(|(user, amount, reason)| AdminEntry {
        user,
        amount,
        reason,
    })
}

/// Any debit.
pub fn debit() -> impl Strategy<Value = Debit> {
    (
        debit_key(),
        text(),
        any::<i64>(),
        any::<u32>(),
        interval(),
        any::<u64>(),
    )
        .prop_map(|(key, user, amount, rank, interval, cpu_us)| Debit {
            key,
            user,
            amount,
            rank,
            interval,
            cpu_us,
        })
}

/// Every operation, with any `ReportBy` code (known or not).
pub fn account_op() -> impl Strategy<Value = AccountOp> {
    let refund =
        (debit_key(), text(), any::<i64>(), text()).prop_map(|(key, user, amount, reason)| {
            AccountOp::Refund(Refund {
                key,
                user,
                amount,
                reason,
            })
        });
    let history = (
        option::of(text()),
        option::of(any::<i64>()),
        option::of(any::<i64>()),
        option::of(any::<i64>()),
        any::<u32>(),
    )
        .prop_map(|(user, since_us, until_us, after_id, limit)| {
            AccountOp::History(HistoryQuery {
                user,
                since_us,
                until_us,
                after_id,
                limit,
            })
        });
    let report = (
        any::<u16>(),
        option::of(any::<i64>()),
        option::of(any::<i64>()),
    )
        .prop_map(|(by, since_us, until_us)| {
            AccountOp::Report(ReportQuery {
                by: ReportBy::from(by),
                since_us,
                until_us,
            })
        });
    prop_oneof![
        debit().prop_map(AccountOp::Debit),
        // Any count, also none or more than a frame may carry (the server refuses those).
        vec(debit(), 0..4).prop_map(AccountOp::Debits),
        refund,
        option::of(text()).prop_map(|user| AccountOp::Balance(BalanceQuery { user })),
        history,
        (text(), any::<i64>())
            .prop_map(|(user, initial)| AccountOp::CreateAccount(CreateAccount { user, initial })),
        admin_entry().prop_map(AccountOp::Grant),
        admin_entry().prop_map(AccountOp::Adjust),
        report,
        Just(AccountOp::Audit),
        Just(AccountOp::WhoAmI),
        (
            text(),
            super::job_id(),
            any::<u32>(),
            any::<u32>(),
            any::<[u8; 32]>()
        )
            .prop_map(
                |(user, job, attempt, rank, digest)| AccountOp::Claim(Claim {
                    user,
                    job,
                    attempt,
                    rank,
                    digest,
                })
            ),
        Just(AccountOp::Head),
        super::project::project_op().prop_map(AccountOp::Project),
        any::<u32>().prop_map(|hours| AccountOp::Spend(proto::spend::SpendQuery { hours })),
        (
            text(),
            super::job_id(),
            any::<u32>(),
            any::<u32>(),
            any::<[u8; 32]>(),
            any::<u32>()
        )
            .prop_map(|(user, job, attempt, rank, digest, width)| {
                AccountOp::RankEnd(RankEnd {
                    claim: Claim {
                        user,
                        job,
                        attempt,
                        rank,
                        digest,
                    },
                    width,
                })
            }),
    ]
}

/// Requests at any protocol version, not only the current one.
pub fn account_request() -> impl Strategy<Value = AccountRequest> {
    (any::<u16>(), any::<u64>(), account_op()).prop_map(|(version, id, op)| AccountRequest {
        version,
        id,
        op,
    })
}

pub fn account_balance() -> impl Strategy<Value = AccountBalance> {
    (text(), any::<i64>()).prop_map(|(user, balance)| AccountBalance { user, balance })
}

pub fn ledger_entry() -> impl Strategy<Value = LedgerEntry> {
    (
        (
            any::<i64>(),
            any::<i64>(),
            text(),
            any::<i64>(),
            any::<u16>(),
        ),
        (
            option::of(debit_key()),
            option::of(any::<u32>()),
            option::of(interval()),
            option::of(any::<u64>()),
        ),
        (text(), option::of(text()), any::<i64>()),
    )
        .prop_map(
            |(
                (id, at_us, user, amount, kind),
                (key, rank, interval, cpu_us),
                (actor, reason, balance_after),
            )| LedgerEntry {
                id,
                at_us,
                user,
                amount,
                kind: EntryKind::from(kind),
                key,
                rank,
                interval,
                cpu_us,
                actor,
                reason,
                balance_after,
            },
        )
}

/// A spend summary within the decoder's bounds.
pub fn hourly_spend() -> impl Strategy<Value = proto::spend::HourlySpend> {
    (
        any::<i64>(),
        any::<u32>(),
        vec(
            (text(), vec(any::<i64>(), 0..5))
                .prop_map(|(project, charged)| proto::spend::ProjectSpend { project, charged }),
            0..3,
        ),
        any::<u64>(),
    )
        .prop_map(
            |(first_hour_us, hours, projects, more)| proto::spend::HourlySpend {
                first_hour_us,
                hours,
                projects,
                more,
            },
        )
}

pub fn report_row() -> impl Strategy<Value = ReportRow> {
    (text(), any::<i64>(), any::<u64>(), any::<u64>()).prop_map(|(key, charged, cpu_us, jobs)| {
        ReportRow {
            key,
            charged,
            cpu_us,
            jobs,
        }
    })
}

pub fn audit_problem() -> impl Strategy<Value = AuditProblem> {
    (text(), option::of(text()), vec(any::<i64>(), 0..4)).prop_map(|(what, user, entry_ids)| {
        AuditProblem {
            what,
            user,
            entry_ids,
        }
    })
}

/// Any charge receipt.
pub fn charge_receipt() -> impl Strategy<Value = ChargeReceipt> {
    (
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        any::<bool>(),
    )
        .prop_map(
            |(entry_id, amount, balance_after, balance_now, duplicate)| ChargeReceipt {
                entry_id,
                amount,
                balance_after,
                balance_now,
                duplicate,
            },
        )
}

/// Every reply variant.
pub fn account_reply() -> impl Strategy<Value = AccountReply> {
    prop_oneof![
        charge_receipt().prop_map(AccountReply::Charged),
        vec(
            prop_oneof![charge_receipt().prop_map(Ok), account_error().prop_map(Err)],
            0..4
        )
        .prop_map(AccountReply::Charges),
        account_balance().prop_map(AccountReply::Balance),
        (vec(ledger_entry(), 0..4), option::of(any::<i64>())).prop_map(|(entries, next_after)| {
            AccountReply::History(HistoryPage {
                entries,
                next_after,
            })
        }),
        (any::<i64>(), any::<i64>()).prop_map(|(entry_id, balance_after)| {
            AccountReply::Entry(EntryReceipt {
                entry_id,
                balance_after,
            })
        }),
        account_balance().prop_map(AccountReply::Created),
        vec(report_row(), 0..4).prop_map(AccountReply::Report),
        (any::<u64>(), any::<u64>(), vec(audit_problem(), 0..4)).prop_map(
            |(accounts, entries, problems)| AccountReply::Audit(AuditReport {
                accounts,
                entries,
                problems,
            })
        ),
        (text(), text()).prop_map(|(role, name)| AccountReply::WhoAmI(Identity { role, name })),
        Just(AccountReply::Claimed),
        Just(AccountReply::Ended),
        super::project::project_reply().prop_map(AccountReply::Project),
        hourly_spend().prop_map(AccountReply::Spend),
        option::of(
            (
                any::<i64>(),
                vec(any::<u8>(), 0..40),
                any::<i64>(),
                vec(any::<u8>(), 0..80),
                vec(any::<u8>(), 0..80)
            )
                .prop_map(|(id, hash, at_us, signature, cert)| SignedHead {
                    id,
                    hash,
                    at_us,
                    signature,
                    cert,
                })
        )
        .prop_map(AccountReply::Head),
    ]
}

/// Any error code (known or not) with a message.
pub fn account_error() -> impl Strategy<Value = AccountError> {
    prop_oneof![
        (proptest::sample::select(ErrorCode::ALL), text()),
        (any::<u16>().prop_map(ErrorCode::from), text()),
    ]
    .prop_map(|(code, message)| AccountError::new(code, message))
}

/// Successful and failed responses, about one in three an error.
pub fn account_response() -> impl Strategy<Value = AccountResponse> {
    let result = prop_oneof![
        2 => account_reply().prop_map(Ok),
        1 => account_error().prop_map(Err),
    ];
    (any::<u64>(), result).prop_map(|(id, result)| AccountResponse { id, result })
}
