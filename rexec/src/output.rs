//! The output writer: one thread that owns the client's stdout and stderr
//! and writes what the ranks send, in arrival order. The thread starts with
//! the first thing to write: a job that prints nothing (the common
//! `rexec -n 1 prog` of a script) never pays for one.
//!
//! Raw mode passes bytes through untouched: large chunks go to the file
//! descriptor directly (no copy), small ones are gathered into one buffer
//! and written together. With `-l`, each complete line is written as
//! `[R] line`; a rank's unfinished last line waits for its end of line (or
//! for the rank's end, when it is written with a newline added). A line
//! longer than [`MAX_LINE`] is written in pieces of that size, each labelled
//! and ended with a newline, so a rank that never ends a line cannot make the
//! client hold its whole output.
//!
//! The channel into the thread is bounded, so a slow reader of the client's
//! stdout slows the ranks down through TCP flow control instead of filling
//! memory. A broken pipe on stdout is reported once as
//! [`OutputEvent::BrokenPipe`]; from then on output is discarded.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;

use tokio::sync::{mpsc, oneshot};

/// Chunks in flight between the ranks and the writer (at 64 KiB each, 8 MiB).
pub const QUEUE: usize = 128;

/// Chunks at least this large are written without copying.
const DIRECT: usize = 16 * 1024;

/// Gathered small chunks are written once they reach this size.
const GATHER: usize = 256 * 1024;

/// With `-l`, the longest line held back waiting for its newline.
pub const MAX_LINE: usize = 64 * 1024;

/// Which of the client's streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// Standard output.
    Out,
    /// Standard error.
    Err,
}

/// Something to write.
#[derive(Debug)]
pub enum Out {
    /// Bytes from a rank.
    Data {
        /// The rank.
        rank: u32,
        /// Where they go.
        stream: Stream,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// A rank has ended: write its unfinished lines (in `-l` mode).
    RankDone(u32),
    /// One line of the client's own to stderr (without the newline).
    Message(String),
}

/// Trouble the writer reports to the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputEvent {
    /// Whoever reads our stdout has gone away.
    BrokenPipe,
    /// Writing failed for another reason (the text says which).
    Failed(String),
}

/// The writer thread's queue, and word from the thread once it has written everything.
pub struct Output {
    tx: mpsc::Sender<Out>,
    done: oneshot::Receiver<()>,
}

impl Output {
    /// The writer on this process's stdout and stderr. Its thread starts when the
    /// first data or message arrives (a `RankDone` before any output writes
    /// nothing); a failure to start it is reported as [`OutputEvent::Failed`].
    /// Must run inside the tokio runtime.
    pub fn start(label: bool, events: mpsc::UnboundedSender<OutputEvent>) -> Output {
        let (tx, mut rx) = mpsc::channel(QUEUE);
        let (done_tx, done) = oneshot::channel();
        tokio::spawn(async move {
            let first = loop {
                match rx.recv().await {
                    // Nothing written yet, so no rank has an unfinished line.
                    Some(Out::RankDone(_)) => continue,
                    Some(first) => break first,
                    None => {
                        let _ = done_tx.send(());
                        return;
                    }
                }
            };
            let writer = Writer::new(label, events.clone());
            let spawned = std::thread::Builder::new()
                .name("rexec-output".into())
                .spawn(move || {
                    writer.run(first, rx);
                    let _ = done_tx.send(());
                });
            if let Err(e) = spawned {
                let _ = events.send(OutputEvent::Failed(format!(
                    "cannot start the output thread: {e}"
                )));
            }
        });
        Output { tx, done }
    }

    /// A sender for rank tasks.
    pub fn sender(&self) -> mpsc::Sender<Out> {
        self.tx.clone()
    }

    /// Close the queue and wait until everything sent so far is written.
    /// Every other sender must have been dropped, or this waits for them.
    /// An async wait (the thread says when it is done), so the runtime needs no
    /// blocking thread for it.
    pub async fn finish(self) {
        drop(self.tx);
        // An error means the thread ended without saying so (it panicked): nothing
        // more will be written either way.
        let _ = self.done.await;
    }
}

struct Writer {
    out: Option<File>,
    err: Option<File>,
    label: bool,
    /// `-l`: the unfinished last line of each rank and stream.
    partial: HashMap<(u32, Stream), Vec<u8>>,
    gather: Vec<u8>,
    gather_stream: Stream,
    events: mpsc::UnboundedSender<OutputEvent>,
    broken: bool,
}

