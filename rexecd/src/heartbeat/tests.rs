//! Liveness under injected time, and a session's timers under tokio's paused clock:
//! each test covers minutes of heartbeats in a few milliseconds.
use super::*;

#[test]
fn a_frame_ends_the_suspension_and_restarts_the_clock() {
    let t0 = Instant::now();
    let mut live = Liveness::new(Duration::from_secs(2), t0);
    live.suspend();
    assert!(!live.is_dead(t0 + Duration::from_secs(10)));
    live.saw_frame(t0 + Duration::from_secs(10));
    assert!(!live.is_dead(t0 + Duration::from_secs(12)));
    assert!(live.is_dead(t0 + Duration::from_millis(12_001)));
    assert_eq!((live.next_seq(), live.next_seq()), (1, 2));
}

/// Regression: a heartbeat the client queued just before Ctrl-Z stopped it arrived
/// after its TSTP, restarted the clock, and the stopped client was declared dead.
#[test]
fn a_stopped_client_stays_alive_through_late_frames_until_it_resumes() {
    let t0 = Instant::now();
    let mut live = Liveness::new(Duration::from_secs(2), t0);
    live.client_stopped(t0);
    live.saw_frame(t0 + Duration::from_millis(5));
    assert!(!live.is_dead(t0 + Duration::from_secs(60)));
    live.client_resumed(t0 + Duration::from_secs(60));
    assert!(!live.is_dead(t0 + Duration::from_secs(62)));
    assert!(live.is_dead(t0 + Duration::from_millis(62_001)));
}

/// Regression: a client stopped by Ctrl-Z was trusted forever.
#[test]
fn a_stopped_client_is_trusted_for_the_stop_limit_only() {
    let t0 = Instant::now();
    let mut live =
        Liveness::new(Duration::from_secs(2), t0).with_stop_limit(Duration::from_secs(30));
    live.client_stopped(t0);
    live.client_stopped(t0 + Duration::from_secs(20));
    assert!(!live.is_dead(t0 + Duration::from_secs(30)));
    assert!(live.is_dead(t0 + Duration::from_millis(30_001)));
    live.client_resumed(t0 + Duration::from_secs(31));
    assert!(!live.is_dead(t0 + Duration::from_secs(33)));
}

// The session's timers under tokio's paused clock. `session` runs the loop of
// `session/job.rs` (client frames, beats, liveness checks) against a scripted client.

use tokio::sync::mpsc;
use tokio::time::sleep_until;

/// A frame the scripted client sends.
#[derive(Debug, Clone, Copy)]
enum Frame {
    /// Any frame (a heartbeat, stdin, ...).
    Any,
    /// `Signal(Tstp)`: the client stops itself.
    Tstp,
    /// `Signal(Cont)`: it runs again.
    Cont,
}

