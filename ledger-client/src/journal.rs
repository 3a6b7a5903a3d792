//! The node's debit journal: an append-only file that holds every charge a
//! node has decided on until accountd has acknowledged (or definitively
//! refused) it, so no charge is lost or doubled across restarts of the node.
//!
//! Format: the magic `RXJ1`, then records of `[len: u32 LE][crc32: u32 LE]
//! [postcard body]`. A record is `Intent(charge)` (written and fsynced before
//! the charge is ever sent) or `Settled(key, outcome)`. On open the file is
//! replayed; a torn tail (a record cut short by a crash mid-append) is cut
//! off. A complete record that fails its checksum is damage rather than a
//! crash: replay skips to the first later offset from which records run intact
//! to the end of the file, keeps everything from there, saves the damaged
//! file as `<journal>.damaged-<time>` and logs an error (a charge in the
//! damaged bytes may be lost, and the copy is what to compare with accountd's
//! history); the journal is then rewritten clean. What is still pending is
//! sent again; accountd's idempotency keys make a second
//! arrival harmless. When the file has grown past [`COMPACT_AT`] and is mostly
//! settled records, it is rewritten with only the pending intents.
//!
//! One process at a time: opening takes an exclusive `flock` on a sidecar
//! `<journal>.lock` file (the journal itself is replaced when compacted), so
//! a second rexecd on the same journal is refused instead of interleaving.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use proto::account::{AccountOp, ChargeReceipt, Debit, DebitKey, EntryKind, ErrorCode, Refund};
use proto::project::ProjectDebit;
use serde::{Deserialize, Serialize};

const MAGIC: &[u8; 4] = b"RXJ1";
/// Largest record accepted when reading back (anything larger is corruption).
pub const MAX_RECORD: usize = 64 * 1024;
/// When the file is larger than this and mostly settled, it is compacted.
pub const COMPACT_AT: u64 = 1 << 20;
/// Mode of a new journal (and of its compacted copy): it names users and what
/// they were charged, which is nobody else's business on the node.
pub const JOURNAL_MODE: u32 = 0o600;

/// A charge a node asks accountd to apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Charge {
    /// Take credits for CPU used.
    Debit(Debit),
    /// Give back an over-charge.
    Refund(Refund),
    /// Take credits for CPU used from a project, for the member who used it
    /// (`rexec -A`). Last, so that journals written before it read as before.
    ProjectDebit(ProjectDebit),
}

impl Charge {
    /// The idempotency key.
    pub fn key(&self) -> &DebitKey {
        match self {
            Charge::Debit(d) => &d.key,
            Charge::Refund(r) => &r.key,
            Charge::ProjectDebit(p) => &p.debit.key,
        }
    }

    /// Debit or refund.
    pub fn kind(&self) -> EntryKind {
        match self {
            Charge::Debit(_) | Charge::ProjectDebit(_) => EntryKind::Debit,
            Charge::Refund(_) => EntryKind::Refund,
        }
    }

    /// The user charged (for a project debit, the member who spent).
    pub fn user(&self) -> &str {
        match self {
            Charge::Debit(d) => &d.user,
            Charge::Refund(r) => &r.user,
            Charge::ProjectDebit(p) => &p.debit.user,
        }
    }

    /// The project charged, `None` for the user's personal account.
    pub fn project(&self) -> Option<&str> {
        match self {
            Charge::ProjectDebit(p) => Some(&p.project),
            Charge::Debit(_) | Charge::Refund(_) => None,
        }
    }

    /// Micro-credits taken (a refund's given back).
    pub fn amount(&self) -> i64 {
        match self {
            Charge::Debit(d) => d.amount,
            Charge::Refund(r) => r.amount,
            Charge::ProjectDebit(p) => p.debit.amount,
        }
    }

    /// The request to send.
    pub fn to_op(&self) -> AccountOp {
        match self {
            Charge::Debit(d) => AccountOp::Debit(d.clone()),
            Charge::Refund(r) => AccountOp::Refund(r.clone()),
            Charge::ProjectDebit(p) => {
                AccountOp::Project(proto::project::ProjectOp::Debit(p.clone()))
            }
        }
    }

    fn id(&self) -> ChargeId {
        (self.kind() == EntryKind::Refund, self.key().clone())
    }
}

/// (is refund, key): debits and refunds have separate key spaces.
type ChargeId = (bool, DebitKey);

/// How accountd settled a charge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// Applied (possibly earlier: `receipt.duplicate`).
    Applied(ChargeReceipt),
    /// Refused for good (not retryable): code and message.
    Refused(ErrorCode, String),
}

