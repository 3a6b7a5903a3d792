//! A project's members: who they are (added and removed by admins and the
//! project's admin), each user's default project, the member limits per
//! calendar period that a member's debit is held to, and which account a
//! user's job pays from ([`ProjectOp::Resolve`](proto::project::ProjectOp)).

use proto::account::{AccountError, ChargeReceipt, EntryKind, ErrorCode};
use proto::project::{
    ChangeMembers, ChargedAccount, LimitPeriod, ProjectDebit, ProjectReply, SetDefault,
    WhichAccount,
};

use super::{
    DAY_US, DEFAULT, Member, Rows, SPENT_BY, burn::burn, info, is_admin, ledger, manages, need,
    refuse, save,
};
use crate::validate::{check_name, check_positive};

pub(super) fn members(
    db: &mut dyn Rows,
    m: &ChangeMembers,
    actor: &str,
    now_us: i64,
    max: i64,
) -> Result<ProjectReply, AccountError> {
    let mut doc = need(db, &m.project)?;
    if !manages(actor, &doc) {
        return Err(refuse(
            ErrorCode::Forbidden,
            format!(
                "{actor} may not change the members of {:?}: only admins and the project's admin may",
                m.project
            ),
        ));
    }
    for u in m.add.iter().chain(&m.remove) {
        check_name("user", u)?;
    }
    for u in &m.add {
        doc.members.entry(u.clone()).or_default();
    }
    for u in &m.remove {
        doc.members.remove(u);
    }
    for (u, limit) in &m.limits {
        if let Some(l) = limit {
            check_positive(l.amount, max)?;
        }
        let member = doc.members.get_mut(u).ok_or_else(|| {
            refuse(
                ErrorCode::UnknownUser,
                format!("{u:?} is not a member of {:?}: add it first", m.project),
            )
        })?;
        member.limit = *limit;
    }
    // Every check is done: the writes follow.
    for u in &m.remove {
        let key = format!("{DEFAULT}{u}");
        if db.doc(&key)?.as_deref() == Some(m.project.as_str()) {
            db.put_doc(&key, "")?;
        }
    }
    save(db, &m.project, &doc)?;
    info(db, &m.project, &doc, now_us).map(ProjectReply::Project)
}

pub(super) fn set_default(
    db: &mut dyn Rows,
    d: &SetDefault,
    actor: &str,
) -> Result<(), AccountError> {
    check_name("user", &d.user)?;
    if !is_admin(actor) && actor != format!("user:{}", d.user) {
        return Err(refuse(
            ErrorCode::Forbidden,
            format!(
                "{actor} may not set the default project of {:?}: only admins and the user may",
                d.user
            ),
        ));
    }
    if let Some(p) = &d.project {
        let doc = need(db, p)?;
        if !doc.members.contains_key(&d.user) {
            return Err(not_member(&d.user, p));
        }
    }
    db.put_doc(
        &format!("{DEFAULT}{}", d.user),
        d.project.as_deref().unwrap_or(""),
    )
}

pub(super) fn not_member(user: &str, project: &str) -> AccountError {
    refuse(
        ErrorCode::Forbidden,
        format!("{user} is not a member of project {project}: its admin can add them"),
    )
}

pub(super) fn debit(
    db: &mut dyn Rows,
    pd: &ProjectDebit,
    actor: &str,
    now_us: i64,
    max: i64,
) -> Result<ChargeReceipt, AccountError> {
    let d = &pd.debit;
    check_name("user", &d.user)?;
    let mut doc = need(db, &pd.project)?;
    let reason = format!("{SPENT_BY}{}", d.user);
    let account = Some((pd.project.as_str(), reason.as_str()));
    // A repeat is answered as the first charge was, limits or not.
    if db
        .charge_by_key(&ledger::key_text(EntryKind::Debit, &d.key))?
        .is_some()
    {
        return ledger::debit_from(db, d, account, actor, now_us, max);
    }
    let member = doc
        .members
        .get_mut(&d.user)
        .ok_or_else(|| not_member(&d.user, &pd.project))?;
    if let Some(l) = member.limit {
        let spent = spent_now(member, now_us);
        let total = spent.checked_add(d.amount).unwrap_or(i64::MAX);
        if total > l.amount {
            return Err(refuse(
                ErrorCode::Forbidden,
                format!(
                    "{} has spent {} of its {}/{} limit in project {}; this charge of {} is over it",
                    d.user,
                    money::format_credits(spent),
                    money::format_credits(l.amount),
                    l.period.as_str(),
                    pd.project,
                    money::format_credits(d.amount),
                ),
            ));
        }
        member.period = period_index(l.period, now_us);
        member.spent = total;
    }
    let receipt = ledger::debit_from(db, d, account, actor, now_us, max)?;
    if doc.members[&d.user].limit.is_some() {
        save(db, &pd.project, &doc)?;
    }
    Ok(receipt)
}

/// The account a user's job is charged to: the project asked for, else the
/// user's default project, else the personal account.
pub(super) fn resolve(
    db: &mut dyn Rows,
    w: &WhichAccount,
    now_us: i64,
) -> Result<ChargedAccount, AccountError> {
    check_name("user", &w.user)?;
    let project = match &w.project {
        Some(p) => Some(p.clone()),
        None => db
            .doc(&format!("{DEFAULT}{}", w.user))?
            .filter(|p| !p.is_empty()),
    };
    let Some(p) = project else {
        let b = super::super::query::balance(db, &w.user)?;
        let burn_per_day = w.burn.then(|| burn(db, &w.user, now_us)).transpose()?;
        return Ok(ChargedAccount {
            project: None,
            balance: b.balance,
            max_cost_per_job: None,
            burn_per_day,
        });
    };
    let doc = need(db, &p)?;
    let m = doc
        .members
        .get(&w.user)
        .ok_or_else(|| not_member(&w.user, &p))?;
    let mut balance = db.balance_of(&p)?.unwrap_or(0);
    if let Some(l) = m.limit {
        balance = balance.min(l.amount - spent_now(m, now_us));
    }
    let burn_per_day = w.burn.then(|| burn(db, &p, now_us)).transpose()?;
    Ok(ChargedAccount {
        project: Some(p),
        balance,
        max_cost_per_job: doc.max_cost_per_job,
        burn_per_day,
    })
}

/// The index of the calendar period (UTC) of `period` that holds `now_us`.
pub fn period_index(period: LimitPeriod, now_us: i64) -> i64 {
    let day = now_us.div_euclid(DAY_US);
    match period {
        LimitPeriod::Day => day,
        // 1970-01-01 was a Thursday: day 4 is the first Monday... minus 7.
        LimitPeriod::Week => (day + 3).div_euclid(7),
        LimitPeriod::Month => {
            let t = time::OffsetDateTime::from_unix_timestamp(now_us.div_euclid(1_000_000))
                .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
            i64::from(t.year()) * 12 + i64::from(u8::from(t.month())) - 1
        }
    }
}

/// What `m` spent in the limit's period that holds `now_us`.
pub(super) fn spent_now(m: &Member, now_us: i64) -> i64 {
    match m.limit {
        Some(l) if m.period == period_index(l.period, now_us) => m.spent,
        _ => 0,
    }
}