/// What the session did, at how many milliseconds after its start.
#[derive(Debug, Default)]
struct Run {
    beats: Vec<(u64, u64)>,
    gone: Option<(u64, Gone)>,
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Runs a session with `timeout`, `stop_limit` and a beat every `beat_every` while
/// the client sends `script` (frames at milliseconds after the start), until the
/// client counts as gone or `until` passes.
async fn session(
    timeout: Duration,
    stop_limit: Duration,
    beat_every: Duration,
    script: &[(u64, Frame)],
    until: Duration,
) -> Run {
    let t0 = Instant::now();
    let since = |t: Instant| t.duration_since(t0).as_millis() as u64;
    let mut live = Liveness::new(timeout, t0).with_stop_limit(stop_limit);
    let mut clocks = Clocks::new(beat_every, &live);
    let (tx, mut frames) = mpsc::unbounded_channel();
    let script = script.to_vec();
    let client = tokio::spawn(async move {
        for (at, frame) in script {
            sleep_until(t0 + ms(at)).await;
            let _ = tx.send(frame);
        }
        // Connected but silent from here on.
        std::future::pending::<()>().await;
    });
    let end = sleep_until(t0 + until);
    tokio::pin!(end);
    let mut run = Run::default();
    loop {
        tokio::select! {
            _ = &mut end => break,
            Some(frame) = frames.recv() => {
                let now = Instant::now();
                live.saw_frame(now);
                match frame {
                    Frame::Tstp => live.client_stopped(now),
                    Frame::Cont => live.client_resumed(now),
                    Frame::Any => {}
                }
            }
            due = clocks.next() => match due {
                Due::Beat => run.beats.push((since(Instant::now()), live.next_seq())),
                Due::Check => {
                    if let Some(gone) = live.gone(Instant::now()) {
                        run.gone = Some((since(Instant::now()), gone));
                        break;
                    }
                }
            },
        }
    }
    client.abort();
    run
}

/// A client beating every `every` ms from `from` to `to` (exclusive).
fn beats(from: u64, to: u64, every: u64) -> Vec<(u64, Frame)> {
    (from..to)
        .step_by(every as usize)
        .map(|t| (t, Frame::Any))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn beats_go_out_on_schedule_and_a_beating_client_stays_alive() {
    let wall = std::time::Instant::now();
    let run = session(
        ms(2000),
        DEFAULT_STOP_LIMIT,
        ms(1000),
        &beats(300, 600_000, 1000),
        // Half a beat past the last one: a session end at the very instant of a beat
        // races it in `select!` (which branch is polled first is random).
        ms(600_500),
    )
    .await;
    assert_eq!(run.gone, None, "a client beating every second is alive");
    // One beat at the start and one every second after, numbered from 1.
    assert_eq!(run.beats.len(), 601);
    for (i, &(at, seq)) in run.beats.iter().enumerate() {
        assert_eq!((at, seq), (i as u64 * 1000, i as u64 + 1));
    }
    // Ten minutes of session on the paused clock: a fraction of a second of real
    // time (bounded loosely: a loaded machine runs other tests beside it).
    assert!(
        wall.elapsed() < Duration::from_secs(10),
        "{:?}",
        wall.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_silent_client_is_gone_at_the_first_check_past_the_timeout_and_not_before() {
    // Timeout 2 s: checks every 500 ms. At 2.0 s the silence is not longer than the
    // timeout yet; the check at 2.5 s finds it gone.
    let run = session(ms(2000), DEFAULT_STOP_LIMIT, ms(1000), &[], ms(60_000)).await;
    assert_eq!(run.gone, Some((2500, Gone::Silent(ms(2000)))));
    assert_eq!(run.gone.unwrap().1.to_string(), "missed heartbeats for 2s");
    // Beats went out until then.
    let sent: Vec<u64> = run.beats.iter().map(|b| b.0).collect();
    assert_eq!(sent, [0, 1000, 2000]);
}

#[tokio::test(start_paused = true)]
async fn a_late_beat_restarts_the_timeout() {
    // Frames at 1.9 s and 3.8 s, each just inside the timeout; then silence. Gone at
    // the first check more than 2 s after 3.8 s (6.0 s), not at 2.5 s.
    let script = [(1900, Frame::Any), (3800, Frame::Any)];
    let run = session(ms(2000), DEFAULT_STOP_LIMIT, ms(1000), &script, ms(60_000)).await;
    assert_eq!(run.gone, Some((6000, Gone::Silent(ms(2000)))));
}

#[tokio::test(start_paused = true)]
async fn a_stopped_client_is_trusted_for_the_stop_limit_then_gone_once() {
    // TSTP at 1 s, then silence (a queued heartbeat at 1.1 s changes nothing); stop
    // limit 10 s: alive through 11 s, gone at the first check past it (11.5 s).
    let script = [(1000, Frame::Tstp), (1100, Frame::Any)];
    let run = session(ms(2000), ms(10_000), ms(1000), &script, ms(60_000)).await;
    assert_eq!(run.gone, Some((11_500, Gone::StoppedTooLong(ms(10_000)))));
    assert!(
        run.gone
            .unwrap()
            .1
            .to_string()
            .contains("stopped_client_limit (10s)")
    );
    // Resumed in time, the clock restarts at the CONT.
    let script = [(1000, Frame::Tstp), (9000, Frame::Cont)];
    let run = session(ms(2000), ms(10_000), ms(1000), &script, ms(60_000)).await;
    assert_eq!(run.gone, Some((11_500, Gone::Silent(ms(2000)))));
}

#[tokio::test(start_paused = true)]
async fn ticks_missed_while_the_runtime_was_busy_fire_once_not_as_a_burst() {
    let t0 = Instant::now();
    let live = Liveness::new(ms(5000), t0);
    let mut clocks = Clocks::new(ms(1000), &live);
    // Both timers fire at the start.
    let mut first = [clocks.next().await, clocks.next().await];
    first.sort_by_key(|d| *d == Due::Check);
    assert_eq!(first, [Due::Beat, Due::Check]);
    assert_eq!(Instant::now(), t0);
    // The session is busy for 10 s (ten beats and eight checks missed).
    tokio::time::advance(ms(10_000)).await;
    let mut late = Vec::new();
    while let Ok(due) = tokio::time::timeout(ms(900), clocks.next()).await {
        late.push((Instant::now().duration_since(t0).as_millis(), due));
    }
    late.sort_by_key(|(at, d)| (*at, *d == Due::Check));
    // One late beat and one late check, then the schedule resumes from there.
    assert_eq!(late, [(10_000, Due::Beat), (10_000, Due::Check)]);
    assert_eq!(clocks.next().await, Due::Beat);
    assert_eq!(Instant::now().duration_since(t0), ms(11_000));
}
