//! Length-prefixed framing: turns a byte stream (TCP, TLS) into a stream of
//! postcard-encoded messages and back.
//!
//! A frame is a 4-byte big-endian `u32` holding the body length, followed by
//! that many body bytes; the body is one value encoded with postcard. The
//! declared length is checked against the reader's limit as soon as the
//! 4 header bytes have arrived, before any buffer for the body is allocated,
//! and the buffer then grows only as body bytes actually arrive, so a peer
//! that announces a large frame and sends nothing costs almost nothing.
//!
//! [`FrameReader::recv`] is cancel-safe: every byte read from the stream is
//! kept in the reader's own buffer, so dropping a `recv` future (for example
//! because another branch of `tokio::select!` won) loses nothing and the next
//! `recv` carries on where the last one stopped. [`FrameWriter::send`] is not
//! cancel-safe: a dropped `send` may leave half a frame on the stream, after
//! which the connection must be closed.
//!
//! A body that does not decode ([`FrameError::Decode`]) is consumed whole,
//! so the stream stays in step and the next `recv` reads the next frame
//! (see [`FrameError::is_recoverable`]). Bytes left over after the decoded
//! value inside a body are ignored; that is what lets an old peer skip a
//! message type it does not know (see the crate docs).

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};

/// Default largest frame body accepted or sent: 1 MiB.
pub const DEFAULT_MAX_FRAME: usize = 1 << 20;

/// Bytes in the length prefix.
pub const HEADER_LEN: usize = 4;

/// The reader's buffer never starts smaller than this, so small frames that
/// arrive together are read with one system call.
const MIN_READ: usize = 8 * 1024;

/// Buffers larger than this are given back once empty, so one large frame
/// does not pin its memory for the life of a connection; smaller ones are
/// kept, so streaming 64 KiB chunks allocates nothing per message.
const KEEP_BUF: usize = 256 * 1024;

/// What went wrong while reading or writing frames.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The underlying stream failed.
    #[error("connection error: {0}")]
    Io(#[from] std::io::Error),
    /// A frame declared (or would need) a body longer than the limit.
    #[error(
        "frame of {len} bytes is larger than the limit of {max} bytes; the peer is misbehaving or needs a larger limit"
    )]
    TooLarge {
        /// Body length declared by the peer, or needed by the message being sent.
        len: usize,
        /// The limit in force.
        max: usize,
    },
    /// The stream ended in the middle of a frame.
    #[error("connection closed in the middle of a frame ({have} of {need} bytes received)")]
    Truncated {
        /// Bytes of the frame (header included) received before the end.
        have: usize,
        /// Bytes the frame needed (header included; 4 if the header itself was cut).
        need: usize,
    },
    /// A complete frame arrived but its body is not a valid encoding of the
    /// expected type. The frame has been consumed; the stream is still usable.
    #[error("received a malformed message: {0}")]
    Decode(postcard::Error),
    /// The message could not be encoded (a serde error in the value itself).
    #[error("could not encode message: {0}")]
    Encode(postcard::Error),
}

impl FrameError {
    /// True when the stream is still in step after this error (only
    /// [`FrameError::Decode`]): the caller may answer with an error message and
    /// keep reading. Every other error means the connection should be closed.
    pub fn is_recoverable(&self) -> bool {
        matches!(self, FrameError::Decode(_))
    }
}

/// Clamp a caller's limit to what the `u32` length prefix can express.
fn clamp_limit(max_frame: usize) -> usize {
    max_frame.min(u32::MAX as usize)
}

/// Encode `msg` as one complete frame (length prefix and body).
///
/// ```
/// let frame = proto::encode_frame(&(7u8, "hi"), proto::DEFAULT_MAX_FRAME).unwrap();
/// assert_eq!(frame, [0, 0, 0, 4, 7, 2, b'h', b'i']);
/// ```
pub fn encode_frame<T: Serialize + ?Sized>(
    msg: &T,
    max_frame: usize,
) -> Result<Vec<u8>, FrameError> {
    let mut out = Vec::new();
    encode_frame_into(msg, max_frame, &mut out)?;
    Ok(out)
}

/// Encode `msg` as one frame into `out`, replacing its contents (keeps its capacity).
fn encode_frame_into<T: Serialize + ?Sized>(
    msg: &T,
    max_frame: usize,
    out: &mut Vec<u8>,
) -> Result<(), FrameError> {
    let max = clamp_limit(max_frame);
    let mut buf = std::mem::take(out);
    buf.clear();
    buf.extend_from_slice(&[0; HEADER_LEN]);
    let mut buf = postcard::to_extend(msg, buf).map_err(FrameError::Encode)?;
    let len = buf.len() - HEADER_LEN;
    if len > max {
        return Err(FrameError::TooLarge { len, max });
    }
    // `len <= max <= u32::MAX`, so the conversion cannot fail.
    let prefix = u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes();
    buf[..HEADER_LEN].copy_from_slice(&prefix);
    *out = buf;
    Ok(())
}

/// The read side's state, shared by [`FrameReader`] and [`Framed`] so that
/// buffered bytes survive [`Framed::into_split`].
#[derive(Debug)]
struct ReadState {
    /// Storage; `buf[..filled]` holds received bytes not yet consumed.
    buf: Vec<u8>,
    filled: usize,
    max: usize,
}

impl ReadState {
    fn new(max_frame: usize) -> Self {
        ReadState {
            buf: Vec::new(),
            filled: 0,
            max: clamp_limit(max_frame),
        }
    }

