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
//! A body that does not decode ([`FrameError::Decode`], or [`FrameError::BadBid`] when
//! what failed is a negative bid) is consumed whole,
//! so the stream stays in step and the next `recv` reads the next frame
//! (see [`FrameError::is_recoverable`]). Bytes left over after the decoded
//! value inside a body are ignored; that is what lets an old peer skip a
//! message type it does not know (see the crate docs).

use serde::Serialize;

mod framed;
mod read;
mod write;

pub use framed::Framed;
pub use read::FrameReader;
pub use write::FrameWriter;

/// Default largest frame body accepted or sent: 1 MiB.
pub const DEFAULT_MAX_FRAME: usize = 1 << 20;

/// Bytes in the length prefix.
pub const HEADER_LEN: usize = 4;

/// The reader's buffer never starts smaller than this, so small frames that
/// arrive together are read with one system call.
pub(crate) const MIN_READ: usize = 8 * 1024;

/// Buffers larger than this are given back once empty, so one large frame
/// does not pin its memory for the life of a connection; smaller ones are
/// kept, so streaming 64 KiB chunks allocates nothing per message.
pub(crate) const KEEP_BUF: usize = 256 * 1024;

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
    #[error("received a malformed message ({0}); the peer may run an incompatible version")]
    Decode(postcard::Error),
    /// A complete frame arrived holding a bid that cannot be one (a negative rate; see
    /// `money::wire`): the one check of a bid that comes from the network. The frame has
    /// been consumed; the stream is still usable.
    #[error("{0}")]
    BadBid(money::BidError),
    /// The message could not be encoded (a serde error in the value itself).
    #[error("could not encode message: {0}")]
    Encode(postcard::Error),
}

impl FrameError {
    /// True when the stream is still in step after this error (only
    /// [`FrameError::Decode`] and [`FrameError::BadBid`]): the caller may answer with an
    /// error message and keep reading. Every other error means the connection should be
    /// closed.
    pub fn is_recoverable(&self) -> bool {
        matches!(self, FrameError::Decode(_) | FrameError::BadBid(_))
    }
}

/// Clamp a caller's limit to what the `u32` length prefix can express.
pub(crate) fn clamp_limit(max_frame: usize) -> usize {
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
pub(crate) fn encode_frame_into<T: Serialize + ?Sized>(
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