#[derive(Serialize, Deserialize)]
enum Record {
    Intent(Charge),
    Settled(bool, DebitKey, Outcome),
}

/// Why the journal failed. Any error here means the charge was not recorded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// Reading or writing the file failed.
    #[error("debit journal {path}: {source}")]
    Io {
        /// The journal file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Another process (or client) has the journal open.
    #[error(
        "debit journal {path} is in use by another process (lock {lock} is held); stop the other rexecd first"
    )]
    Locked {
        /// The journal file.
        path: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// The file is not a journal.
    #[error("{path} is not a debit journal (bad magic): move it away or fix the journal path")]
    NotAJournal {
        /// The file.
        path: PathBuf,
    },
    /// A record could not be encoded.
    #[error("cannot encode a journal record: {0}")]
    Encode(postcard::Error),
}

/// The open journal; see the module docs.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    len: u64,
    next: u64,
    order: BTreeMap<u64, Charge>,
    index: HashMap<ChargeId, u64>,
    compact_at: u64,
    _lock: nix::fcntl::Flock<File>,
    /// Bytes cut off a torn tail when the journal was opened.
    pub discarded_tail: u64,
    /// Unreadable bytes skipped in the middle when the journal was opened
    /// (damage, not a crash: the original is kept beside the journal).
    pub damaged_bytes: u64,
}

/// CRC-32 (IEEE) of a record body, by `crc32fast` (SIMD where the CPU has it:
/// measured 14 to 70 times the speed of the table loop it replaced).
fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

impl Journal {
    /// Opens (creating if missing) and replays the journal at `path`.
    pub fn open(path: &Path) -> Result<Journal, JournalError> {
        let io = |source| JournalError::Io {
            path: path.to_path_buf(),
            source,
        };
        let lock_path = lock_path(path);
        let lock_file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(JOURNAL_MODE)
            .open(&lock_path)
            .map_err(io)?;
        let lock = nix::fcntl::Flock::lock(lock_file, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .map_err(|_| JournalError::Locked {
                path: path.to_path_buf(),
                lock: lock_path.clone(),
            })?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(JOURNAL_MODE)
            .open(path)
            .map_err(io)?;
        let mut data = Vec::new();
        file.read_to_end(&mut data).map_err(io)?;
        let mut j = Journal {
            path: path.to_path_buf(),
            file,
            len: 0,
            next: 0,
            order: BTreeMap::new(),
            index: HashMap::new(),
            compact_at: COMPACT_AT,
            _lock: lock,
            discarded_tail: 0,
            damaged_bytes: 0,
        };
        if data.len() < MAGIC.len() {
            if !MAGIC.starts_with(&data) {
                return Err(JournalError::NotAJournal {
                    path: path.to_path_buf(),
                });
            }
            j.file.set_len(0).map_err(io)?;
            j.file.seek(SeekFrom::Start(0)).map_err(io)?;
            j.file.write_all(MAGIC).map_err(io)?;
            j.file.sync_all().map_err(io)?;
            sync_dir(path).map_err(io)?;
            j.len = MAGIC.len() as u64;
            return Ok(j);
        }
        if &data[..4] != MAGIC {
            return Err(JournalError::NotAJournal {
                path: path.to_path_buf(),
            });
        }
        let mut pos = MAGIC.len();
        loop {
            if let Some((record, used)) = parse_record(&data[pos..]) {
                j.apply(record);
                pos += used;
                continue;
            }
            // A record cut short is what a crash mid-append leaves: the tail is cut
            // below. A complete record that does not check out, with good records
            // after it running to the end, is damage: skip to them rather than lose
            // the rest.
            if is_torn(&data[pos..]) {
                break;
            }
            let Some(next) = resync(&data, pos) else {
                break;
            };
            j.damaged_bytes += (next - pos) as u64;
            pos = next;
        }
        if j.damaged_bytes > 0 {
            let copy = damaged_copy_path(path);
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(JOURNAL_MODE)
                .open(&copy)
                .and_then(|mut f| f.write_all(&data).and_then(|_| f.sync_all()))
                .map_err(|source| JournalError::Io {
                    path: copy.clone(),
                    source,
                })?;
            tracing::error!(
                path = %path.display(),
                bytes = j.damaged_bytes,
                copy = %copy.display(),
                "the debit journal was damaged in the middle: skipped the unreadable bytes and \
                 kept every record after them; a charge recorded there may be lost, so compare \
                 the copy with accountd's history"
            );
            j.compact()?;
            return Ok(j);
        }
        if pos < data.len() {
            j.discarded_tail = (data.len() - pos) as u64;
            tracing::warn!(path = %path.display(), bytes = j.discarded_tail, "cut a torn tail off the debit journal");
            j.file.set_len(pos as u64).map_err(io)?;
            j.file.sync_all().map_err(io)?;
        }
        j.len = pos as u64;
        j.file.seek(SeekFrom::Start(j.len)).map_err(io)?;
        Ok(j)
    }

    fn apply(&mut self, r: Record) {
        match r {
            Record::Intent(c) => {
                let id = c.id();
                if !self.index.contains_key(&id) {
                    self.index.insert(id, self.next);
                    self.order.insert(self.next, c);
                    self.next += 1;
                }
            }
            Record::Settled(refund, key, _) => {
                if let Some(n) = self.index.remove(&(refund, key)) {
                    self.order.remove(&n);
                }
            }
        }
    }

    fn append(&mut self, r: &Record) -> Result<(), JournalError> {
        self.append_all(std::slice::from_ref(r))
    }

    /// Appends records with one write and one fsync. A crash part way leaves
    /// a prefix of them and a torn tail, which the next open cuts off.
    fn append_all(&mut self, records: &[Record]) -> Result<(), JournalError> {
        let mut buf = Vec::new();
        for r in records {
            encode_record(r, &mut buf)?;
        }
        let io = |source| JournalError::Io {
            path: self.path.clone(),
            source,
        };
        let written = self
            .file
            .write_all(&buf)
            .and_then(|_| self.file.sync_data());
        if let Err(e) = written {
            // Cut off whatever part of the record reached the file, so a later
            // record is never hidden behind a torn one.
            let _ = self.file.set_len(self.len);
            let _ = self.file.seek(SeekFrom::Start(self.len));
            return Err(io(e));
        }
        self.len += buf.len() as u64;
        Ok(())
    }

    /// Rewrites the file with only the pending intents (write a temporary
    /// file, fsync, rename over the journal, fsync the directory): a crash at
    /// any point leaves either the old or the new journal, both complete.
    fn compact(&mut self) -> Result<(), JournalError> {
        let io = |source| JournalError::Io {
            path: self.path.clone(),
            source,
        };
        let mut buf = MAGIC.to_vec();
        for c in self.order.values() {
            encode_record(&Record::Intent(c.clone()), &mut buf)?;
        }
        let tmp = self.path.with_extension("compacting");
        let _ = std::fs::remove_file(&tmp);
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(JOURNAL_MODE)
            .open(&tmp)
            .map_err(io)?;
        f.write_all(&buf).and_then(|_| f.sync_all()).map_err(io)?;
        drop(f);
        std::fs::rename(&tmp, &self.path).map_err(io)?;
        sync_dir(&self.path).map_err(io)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)
            .map_err(io)?;
        file.seek(SeekFrom::End(0)).map_err(io)?;
        self.file = file;
        self.len = buf.len() as u64;
        Ok(())
    }

