//! What a client heard on the discovery group, remembered for its next run, so
//! that a zero-config client asks at once instead of listening for up to one and a
//! half announcement periods every time.
//!
//! One small text file per user, per kind of service and per group
//! (`{what}-{cluster}-{group}-{port}`), in [`default_dir`]: `$REXEC_CACHE_DIR`,
//! else `$XDG_RUNTIME_DIR/rexec-market`, else `~/.cache/rexec-market`. The
//! directory is created 0700 and each file is written 0600 through a temporary file
//! renamed into place, so a reader never sees half a file. The format:
//!
//! ```text
//! rexec-market service cache 1
//! written 1764100000
//! vexecd 10.0.0.5:7478
//! ```
//!
//! A cache is a hint, never trusted: the client checks each server's certificate
//! name as it would for any address, so a stale or planted entry costs one refused
//! connection and the client listens on the group after all. A file that does not
//! parse, is older than the caller's limit, or names nothing is as if absent.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::config::DiscoveryConfig;

/// How long a remembered list is believed without listening again (it is
/// refreshed whenever a run confirms it with a live server).
pub const MAX_AGE: Duration = Duration::from_secs(3600);

/// Most entries kept.
pub const MAX_ENTRIES: usize = 64;

const MAGIC: &str = "rexec-market service cache 1";

/// One remembered server: its certificate name and address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remembered {
    /// The name its certificate must carry.
    pub name: String,
    /// `host:port`.
    pub addr: String,
}

/// One cache file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    path: PathBuf,
}

/// The directory caches live in for this user, when one can be named.
pub fn default_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("REXEC_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(run) = var("XDG_RUNTIME_DIR") {
        return Some(PathBuf::from(run).join("rexec-market"));
    }
    var("HOME").map(|home| PathBuf::from(home).join(".cache/rexec-market"))
}

impl Cache {
    /// The cache of `what` (for example `selectors`) heard on `d`'s group, in `dir`.
    pub fn new(dir: &Path, what: &str, d: &DiscoveryConfig) -> Cache {
        let clean = |s: &str| -> String {
            s.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '.' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        };
        let file = format!(
            "{}-{}-{}-{}",
            clean(what),
            clean(&d.cluster),
            d.group,
            d.port
        );
        Cache {
            path: dir.join(file),
        }
    }

    /// The cache of `what` for `d` in [`default_dir`], when there is one.
    pub fn for_user(what: &str, d: &DiscoveryConfig) -> Option<Cache> {
        default_dir().map(|dir| Cache::new(&dir, what, d))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What was remembered at most `max_age` before `now`, with when it was written;
    /// `None` when there is nothing usable (see the module docs).
    pub fn load(
        &self,
        max_age: Duration,
        now: SystemTime,
    ) -> Option<(Vec<Remembered>, SystemTime)> {
        let text = fs::read_to_string(&self.path).ok()?;
        let (entries, written) = parse(&text)?;
        let age = now.duration_since(written).unwrap_or(Duration::ZERO);
        (age <= max_age && !entries.is_empty()).then_some((entries, written))
    }

    /// Remember `entries` (at most [`MAX_ENTRIES`]) as of `now`.
    pub fn store(&self, entries: &[Remembered], now: SystemTime) -> io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let secs = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        let mut text = format!("{MAGIC}\nwritten {secs}\n");
        for e in entries.iter().take(MAX_ENTRIES) {
            if usable(&e.name) && usable(&e.addr) {
                text.push_str(&format!("{} {}\n", e.name, e.addr));
            }
        }
        let tmp = self
            .path
            .with_extension(format!("tmp{}", std::process::id()));
        let written = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(text.as_bytes()));
        match written.and_then(|()| fs::rename(&tmp, &self.path)) {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// Forget what was remembered.
    pub fn forget(&self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// A name or address that fits the one-line format.
fn usable(s: &str) -> bool {
    !s.is_empty() && s.len() <= 255 && s.bytes().all(|b| b.is_ascii_graphic())
}

fn parse(text: &str) -> Option<(Vec<Remembered>, SystemTime)> {
    let mut lines = text.lines();
    (lines.next()? == MAGIC).then_some(())?;
    let secs: u64 = lines.next()?.strip_prefix("written ")?.parse().ok()?;
    let mut entries = Vec::new();
    for line in lines {
        let (name, addr) = line.split_once(' ')?;
        if !usable(name) || !usable(addr) || entries.len() >= MAX_ENTRIES {
            return None;
        }
        entries.push(Remembered {
            name: name.into(),
            addr: addr.into(),
        });
    }
    Some((entries, UNIX_EPOCH + Duration::from_secs(secs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(name: &str, addr: &str) -> Remembered {
        Remembered {
            name: name.into(),
            addr: addr.into(),
        }
    }

    #[test]
    fn what_is_stored_is_loaded_until_it_is_too_old() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(
            &dir.path().join("sub"),
            "selectors",
            &DiscoveryConfig::default(),
        );
        // Whole seconds, as the file keeps them.
        let now = UNIX_EPOCH + Duration::from_secs(1_764_100_000);
        assert_eq!(cache.load(MAX_AGE, now), None);
        let list = [r("v1", "10.0.0.5:7478"), r("v2", "[::1]:7478")];
        cache.store(&list, now).unwrap();
        let (got, _) = cache.load(MAX_AGE, now + MAX_AGE).unwrap();
        assert_eq!(got, list);
        assert_eq!(
            cache.load(MAX_AGE, now + MAX_AGE + Duration::from_secs(2)),
            None
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(cache.path()), 0o600);
        assert_eq!(mode(&dir.path().join("sub")), 0o700);
        cache.forget();
        assert_eq!(cache.load(MAX_AGE, now), None);
    }

    #[test]
    fn a_damaged_file_is_as_if_absent() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path(), "selectors", &DiscoveryConfig::default());
        let now = SystemTime::now();
        let secs = now.duration_since(UNIX_EPOCH).unwrap().as_secs();
        for text in [
            String::new(),
            "garbage\n".into(),
            format!("{MAGIC}\nwritten soon\nv1 h:1\n"),
            format!("{MAGIC}\nwritten {secs}\nv1\n"),
            format!("{MAGIC}\nwritten {secs}\n"),
            format!("{MAGIC}\nwritten {secs}\nv1 h:1\n\u{0}\u{1} x\n"),
        ] {
            fs::write(cache.path(), &text).unwrap();
            assert_eq!(cache.load(MAX_AGE, now), None, "{text:?}");
        }
        fs::write(cache.path(), [0xff, 0xfe, 0x00]).unwrap();
        assert_eq!(cache.load(MAX_AGE, now), None);
    }

    #[test]
    fn each_group_and_kind_has_its_own_file() {
        let dir = Path::new("/x");
        let d = DiscoveryConfig::default();
        let other = DiscoveryConfig {
            port: d.port + 1,
            ..d.clone()
        };
        let a = Cache::new(dir, "selectors", &d);
        assert_ne!(a, Cache::new(dir, "selectors", &other));
        assert_ne!(a, Cache::new(dir, "accountd", &d));
        let odd = DiscoveryConfig {
            cluster: "../../etc".into(),
            ..d
        };
        assert_eq!(
            Cache::new(dir, "selectors", &odd).path().parent(),
            Some(dir)
        );
    }
}
