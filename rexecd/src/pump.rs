//! Moving bytes between a job and its client. [`pump_output`] reads a pipe or terminal
//! in chunks of up to [`CHUNK_SIZE`] and queues each one to the session's writer as soon
//! as it arrives (no line buffering); [`feed_stdin`] writes the client's stdin chunks to
//! the job and closes its stdin on `StdinEnd`; [`write_frames`] is the one task that
//! writes frames to the client, so output, heartbeats and the final `Exit` never
//! interleave. Queues are bounded, so a client that reads slowly slows the job down
//! instead of growing rexecd's memory.

use std::io;
use std::os::fd::AsFd;

use proto::node::{CHUNK_SIZE, Chunk, FromNode};
use proto::{FrameError, FrameWriter};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// Frames queued for the client before the pumps wait.
pub const OUT_QUEUE: usize = 32;
/// Stdin chunks queued for the job before rexecd stops reading the client.
pub const STDIN_QUEUE: usize = 64;
/// Pipe capacity asked for the job's stdout and stderr (fewer, larger reads).
pub const PIPE_SIZE: i32 = 1 << 20;

/// Which output stream a pump carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output (or the terminal).
    Stdout,
    /// Standard error.
    Stderr,
}

/// What the session hands the stdin task.
#[derive(Debug)]
pub enum StdinMsg {
    /// Bytes for the job.
    Data(Chunk),
    /// The client's stdin ended.
    End,
}

/// Reads `source` until EOF and queues each chunk for the client. Returns the number of
/// bytes moved; stops early (without error) when the writer is gone.
pub async fn pump_output<R: AsyncRead + Unpin>(
    mut source: R,
    stream: Stream,
    out: mpsc::Sender<FromNode>,
) -> io::Result<u64> {
    let mut total = 0u64;
    loop {
        let mut buf = Vec::with_capacity(CHUNK_SIZE);
        let n = source.read_buf(&mut buf).await?;
        if n == 0 {
            return Ok(total);
        }
        total += n as u64;
        let chunk = Chunk(buf);
        let msg = match stream {
            Stream::Stdout => FromNode::Stdout(chunk),
            Stream::Stderr => FromNode::Stderr(chunk),
        };
        if out.send(msg).await.is_err() {
            return Ok(total);
        }
    }
}

/// Writes stdin chunks to the job. On [`StdinMsg::End`] it closes the pipe, or, for a
/// terminal (`eof_byte` set), writes the terminal's end-of-file character. When the job
/// stops reading (closed pipe), further input is discarded, as a local pipe would.
pub async fn feed_stdin<W: AsyncWrite + Unpin>(
    sink: W,
    eof_byte: Option<u8>,
    mut input: mpsc::Receiver<StdinMsg>,
) {
    let mut sink = Some(sink);
    while let Some(msg) = input.recv().await {
        let Some(w) = sink.as_mut() else { continue };
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
    }
}

/// Writes every queued frame to the client until the queue closes, then shuts the
/// connection down (TLS close_notify).
pub async fn write_frames<W: AsyncWrite + Unpin>(
    mut writer: FrameWriter<W>,
    mut queue: mpsc::Receiver<FromNode>,
) -> Result<(), FrameError> {
    while let Some(msg) = queue.recv().await {
        writer.send(&msg).await?;
    }
    writer.shutdown().await
}

/// Asks the kernel for a larger pipe buffer (best effort).
pub fn enlarge_pipe(fd: impl AsFd) {
    if let Err(e) = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_SIZE)) {
        tracing::debug!(error = %e, "cannot enlarge pipe");
    }
}
