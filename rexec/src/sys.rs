//! The crate's only unsafe code: reading a terminal's window size with the
//! `TIOCGWINSZ` ioctl, which nix offers only as an unsafe macro, the local
//! time zone's offset at an instant with `localtime_r` (for the times `rexec
//! queue` prints), and `read` into a buffer's unused capacity (the stdin
//! pump's chunks, which would otherwise be zeroed before every read).

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

/// Reads once from `fd` into the unused capacity of `buf` (at most
/// `buf.capacity() - buf.len()` bytes), appending what was read: the number
/// of bytes, 0 at end-of-file. Nothing is zeroed first, which a safe `read`
/// into a fresh buffer would need.
pub fn read_appending(fd: impl AsFd, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let spare = buf.spare_capacity_mut();
    // SAFETY: the descriptor is borrowed and so open for the whole call;
    // `spare` is writable memory owned by `buf` of exactly `spare.len()`
    // bytes, and read(2) writes at most that many into it.
    let n = unsafe {
        nix::libc::read(
            fd.as_fd().as_raw_fd(),
            spare.as_mut_ptr().cast(),
            spare.len(),
        )
    };
    let n = usize::try_from(n).map_err(|_| std::io::Error::last_os_error())?;
    // SAFETY: read(2) initialised the first `n` bytes of the spare capacity
    // (n <= spare.len(), so the new length is within the capacity).
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}

#[cfg(test)]
mod tests {
    #[test]
    fn read_appending_appends_what_was_read_and_says_end_of_file() {
        use std::io::Write;
        let (r, mut w) = std::io::pipe().unwrap();
        w.write_all(b"hello").unwrap();
        drop(w);
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(b">");
        assert_eq!(super::read_appending(&r, &mut buf).unwrap(), 5);
        assert_eq!(buf, b">hello");
        assert_eq!(super::read_appending(&r, &mut buf).unwrap(), 0);
        assert_eq!(buf, b">hello");
        let mut small = Vec::with_capacity(2);
        let (r, mut w) = std::io::pipe().unwrap();
        w.write_all(b"abc").unwrap();
        let cap = small.capacity();
        let n = super::read_appending(&r, &mut small).unwrap();
        assert_eq!(n, cap.min(3), "a read fills at most the unused capacity");
        assert_eq!(small, &b"abc"[..n]);
    }

    #[test]
    fn read_appending_reports_a_bad_descriptor() {
        let (_r, w) = std::io::pipe().unwrap();
        let mut buf = Vec::with_capacity(8);
        let e = super::read_appending(&w, &mut buf).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(nix::libc::EBADF));
        assert!(buf.is_empty());
    }

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
