//! Which MPI library a program links, read from its ELF file on this machine: the
//! `DT_NEEDED` names of its dynamic section, and which of them belong to an MPI that
//! does not speak PMI-1 (Open MPI), so that `rexec --mpi` can say why its ranks never
//! opened their PMI channel instead of letting them run as separate one-rank jobs
//! without a word (see [`crate::mpi::Heard`]).
//!
//! Only the program's own file is read (never run, as `ldd` would), a bounded number of
//! bytes of it, and anything unexpected (not ELF, a script, a static program, a
//! truncated or odd file) is "nothing known": the caller then says nothing about the
//! library.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The most bytes read of a dynamic section or of its string table.
const MAX_TABLE: u64 = 1 << 20;
/// The most program headers looked at.
const MAX_HEADERS: u64 = 512;

/// Libraries of MPIs that do not speak PMI-1, by the start of their file name: Open MPI
/// (`libmpi.so.40` of Open MPI 3 to 5, `libmpi.so.20` of 2.x, and the libraries only
/// Open MPI has). MPICH and its derivatives (`libmpich.so`, Intel MPI's and MVAPICH's
/// `libmpi.so.12`) speak it and are not listed.
const WITHOUT_PMI1: [(&str, &str); 9] = [
    ("libmpi.so.40", "Open MPI"),
    ("libmpi.so.20", "Open MPI"),
    ("libmpi_mpifh.so", "Open MPI"),
    ("libmpi_usempi", "Open MPI"),
    ("libmpi_cxx.so", "Open MPI"),
    ("libmpi_java.so", "Open MPI"),
    ("libopen-rte.so", "Open MPI"),
    ("libopen-pal.so", "Open MPI"),
    ("liboshmem.so", "Open MPI"),
];

/// An MPI library a program links that does not speak PMI-1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoPmi1 {
    /// The library as the program names it (`libmpi.so.40`).
    pub library: String,
    /// Whose it is (`Open MPI`).
    pub mpi: &'static str,
}

/// The first library `needed` names that belongs to an MPI without PMI-1.
///
/// ```
/// use rexec::mpi::linked::without_pmi1;
/// let ompi = ["libmpi.so.40".to_string(), "libc.so.6".to_string()];
/// assert_eq!(without_pmi1(&ompi).unwrap().mpi, "Open MPI");
/// assert!(without_pmi1(&["libmpich.so.12".to_string()]).is_none());
/// ```
pub fn without_pmi1(needed: &[String]) -> Option<NoPmi1> {
    needed.iter().find_map(|lib| {
        WITHOUT_PMI1
            .iter()
            .find(|(prefix, _)| lib.starts_with(prefix))
            .map(|(_, mpi)| NoPmi1 {
                library: lib.clone(),
                mpi,
            })
    })
}

/// The file `program` names as a rank would find it with this process's working
/// directory and `path` (the `PATH` the ranks get): a name with a `/` as it is, else
/// the first regular file of that name in `path`'s directories.
pub fn locate(program: &str, path: Option<&str>) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    path?
        .split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(program))
        .find(|candidate| candidate.is_file())
}

/// The `DT_NEEDED` names of the ELF file at `path`, or `None` when it cannot be read or
/// is not a dynamically linked ELF file.
pub fn needed(path: &Path) -> Option<Vec<String>> {
    let file = File::open(path).ok()?;
    Elf::open(&file)?.needed()
}

/// An ELF file being read: its class and byte order.
struct Elf<'f> {
    file: &'f File,
    wide: bool,
    little: bool,
}

/// A program header's fields that matter here.
struct Segment {
    kind: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;
const DT_STRSZ: u64 = 10;

impl<'f> Elf<'f> {
    fn open(file: &'f File) -> Option<Elf<'f>> {
        let mut ident = [0u8; 16];
        file.read_exact_at(&mut ident, 0).ok()?;
        if ident[..4] != *b"\x7fELF" {
            return None;
        }
        let wide = match ident[4] {
            1 => false,
            2 => true,
            _ => return None,
        };
        let little = match ident[5] {
            1 => true,
            2 => false,
            _ => return None,
        };
        Some(Elf { file, wide, little })
    }

    fn bytes(&self, offset: u64, len: u64) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; usize::try_from(len).ok()?];
        self.file.read_exact_at(&mut buf, offset).ok()?;
        Some(buf)
    }

    fn uint(&self, buf: &[u8], at: usize, size: usize) -> Option<u64> {
        let field = buf.get(at..at.checked_add(size)?)?;
        let mut value = 0u64;
        for i in 0..size {
            let byte = if self.little {
                field[size - 1 - i]
            } else {
                field[i]
            };
            value = (value << 8) | u64::from(byte);
        }
        Some(value)
    }