    /// Records a charge durably before it is sent. Returns false (and writes
    /// nothing) if a charge with the same key is already pending.
    pub fn record(&mut self, c: Charge) -> Result<bool, JournalError> {
        if self.index.contains_key(&c.id()) {
            return Ok(false);
        }
        let r = Record::Intent(c);
        self.append(&r)?;
        self.apply(r);
        Ok(true)
    }

    /// Records how accountd settled a pending charge, then compacts when the file is
    /// large and mostly settled records.
    ///
    /// `Err` means the settlement was not recorded (the charge stays pending).
    /// `Ok(Some(e))` means it was recorded, durably, but the compaction after it
    /// failed with `e`: the journal is whole (compaction replaces the file only once
    /// its copy is complete) and the next settlement tries again.
    pub fn settle(
        &mut self,
        c: &Charge,
        outcome: Outcome,
    ) -> Result<Option<JournalError>, JournalError> {
        self.settle_many(&[(c.clone(), outcome)])
    }

    /// [`Journal::settle`] for several charges at once: their records go to the
    /// file in one write and one fsync. `Err` means none of them was recorded
    /// (or, after a crash, only some: the others stay pending and are sent
    /// again, which accountd answers as duplicates).
    pub fn settle_many(
        &mut self,
        settled: &[(Charge, Outcome)],
    ) -> Result<Option<JournalError>, JournalError> {
        let mut records = Vec::with_capacity(settled.len());
        let mut seen = std::collections::HashSet::new();
        for (c, outcome) in settled {
            let id = c.id();
            if self.index.contains_key(&id) && seen.insert(id.clone()) {
                records.push(Record::Settled(id.0, id.1, outcome.clone()));
            }
        }
        if records.is_empty() {
            return Ok(None);
        }
        self.append_all(&records)?;
        for r in records {
            self.apply(r);
        }
        if self.len > self.compact_at && (self.order.len() as u64) * 512 < self.len / 2 {
            return Ok(self.compact().err());
        }
        Ok(None)
    }

