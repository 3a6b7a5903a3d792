//! FNV-1a 64, the one non-cryptographic hash of the workspace: the checksum
//! at the end of a profile file ([`crate::profile`]) and the stable order in
//! which a client tries the selectors it found (`rexec::find`). Not for
//! anything an adversary chooses the input of to collide.

/// FNV-1a's 64-bit offset basis: the hash of no bytes.
pub const FNV1A_BASIS: u64 = 0xcbf2_9ce4_8422_2325;

const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64 of `bytes`.
///
/// ```
/// use discovery::hash::fnv1a;
/// assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
/// assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
/// ```
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_extend(FNV1A_BASIS, bytes)
}

/// The FNV-1a 64 state `h` carried on over `bytes`: `fnv1a_extend(fnv1a(a), b)`
/// is the hash of `a` followed by `b`.
///
/// ```
/// use discovery::hash::{fnv1a, fnv1a_extend};
/// assert_eq!(fnv1a_extend(fnv1a(b"ab"), b"cd"), fnv1a(b"abcd"));
/// ```
pub fn fnv1a_extend(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}
