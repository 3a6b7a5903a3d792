//! [`Chunk`]: a run of raw bytes (stdin, stdout, stderr) encoded as a
//! length and the bytes themselves.
//!
//! A plain `Vec<u8>` field would encode the same way under postcard, but it
//! decodes one byte at a time through serde's sequence machinery and may
//! preallocate from the declared length. `Chunk` uses serde's bytes path
//! instead: decoding is a single bounds-checked copy of exactly the bytes
//! present in the frame.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Suggested largest chunk of output or input per message (64 KiB): large
/// enough for throughput, small enough to keep interactive echo prompt.
pub const CHUNK_SIZE: usize = 64 * 1024;

/// Raw bytes of a stream, sent as they are.
///
/// ```
/// let chunk = proto::Chunk::from(&b"hi\n"[..]);
/// let body = postcard::to_stdvec(&chunk).unwrap();
/// assert_eq!(body, [3, b'h', b'i', b'\n']);
/// assert_eq!(postcard::from_bytes::<proto::Chunk>(&body).unwrap(), chunk);
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Chunk(pub Vec<u8>);

impl Chunk {
    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The bytes, owned.
    pub fn into_vec(self) -> Vec<u8> {
        self.0
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Chunk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Chunk({:?})", String::from_utf8_lossy(&self.0))
    }
}

impl From<Vec<u8>> for Chunk {
    fn from(v: Vec<u8>) -> Self {
        Chunk(v)
    }
}

impl From<&[u8]> for Chunk {
    fn from(v: &[u8]) -> Self {
        Chunk(v.to_vec())
    }
}

impl std::ops::Deref for Chunk {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl Serialize for Chunk {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Chunk {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BytesVisitor;
        impl<'de> Visitor<'de> for BytesVisitor {
            type Value = Chunk;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a byte string")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Chunk, E> {
                Ok(Chunk(v.to_vec()))
            }
            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Chunk, E> {
                Ok(Chunk(v))
            }
        }
        deserializer.deserialize_byte_buf(BytesVisitor)
    }
}
