//! Pseudo-terminals for jobs launched with a terminal (`rexec -t`): [`Pty::open`]
//! allocates a master/slave pair (both close-on-exec from birth, so no concurrently
//! spawned job can inherit them), sets the window size, and gives the slave to the
//! job's standard input, output and error. [`PtyMaster`] is the server's end, readable
//! and writable from tokio without blocking a thread; a read after every slave holder
//! is gone ends with EOF (the kernel's `EIO` is mapped to it).

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use proto::node::WindowSize;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::sys;

/// A freshly opened terminal pair.
#[derive(Debug)]
pub struct Pty {
    /// The server's end.
    pub master: PtyMaster,
    /// The job's end (give clones to the child's stdio, then drop it).
    pub slave: OwnedFd,
}

impl Pty {
    /// Opens a pair with the given window size. Must run inside a tokio runtime.
    pub fn open(size: WindowSize) -> io::Result<Pty> {
        let flags = OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
        let master = nix::pty::posix_openpt(flags)?;
        nix::pty::grantpt(&master)?;
        nix::pty::unlockpt(&master)?;
        let name = nix::pty::ptsname_r(&master)?;
        let slave = nix::fcntl::open(
            name.as_str(),
            OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let master = PtyMaster(Arc::new(sys::async_fd(OwnedFd::from(master))?));
        master.resize(size)?;
        Ok(Pty { master, slave })
    }
}

/// The master side of a job's terminal; clones share the descriptor (one for the
/// output pump, one for stdin and resizing).
#[derive(Debug, Clone)]
pub struct PtyMaster(Arc<AsyncFd<OwnedFd>>);

impl PtyMaster {
    /// Sets the terminal's window size (the job's foreground group gets SIGWINCH).
    pub fn resize(&self, size: WindowSize) -> io::Result<()> {
        sys::set_window_size(self.0.get_ref().as_fd(), size.rows, size.cols)?;
        Ok(())
    }
}

impl AsyncRead for PtyMaster {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match guard.try_io(|fd| nix::unistd::read(fd.get_ref(), unfilled).map_err(Into::into)) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // EIO: every slave descriptor is closed; that is the terminal's EOF.
                Ok(Err(e)) if e.raw_os_error() == Some(Errno::EIO as i32) => {
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for PtyMaster {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = ready!(self.0.poll_write_ready(cx))?;
            match guard.try_io(|fd| nix::unistd::write(fd.get_ref(), data).map_err(Into::into)) {
                Ok(result) => return Poll::Ready(result),
                Err(_would_block) => continue,
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