    /// Bytes the frame at the front needs in total, header included (just
    /// the header while it is incomplete); refuses an oversized declaration.
    fn needed(&self) -> Result<usize, FrameError> {
        if self.filled < HEADER_LEN {
            return Ok(HEADER_LEN);
        }
        let mut prefix = [0u8; HEADER_LEN];
        prefix.copy_from_slice(&self.buf[..HEADER_LEN]);
        let len = u32::from_be_bytes(prefix) as usize;
        if len > self.max {
            return Err(FrameError::TooLarge { len, max: self.max });
        }
        Ok(HEADER_LEN + len)
    }

    /// Drop the first `n` bytes of the buffer.
    fn consume(&mut self, n: usize) {
        self.buf.copy_within(n..self.filled, 0);
        self.filled -= n;
        // Give back the memory of a large frame once it is dealt with.
        if self.filled == 0 && self.buf.len() > KEEP_BUF {
            self.buf = Vec::new();
        }
    }

    async fn recv<T, R>(&mut self, inner: &mut R) -> Result<Option<T>, FrameError>
    where
        T: DeserializeOwned,
        R: AsyncRead + Unpin,
    {
        loop {
            let need = self.needed()?;
            // `need` is at least HEADER_LEN, so this also means the header is in.
            if self.filled >= need {
                let result = postcard::from_bytes(&self.buf[HEADER_LEN..need]);
                self.consume(need);
                return result.map(Some).map_err(FrameError::Decode);
            }
            // Grow a full buffer towards what this frame needs, at most
            // doubling, so memory follows the bytes that really arrived.
            if self.filled == self.buf.len() {
                let target = need.min(self.buf.len().saturating_mul(2)).max(MIN_READ);
                // A fresh zeroed allocation (calloc) plus one copy of the
                // filled part costs less than zero-filling in place.
                let mut bigger = vec![0; target];
                bigger[..self.filled].copy_from_slice(&self.buf[..self.filled]);
                self.buf = bigger;
            }
            // `read` is cancel-safe: if this future is dropped here, no byte
            // has been taken from the stream, and `filled` is unchanged.
            let n = inner.read(&mut self.buf[self.filled..]).await?;
            if n == 0 {
                return if self.filled == 0 {
                    Ok(None)
                } else {
                    Err(FrameError::Truncated {
                        have: self.filled,
                        need,
                    })
                };
            }
            self.filled += n;
        }
    }
}

/// Reads frames from an [`AsyncRead`] and decodes them.
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: R,
    state: ReadState,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Wrap `inner`, refusing frames whose body is longer than `max_frame` bytes.
    pub fn new(inner: R, max_frame: usize) -> Self {
        FrameReader {
            inner,
            state: ReadState::new(max_frame),
        }
    }

    /// Read and decode the next frame.
    ///
    /// Returns `Ok(None)` on a clean end of stream at a frame boundary; an end
    /// of stream inside a frame is [`FrameError::Truncated`]. Cancel-safe:
    /// dropping the returned future loses no data.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let bytes = proto::encode_frame(&"hello", 64).unwrap();
    /// let mut reader = proto::FrameReader::new(&bytes[..], 64);
    /// assert_eq!(reader.recv::<String>().await.unwrap().as_deref(), Some("hello"));
    /// assert_eq!(reader.recv::<String>().await.unwrap(), None);
    /// # });
    /// ```
    pub async fn recv<T: DeserializeOwned>(&mut self) -> Result<Option<T>, FrameError> {
        self.state.recv(&mut self.inner).await
    }
}

impl<R> FrameReader<R> {
    /// The wrapped stream.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The wrapped stream, mutably. Reading from it directly corrupts framing.
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    /// Bytes received but not yet returned as a frame.
    pub fn buffered(&self) -> usize {
        self.state.filled
    }

    /// The body length limit in force.
    pub fn max_frame(&self) -> usize {
        self.state.max
    }
}

/// Encodes messages and writes them as frames to an [`AsyncWrite`].
#[derive(Debug)]
pub struct FrameWriter<W> {
    inner: W,
    buf: Vec<u8>,
    max: usize,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    /// Wrap `inner`, refusing to send bodies longer than `max_frame` bytes.
    pub fn new(inner: W, max_frame: usize) -> Self {
        FrameWriter {
            inner,
            buf: Vec::new(),
            max: clamp_limit(max_frame),
        }
    }

    /// Encode `msg`, write it as one frame and flush. A message too large
    /// for the limit is refused ([`FrameError::TooLarge`]) and nothing is
    /// written. Not cancel-safe (see the module docs).
    pub async fn send<T: Serialize + ?Sized>(&mut self, msg: &T) -> Result<(), FrameError> {
        encode_frame_into(msg, self.max, &mut self.buf)?;
        self.inner.write_all(&self.buf).await?;
        self.inner.flush().await?;
        // Do not keep a huge buffer around after one large message.
        if self.buf.capacity() > KEEP_BUF {
            self.buf = Vec::new();
        }
        Ok(())
    }

    /// Shut down the write side (sends TLS close_notify / TCP FIN).
    pub async fn shutdown(&mut self) -> Result<(), FrameError> {
        self.inner.shutdown().await?;
        Ok(())
    }
}

impl<W> FrameWriter<W> {
    /// The wrapped stream.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// The wrapped stream, mutably. Writing to it directly corrupts framing.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    /// The wrapped stream.
    pub fn into_inner(self) -> W {
        self.inner
    }

    /// The body length limit in force.
    pub fn max_frame(&self) -> usize {
        self.max
    }
}

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
            FrameReader {
                inner: r,
                state: self.read,
            },
            FrameWriter {
                inner: w,
                buf: self.write_buf,
                max,
            },
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
