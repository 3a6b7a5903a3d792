//! The crate's only unsafe code: reading a terminal's window size with the
//! `TIOCGWINSZ` ioctl, which nix offers only as an unsafe macro, and the local
//! time zone's offset at an instant with `localtime_r` (for the times `rexec
//! queue` prints).

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

/// Seconds east of UTC of the local time zone at `utc_secs` (seconds since the
/// epoch), as `localtime_r` finds it (`TZ`, else `/etc/localtime`); `None` if it
/// cannot say.
// time_t and tm_gmtoff are i64 on 64-bit Linux, narrower elsewhere.
#[allow(clippy::useless_conversion)]
pub fn local_offset(utc_secs: i64) -> Option<i64> {
    let t: nix::libc::time_t = utc_secs.try_into().ok()?;
    // SAFETY: `tm` is plain old data for which all-zero bytes are a valid value.
    let mut tm: nix::libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to live locals for the whole call; localtime_r
    // is the re-entrant form, writing only into `tm`. (Nothing in this client
    // changes `TZ` while it runs.)
    let r = unsafe { nix::libc::localtime_r(&t, &mut tm) };
    (!r.is_null()).then_some(i64::from(tm.tm_gmtoff))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_local_offset_is_within_a_day() {
        let off = super::local_offset(1_764_000_000).expect("an offset");
        assert!(off.abs() < 86_400, "{off}");
    }

    #[test]
    fn a_pipe_has_no_window_size() {
        let (r, _w) = nix::unistd::pipe().unwrap();
        assert_eq!(super::window_size(&r), None);
    }
}
