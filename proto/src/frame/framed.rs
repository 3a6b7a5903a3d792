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
    /// Largest body sent (the read limit is in `read`).
    write_max: usize,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Framed<S> {
    /// Wrap `stream` with the same body limit in both directions.
    pub fn new(stream: S, max_frame: usize) -> Self {
        Framed::with_limits(stream, max_frame, max_frame)
    }

    /// Wrap `stream` with one body limit for frames received and another for
    /// frames sent: a server whose requests are small but whose answers may be
    /// large reads with a small limit, so a peer cannot make it buffer a large
    /// request.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let (a, b) = tokio::io::duplex(4096);
    /// let mut server = proto::Framed::with_limits(a, 16, 1024);
    /// let mut client = proto::Framed::new(b, 1024);
    /// server.send(&"an answer longer than sixteen bytes").await.unwrap();
    /// assert!(client.recv::<String>().await.unwrap().is_some());
    /// client.send(&"a request longer than sixteen bytes").await.unwrap();
    /// assert!(matches!(
    ///     server.recv::<String>().await,
    ///     Err(proto::FrameError::TooLarge { max: 16, .. })
    /// ));
    /// # });
    /// ```
    pub fn with_limits(stream: S, max_recv: usize, max_send: usize) -> Self {
        Framed {
            stream,
            read: ReadState::new(max_recv),
            write_buf: Vec::new(),
            write_max: max_send,
        }
    }

    /// Encode `msg`, write it as one frame and flush. Not cancel-safe.
    pub async fn send<T: Serialize + ?Sized>(&mut self, msg: &T) -> Result<(), FrameError> {
        encode_frame_into(msg, self.write_max, &mut self.write_buf)?;
        self.write_out().await
    }

    /// Encode `msgs` and write them as consecutive frames in one write, then flush,
    /// so that they reach the peer in one flight. If any is too large for the limit
    /// ([`FrameError::TooLarge`]), nothing is written. Not cancel-safe.
    pub async fn send_all<T: Serialize>(&mut self, msgs: &[T]) -> Result<(), FrameError> {
        let mut all = Vec::new();
        for msg in msgs {
            encode_frame_into(msg, self.write_max, &mut self.write_buf)?;
            all.extend_from_slice(&self.write_buf);
        }
        self.write_buf = all;
        self.write_out().await
    }

    /// Writes the encoded frames in `write_buf` and flushes; a buffer grown by one
    /// large message is not kept.
    async fn write_out(&mut self) -> Result<(), FrameError> {
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
        let max = self.write_max;
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

    /// The body length limit in force for frames received.
    pub fn max_frame(&self) -> usize {
        self.read.max
    }

    /// The body length limit in force for frames sent.
    pub fn max_send(&self) -> usize {
        super::clamp_limit(self.write_max)
    }
}
