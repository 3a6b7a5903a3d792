//! Running `rexec` on a real pseudo-terminal, as from an interactive shell:
//! `setsid --ctty` makes the terminal its controlling terminal (so resizing
//! it sends SIGWINCH), the test reads the terminal's output from the master
//! side, types into it, resizes it with `stty`, and checks its modes.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::pty::{Winsize, openpty};
use nix::sys::termios::{LocalFlags, tcgetattr};

use crate::rexec::Rexec;

/// A client running on a pseudo-terminal.
pub struct OnPty {
    child: Child,
    master: File,
    slave: OwnedFd,
    /// The terminal's device path (`/dev/pts/N`).
    pub path: String,
    output: Arc<Mutex<Vec<u8>>>,
}

impl Rexec {
    /// Start the client with a new terminal of `rows` x `cols` as its stdin,
    /// stdout, stderr and controlling terminal.
    pub fn spawn_on_pty(self, rows: u16, cols: u16) -> OnPty {
        let size = Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = openpty(Some(&size), None).expect("cannot open a pseudo-terminal");
        let path = std::fs::read_link(format!("/proc/self/fd/{}", {
            use std::os::fd::AsRawFd;
            pty.slave.as_raw_fd()
        }))
        .expect("pty path")
        .display()
        .to_string();
        let cmd = self.command();
        let mut wrapped = Command::new("setsid");
        wrapped
            .arg("--ctty")
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => wrapped.env(k, v),
                None => wrapped.env_remove(k),
            };
        }
        if let Some(dir) = cmd.get_current_dir() {
            wrapped.current_dir(dir);
        }
        let io = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup"));
        let child = wrapped
            .stdin(io(&pty.slave))
            .stdout(io(&pty.slave))
            .stderr(io(&pty.slave))
            .spawn()
            .expect("cannot start setsid rexec");
        let master = File::from(pty.master);
        let output = Arc::new(Mutex::new(Vec::new()));
        let sink = output.clone();
        let mut reader = master.try_clone().expect("dup master");
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut o) = sink.lock() {
                    o.extend_from_slice(&buf[..n]);
                }
            }
        });
        OnPty {
            child,
            master,
            slave: pty.slave,
            path,
            output,
        }
    }
}

impl OnPty {
    /// The client's process id (`setsid` execs it in place).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the terminal showed so far.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().map(|o| o.clone()).unwrap_or_default())
            .into_owned()
    }

    /// Wait until the terminal shows `needle`; panics after `limit`.
    pub fn wait_for(&self, needle: &str, limit: Duration) {
        assert!(
            crate::wait_until(limit, || self.screen().contains(needle)).is_some(),
            "the terminal never showed {needle:?}: {:?}",
            self.screen()
        );
    }

    /// Type `bytes` on the keyboard.
    pub fn type_bytes(&mut self, bytes: &[u8]) {
        self.master
            .write_all(bytes)
            .expect("cannot write to the pty");
    }

    /// Whether the terminal is in canonical (cooked) mode with echo: what a
    /// shell leaves it in, and what rexec must restore.
    pub fn is_cooked(&self) -> bool {
        let t = tcgetattr(self.slave.as_fd()).expect("tcgetattr");
        t.local_flags
            .contains(LocalFlags::ICANON | LocalFlags::ECHO)
    }

    /// Wait up to `limit` for rexec to put the terminal in raw mode. It does
    /// so once every rank has started, which may be after rank 0's first
    /// output on a slow machine.
    pub fn becomes_raw(&self, limit: Duration) -> bool {
        crate::wait_until(limit, || !self.is_cooked()).is_some()
    }

    /// Resize the terminal (which sends SIGWINCH to its foreground group).
    pub fn resize(&self, rows: u16, cols: u16) {
        let status = Command::new("stty")
            .args([
                "-F",
                &self.path,
                "rows",
                &rows.to_string(),
                "cols",
                &cols.to_string(),
            ])
            .status()
            .expect("cannot run stty");
        assert!(status.success(), "stty failed");
    }

    /// Wait for the end; returns the exit code.
    pub fn wait(&mut self, limit: Duration) -> Option<i32> {
        match testhost::wait::until(limit, || self.child.try_wait().ok().flatten()) {
            Some(s) => s.code(),
            None => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "rexec on a pty did not end in {limit:?}: {:?}",
                    self.screen()
                );
            }
        }
    }
}

impl Drop for OnPty {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
