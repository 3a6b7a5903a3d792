//! The Ring Leader prediction, literally: walk the slots from now, giving
//! the job the idle fraction of each (times the node's speed), until its CPU
//! length is done. Whole weeks are skipped at once, so a job longer than a
//! week costs no more than one week's walk. This is the reference the fast
//! [`super::summary::Summary::predict`] is tested against.

/// Seconds from `start` (seconds into the profile's week) until a job of
/// `cpu_secs` (on a speed-1.0 machine) completes on a node of `speed` whose
/// slot `i` (of `slot_secs` seconds) is busy a fraction `busy[i]` of the
/// time. `None` when the node never has idle time or `speed` is not positive.
pub fn walk(busy: &[f64], slot_secs: f64, start: f64, cpu_secs: f64, speed: f64) -> Option<f64> {
    if cpu_secs <= 0.0 {
        return Some(0.0);
    }
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if busy.is_empty() || !positive(speed) || !positive(slot_secs) || !cpu_secs.is_finite() {
        return None;
    }
    let idle = |b: f64| (1.0 - b).clamp(0.0, 1.0);
    let week = slot_secs * busy.len() as f64;
    let per_week: f64 = busy.iter().map(|&b| idle(b) * speed * slot_secs).sum();
    if !positive(per_week) {
        return None;
    }
    let mut remaining = cpu_secs;
    let mut elapsed = 0.0;
    let whole = (remaining / per_week).floor() - 1.0;
    if whole >= 1.0 {
        remaining -= whole * per_week;
        elapsed += whole * week;
    }
    let mut t = start.rem_euclid(week);
    // At most two weeks and a slot remain to walk.
    for _ in 0..=2 * busy.len() + 1 {
        let slot = ((t / slot_secs) as usize).min(busy.len() - 1);
        let end = (slot as f64 + 1.0) * slot_secs;
        let rate = idle(busy[slot]) * speed;
        let span = end - t;
        if rate > 0.0 && rate * span >= remaining {
            return Some(elapsed + remaining / rate);
        }
        remaining -= rate * span;
        elapsed += span;
        t = if slot + 1 == busy.len() { 0.0 } else { end };
    }
    Some(elapsed + remaining / (per_week / week))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_machine_takes_cpu_length_over_speed() {
        let busy = vec![0.0; 10];
        assert_eq!(walk(&busy, 60.0, 30.0, 120.0, 1.0), Some(120.0));
        assert_eq!(walk(&busy, 60.0, 30.0, 120.0, 2.0), Some(60.0));
        assert_eq!(walk(&busy, 60.0, 0.0, 0.0, 1.0), Some(0.0));
    }

    #[test]
    fn half_busy_doubles_and_never_idle_is_none() {
        let busy = vec![0.5; 10];
        assert!((walk(&busy, 60.0, 0.0, 60.0, 1.0).unwrap() - 120.0).abs() < 1e-9);
        assert_eq!(walk(&[1.0; 10], 60.0, 0.0, 60.0, 1.0), None);
        assert_eq!(walk(&busy, 60.0, 0.0, 60.0, 0.0), None);
    }

    #[test]
    fn long_jobs_wrap_around_weeks() {
        // Week of 2 slots of 10 s: idle, busy. 25 CPU-seconds from 0:
        // 10 (slot 0) + 10 busy + 10 (slot 0) + 10 busy + 5 = 45 s.
        let t = walk(&[0.0, 1.0], 10.0, 0.0, 25.0, 1.0).unwrap();
        assert!((t - 45.0).abs() < 1e-9, "{t}");
        // Many weeks: 10,005 CPU-seconds = 1000 weeks and 5 s.
        let t = walk(&[0.0, 1.0], 10.0, 0.0, 10_005.0, 1.0).unwrap();
        assert!((t - 20_005.0).abs() < 1e-6, "{t}");
    }
}
