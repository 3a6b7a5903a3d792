//! The crate's only unsafe code: reading a terminal's window size with the
//! `TIOCGWINSZ` ioctl, which nix offers only as an unsafe macro.

use std::os::fd::{AsFd, AsRawFd};

mod ioctl {
    nix::ioctl_read_bad!(
        /// `ioctl(fd, TIOCGWINSZ, &mut winsize)`.
        tiocgwinsz,
        nix::libc::TIOCGWINSZ,
        nix::libc::winsize
    );
}

/// Rows and columns of the terminal open on `fd`, or `None` when `fd` is
/// not a terminal or reports a zero size.
pub fn window_size(fd: impl AsFd) -> Option<(u16, u16)> {
    let mut ws = nix::libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: the descriptor is borrowed and so open for the whole call, and
    // `ws` is a live, writable `winsize`, exactly what TIOCGWINSZ fills in.
    let r = unsafe { ioctl::tiocgwinsz(fd.as_fd().as_raw_fd(), &mut ws) };
    match r {
        Ok(_) if ws.ws_row > 0 && ws.ws_col > 0 => Some((ws.ws_row, ws.ws_col)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pipe_has_no_window_size() {
        let (r, _w) = nix::unistd::pipe().unwrap();
        assert_eq!(super::window_size(&r), None);
    }
}