    /// Changes the size above which a mostly settled journal is compacted.
    pub fn set_compact_at(&mut self, bytes: u64) {
        self.compact_at = bytes;
    }

    /// Pending charges, oldest first.
    pub fn pending(&self) -> Vec<Charge> {
        self.order.values().cloned().collect()
    }

    /// The `n` oldest pending charges, oldest first.
    pub fn oldest_pending(&self, n: usize) -> Vec<Charge> {
        self.order.values().take(n).cloned().collect()
    }

    /// Number of pending charges.
    pub fn pending_len(&self) -> usize {
        self.order.len()
    }

    /// Bytes in the file.
    pub fn file_len(&self) -> u64 {
        self.len
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn encode_record(r: &Record, buf: &mut Vec<u8>) -> Result<(), JournalError> {
    let body = postcard::to_stdvec(r).map_err(JournalError::Encode)?;
    buf.extend_from_slice(&(body.len() as u32).to_le_bytes());
    buf.extend_from_slice(&crc32(&body).to_le_bytes());
    buf.extend_from_slice(&body);
    Ok(())
}

fn parse_record(data: &[u8]) -> Option<(Record, usize)> {
    let (len, crc) = header(data)?;
    if len > MAX_RECORD || data.len() < 8 + len {
        return None;
    }
    let body = &data[8..8 + len];
    // Every record starts with its variant tag (0 or 1); checking it first keeps a
    // scan over damaged bytes from computing checksums at nearly every offset.
    if !matches!(body.first(), Some(0 | 1)) || crc32(body) != crc {
        return None;
    }
    let record = postcard::from_bytes(body).ok()?;
    Some((record, 8 + len))
}

/// The length and checksum of the record header at the start of `data`.
fn header(data: &[u8]) -> Option<(usize, u32)> {
    let len = u32::from_le_bytes(data.get(..4)?.try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(data.get(4..8)?.try_into().ok()?);
    Some((len, crc))
}

/// Whether `data` (from a record boundary to the end of the file) is a record cut
/// short: a partial header, or a plausible header whose body runs past the end.
fn is_torn(data: &[u8]) -> bool {
    match header(data) {
        None => true,
        Some((len, _)) => len <= MAX_RECORD && data.len() < 8 + len,
    }
}

/// Most candidate offsets whose checksum a resync computes before giving up (each
/// costs up to [`MAX_RECORD`] bytes of CRC), so a pathological file cannot stall
/// start-up: at worst about 256 MiB of checksum, a fraction of a second.
const RESYNC_CANDIDATES: usize = 4096;

/// After damage at `bad`, the first later offset from which records run intact to
/// the end of the file (or to a torn tail), if any is found within the budget.
fn resync(data: &[u8], bad: usize) -> Option<usize> {
    let mut checksummed = 0;
    for start in bad + 1..data.len() {
        let rest = &data[start..];
        // The cheap tests parse_record makes before its checksum.
        let plausible = header(rest).is_some_and(|(len, _)| {
            len <= MAX_RECORD && rest.len() >= 8 + len && matches!(rest.get(8), Some(0 | 1))
        });
        if !plausible {
            continue;
        }
        checksummed += 1;
        if checksummed > RESYNC_CANDIDATES {
            return None;
        }
        if parse_record(rest).is_none() {
            continue;
        }
        let mut at = start;
        while let Some((_, used)) = parse_record(&data[at..]) {
            at += used;
        }
        if at == data.len() || is_torn(&data[at..]) {
            return Some(start);
        }
    }
    None
}

/// Where the bytes of a journal found damaged are kept for the admin:
/// `<journal>.damaged-<unix seconds>` (with a counter if that exists).
fn damaged_copy_path(path: &Path) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".damaged-{secs}"));
    let mut copy = path.with_file_name(&name);
    let mut n = 1;
    while copy.exists() {
        let mut numbered = name.clone();
        numbered.push(format!(".{n}"));
        copy = path.with_file_name(numbered);
        n += 1;
    }
    copy
}

fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    path.with_file_name(name)
}

fn sync_dir(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => File::open(dir)?.sync_all(),
        _ => Ok(()),
    }
}

#[cfg(test)]
pub(crate) mod tests;
