//! A Linux initramfs written from Rust: the "newc" cpio format the kernel unpacks at
//! boot (uncompressed; the kernel takes that as well as gzip), with directories
//! and regular files (some copied from the host). No `cpio` binary is needed.
//!
//! Also finds the shared libraries an executable needs (from `ldd`), so a dynamically
//! linked test binary runs in the guest exactly as it does on the host.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

/// Streams entries into a newc archive. Parent directories of every entry are written
/// first, once each, so callers only name the files they want.
pub struct Initramfs {
    out: BufWriter<File>,
    dirs: BTreeSet<PathBuf>,
    next_ino: u32,
}

impl Initramfs {
    /// Starts an archive in `path` (created or truncated).
    pub fn create(path: &Path) -> io::Result<Initramfs> {
        Ok(Initramfs {
            out: BufWriter::new(File::create(path)?),
            dirs: BTreeSet::new(),
            next_ino: 1,
        })
    }

    /// A directory (and its parents), mode 0755.
    pub fn dir(&mut self, path: &str) -> io::Result<()> {
        let path = archive_path(path)?;
        let mut so_far = PathBuf::new();
        for part in path.components() {
            so_far.push(part);
            if self.dirs.insert(so_far.clone()) {
                self.entry(&so_far, 0o040_755, &[])?;
            }
        }
        Ok(())
    }

    /// A regular file with `data` and permission bits `perm`.
    pub fn file(&mut self, path: &str, perm: u32, data: &[u8]) -> io::Result<()> {
        let path = self.parents(path)?;
        self.entry(&path, 0o100_000 | (perm & 0o7777), data)
    }

    /// A copy of the host file `host` (symlinks followed) at `path`, keeping its mode.
    pub fn copy(&mut self, path: &str, host: &Path) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let data = std::fs::read(host)?;
        let perm = std::fs::metadata(host)?.permissions().mode();
        self.file(path, perm, &data)
    }

    /// Writes the trailer and flushes the file.
    pub fn finish(mut self) -> io::Result<()> {
        self.entry(Path::new("TRAILER!!!"), 0, &[])?;
        let mut file = self.out.into_inner().map_err(|e| e.into_error())?;
        file.flush()?;
        file.sync_all()
    }

    fn parents(&mut self, path: &str) -> io::Result<PathBuf> {
        let path = archive_path(path)?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.dir(parent.to_str().unwrap_or_default())?;
        }
        Ok(path)
    }

    /// One newc record: "070701", thirteen 8-digit hex fields, the NUL-terminated name
    /// padded to 4 bytes, then the data padded to 4 bytes.
    fn entry(&mut self, name: &Path, mode: u32, data: &[u8]) -> io::Result<()> {
        let name = name.to_str().ok_or_else(|| invalid("non-UTF-8 path"))?;
        let size = u32::try_from(data.len()).map_err(|_| invalid("file over 4 GiB"))?;
        let name_size = u32::try_from(name.len() + 1).map_err(|_| invalid("long name"))?;
        let ino = self.next_ino;
        self.next_ino += 1;
        let nlink = if mode & 0o170_000 == 0o040_000 { 2 } else { 1 };
        let fields = [ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, name_size, 0];
        let mut header = String::with_capacity(110);
        header.push_str("070701");
        for f in fields {
            header.push_str(&format!("{f:08x}"));
        }
        self.out.write_all(header.as_bytes())?;
        self.out.write_all(name.as_bytes())?;
        self.out.write_all(&[0])?;
        self.pad(110 + name.len() + 1)?;
        self.out.write_all(data)?;
        self.pad(data.len())
    }

    fn pad(&mut self, written: usize) -> io::Result<()> {
        let zeros = (4 - written % 4) % 4;
        self.out.write_all(&[0; 3][..zeros])
    }
}

/// An absolute or relative path as the archive names it: relative, no `.` or `..`.
fn archive_path(path: &str) -> io::Result<PathBuf> {
    let mut out = PathBuf::new();
    for part in Path::new(path).components() {
        match part {
            Component::RootDir => {}
            Component::Normal(p) => out.push(p),
            _ => return Err(invalid("path with '.' or '..'")),
        }
    }
    if out.as_os_str().is_empty() {
        return Err(invalid("empty path"));
    }
    Ok(out)
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_string())
}

/// The shared libraries (and the dynamic loader) `exe` loads, as absolute host paths,
/// from `ldd`. Empty for a static executable.
pub fn shared_libraries(exe: &Path) -> io::Result<Vec<PathBuf>> {
    let out = Command::new("ldd").arg(exe).output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        if text.contains("not a dynamic executable")
            || String::from_utf8_lossy(&out.stderr).contains("not a dynamic executable")
        {
            return Ok(Vec::new());
        }
        return Err(io::Error::other(format!(
            "ldd {} failed: {}",
            exe.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    parse_ldd(&text).map_err(|line| io::Error::other(format!("ldd: cannot resolve {line:?}")))
}

/// Library paths from `ldd` output; `Err(line)` for a library ldd could not find.
fn parse_ldd(text: &str) -> Result<Vec<PathBuf>, String> {
    let mut libs = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.contains("not a dynamic executable") || line.contains("statically linked") {
            continue;
        }
        if line.contains("=> not found") {
            return Err(line.to_string());
        }
        let path = match line.split_once("=>") {
            Some((_, right)) => right.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        // `linux-vdso.so.1 (0x...)` is provided by the kernel: no path, nothing to copy.
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    Ok(libs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_library_and_loader_paths() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f41)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f41)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f41)\n";
        assert_eq!(
            parse_ldd(text).unwrap(),
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
            .map(PathBuf::from)
        );
        assert!(parse_ldd("\tlibfoo.so => not found\n").is_err());
    }
}
