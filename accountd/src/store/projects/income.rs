//! A project's income: set by admins, granted once per period by the
//! writer's tick under the key `income/PROJECT/grant/n`, never above the cap
//! (see the parent module's docs).

use proto::account::{AccountError, DebitKey, EntryKind, ErrorCode, LedgerEntry};
use proto::project::{ProjectReply, SetIncome};

use super::{Doc, INCOME_NODE, PROJECT, Rows, info, is_admin, ledger, need, refuse, save};
use crate::validate::check_positive;

pub(super) fn set_income(
    db: &mut dyn Rows,
    s: &SetIncome,
    actor: &str,
    now_us: i64,
    max: i64,
) -> Result<ProjectReply, AccountError> {
    if !is_admin(actor) {
        return Err(refuse(
            ErrorCode::Forbidden,
            format!("{actor} may not set income: only admins may"),
        ));
    }
    let mut doc = need(db, &s.project)?;
    let i = &s.income;
    if i.amount != 0 {
        check_positive(i.amount, max)?;
    }
    if i.every_us < 1_000_000 {
        return Err(refuse(
            ErrorCode::InvalidAmount,
            "an income period is at least one second".into(),
        ));
    }
    if i.cap.is_some_and(|c| c <= 0) {
        return Err(refuse(
            ErrorCode::InvalidAmount,
            "an income cap must be positive".into(),
        ));
    }
    doc.income = (i.amount > 0).then(|| i.clone());
    save(db, &s.project, &doc)?;
    info(db, &s.project, &doc, now_us).map(ProjectReply::Project)
}

/// Grants each project's income that is due now; returns the entries written.
pub(super) fn tick(
    db: &mut dyn Rows,
    actor: &str,
    now_us: i64,
    max: i64,
) -> Result<Vec<LedgerEntry>, AccountError> {
    let mut out = Vec::new();
    for (key, text) in db.docs(PROJECT)? {
        let Some(name) = key.strip_prefix(PROJECT) else {
            continue;
        };
        let Ok(doc) = serde_json::from_str::<Doc>(&text) else {
            continue;
        };
        let Some(inc) = doc.income else { continue };
        let period = now_us.div_euclid(inc.every_us.max(1));
        let Ok(seq) = u64::try_from(period) else {
            continue;
        };
        let key = DebitKey {
            node: INCOME_NODE.into(),
            job: name.to_string(),
            seq,
        };
        if db
            .charge_by_key(&ledger::key_text(EntryKind::Grant, &key))?
            .is_some()
        {
            continue;
        }
        let balance = db.balance_of(name)?.unwrap_or(0);
        let room = inc.cap.map_or(i64::MAX, |c| c.saturating_sub(balance));
        let amount = inc.amount.min(room).min(max);
        if amount <= 0 {
            continue;
        }
        let reason = format!("income for period {period}");
        if let Some(r) = ledger::keyed_grant(db, name, amount, &key, &reason, actor, now_us)? {
            out.push(LedgerEntry {
                id: r.entry_id,
                at_us: now_us,
                user: name.to_string(),
                amount,
                kind: EntryKind::Grant,
                key: Some(key),
                rank: None,
                interval: None,
                cpu_us: None,
                actor: actor.to_string(),
                reason: Some(reason),
                balance_after: r.balance_after,
            });
        }
    }
    Ok(out)
}
