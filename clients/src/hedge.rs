//! Trying several instances of a service without waiting out a silent one:
//! [`first_ok`] starts an attempt on the first instance, and when it has not
//! succeeded within [`HEDGE_AFTER`] (or failed sooner) starts the next beside
//! it, and so on; the first attempt to succeed wins and the others are dropped.
//! A host that vanished (link down, no RST) then costs [`HEDGE_AFTER`] instead
//! of the whole per-instance limit, while a healthy first instance, which
//! answers well within [`HEDGE_AFTER`], is the only one ever tried.
//!
//! ```
//! use std::time::Duration;
//! use clients::hedge::{Failed, first_ok};
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! // The first instance never answers; the second does at once.
//! let won = first_ok(2, Duration::from_millis(10), |i| async move {
//!     if i == 0 {
//!         std::future::pending::<Result<&str, ()>>().await
//!     } else {
//!         Ok("b")
//!     }
//! }, |_| false).await;
//! assert_eq!(won.unwrap(), (1, "b"));
//! # });
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

/// How long one instance of several gets before the next is tried beside it.
pub const HEDGE_AFTER: Duration = Duration::from_millis(300);

/// Why no attempt of [`first_ok`] succeeded.
#[derive(Debug)]
pub enum Failed<E> {
    /// Attempt `.0` failed in a way the caller said stops everything.
    Stopped(usize, E),
    /// Every attempt failed: each one's error, in the order of the instances.
    All(Vec<(usize, E)>),
}

/// Runs `start(0)`, then `start(1)` once `start(0)` has failed or `after` has
/// passed without its success, and so on up to `start(n - 1)`, every started
/// attempt running until one succeeds; returns the index and value of the first
/// success. An error for which `stop` is true ends the race at once.
pub async fn first_ok<T, E, F>(
    n: usize,
    after: Duration,
    mut start: impl FnMut(usize) -> F,
    stop: impl Fn(&E) -> bool,
) -> Result<(usize, T), Failed<E>>
where
    F: Future<Output = Result<T, E>>,
{
    let mut running: Vec<(usize, Pin<Box<F>>)> = Vec::new();
    let mut errors: Vec<(usize, E)> = Vec::new();
    let mut started = 0;
    // When the next attempt starts (now: at once).
    let mut next_at = Instant::now();
    loop {
        if started < n && (running.is_empty() || Instant::now() >= next_at) {
            running.push((started, Box::pin(start(started))));
            started += 1;
            next_at = Instant::now() + after;
        }
        if running.is_empty() {
            errors.sort_by_key(|(i, _)| *i);
            return Err(Failed::All(errors));
        }
        let more = started < n;
        let mut timer = std::pin::pin!(tokio::time::sleep_until(next_at));
        let event = std::future::poll_fn(|cx| {
            for (k, (_, f)) in running.iter_mut().enumerate() {
                if let Poll::Ready(r) = f.as_mut().poll(cx) {
                    return Poll::Ready(Some((k, r)));
                }
            }
            if more && timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            Poll::Pending
        })
        .await;
        let Some((k, result)) = event else {
            continue;
        };
        let (i, _) = running.swap_remove(k);
        match result {
            Ok(value) => return Ok((i, value)),
            Err(e) if stop(&e) => return Err(Failed::Stopped(i, e)),
            Err(e) => {
                errors.push((i, e));
                // A failure moves on at once, as trying in turn would.
                next_at = Instant::now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime")
    }

    #[test]
    fn a_quick_first_instance_is_the_only_one_tried() {
        rt().block_on(async {
            let mut tried = Vec::new();
            let r = first_ok(
                3,
                HEDGE_AFTER,
                |i| {
                    tried.push(i);
                    async move {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Ok::<_, ()>(i)
                    }
                },
                |_| false,
            )
            .await;
            assert_eq!(r.unwrap(), (0, 0));
            assert_eq!(tried, [0]);
        });
    }

    #[test]
    fn a_silent_instance_costs_the_hedge_delay_only() {
        rt().block_on(async {
            let t0 = Instant::now();
            let r = first_ok(
                2,
                HEDGE_AFTER,
                |i| async move {
                    if i == 0 {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                    }
                    Ok::<_, ()>(i)
                },
                |_| false,
            )
            .await;
            assert_eq!(r.unwrap(), (1, 1));
            let took = t0.elapsed();
            assert!(
                took >= HEDGE_AFTER && took < Duration::from_secs(5),
                "{took:?}"
            );
        });
    }

    #[test]
    fn failures_move_on_at_once_and_are_all_reported_in_order() {
        rt().block_on(async {
            let t0 = Instant::now();
            let r = first_ok(
                3,
                HEDGE_AFTER,
                |i| async move { Err::<(), _>(i) },
                |_| false,
            )
            .await;
            match r {
                Err(Failed::All(e)) => assert_eq!(e, [(0, 0), (1, 1), (2, 2)]),
                other => panic!("{other:?}"),
            }
            assert!(t0.elapsed() < HEDGE_AFTER, "{:?}", t0.elapsed());
            let r = first_ok(
                3,
                HEDGE_AFTER,
                |i| async move { Err::<(), _>(i) },
                |&e| e == 1,
            )
            .await;
            assert!(matches!(r, Err(Failed::Stopped(1, 1))), "{r:?}");
        });
    }
}
