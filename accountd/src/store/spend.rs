//! The spend summary the market page's ledger panel shows
//! ([`proto::account::AccountOp::Spend`]): each project's net charge
//! (debits minus refunds, as `accountctl report --by project` counts them)
//! in each of the last whole UTC hours, the current one included. It reads
//! only the projects' own entries in the window (the history index by
//! account and time), page by page, and answers aggregates: no member, node
//! or balance leaves accountd through it.

use std::collections::BTreeMap;

use proto::account::{AccountError, EntryKind, ErrorCode, MAX_HISTORY_PAGE};
use proto::spend::{HOUR_US, HourlySpend, MAX_SPEND_HOURS, MAX_SPEND_PROJECTS, ProjectSpend};

use super::rows::Rows;

/// The last `hours` hours as of `now_us`: each project's spend per hour.
pub fn hourly(db: &mut dyn Rows, hours: u32, now_us: i64) -> Result<HourlySpend, AccountError> {
    if !(1..=MAX_SPEND_HOURS).contains(&hours) {
        return Err(AccountError::new(
            ErrorCode::Malformed,
            format!("a spend summary covers 1 to {MAX_SPEND_HOURS} hours, not {hours}"),
        ));
    }
    let current = now_us - now_us.rem_euclid(HOUR_US);
    let first = current - i64::from(hours - 1) * HOUR_US;
    let until = current.saturating_add(HOUR_US);
    let mut spent: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for project in super::projects::names(db)? {
        let mut after = 0;
        loop {
            let page = db.history(&project, after, first, until, i64::from(MAX_HISTORY_PAGE))?;
            for e in &page {
                if !matches!(e.kind, EntryKind::Debit | EntryKind::Refund) {
                    continue;
                }
                let hour = usize::try_from((e.at_us - first).div_euclid(HOUR_US)).ok();
                let Some(hour) = hour.filter(|h| *h < hours as usize) else {
                    continue;
                };
                let row = spent
                    .entry(project.clone())
                    .or_insert_with(|| vec![0; hours as usize]);
                // Stored amounts are effects on the balance: a debit is negative.
                row[hour] = row[hour].saturating_sub(e.amount);
            }
            match page.last() {
                Some(last) if page.len() == MAX_HISTORY_PAGE as usize => after = last.id,
                _ => break,
            }
        }
    }
    let mut projects: Vec<ProjectSpend> = spent
        .into_iter()
        .map(|(project, charged)| ProjectSpend { project, charged })
        .collect();
    projects.sort_by(|a, b| b.total().cmp(&a.total()).then(a.project.cmp(&b.project)));
    let more = projects.len().saturating_sub(MAX_SPEND_PROJECTS) as u64;
    projects.truncate(MAX_SPEND_PROJECTS);
    Ok(HourlySpend {
        first_hour_us: first,
        hours,
        projects,
        more,
    })
}