impl Writer {
    /// A writer on this process's stdout and stderr.
    fn new(label: bool, events: mpsc::UnboundedSender<OutputEvent>) -> Writer {
        let dup = |fd: std::os::fd::BorrowedFd<'_>| fd.try_clone_to_owned().ok().map(File::from);
        Writer {
            out: dup(io::stdout().as_fd()),
            err: dup(io::stderr().as_fd()),
            label,
            partial: HashMap::new(),
            gather: Vec::with_capacity(GATHER),
            gather_stream: Stream::Out,
            events,
            broken: false,
        }
    }

    /// Write `first`, then what arrives until every sender is gone.
    fn run(mut self, first: Out, mut rx: mpsc::Receiver<Out>) {
        let mut item = Some(first);
        while let Some(next) = item {
            self.take(next);
            // Drain what is already queued before writing what was gathered.
            while let Ok(queued) = rx.try_recv() {
                self.take(queued);
            }
            self.flush_gather();
            item = rx.blocking_recv();
        }
        let ranks: Vec<u32> = self.partial.keys().map(|k| k.0).collect();
        for rank in ranks {
            self.rank_done(rank);
        }
        self.flush_gather();
    }

    fn take(&mut self, item: Out) {
        match item {
            Out::Data {
                rank,
                stream,
                bytes,
            } if self.label => self.labelled(rank, stream, &bytes),
            Out::Data { stream, bytes, .. } => {
                if bytes.len() >= DIRECT {
                    self.flush_gather();
                    self.write(stream, &bytes);
                } else {
                    self.gather_bytes(stream, &bytes);
                }
            }
            Out::RankDone(rank) => self.rank_done(rank),
            Out::Message(text) => {
                let eol: &[u8] = if crate::tty::is_raw() { b"\r\n" } else { b"\n" };
                self.gather_bytes(Stream::Err, text.as_bytes());
                self.gather_bytes(Stream::Err, eol);
            }
        }
    }

