//! The stdin pump: a thread that reads the client's standard input in
//! chunks of up to [`proto::node::CHUNK_SIZE`] and hands each chunk to the ranks
//! chosen by `--stdin`, then `StdinEnd` at end-of-file.
//!
//! `--stdin all` gives every rank every chunk; `--stdin 0` only rank 0, the
//! others get `StdinEnd` at once; `--stdin none` reads nothing and every
//! rank gets `StdinEnd` at once. The queues are bounded, so a rank that does
//! not read its input holds the pump back, as a full pipe would locally.
//! The thread blocks in `read`; the client ends with `process::exit`, which
//! does not wait for it. When standard input is `/dev/null` (scripts, cron,
//! `rexec ... </dev/null`), whose every read is end-of-file, the ranks get
//! `StdinEnd` at once and no thread starts.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;

use proto::Chunk;
use proto::node::ToNode;
use tokio::sync::mpsc;

use crate::cli::StdinMode;

/// Start delivering standard input to `ranks` (stdin queues in rank order).
pub fn start(mode: StdinMode, ranks: Vec<mpsc::Sender<ToNode>>) -> io::Result<()> {
    let (readers, others): (Vec<_>, Vec<_>) = match mode {
        StdinMode::All => (ranks, Vec::new()),
        StdinMode::Rank0 => {
            let mut all = ranks.into_iter();
            (all.next().into_iter().collect(), all.collect())
        }
        StdinMode::None => (Vec::new(), ranks),
    };
    for q in &others {
        // The queues are new and empty, so this never waits.
        let _ = q.try_send(ToNode::StdinEnd);
    }
    if readers.is_empty() {
        return Ok(());
    }
    if is_dev_null(io::stdin().as_fd()) {
        for q in &readers {
            // New and empty queues, as above: what the pump would send at end-of-file.
            let _ = q.try_send(ToNode::StdinEnd);
        }
        return Ok(());
    }
    let file = io::stdin().as_fd().try_clone_to_owned().map(File::from);
    std::thread::Builder::new()
        .name("rexec-stdin".into())
        .spawn(move || pump(file.ok(), readers))?;
    Ok(())
}

/// Whether `fd` is the null device (character device 1:3 on Linux).
fn is_dev_null(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use nix::sys::stat::{SFlag, fstat, major, minor};
    fstat(fd).is_ok_and(|st| {
        SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFCHR
            && major(st.st_rdev) == 1
            && minor(st.st_rdev) == 3
    })
}

fn pump(file: Option<File>, readers: Vec<mpsc::Sender<ToNode>>) {
    let Some((last, others)) = readers.split_last() else {
        return;
    };
    if let Some(file) = file {
        loop {
            // Each chunk is read into its own buffer, which becomes the message: one
            // rank's input is never copied on this side (several ranks get copies),
            // nor zeroed before the read (a memset of every byte of input).
            let mut buf = Vec::with_capacity(proto::node::CHUNK_SIZE);
            match crate::sys::read_appending(&file, &mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
            let mut delivered = false;
            for q in others {
                let chunk = Chunk(buf.clone());
                delivered |= q.blocking_send(ToNode::Stdin(chunk)).is_ok();
            }
            delivered |= last.blocking_send(ToNode::Stdin(Chunk(buf))).is_ok();
            if !delivered {
                // Every rank has gone; nobody wants more input.
                return;
            }
        }
    }
    for q in &readers {
        let _ = q.blocking_send(ToNode::StdinEnd);
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    #[test]
    fn only_the_null_device_counts_as_dev_null() {
        let null = std::fs::File::open("/dev/null").unwrap();
        assert!(super::is_dev_null(null.as_fd()));
        let zero = std::fs::File::open("/dev/zero").unwrap();
        assert!(!super::is_dev_null(zero.as_fd()));
        let file = tempfile::tempfile().unwrap();
        assert!(!super::is_dev_null(file.as_fd()));
        let (r, _w) = std::io::pipe().unwrap();
        assert!(!super::is_dev_null(r.as_fd()));
    }
}
