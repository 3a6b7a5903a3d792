//! Starting a daemon until it is ready: it writes the address it bound, and a
//! newline, to its `--ready-file` once it listens.

use std::fs;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// Starts a daemon with `spawn` until it has written its address to `ready`,
/// and returns it with that address. A daemon that exits before it is ready
/// (after a `kill -9`, its predecessor's port can be held a moment longer) is
/// started again after a pause, until `within` has passed; `None` when it never
/// became ready (the last one is killed).
pub fn start_until_ready(
    ready: &Path,
    within: Duration,
    mut spawn: impl FnMut() -> Child,
) -> Option<(Child, String)> {
    let deadline = Instant::now() + within;
    loop {
        let _ = fs::remove_file(ready);
        let mut child = spawn();
        // Its address, or `None` once it has exited.
        let addr =
            testhost::wait::until(deadline.saturating_duration_since(Instant::now()), || {
                if let Ok(text) = fs::read_to_string(ready)
                    && text.ends_with('\n')
                {
                    return Some(Some(text.trim().to_string()));
                }
                matches!(child.try_wait(), Ok(Some(_))).then_some(None)
            });
        match addr {
            Some(Some(addr)) => return Some((child, addr)),
            // A pause before the next try (plain tests' sync code, on no runtime).
            Some(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}
