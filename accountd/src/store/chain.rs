//! The hash chain over the ledger's entries: every entry stores
//! SHA-256(`"rexec-ledger-entry-v1"`, previous entry's hash, its canonical
//! content), the first entry's previous hash being 32 zero bytes. Changing,
//! deleting or inserting an entry breaks the chain at that entry (or at the
//! one after it) unless every later hash is recomputed too, which the signed
//! chain heads kept outside the database then reveal.
//!
//! The canonical content is every stored column of the entry in a fixed
//! order, each field framed so that no two entries encode alike: integers as
//! 8 bytes big-endian, text as a 4-byte big-endian length and its UTF-8
//! bytes, and an optional field as one byte 0 (absent) or 1 followed by the
//! value. The key text is not hashed: it is derived from node, job, kind and
//! sequence, which are (and the audit checks that it matches them).

use ring::digest::{Context, SHA256};

use super::query::EntryColumns;

/// Length of a hash.
pub const HASH_LEN: usize = 32;

/// A chain hash.
pub type Hash = [u8; HASH_LEN];

/// The previous hash of the first entry.
pub const GENESIS: Hash = [0; HASH_LEN];

const DOMAIN: &[u8] = b"rexec-ledger-entry-v1\0";

struct Canon(Context);

impl Canon {
    fn int(&mut self, v: i64) {
        self.0.update(&v.to_be_bytes());
    }

    fn text(&mut self, s: &str) {
        let len = u32::try_from(s.len()).unwrap_or(u32::MAX);
        self.0.update(&len.to_be_bytes());
        self.0.update(s.as_bytes());
    }

    fn opt_int(&mut self, v: Option<i64>) {
        match v {
            None => self.0.update(&[0]),
            Some(v) => {
                self.0.update(&[1]);
                self.int(v);
            }
        }
    }

    fn opt_text(&mut self, v: Option<&str>) {
        match v {
            None => self.0.update(&[0]),
            Some(v) => {
                self.0.update(&[1]);
                self.text(v);
            }
        }
    }
}

/// The hash of entry `e` following an entry whose hash is `prev`.
pub fn entry_hash(prev: &Hash, e: &EntryColumns) -> Hash {
    let mut c = Canon(Context::new(&SHA256));
    c.0.update(DOMAIN);
    c.0.update(prev);
    c.int(e.id);
    c.int(e.at_us);
    c.text(&e.user);
    c.int(e.amount);
    c.text(&e.kind);
    c.opt_text(e.node.as_deref());
    c.opt_text(e.job.as_deref());
    c.opt_int(e.seq);
    c.opt_int(e.rank);
    c.opt_int(e.interval.0);
    c.opt_int(e.interval.1);
    c.opt_int(e.cpu_us);
    c.text(&e.actor);
    c.opt_text(e.reason.as_deref());
    c.int(e.balance_after);
    let mut out = GENESIS;
    out.copy_from_slice(c.0.finish().as_ref());
    out
}

/// A stored hash as a [`Hash`], `None` when absent or of the wrong length.
pub fn stored(h: Option<&[u8]>) -> Option<Hash> {
    h.and_then(|h| Hash::try_from(h).ok())
}

/// Lower-case hex of a hash, for messages and anchors.
pub fn hex(h: &Hash) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes written as hex digits in `s`, `None` when it is not hex.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Walks the entries in id order and returns the first entry where the
/// chain breaks, with why; `None` when every hash matches.
pub struct Verifier {
    prev: Hash,
    /// Entries checked.
    pub checked: u64,
    /// The first break: entry id and what is wrong.
    pub first_break: Option<(i64, String)>,
    /// Hash of the last entry checked (the chain head).
    pub head: (i64, Hash),
}

impl Default for Verifier {
    fn default() -> Self {
        Verifier {
            prev: GENESIS,
            checked: 0,
            first_break: None,
            head: (0, GENESIS),
        }
    }
}

impl Verifier {
    /// Checks the next entry (in id order) and its stored hash.
    pub fn next(&mut self, e: &EntryColumns, hash: Option<&[u8]>) {
        self.checked += 1;
        let expect = entry_hash(&self.prev, e);
        let got = stored(hash);
        if self.first_break.is_none() {
            let why = match got {
                None => Some(format!("entry {} carries no chain hash", e.id)),
                Some(h) if h != expect => Some(format!(
                    "the hash chain breaks at entry {}: its content or the entry before it was changed, or an entry before it was deleted or inserted",
                    e.id
                )),
                Some(_) => None,
            };
            if let Some(why) = why {
                self.first_break = Some((e.id, why));
            }
        }
        // Go on from what is stored, so one change is named once.
        self.prev = got.unwrap_or(expect);
        self.head = (e.id, self.prev);
    }
}
