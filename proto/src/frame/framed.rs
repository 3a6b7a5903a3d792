//! [`Framed`]: frames both ways over one stream, and its split into a
//! reader and a writer for separate tasks.

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};

use super::read::ReadState;
use super::{FrameError, FrameReader, FrameWriter, KEEP_BUF, encode_frame_into};

/// Frames in both directions over one stream; split it with
/// [`Framed::into_split`] to read and write from different tasks.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let (a, b) = tokio::io::duplex(1024);
/// let mut a = proto::Framed::new(a, proto::DEFAULT_MAX_FRAME);
/// let mut b = proto::Framed::new(b, proto::DEFAULT_MAX_FRAME);
/// a.send(&42u32).await.unwrap();
/// assert_eq!(b.recv::<u32>().await.unwrap(), Some(42));
/// # });
/// ```
#[derive(Debug)]
pub struct Framed<S> {
    stream: S,
    read: ReadState,
    write_buf: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Framed<S> {
    /// Wrap `stream` with the same body limit in both directions.
    pub fn new(stream: S, max_frame: usize) -> Self {
        Framed {
            stream,
            read: ReadState::new(max_frame),
            write_buf: Vec::new(),
        }
    }

    /// Encode `msg`, write it as one frame and flush. Not cancel-safe.
    pub async fn send<T: Serialize + ?Sized>(&mut self, msg: &T) -> Result<(), FrameError> {
        encode_frame_into(msg, self.read.max, &mut self.write_buf)?;
        self.stream.write_all(&self.write_buf).await?;
        self.stream.flush().await?;
        if self.write_buf.capacity() > KEEP_BUF {
            self.write_buf = Vec::new();
        }
        Ok(())
    }

    /// Read and decode the next frame; see [`FrameReader::recv`]. Cancel-safe.
    pub async fn recv<T: DeserializeOwned>(&mut self) -> Result<Option<T>, FrameError> {
        self.read.recv(&mut self.stream).await
    }

    /// Split into a reader and a writer (with `tokio::io::split`), keeping any
    /// bytes already received.
    pub fn into_split(self) -> (FrameReader<ReadHalf<S>>, FrameWriter<WriteHalf<S>>) {
        let max = self.read.max;
        let (r, w) = tokio::io::split(self.stream);
        (
            FrameReader::from_state(r, self.read),
            FrameWriter::from_parts(w, self.write_buf, max),
        )
    }
}

impl<S> Framed<S> {
    /// The wrapped stream (for example to read the peer's TLS certificate).
    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    /// The wrapped stream, mutably. Direct reads or writes corrupt framing.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// The body length limit in force.
    pub fn max_frame(&self) -> usize {
        self.read.max
    }
}
