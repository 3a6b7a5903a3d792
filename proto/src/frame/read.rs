//! The read side: [`FrameReader`] and the buffer state it shares with
//! [`Framed`](super::Framed). Bytes are buffered inside the state, never in
//! a future, which is what makes `recv` cancel-safe.

use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::{FrameError, HEADER_LEN, KEEP_BUF, MIN_READ, clamp_limit};

/// The read side's state, shared by [`FrameReader`] and [`Framed`] so that
/// buffered bytes survive [`Framed::into_split`].
#[derive(Debug)]
pub(crate) struct ReadState {
    /// Storage; `buf[..filled]` holds received bytes not yet consumed.
    buf: Vec<u8>,
    filled: usize,
    pub(crate) max: usize,
}

impl ReadState {
    pub(crate) fn new(max_frame: usize) -> Self {
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

    pub(crate) async fn recv<T, R>(&mut self, inner: &mut R) -> Result<Option<T>, FrameError>
    where
        T: DeserializeOwned,
        R: AsyncRead + Unpin,
    {
        loop {
            let need = self.needed()?;
            // `need` is at least HEADER_LEN, so this also means the header is in.
            if self.filled >= need {
                let body = &self.buf[HEADER_LEN..need];
                let (result, refused) = money::catch_refused_bid(|| postcard::from_bytes(body));
                self.consume(need);
                return match (result, refused) {
                    (Ok(msg), _) => Ok(Some(msg)),
                    (Err(_), Some(bid)) => Err(FrameError::BadBid(bid)),
                    (Err(e), None) => Err(FrameError::Decode(e)),
                };
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
    /// A reader over `inner` that carries on from `state` (used by `Framed::into_split`).
    pub(crate) fn from_state(inner: R, state: ReadState) -> Self {
        FrameReader { inner, state }
    }

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
