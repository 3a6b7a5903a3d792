//! Moving bytes between a job and its client.
//!
//! [`output`] is the one task that writes frames to the client. It reads the job's
//! stdout and stderr itself (pipes, or the terminal), up to [`READ_SIZE`] bytes per
//! read, and sends what arrived at once as chunks of at most [`CHUNK_SIZE`], with no
//! line buffering. Its buffers are reused, so streaming allocates nothing per chunk and
//! no bytes change threads.
//! Between chunks it sends what the session queues ([`Out`]): heartbeats, notices, and
//! at the end either the final `Exit` after both streams reached EOF
//! ([`Out::Finish`]) or an immediate last frame ([`Out::Close`]). Because a slow client
//! makes it wait, it also makes the job wait on a full pipe instead of growing
//! rexecd's memory.
//!
//! [`feed_stdin`] writes the client's stdin chunks to the job, counts what it wrote
//! (for the session's `StdinTaken` reports) and closes the job's stdin on `StdinEnd`.
//! How much stdin it may hold is bounded by the protocol's window
//! (`proto::node::STDIN_WINDOW`), which the session enforces.

use std::io;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::time::Duration;

use proto::node::{CHUNK_SIZE, Chunk, FromNode};
use proto::{FrameError, FrameWriter};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Frames the session may queue for the output task before it waits.
pub const OUT_QUEUE: usize = 32;
/// Pipe capacity asked for the job's stdin, stdout and stderr (fewer, larger reads and
/// writes, and fewer wake-ups of the job and of rexecd).
pub const PIPE_SIZE: i32 = 1 << 20;
/// Bytes read from the job's output per system call (sent as several chunks): fewer,
/// larger reads cost rexecd and the job fewer wake-ups.
pub const READ_SIZE: usize = 4 * CHUNK_SIZE;
/// How long the output of an ended rank may take to reach EOF.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// A readable end of the job's output.
pub type Source = Pin<Box<dyn AsyncRead + Send>>;

/// What the session asks of the output task.
#[derive(Debug)]
pub enum Out {
    /// Send this frame between output chunks.
    Frame(FromNode),
    /// The job ended: read both streams to EOF (at most [`DRAIN_LIMIT`]), then send
    /// this last frame and close.
    Finish(FromNode),
    /// Stop reading output; send this frame (if any) and close.
    Close(Option<FromNode>),
}

/// What the session hands the stdin task.
#[derive(Debug)]
pub enum StdinMsg {
    /// Bytes for the job.
    Data(Chunk),
    /// The client's stdin ended.
    End,
}

/// One output stream with its reusable buffer.
struct Stream {
    source: Option<Source>,
    buf: Vec<u8>,
    spare: Vec<u8>,
    stderr: bool,
}

impl Stream {
    fn new(source: Option<Source>, stderr: bool) -> Stream {
        Stream {
            source,
            buf: Vec::with_capacity(READ_SIZE),
            spare: Vec::with_capacity(CHUNK_SIZE),
            stderr,
        }
    }

    /// Reads the next chunk (cancel-safe); pending forever once closed.
    async fn read(&mut self) -> io::Result<usize> {
        match self.source.as_mut() {
            Some(source) => {
                self.buf.clear();
                source.read_buf(&mut self.buf).await
            }
            None => std::future::pending().await,
        }
    }

    /// Sends what was just read as chunks of at most [`CHUNK_SIZE`]; both the read
    /// buffer and the chunk buffer are kept for the next time.
    async fn send<W: AsyncWrite + Unpin>(
        &mut self,
        writer: &mut FrameWriter<W>,
    ) -> Result<(), FrameError> {
        for piece in self.buf.chunks(CHUNK_SIZE) {
            let mut bytes = std::mem::take(&mut self.spare);
            bytes.clear();
            bytes.extend_from_slice(piece);
            let msg = if self.stderr {
                FromNode::Stderr(Chunk(bytes))
            } else {
                FromNode::Stdout(Chunk(bytes))
            };
            let sent = writer.send(&msg).await;
            if let FromNode::Stdout(Chunk(bytes)) | FromNode::Stderr(Chunk(bytes)) = msg {
                self.spare = bytes;
            }
            sent?;
        }
        Ok(())
    }

