//! The client's own terminal under `-t`: its window size, raw mode, and the
//! one saved setting that every exit path restores.
//!
//! Raw mode is entered on standard input only when it is a terminal. The
//! original settings live in a process-wide slot so that [`restore`] works
//! from anywhere: the normal end, an error, a signal that ends the client,
//! the panic hook, and before the client stops itself for Ctrl-Z.

use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::termios::{SetArg, Termios, cfmakeraw, tcgetattr, tcsetattr};
use proto::node::WindowSize;

static SAVED: Mutex<Option<Termios>> = Mutex::new(None);
static RAW: AtomicBool = AtomicBool::new(false);

/// The size used when no terminal reports one.
pub const DEFAULT_SIZE: WindowSize = WindowSize { rows: 24, cols: 80 };

/// Whether standard input is a terminal.
pub fn stdin_is_tty() -> bool {
    nix::unistd::isatty(io::stdin()).unwrap_or(false)
}

/// The size of the client's terminal (stdin, else stdout, else stderr).
pub fn window_size() -> Option<WindowSize> {
    let size = crate::sys::window_size(io::stdin())
        .or_else(|| crate::sys::window_size(io::stdout()))
        .or_else(|| crate::sys::window_size(io::stderr()))?;
    Some(WindowSize {
        rows: size.0,
        cols: size.1,
    })
}

/// Whether the client's terminal is in raw mode now (messages then need
/// `\r\n` line ends).
pub fn is_raw() -> bool {
    RAW.load(Ordering::SeqCst)
}

/// Put standard input's terminal in raw mode, saving the current settings
/// (once) for [`restore`]. Does nothing when stdin is not a terminal.
pub fn enter_raw() -> nix::Result<()> {
    if !stdin_is_tty() {
        return Ok(());
    }
    let current = tcgetattr(io::stdin())?;
    let mut raw = current.clone();
    cfmakeraw(&mut raw);
    {
        let mut saved = SAVED.lock().unwrap_or_else(|e| e.into_inner());
        if saved.is_none() {
            *saved = Some(current);
        }
    }
    tcsetattr(io::stdin(), SetArg::TCSADRAIN, &raw)?;
    RAW.store(true, Ordering::SeqCst);
    Ok(())
}

/// Put the terminal back as it was before [`enter_raw`]. Safe to call any
/// number of times, with or without raw mode.
pub fn restore() {
    if !RAW.swap(false, Ordering::SeqCst) {
        return;
    }
    let saved = SAVED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = saved.as_ref() {
        let _ = tcsetattr(io::stdin(), SetArg::TCSADRAIN, t);
    }
}

/// Make a panic restore the terminal before its message is printed.
pub fn restore_on_panic() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
}
