//! The ends of signed batch ranks, on their way to accountd: when a rank this node
//! claimed has exited, its end ([`proto::account::RankEnd`]) is written to a file
//! beside the rank's started marker (`<marker>.end`, fsynced with its directory)
//! before the queue is told the exit, and [`deliver`] sends every such file to
//! accountd, in the background, until accountd has recorded it; only then is the
//! file removed. accountd answers a repeat as the first, so a file whose answer was
//! lost is simply sent again. A rexecd restart finds the files still there and
//! sends them; while accountd is away, they wait, retried with backoff. An end
//! accountd refuses for good (it cannot be: this node claimed the rank) is kept as
//! `<marker>.end-refused` for the admin and logged.
//!
//! Once every rank of an attempt has ended, accountd refuses any later claim of the
//! job (see `accountd::store::claims`), so a finished job never starts again.

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use proto::account::{Claim, RankEnd};
use tokio::sync::watch;

use super::{MarkerError, StartedRanks};
use crate::market::Market;
use crate::market::credit::EndNotRecorded;

/// First wait before sending again after accountd could not take an end.
const BACKOFF_MIN: Duration = Duration::from_millis(200);
/// Longest wait between tries.
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// What an end file starts with (its format's version).
const MAGIC: &str = "rexec-rank-end-v1";
const SUFFIX: &str = ".end";

/// One line: the magic, user, job, attempt, rank, width and digest (hex).
fn encode(e: &RankEnd) -> String {
    let c = &e.claim;
    let digest: String = c.digest.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{MAGIC} {} {} {} {} {} {digest}\n",
        c.user, c.job, c.attempt, c.rank, e.width
    )
}

fn decode(text: &str) -> Option<RankEnd> {
    let mut f = text.split_whitespace();
    if f.next()? != MAGIC {
        return None;
    }
    let user = f.next()?.to_string();
    let job = f.next()?.parse().ok()?;
    let attempt = f.next()?.parse().ok()?;
    let rank = f.next()?.parse().ok()?;
    let width = f.next()?.parse().ok()?;
    let hex = f.next()?;
    if hex.len() != 64 || f.next().is_some() {
        return None;
    }
    let mut digest = [0u8; 32];
    for (i, b) in digest.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(RankEnd {
        claim: Claim {
            user,
            job,
            attempt,
            rank,
            digest,
        },
        width,
    })
}

impl StartedRanks {
    fn end_path(&self, c: &Claim) -> PathBuf {
        self.dir.join(format!(
            "{}+{}+{}+{}{SUFFIX}",
            c.user, c.job, c.attempt, c.rank
        ))
    }

    /// Records, durably, that the rank `end` names ended, for [`deliver`] to send;
    /// blocking. A second record of the same rank changes nothing.
    pub fn record_end(&self, end: &RankEnd) -> Result<(), MarkerError> {
        if self.write_once(&self.end_path(&end.claim), &encode(end))? {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// The ends not yet recorded by accountd, with their files; blocking. A file
    /// that does not read as an end (cut short by a crash before its fsync) is
    /// logged and left alone.
    pub fn pending_ends(&self) -> Vec<(PathBuf, RankEnd)> {
        let Ok(dir) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in dir.flatten() {
            let path = entry.path();
            if !path.to_string_lossy().ends_with(SUFFIX) {
                continue;
            }
            match fs::read_to_string(&path).ok().as_deref().and_then(decode) {
                Some(end) => out.push((path, end)),
                None => tracing::warn!(path = %path.display(),
                    "not a rank's end record; left as it is"),
            }
        }
        out
    }
}

/// One pass over the pending ends; whether one had to be left for later
/// (accountd away: the rest wait too, in order).
async fn pass(started: &StartedRanks, market: &Market, said_later: &mut bool) -> bool {
    let listing = started.clone();
    let pending = tokio::task::spawn_blocking(move || listing.pending_ends())
        .await
        .unwrap_or_default();
    for (path, end) in pending {
        let c = &end.claim;
        match market.record_end(end.clone()).await {
            Ok(()) => {
                tracing::debug!(user = %c.user, job = %c.job, attempt = c.attempt,
                    rank = c.rank, "accountd recorded the rank's end");
                let _ = tokio::task::spawn_blocking(move || fs::remove_file(path)).await;
                *said_later = false;
            }
            Err(EndNotRecorded::Refused(why)) => {
                tracing::error!(user = %c.user, job = %c.job, attempt = c.attempt,
                    rank = c.rank, %why, "accountd refused the end of a rank this node claimed; \
                    kept as .end-refused");
                let mut kept = path.clone().into_os_string();
                kept.push("-refused");
                let _ = tokio::task::spawn_blocking(move || fs::rename(path, kept)).await;
            }
            Err(EndNotRecorded::Later(why)) => {
                if !*said_later {
                    tracing::warn!(%why, "cannot record a batch rank's end at accountd yet; \
                        kept and sent again");
                    *said_later = true;
                }
                return true;
            }
        }
    }
    false
}

/// Sends the ends [`StartedRanks::record_end`] keeps to accountd until each is
/// recorded there (see the module doc); returns when `stop` turns true.
pub async fn deliver(started: StartedRanks, market: Arc<Market>, mut stop: watch::Receiver<bool>) {
    let mut backoff = BACKOFF_MIN;
    let mut said_later = false;
    loop {
        let wait = if pass(&started, &market, &mut said_later).await {
            let w = backoff;
            backoff = (backoff * 2).min(BACKOFF_MAX);
            Some(w)
        } else {
            backoff = BACKOFF_MIN;
            None
        };
        tokio::select! {
            () = started.wake.notified() => {}
            () = tokio::time::sleep(wait.unwrap_or(BACKOFF_MAX)), if wait.is_some() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// At shutdown, once every rank has ended: one last pass, at most `grace`; what
/// accountd did not take stays on disk for the next start.
pub async fn flush(started: &StartedRanks, market: &Market, grace: Duration) {
    let mut said_later = false;
    let _ = tokio::time::timeout(grace, pass(started, market, &mut said_later)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end() -> RankEnd {
        RankEnd {
            claim: Claim {
                user: "alice".into(),
                job: proto::node::JobId(0xab),
                attempt: 2,
                rank: 1,
                digest: [0x5a; 32],
            },
            width: 3,
        }
    }

    #[test]
    fn an_end_is_kept_on_disk_until_sent_and_a_repeat_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("started");
        let (s, _) = StartedRanks::open(&at, std::time::SystemTime::now()).unwrap();
        s.record_end(&end()).unwrap();
        s.record_end(&end()).unwrap();
        let pending = s.pending_ends();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].1, end());
        // A restart (a new open, which prunes expired markers) keeps it.
        let (again, _) = StartedRanks::open(&at, std::time::SystemTime::now()).unwrap();
        assert_eq!(again.pending_ends().len(), 1);
        // A torn file is not taken for an end.
        fs::write(at.join("bob+1+0+0.end"), "rexec-rank-end-v1 bob").unwrap();
        assert_eq!(again.pending_ends().len(), 1);
    }

    #[test]
    fn the_format_round_trips_and_refuses_garbage() {
        assert_eq!(decode(&encode(&end())), Some(end()));
        assert_eq!(
            decode("rexec-rank-end-v1 a 0000000000000001 0 0 1 zz"),
            None
        );
        assert_eq!(decode("12345"), None);
    }
}
