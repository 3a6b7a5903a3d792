//! The write side: [`FrameWriter`] encodes a message into a reused buffer
//! and writes it as one frame.

use serde::Serialize;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::{FrameError, KEEP_BUF, clamp_limit, encode_frame_into};

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
    /// A writer over `inner` reusing `buf` (used by `Framed::into_split`).
    pub(crate) fn from_parts(inner: W, buf: Vec<u8>, max: usize) -> Self {
        FrameWriter { inner, buf, max }
    }

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
