//! A rank's spending ceiling (its share of the job's `--max-cost`): setting it,
//! and dropping a rank to bid 0 for good once its charges reach it.

use tokio::sync::mpsc;

use super::{Book, Key};
use crate::control::Control;
use proto::node::{Notice, NoticeKind};

impl Book {
    /// Sets the most rank `key` may be charged, micro-credits (its share of the job's
    /// spending ceiling); checked at every tick ([`Book::reach_ceilings`]).
    pub fn set_ceiling(&mut self, key: &Key, ceiling: i64) {
        if let Some(r) = self.ranks.get_mut(key) {
            r.ceiling = Some(ceiling);
        }
    }

    /// Drops to bid 0, for good, every rank whose charges reached its ceiling; returns
    /// each such rank newly capped with what it was charged, its ceiling and its
    /// control queue (each gets one notice).
    pub fn reach_ceilings(&mut self) -> Vec<(Key, i64, i64, mpsc::Sender<Control>)> {
        let mut newly = Vec::new();
        for (key, r) in self.ranks.iter_mut() {
            let Some(ceiling) = r.ceiling else { continue };
            if r.capped || r.batch || r.bid.is_zero() || r.meter.total() < ceiling {
                continue;
            }
            r.capped = true;
            newly.push((*key, r.meter.total(), ceiling, r.control.clone()));
        }
        if !newly.is_empty() {
            self.changed();
            self.recompute();
        }
        newly
    }
}

/// The notice a rank gets when its charges reach its share of the job's ceiling.
pub fn ceiling_notice(node: &str, key: Key, charged: i64, ceiling: i64) -> Control {
    let (job, rank) = key;
    Control::Notice(Notice {
        kind: NoticeKind::CostLimit,
        text: format!(
            "node {node}: job {job} reached its spending ceiling (rank {rank} was charged {} of \
             its {} credits); it keeps running at bid 0, where it is free",
            money::format_credits(charged),
            money::format_credits(ceiling)
        ),
    })
}
