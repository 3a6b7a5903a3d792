//! The queue's clock. The simulator moves from instant to instant (arrivals,
//! which fall on whole seconds, and ends, to the millisecond) and, at each,
//! first ends the jobs due then, then admits the jobs submitted then, then
//! decides once (`batch::sim`). The live queue keeps the same order. It decides
//! on ticks that fall on whole multiples of the tick period since the queue's
//! epoch (which survive a restart, since the epoch is stored), and at each job's
//! end: an end counts from when the queue heard it (its last rank's exit), and
//! the processors it frees are given out by a decision at that instant, before
//! any news heard later or the next tick, however late the loop gets to the news
//! (see `Sched::advance`); an end heard exactly on a tick is that tick's
//! decision. A job submitted between two ticks is first seen at the next tick,
//! and that tick is its submission time as far as the policy knows; a decision
//! at an end between ticks does not see it yet. The policy sees whole seconds
//! since the epoch (an end's instant rounded down); a start or a suspension is
//! recorded at its decision's instant. So every decision is made on everything
//! that happened since the last one, as in the simulator, whatever order the
//! network delivered it in, and a chain of short jobs loses no tick per job.

use std::time::Duration;

/// Ticks of `tick_ms` counted from `epoch_ms` (UTC milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    epoch_ms: i64,
    tick_ms: i64,
}

impl Default for Clock {
    /// A one-second tick from UTC 0 (a queue not opened from a store).
    fn default() -> Self {
        Clock::new(0, Duration::from_secs(1))
    }
}

impl Clock {
    /// Its epoch, UTC ms.
    pub fn epoch_ms(&self) -> i64 {
        self.epoch_ms
    }

    /// The clock of a queue opened at `epoch_ms` deciding every `tick`.
    pub fn new(epoch_ms: i64, tick: Duration) -> Self {
        Clock {
            epoch_ms,
            tick_ms: (tick.as_millis() as i64).max(1),
        }
    }

    /// The last tick at or before `at_ms`.
    pub fn tick_at(&self, at_ms: i64) -> i64 {
        self.epoch_ms + (at_ms - self.epoch_ms).div_euclid(self.tick_ms) * self.tick_ms
    }

    /// The tick a timer firing at `at_ms` stands for: the last one at or before
    /// it, or the next one if that is within a tenth of a tick (the timer fires
    /// at or after its tick, but the wall clock may have been stepped back a
    /// little since it was set). A timer late by most of a tick, on a loaded
    /// machine, still stands for its own tick, never for one still to come.
    pub fn due(&self, at_ms: i64) -> i64 {
        self.tick_at(at_ms + self.tick_ms / 10)
    }

    /// The first tick at or after `at_ms`: when the queue first decides on
    /// something that happened at `at_ms`.
    pub fn seen_at(&self, at_ms: i64) -> i64 {
        let last = self.tick_at(at_ms);
        if last == at_ms {
            last
        } else {
            last + self.tick_ms
        }
    }

    /// A timer firing on every tick from the next one on; a tick missed (a slow
    /// decision) is skipped, not made up, so ticks stay on the grid.
    pub fn interval(&self, now_ms: i64) -> tokio::time::Interval {
        let next = self.seen_at(now_ms + 1);
        let wait = Duration::from_millis((next - now_ms).max(0) as u64);
        let mut i = tokio::time::interval_at(
            tokio::time::Instant::now() + wait,
            Duration::from_millis(self.tick_ms as u64),
        );
        i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_fall_on_the_epochs_grid() {
        let c = Clock::new(10_250, Duration::from_secs(1));
        assert_eq!(c.tick_at(10_250), 10_250);
        assert_eq!(c.tick_at(11_249), 10_250);
        assert_eq!(c.tick_at(11_250), 11_250);
        assert_eq!(c.tick_at(10_000), 9_250);
        assert_eq!(c.seen_at(11_250), 11_250);
        assert_eq!(c.seen_at(11_251), 12_250);
        assert_eq!(c.seen_at(10_251), 11_250);
        assert_eq!(c.due(11_160), 11_250);
        assert_eq!(c.due(11_140), 10_250);
        assert_eq!(c.due(11_700), 11_250);
        assert_eq!(c.due(12_140), 11_250);
        let half = Clock::new(0, Duration::from_millis(500));
        assert_eq!(half.seen_at(1_200), 1_500);
        assert_eq!(half.tick_at(1_499), 1_000);
    }

    #[tokio::test(start_paused = true)]
    async fn the_timer_fires_on_the_grid_and_skips_what_it_missed() {
        let c = Clock::new(0, Duration::from_secs(1));
        let start = tokio::time::Instant::now();
        let mut i = c.interval(400);
        i.tick().await;
        assert_eq!(start.elapsed(), Duration::from_millis(600));
        i.tick().await;
        assert_eq!(start.elapsed(), Duration::from_millis(1_600));
        // A decision that takes 2.5 ticks: the next tick is back on the grid.
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        i.tick().await;
        i.tick().await;
        assert_eq!(start.elapsed(), Duration::from_millis(4_600));
    }
}
