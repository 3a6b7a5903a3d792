//! Who pays for a rank (its project's account or its owner's) and running
//! dry: the ranks a payer out of credit keeps running at bid 0, and the
//! notices a rank gets when that happens and when credit is back.

use std::time::Instant;

use money::Bid;
use proto::node::{JobId, Notice, NoticeKind};
use tokio::sync::mpsc;

use super::{Book, Key, RankState};
use crate::control::Control;

impl RankState {
    /// The account it is charged to: its project's, else its owner's.
    pub fn payer(&self) -> &str {
        self.account.as_deref().unwrap_or(&self.owner)
    }
}

impl Book {
    /// Charges rank `key` to project `account` (for its owner, a member) rather
    /// than to its owner's personal account.
    pub fn set_account(&mut self, key: &Key, account: String) {
        if let Some(r) = self.ranks.get_mut(key) {
            r.account = Some(account);
        }
    }

    /// Marks every rank that `payer` pays for (a user's personal account or a
    /// project) out of credit; returns the control queues of the ranks that were
    /// not already (each gets one notice).
    pub fn run_dry(&mut self, payer: &str) -> Vec<(Key, mpsc::Sender<Control>)> {
        self.run_dry_if(|r| r.payer() == payer)
    }

    /// Marks every rank `owner` runs on project `project`'s account out of
    /// credit (the project refused that member's charge: its limit, or it is no
    /// member any more); returns the control queues as [`Book::run_dry`].
    pub fn run_dry_member(
        &mut self,
        project: &str,
        owner: &str,
    ) -> Vec<(Key, mpsc::Sender<Control>)> {
        self.run_dry_if(|r| r.account.as_deref() == Some(project) && r.owner == owner)
    }

    fn run_dry_if(
        &mut self,
        pays: impl Fn(&RankState) -> bool,
    ) -> Vec<(Key, mpsc::Sender<Control>)> {
        self.accrue_all(Instant::now());
        let mut newly = Vec::new();
        for (key, r) in self.ranks.iter_mut() {
            if pays(r) && !r.dry && !r.bid.is_zero() && !r.batch {
                r.dry = true;
                newly.push((*key, r.control.clone()));
            }
        }
        if !newly.is_empty() {
            self.changed();
            self.recompute();
        }
        newly
    }
}

/// The notice a rank gets when its owner runs dry on this node.
pub fn dry_notice(node: &str, user: &str, job: JobId, balance: i64) -> Control {
    Control::Notice(Notice {
        kind: NoticeKind::OutOfCredit,
        text: format!(
            "node {node}: {user} is out of credit (balance {}); job {job} keeps running at bid 0 \
             on CPU nobody else wants; after a grant, `rexec bid {job} RATE` restores the bid",
            money::format_credits(balance)
        ),
    })
}

/// The notice a dry rank gets when a re-bid restores its bid.
pub fn restored_notice(node: &str, bid: Bid) -> Control {
    Control::Notice(Notice {
        kind: NoticeKind::CreditRestored,
        text: format!(
            "node {node}: credit restored; the job bids {} credits per minute again",
            money::format_credits(bid.micros_per_minute())
        ),
    })
}