    /// A word of the file's class: 8 bytes in ELF64, 4 in ELF32.
    fn word(&self, buf: &[u8], at: usize) -> Option<u64> {
        self.uint(buf, at, if self.wide { 8 } else { 4 })
    }

    fn segments(&self) -> Option<Vec<Segment>> {
        let header = self.bytes(0, if self.wide { 64 } else { 52 })?;
        let (phoff, phentsize, phnum) = if self.wide {
            (
                self.uint(&header, 32, 8)?,
                self.uint(&header, 54, 2)?,
                self.uint(&header, 56, 2)?,
            )
        } else {
            (
                self.uint(&header, 28, 4)?,
                self.uint(&header, 42, 2)?,
                self.uint(&header, 44, 2)?,
            )
        };
        let entry = if self.wide { 56 } else { 32 };
        if phentsize < entry || phentsize > 4 * entry || phnum > MAX_HEADERS {
            return None;
        }
        let table = self.bytes(phoff, phentsize.checked_mul(phnum)?)?;
        let step = usize::try_from(phentsize).ok()?;
        (0..usize::try_from(phnum).ok()?)
            .map(|i| {
                let at = i * step;
                let kind = u32::try_from(self.uint(&table, at, 4)?).ok()?;
                Some(if self.wide {
                    Segment {
                        kind,
                        offset: self.uint(&table, at + 8, 8)?,
                        vaddr: self.uint(&table, at + 16, 8)?,
                        filesz: self.uint(&table, at + 32, 8)?,
                    }
                } else {
                    Segment {
                        kind,
                        offset: self.uint(&table, at + 4, 4)?,
                        vaddr: self.uint(&table, at + 8, 4)?,
                        filesz: self.uint(&table, at + 16, 4)?,
                    }
                })
            })
            .collect()
    }