    fn labelled(&mut self, rank: u32, stream: Stream, bytes: &[u8]) {
        let mut rest = bytes;
        while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
            let (line, tail) = rest.split_at(pos + 1);
            let head = self.partial.remove(&(rank, stream)).unwrap_or_default();
            self.gather_bytes(stream, format!("[{rank}] ").as_bytes());
            self.gather_bytes(stream, &head);
            self.gather_bytes(stream, line);
            rest = tail;
        }
        if !rest.is_empty() {
            let held = self.partial.entry((rank, stream)).or_default();
            held.extend_from_slice(rest);
            if held.len() >= MAX_LINE
                && let Some(held) = self.partial.remove(&(rank, stream))
            {
                let mut pieces = held.chunks(MAX_LINE).peekable();
                while let Some(piece) = pieces.next() {
                    if piece.len() < MAX_LINE && pieces.peek().is_none() {
                        self.partial.insert((rank, stream), piece.to_vec());
                        break;
                    }
                    self.gather_bytes(stream, format!("[{rank}] ").as_bytes());
                    self.gather_bytes(stream, piece);
                    self.gather_bytes(stream, b"\n");
                }
            }
        }
    }

    fn rank_done(&mut self, rank: u32) {
        for stream in [Stream::Out, Stream::Err] {
            if let Some(mut line) = self.partial.remove(&(rank, stream)) {
                line.push(b'\n');
                self.gather_bytes(stream, format!("[{rank}] ").as_bytes());
                self.gather_bytes(stream, &line);
            }
        }
    }

    fn gather_bytes(&mut self, stream: Stream, bytes: &[u8]) {
        if stream != self.gather_stream || self.gather.len() + bytes.len() > GATHER {
            self.flush_gather();
            self.gather_stream = stream;
        }
        self.gather.extend_from_slice(bytes);
    }

    fn flush_gather(&mut self) {
        if self.gather.is_empty() {
            return;
        }
        let buf = std::mem::take(&mut self.gather);
        self.write(self.gather_stream, &buf);
        self.gather = buf;
        self.gather.clear();
    }

    fn write(&mut self, stream: Stream, bytes: &[u8]) {
        let file = match stream {
            Stream::Out => &mut self.out,
            Stream::Err => &mut self.err,
        };
        let Some(f) = file else { return };
        if let Err(e) = f.write_all(bytes) {
            *file = None;
            let event = if e.kind() == io::ErrorKind::BrokenPipe {
                if self.broken {
                    return;
                }
                self.broken = true;
                OutputEvent::BrokenPipe
            } else {
                let which = match stream {
                    Stream::Out => "standard output",
                    Stream::Err => "standard error",
                };
                OutputEvent::Failed(format!("cannot write to {which}: {e}"))
            };
            let _ = self.events.send(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two tests that count writer threads take turns.
    static THREAD_TESTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    fn output_threads() -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|comm| comm.trim() == "rexec-output")
            .count()
    }

    /// `rexec -n 1 prog` of a silent program: the rank's end writes nothing, so
    /// no writer thread starts, and finishing does not wait for one.
    #[tokio::test]
    async fn a_job_that_prints_nothing_starts_no_writer_thread() {
        let _turn = THREAD_TESTS.lock().await;
        let (events, mut heard) = mpsc::unbounded_channel();
        let output = Output::start(true, events);
        output.sender().send(Out::RankDone(0)).await.unwrap();
        output.finish().await;
        assert_eq!(output_threads(), 0);
        assert!(heard.try_recv().is_err());
    }

    /// The first output starts the thread, which still drains everything before
    /// `finish` returns.
    #[tokio::test]
    async fn the_first_output_starts_the_writer_and_finish_waits_for_it() {
        let _turn = THREAD_TESTS.lock().await;
        let (events, mut heard) = mpsc::unbounded_channel();
        let output = Output::start(false, events);
        let tx = output.sender();
        tx.send(Out::RankDone(0)).await.unwrap();
        tx.send(data(0, b"")).await.unwrap();
        tx.send(Out::RankDone(0)).await.unwrap();
        drop(tx);
        tokio::time::timeout(std::time::Duration::from_secs(30), output.finish())
            .await
            .expect("the writer thread ended");
        assert!(heard.try_recv().is_err());
        // It said so just before returning; let it go before the other test counts.
        let gone = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while output_threads() > 0 {
            assert!(std::time::Instant::now() < gone, "the writer thread stays");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    fn writer(label: bool) -> (Writer, mpsc::UnboundedReceiver<OutputEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let w = Writer {
            out: None,
            err: None,
            label,
            partial: HashMap::new(),
            gather: Vec::new(),
            gather_stream: Stream::Out,
            events: tx,
            broken: false,
        };
        (w, rx)
    }

    fn data(rank: u32, bytes: &[u8]) -> Out {
        Out::Data {
            rank,
            stream: Stream::Out,
            bytes: bytes.to_vec(),
        }
    }

    #[test]
    fn labels_whole_lines_and_keeps_partial_lines_per_rank() {
        let (mut w, _rx) = writer(true);
        w.take(data(0, b"a1\na"));
        w.take(data(1, b"b1\n"));
        w.take(data(0, b"2\n"));
        w.take(data(1, b"tail"));
        w.take(Out::RankDone(1));
        assert_eq!(
            String::from_utf8(w.gather.clone()).unwrap(),
            "[0] a1\n[1] b1\n[0] a2\n[1] tail\n"
        );
    }

    #[test]
    fn a_line_without_end_is_written_in_labelled_pieces_not_held_whole() {
        let (mut w, _rx) = writer(true);
        let chunk = vec![b'x'; 10_000];
        for _ in 0..20 {
            w.take(data(0, &chunk));
        }
        let held: usize = w.partial.values().map(Vec::len).sum();
        assert!(held < MAX_LINE, "{held} bytes held back");
        let text = String::from_utf8(w.gather.clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 200_000 / MAX_LINE, "{} lines", lines.len());
        for line in lines {
            assert_eq!(line.len(), "[0] ".len() + MAX_LINE);
            assert!(line.starts_with("[0] x"));
        }
        w.take(data(0, b"end\n"));
        let text = String::from_utf8(w.gather.clone()).unwrap();
        let last = text.lines().last().unwrap();
        assert_eq!(last.len(), "[0] ".len() + 200_000 % MAX_LINE + "end".len());
        assert!(w.partial.is_empty());
        // A line of exactly MAX_LINE leaves nothing behind to print at the end.
        w.gather.clear();
        w.take(data(1, &vec![b'y'; MAX_LINE]));
        w.take(Out::RankDone(1));
        assert_eq!(
            String::from_utf8(w.gather.clone()).unwrap().lines().count(),
            1
        );
    }

    #[test]
    fn raw_mode_passes_bytes_through() {
        let (mut w, _rx) = writer(false);
        w.take(data(0, b"x\ny"));
        w.take(data(1, b"\xff\x00"));
        assert_eq!(w.gather, b"x\ny\xff\x00");
    }

    #[test]
    fn broken_pipe_is_reported_once() {
        let (mut w, mut rx) = writer(false);
        let (r, wr) = nix::unistd::pipe().unwrap();
        drop(r);
        w.out = Some(File::from(wr));
        w.write(Stream::Out, b"hello");
        w.write(Stream::Out, b"again");
        assert_eq!(rx.try_recv(), Ok(OutputEvent::BrokenPipe));
        assert!(rx.try_recv().is_err());
    }
}
