//! Proptest strategies for the project messages carried by
//! `AccountOp::Project` and `AccountReply::Project`: every [`ProjectOp`] and
//! [`ProjectReply`] variant (never an `Unknown { tag }`).

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proto::project::*;

use super::account::{charge_receipt, debit, ledger_entry, report_row};
use super::text;

fn limit() -> impl Strategy<Value = MemberLimit> {
    (
        any::<i64>(),
        prop_oneof![
            Just(LimitPeriod::Day),
            Just(LimitPeriod::Week),
            Just(LimitPeriod::Month)
        ],
    )
        .prop_map(|(amount, period)| MemberLimit { amount, period })
}

fn income() -> impl Strategy<Value = Income> {
    (any::<i64>(), any::<i64>(), option::of(any::<i64>())).prop_map(|(amount, every_us, cap)| {
        Income {
            amount,
            every_us,
            cap,
        }
    })
}

fn grouping() -> impl Strategy<Value = ProjectGrouping> {
    prop_oneof![
        Just(ProjectGrouping::Account),
        Just(ProjectGrouping::User),
        Just(ProjectGrouping::Node),
        Just(ProjectGrouping::Day),
    ]
}

/// Every project operation.
pub fn project_op() -> impl Strategy<Value = ProjectOp> {
    prop_oneof![
        (text(), vec(text(), 0..3), option::of(text())).prop_map(|(name, members, admin)| {
            ProjectOp::Create(CreateProject {
                name,
                members,
                admin,
            })
        }),
        (
            text(),
            vec(text(), 0..3),
            vec(text(), 0..3),
            vec((text(), option::of(limit())), 0..3)
        )
            .prop_map(
                |(project, add, remove, limits)| ProjectOp::Members(ChangeMembers {
                    project,
                    add,
                    remove,
                    limits,
                })
            ),
        (text(), option::of(text()))
            .prop_map(|(user, project)| ProjectOp::Default(SetDefault { user, project })),
        (text(), income())
            .prop_map(|(project, income)| ProjectOp::Income(SetIncome { project, income })),
        (text(), debit())
            .prop_map(|(project, debit)| ProjectOp::Debit(ProjectDebit { project, debit })),
        Just(ProjectOp::List),
        (text(), option::of(text()), any::<bool>()).prop_map(|(user, project, burn)| {
            ProjectOp::Resolve(WhichAccount {
                user,
                project,
                burn,
            })
        }),
        (
            grouping(),
            option::of(any::<i64>()),
            option::of(any::<i64>())
        )
            .prop_map(|(by, since_us, until_us)| ProjectOp::Report(ProjectReport {
                by,
                since_us,
                until_us
            })),
        Just(ProjectOp::Forecast),
        Just(ProjectOp::Tick),
        (text(), option::of(any::<i64>())).prop_map(|(project, max_cost_per_job)| {
            ProjectOp::Ceiling(SetCeiling {
                project,
                max_cost_per_job,
            })
        }),
    ]
}

fn info() -> impl Strategy<Value = ProjectInfo> {
    (
        text(),
        any::<i64>(),
        option::of(text()),
        vec((text(), option::of(limit()), any::<i64>()), 0..3),
        option::of(income()),
    )
        .prop_map(|(name, balance, admin, members, income)| ProjectInfo {
            name,
            balance,
            admin,
            members,
            income,
        })
}

/// Every project reply.
pub fn project_reply() -> impl Strategy<Value = ProjectReply> {
    prop_oneof![
        info().prop_map(ProjectReply::Project),
        Just(ProjectReply::Done),
        charge_receipt().prop_map(ProjectReply::Charged),
        vec(info(), 0..3).prop_map(ProjectReply::Projects),
        (
            option::of(text()),
            any::<i64>(),
            option::of(any::<i64>()),
            option::of(any::<i64>())
        )
            .prop_map(|(project, balance, max_cost_per_job, burn_per_day)| {
                ProjectReply::Account(ChargedAccount {
                    project,
                    balance,
                    max_cost_per_job,
                    burn_per_day,
                })
            }),
        vec(report_row(), 0..3).prop_map(ProjectReply::Report),
        vec(
            (text(), any::<i64>(), any::<i64>(), option::of(any::<i64>())).prop_map(
                |(project, balance, burn_per_day, dry_at_us)| ForecastRow {
                    project,
                    balance,
                    burn_per_day,
                    dry_at_us,
                }
            ),
            0..3
        )
        .prop_map(ProjectReply::Forecast),
        vec(ledger_entry(), 0..2).prop_map(ProjectReply::Granted),
    ]
}
