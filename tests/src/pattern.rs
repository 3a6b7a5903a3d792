//! A deterministic stream of binary bytes that both a job (through the
//! `rexec-testgen` binary) and a test can produce, so that a test checks
//! output of any size byte for byte without keeping it in memory.
//!
//! The stream is made of 1 MiB blocks of pseudo-random bytes (every byte
//! value occurs, including NUL, `\n` and `\r`); block `k` starts with `k` as
//! 8 little-endian bytes, so a lost, repeated or reordered block is caught.

/// Size of one block.
pub const BLOCK: usize = 1 << 20;

/// The block pattern for `seed` (before the block number is stamped in).
pub fn block(seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(BLOCK);
    while out.len() < BLOCK {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// Write `len` bytes of the stream for `seed` to `w`.
pub fn write_stream(seed: u64, len: u64, w: &mut impl std::io::Write) -> std::io::Result<()> {
    let mut b = block(seed);
    let mut k: u64 = 0;
    let mut left = len;
    while left > 0 {
        b[..8].copy_from_slice(&k.to_le_bytes());
        let n = left.min(BLOCK as u64) as usize;
        w.write_all(&b[..n])?;
        left -= n as u64;
        k += 1;
    }
    Ok(())
}

/// The whole stream for `seed` of `len` bytes, for small sizes.
pub fn stream(seed: u64, len: u64) -> Vec<u8> {
    let mut v = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = write_stream(seed, len, &mut v);
    v
}

/// Checks a stream as it arrives in chunks of any size.
#[derive(Debug)]
pub struct Verifier {
    block: Vec<u8>,
    pos: u64,
    /// The first offset where the bytes differed, if any.
    pub mismatch: Option<u64>,
}

impl Verifier {
    /// A checker for the stream of `seed`.
    pub fn new(seed: u64) -> Verifier {
        Verifier {
            block: block(seed),
            pos: 0,
            mismatch: None,
        }
    }

    /// Bytes seen so far.
    pub fn len(&self) -> u64 {
        self.pos
    }

    /// True when nothing has been seen.
    pub fn is_empty(&self) -> bool {
        self.pos == 0
    }

    /// Check the next bytes.
    pub fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let k = self.pos / BLOCK as u64;
            let off = (self.pos % BLOCK as u64) as usize;
            let n = data.len().min(BLOCK - off);
            self.block[..8].copy_from_slice(&k.to_le_bytes());
            if self.mismatch.is_none() && data[..n] != self.block[off..off + n] {
                let at = data[..n]
                    .iter()
                    .zip(&self.block[off..off + n])
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                self.mismatch = Some(self.pos + at as u64);
            }
            self.pos += n as u64;
            data = &data[n..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifier_accepts_the_stream_in_odd_chunks_and_finds_a_flip() {
        let s = stream(7, 3 * BLOCK as u64 + 5);
        let mut v = Verifier::new(7);
        for c in s.chunks(65_537) {
            v.feed(c);
        }
        assert_eq!((v.len(), v.mismatch), (s.len() as u64, None));
        let mut bad = s.clone();
        bad[BLOCK + 3] ^= 1;
        let mut v = Verifier::new(7);
        v.feed(&bad);
        assert_eq!(v.mismatch, Some(BLOCK as u64 + 3));
        assert!(s.contains(&0) && s.contains(&b'\n') && s.contains(&0xff));
    }
}