    fn needed(&self) -> Option<Vec<String>> {
        let segments = self.segments()?;
        let dynamic = segments.iter().find(|s| s.kind == PT_DYNAMIC)?;
        let table = self.bytes(dynamic.offset, dynamic.filesz.min(MAX_TABLE))?;
        let word = if self.wide { 8 } else { 4 };
        let (mut strtab, mut strsz, mut names) = (None, None, Vec::new());
        for entry in table.chunks_exact(2 * word) {
            let tag = self.word(entry, 0)?;
            let value = self.word(entry, word)?;
            match tag {
                DT_NULL => break,
                DT_NEEDED => names.push(value),
                DT_STRTAB => strtab = Some(value),
                DT_STRSZ => strsz = Some(value),
                _ => {}
            }
        }
        // The string table is named by its address once loaded: find the loaded
        // segment that holds it to know where it is in the file.
        let (strtab, strsz) = (strtab?, strsz?.min(MAX_TABLE));
        let holder = segments.iter().find(|s| {
            s.kind == PT_LOAD
                && s.vaddr <= strtab
                && strtab.saturating_add(strsz) <= s.vaddr.saturating_add(s.filesz)
        })?;
        let strings = self.bytes(holder.offset.checked_add(strtab - holder.vaddr)?, strsz)?;
        names
            .into_iter()
            .map(|at| {
                let rest = strings.get(usize::try_from(at).ok()?..)?;
                let end = rest.iter().position(|b| *b == 0)?;
                String::from_utf8(rest[..end].to_vec()).ok()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_program_links_libc_and_no_mpi() {
        let me = std::env::current_exe().unwrap();
        let names = needed(&me).expect("the test binary is a dynamic ELF file");
        assert!(names.iter().any(|n| n.starts_with("libc.so")), "{names:?}");
        assert_eq!(without_pmi1(&names), None);
    }

    #[test]
    fn what_is_not_a_dynamic_elf_file_is_nothing_known() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("script");
        std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
        assert_eq!(needed(&script), None);
        // A truncated ELF header, and one whose program headers point past the end.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let short = dir.path().join("short");
        std::fs::write(&short, &me[..40]).unwrap();
        assert_eq!(needed(&short), None);
        let mut odd = me[..64].to_vec();
        odd[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        let odd_path = dir.path().join("odd");
        std::fs::write(&odd_path, &odd).unwrap();
        assert_eq!(needed(&odd_path), None);
        assert_eq!(needed(&dir.path().join("absent")), None);
    }

    /// A minimal dynamic ELF file of either class and byte order naming `needed`: one
    /// loaded segment holding everything, the string table inside it, a dynamic section.
    fn elf(wide: bool, little: bool, needed: &[&str]) -> Vec<u8> {
        let put = |buf: &mut Vec<u8>, value: u64, size: usize| {
            let bytes = value.to_be_bytes();
            let mut field = bytes[8 - size..].to_vec();
            if little {
                field.reverse();
            }
            buf.extend_from_slice(&field);
        };
        let (ehsize, phentsize, word) = if wide { (64, 56, 8) } else { (52, 32, 4) };
        let mut strings = vec![0u8];
        let mut offsets = Vec::new();
        for name in needed {
            offsets.push(strings.len() as u64);
            strings.extend_from_slice(name.as_bytes());
            strings.push(0);
        }
        let strtab = (ehsize + 2 * phentsize) as u64;
        let dynamic = strtab + strings.len() as u64;
        let dynsz = ((needed.len() + 3) * 2 * word) as u64;
        let total = dynamic + dynsz;
        let base = 0x40_0000u64;
        let mut f = b"\x7fELF".to_vec();
        f.extend_from_slice(&[if wide { 2 } else { 1 }, if little { 1 } else { 2 }, 1]);
        f.resize(16, 0);
        put(&mut f, 2, 2); // e_type
        put(&mut f, 62, 2); // e_machine
        put(&mut f, 1, 4); // e_version
        put(&mut f, 0, word); // e_entry
        put(&mut f, ehsize as u64, word); // e_phoff
        put(&mut f, 0, word); // e_shoff
        put(&mut f, 0, 4); // e_flags
        put(&mut f, ehsize as u64, 2);
        put(&mut f, phentsize as u64, 2);
        put(&mut f, 2, 2); // e_phnum
        put(&mut f, 0, 6); // e_shentsize, e_shnum, e_shstrndx
        assert_eq!(f.len(), ehsize);
        for (kind, offset, filesz) in [(PT_LOAD, 0, total), (PT_DYNAMIC, dynamic, dynsz)] {
            let vaddr = base + offset;
            if wide {
                put(&mut f, u64::from(kind), 4);
                put(&mut f, 4, 4); // p_flags
                for v in [offset, vaddr, vaddr, filesz, filesz, 8] {
                    put(&mut f, v, 8);
                }
            } else {
                for v in [u64::from(kind), offset, vaddr, vaddr, filesz, filesz, 4, 4] {
                    put(&mut f, v, 4);
                }
            }
        }
        f.extend_from_slice(&strings);
        let mut entries: Vec<(u64, u64)> = offsets.iter().map(|o| (DT_NEEDED, *o)).collect();
        entries.extend([
            (DT_STRTAB, base + strtab),
            (DT_STRSZ, strings.len() as u64),
            (DT_NULL, 0),
        ]);
        for (tag, value) in entries {
            put(&mut f, tag, word);
            put(&mut f, value, word);
        }
        assert_eq!(f.len() as u64, total);
        f
    }

    #[test]
    fn the_needed_names_are_read_in_either_class_and_byte_order() {
        let dir = tempfile::tempdir().unwrap();
        let want = ["libmpi.so.40", "libc.so.6"];
        for (wide, little) in [(true, true), (true, false), (false, true), (false, false)] {
            let path = dir.path().join(format!("prog-{wide}-{little}"));
            std::fs::write(&path, elf(wide, little, &want)).unwrap();
            let names = needed(&path).unwrap_or_else(|| panic!("{wide} {little}"));
            assert_eq!(names, want, "{wide} {little}");
            assert_eq!(without_pmi1(&names).unwrap().library, "libmpi.so.40");
        }
        // A string offset past the table, and a table outside every loaded segment.
        // (Five 16-byte entries end the file: NEEDED, NEEDED, STRTAB, STRSZ, NULL.)
        let good = elf(true, true, &want);
        let end = good.len();
        for (at, value) in [(end - 72, 1000u64), (end - 40, 0x50_0000)] {
            let mut bad = good.clone();
            bad[at..at + 8].copy_from_slice(&value.to_le_bytes());
            let path = dir.path().join(format!("bad-{at}"));
            std::fs::write(&path, &bad).unwrap();
            assert_eq!(needed(&path), None, "{at}");
        }
    }

    #[test]
    fn open_mpi_libraries_are_known_and_mpich_ones_are_not() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ompi = without_pmi1(&names(&["libm.so.6", "libmpi_mpifh.so.40", "libmpi.so.40"]));
        assert_eq!(
            ompi,
            Some(NoPmi1 {
                library: "libmpi_mpifh.so.40".into(),
                mpi: "Open MPI"
            })
        );
        assert_eq!(
            without_pmi1(&names(&["libmpich.so.12", "libmpi.so.12"])),
            None
        );
    }

    #[test]
    fn a_bare_name_is_found_on_the_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("prog"), "").unwrap();
        let path = format!("/nonexistent:{}", dir.path().display());
        assert_eq!(locate("prog", Some(&path)), Some(dir.path().join("prog")));
        assert_eq!(locate("absent", Some(&path)), None);
        assert_eq!(locate("./x/prog", None), Some(PathBuf::from("./x/prog")));
        assert_eq!(locate("prog", None), None);
    }
}
