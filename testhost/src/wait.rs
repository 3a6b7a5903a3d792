//! Waiting for a condition instead of sleeping a fixed time: [`until`] and
//! [`eventually`] for plain tests, [`until_async`] and [`eventually_async`] for async
//! ones ([`until_async_every`] for a costly check). Each polls its check every [`POLL`] until it holds or the limit passes, so a
//! test waits no longer than the condition takes and no less, however loaded the
//! machine is.
//!
//! The sync forms never put a runtime thread to sleep: called on a thread of a
//! multi-thread tokio runtime they wait under `block_in_place` (the thread's other
//! tasks move elsewhere); on a current-thread runtime, where they would stall every
//! task of the test, they refuse (panic) and name the async form to use.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::runtime::{Handle, RuntimeFlavor};

/// How often a condition is checked again.
pub const POLL: Duration = Duration::from_millis(20);

/// Polls `check` until it returns `Some` or `limit` passes (checking once more at the
/// end); returns the value, or `None` on timeout.
///
/// # Panics
/// On a current-thread tokio runtime's thread (use [`until_async`] there).
pub fn until<T>(limit: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let mut wait = || {
        let end = Instant::now() + limit;
        loop {
            if let Some(v) = check() {
                return Some(v);
            }
            if Instant::now() >= end {
                return None;
            }
            std::thread::sleep(POLL);
        }
    };
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Err(_) => wait(),
        Ok(RuntimeFlavor::CurrentThread) => panic!(
            "testhost::wait::until/eventually would block the only thread of this async \
             test's runtime: use until_async/eventually_async, or a multi_thread runtime"
        ),
        Ok(_) => tokio::task::block_in_place(wait),
    }
}

/// Polls `check` until it holds or `limit` passes; returns whether it held.
///
/// ```
/// use std::time::Duration;
/// let start = std::time::Instant::now();
/// let later = start + Duration::from_millis(50);
/// assert!(testhost::wait::eventually(Duration::from_secs(5), || std::time::Instant::now() > later));
/// assert!(!testhost::wait::eventually(Duration::ZERO, || false));
/// ```
///
/// # Panics
/// On a current-thread tokio runtime's thread (use [`eventually_async`] there).
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    until(limit, || check().then_some(())).is_some()
}

/// Awaits `check` until it returns `Some` or `limit` passes (checking once more at
/// the end), sleeping on the runtime's timer in between.
pub async fn until_async<T, F, Fut>(limit: Duration, check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    until_async_every(limit, POLL, check).await
}

/// [`until_async`] checking every `every` instead of every [`POLL`], for a check
/// that costs something (a new connection, a process started).
pub async fn until_async_every<T, F, Fut>(
    limit: Duration,
    every: Duration,
    mut check: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let end = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return Some(v);
        }
        if tokio::time::Instant::now() >= end {
            return None;
        }
        tokio::time::sleep(every).await;
    }
}

/// Awaits `check` until it holds or `limit` passes; returns whether it held. A sync
/// check reads `eventually_async(limit, || async { cond }).await` (`async move` when
/// it captures a copy or a reference to move in).
pub async fn eventually_async<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    until_async(limit, || {
        let done = check();
        async move { done.await.then_some(()) }
    })
    .await
    .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_is_waited_for_and_a_timeout_reported() {
        let end = Instant::now() + Duration::from_millis(60);
        let took = Instant::now();
        assert_eq!(
            until(Duration::from_secs(10), || (Instant::now() > end)
                .then_some(7)),
            Some(7)
        );
        assert!(took.elapsed() < Duration::from_secs(5));
        let took = Instant::now();
        assert!(!eventually(Duration::from_millis(50), || false));
        assert!(took.elapsed() >= Duration::from_millis(50));
    }

    #[tokio::test(start_paused = true)]
    async fn the_async_form_waits_on_the_runtimes_clock() {
        let t0 = tokio::time::Instant::now();
        let at = t0 + Duration::from_secs(30);
        let held = eventually_async(Duration::from_secs(60), || async move {
            tokio::time::Instant::now() >= at
        })
        .await;
        assert!(held);
        assert!(tokio::time::Instant::now() - t0 < Duration::from_secs(31));
        let never = until_async(Duration::from_secs(5), || async { None::<()> }).await;
        assert_eq!(never, None);
    }

    #[tokio::test]
    #[should_panic(expected = "use until_async/eventually_async")]
    async fn the_sync_form_refuses_to_block_a_current_thread_runtime() {
        eventually(Duration::from_secs(1), || true);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_sync_form_leaves_a_multi_thread_runtime_running() {
        let (tx, rx) = std::sync::mpsc::channel();
        // A task that can only run while the waiting thread's tasks move elsewhere.
        tokio::spawn(async move { tx.send(()).unwrap() });
        assert!(eventually(Duration::from_secs(10), || rx
            .try_recv()
            .is_ok()));
    }
}