    /// Handles a read result: sends data, closes the stream at EOF or error.
    async fn deliver<W: AsyncWrite + Unpin>(
        &mut self,
        read: io::Result<usize>,
        writer: &mut FrameWriter<W>,
    ) -> Result<(), FrameError> {
        match read {
            Ok(0) => self.source = None,
            Ok(_) => self.send(writer).await?,
            Err(e) => {
                tracing::debug!(error = %e, stderr = self.stderr, "job output failed");
                self.source = None;
            }
        }
        Ok(())
    }
}

/// Writes `first`, then the job's output and the session's frames, until told to stop
/// (see [`Out`]); then shuts the connection down (TLS close_notify). Ends early, with
/// the error, when the client connection fails.
pub async fn output<W: AsyncWrite + Unpin>(
    mut writer: FrameWriter<W>,
    first: FromNode,
    stdout: Option<Source>,
    stderr: Option<Source>,
    mut queue: mpsc::Receiver<Out>,
) -> Result<(), FrameError> {
    writer.send(&first).await?;
    let mut out = Stream::new(stdout, false);
    let mut err = Stream::new(stderr, true);
    let mut finish: Option<(FromNode, Instant)> = None;
    loop {
        if out.source.is_none()
            && err.source.is_none()
            && let Some((last, _)) = finish.take()
        {
            writer.send(&last).await?;
            break;
        }
        let deadline = finish.as_ref().map(|f| f.1);
        tokio::select! {
            read = out.read() => out.deliver(read, &mut writer).await?,
            read = err.read() => err.deliver(read, &mut writer).await?,
            msg = queue.recv(), if finish.is_none() => match msg {
                Some(Out::Frame(frame)) => writer.send(&frame).await?,
                Some(Out::Finish(last)) => finish = Some((last, Instant::now() + DRAIN_LIMIT)),
                Some(Out::Close(last)) => {
                    if let Some(last) = last {
                        writer.send(&last).await?;
                    }
                    break;
                }
                None => break,
            },
            _ = sleep_until(deadline) => {
                tracing::warn!("job output did not reach EOF in time; dropping the rest");
                out.source = None;
                err.source = None;
            }
        }
    }
    writer.shutdown().await
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Writes stdin chunks to the job. On [`StdinMsg::End`] it closes the pipe, or, for a
/// terminal (`eof_byte` set), writes the terminal's end-of-file character. When the job
/// stops reading (closed pipe), further input is discarded, as a local pipe would.
/// `taken` counts the bytes of every chunk written or discarded.
pub async fn feed_stdin<W: AsyncWrite + Unpin>(
    sink: W,
    eof_byte: Option<u8>,
    mut input: mpsc::UnboundedReceiver<StdinMsg>,
    taken: tokio::sync::watch::Sender<u64>,
) {
    let mut sink = Some(sink);
    while let Some(msg) = input.recv().await {
        let len = match &msg {
            StdinMsg::Data(chunk) => chunk.len() as u64,
            StdinMsg::End => 0,
        };
        let Some(w) = sink.as_mut() else {
            taken.send_modify(|t| *t += len);
            continue;
        };
        let result = match msg {
            StdinMsg::Data(chunk) => w.write_all(&chunk).await,
            StdinMsg::End => match eof_byte {
                Some(byte) => w.write_all(&[byte]).await,
                None => {
                    let _ = w.shutdown().await;
                    sink = None;
                    Ok(())
                }
            },
        };
        if let Err(e) = result {
            tracing::debug!(error = %e, "job stopped reading stdin; discarding the rest");
            sink = None;
        }
        taken.send_modify(|t| *t += len);
    }
}

/// Asks the kernel for a larger pipe buffer (best effort).
pub fn enlarge_pipe(fd: impl AsFd) {
    if let Err(e) = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_SIZE)) {
        tracing::debug!(error = %e, "cannot enlarge pipe");
    }
}
