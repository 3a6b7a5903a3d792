//! CPU sets for nodes that own their CPUs: [`CpuSet`], the kernel's cpu-list syntax
//! (`0-3`, `0,2,5-7`) parsed strictly and printed canonically, and the cpuset file
//! operations both cgroup versions share: reading a list from a control file, writing
//! one, and checking a configured set against the CPUs the machine has and the CPUs the
//! parent cgroup may use. Which files are read and written where is the business of
//! `v1` (a separate `cpuset` hierarchy; every job cgroup there needs `cpuset.cpus` and
//! `cpuset.mems` of its own) and `v2` (`+cpuset` down to the parent's parent,
//! `cpuset.cpus` on the parent).

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use super::error::{CgroupError, Result};
use super::fs;

/// The largest CPU number accepted: the kernel's `NR_CPUS` is at most 8192.
pub const MAX_CPU: u32 = 8191;

/// Why a cpu list could not be parsed. One line, naming the offending item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CpuListError {
    /// An item between commas is empty (`0,,1`, a leading or trailing comma).
    #[error("empty item in cpu list (a stray comma?)")]
    EmptyItem,
    /// An item is neither `N` nor `N-M`.
    #[error("{item:?} is not a CPU number or a range N-M")]
    Syntax {
        /// The item as written.
        item: String,
    },
    /// A range whose start is above its end.
    #[error("range {item:?} is reversed; write {end}-{start}")]
    Reversed {
        /// The item as written.
        item: String,
        /// Its start.
        start: u32,
        /// Its end.
        end: u32,
    },
    /// A CPU number beyond any kernel's.
    #[error("CPU {cpu} is beyond the largest CPU number Linux supports ({MAX_CPU})")]
    TooLarge {
        /// The number as written.
        cpu: String,
    },
    /// A CPU named twice (`0,0` or `0-3,2`).
    #[error("CPU {cpu} is listed twice")]
    Duplicate {
        /// The CPU.
        cpu: u32,
    },
}

/// A set of CPU numbers, printed in the kernel's canonical list form.
///
/// ```
/// use rexecd::cgroup::CpuSet;
/// let set: CpuSet = "5-7,0,2".parse().unwrap();
/// assert_eq!(set.to_string(), "0,2,5-7");
/// assert_eq!(set.len(), 5);
/// assert!("3-1".parse::<CpuSet>().is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuSet(BTreeSet<u32>);

impl CpuSet {
    /// Parses a cpu list. The empty list (an empty or all-blank text, as the kernel
    /// writes an empty set) is the empty set; items are `N` or `N-M` with `N <= M`,
    /// separated by commas, blanks around them ignored; no CPU may appear twice.
    pub fn parse(text: &str) -> std::result::Result<CpuSet, CpuListError> {
        let text = text.trim();
        let mut set = BTreeSet::new();
        if text.is_empty() {
            return Ok(CpuSet(set));
        }
        for item in text.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(CpuListError::EmptyItem);
            }
            let (start, end) = match item.split_once('-') {
                Some((a, b)) => (number(item, a)?, number(item, b)?),
                None => {
                    let n = number(item, item)?;
                    (n, n)
                }
            };
            if start > end {
                return Err(CpuListError::Reversed {
                    item: item.to_string(),
                    start,
                    end,
                });
            }
            for cpu in start..=end {
                if !set.insert(cpu) {
                    return Err(CpuListError::Duplicate { cpu });
                }
            }
        }
        Ok(CpuSet(set))
    }

    /// How many CPUs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True when `cpu` is in the set.
    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }

    /// The CPUs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    /// The smallest CPU of this set that `other` lacks, if any.
    pub fn first_outside(&self, other: &CpuSet) -> Option<u32> {
        self.iter().find(|c| !other.contains(*c))
    }
}

/// One CPU number of `item`: decimal digits only, at most [`MAX_CPU`].
fn number(item: &str, digits: &str) -> std::result::Result<u32, CpuListError> {
    let digits = digits.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CpuListError::Syntax {
            item: item.to_string(),
        });
    }
    match digits.parse::<u32>() {
        Ok(n) if n <= MAX_CPU => Ok(n),
        _ => Err(CpuListError::TooLarge {
            cpu: digits.to_string(),
        }),
    }
}

impl std::str::FromStr for CpuSet {
    type Err = CpuListError;
    fn from_str(s: &str) -> std::result::Result<CpuSet, CpuListError> {
        CpuSet::parse(s)
    }
}

impl fmt::Display for CpuSet {
    /// The kernel's form: ascending, runs of two or more as `N-M`, comma-separated.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        let mut cpus = self.iter().peekable();
        while let Some(start) = cpus.next() {
            let mut end = start;
            while cpus.peek() == Some(&(end + 1)) {
                end += 1;
                cpus.next();
            }
            if !out.is_empty() {
                out.push(',');
            }
            if end == start {
                out.push_str(&start.to_string());
            } else {
                out.push_str(&format!("{start}-{end}"));
            }
        }
        f.pad(&out)
    }
}

/// Reads a cpu list (or memory-node list, same syntax) from a control file.
pub(crate) fn read_list(path: &Path) -> Result<CpuSet> {
    let text = fs::read(path)?;
    CpuSet::parse(&text).map_err(|e| CgroupError::Parse {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })
}

/// Writes `set` to a control file such as `cpuset.cpus`.
pub(crate) fn write_list(path: &Path, set: &CpuSet) -> Result<()> {
    fs::write(path, &set.to_string())
}

/// Checks `wanted` before anything is written: every CPU must exist (be in
/// `machine`, the root cgroup's effective CPUs, read from `machine_file`) and be one
/// the parent cgroup may use (in `allowed_file`, the effective CPUs of the parent's
/// parent). The error names the first bad CPU.
pub(crate) fn check_available(
    wanted: &CpuSet,
    machine_file: &Path,
    allowed_file: &Path,
) -> Result<()> {
    if wanted.is_empty() {
        return Err(CgroupError::EmptyCpuSet);
    }
    let machine = read_list(machine_file)?;
    if let Some(cpu) = wanted.first_outside(&machine) {
        return Err(CgroupError::NoSuchCpu {
            cpu,
            online: machine,
            path: machine_file.to_path_buf(),
        });
    }
    let allowed = read_list(allowed_file)?;
    if let Some(cpu) = wanted.first_outside(&allowed) {
        return Err(CgroupError::CpuNotAllowed {
            cpu,
            allowed,
            path: allowed_file.to_path_buf(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cpus: &[u32]) -> CpuSet {
        CpuSet(cpus.iter().copied().collect())
    }

    #[test]
    fn good_lists_parse() {
        for (text, cpus) in [
            ("0", vec![0]),
            ("0-3", vec![0, 1, 2, 3]),
            ("0,2,5-7", vec![0, 2, 5, 6, 7]),
            ("7,5-6,0", vec![0, 5, 6, 7]),
            (" 1 , 3-4 \n", vec![1, 3, 4]),
            ("4-4", vec![4]),
            ("8191", vec![8191]),
            ("", vec![]),
            ("\n", vec![]),
        ] {
            assert_eq!(CpuSet::parse(text), Ok(set(&cpus)), "{text:?}");
        }
    }

    #[test]
    fn bad_syntax_is_refused_naming_the_item() {
        for text in [
            "a", "0-", "-3", "0--3", "1-2-3", "+1", "0x1", "1.5", "0;1", "0 1", "0-3:1/2",
        ] {
            let err = CpuSet::parse(text).unwrap_err();
            assert!(
                matches!(err, CpuListError::Syntax { .. }),
                "{text:?}: {err}"
            );
            assert!(err.to_string().contains(text.trim()), "{text:?}: {err}");
        }
        for text in [",", "0,", ",0", "0,,1"] {
            assert_eq!(
                CpuSet::parse(text),
                Err(CpuListError::EmptyItem),
                "{text:?}"
            );
        }
    }

    #[test]
    fn reversed_ranges_are_refused_with_the_fix() {
        let err = CpuSet::parse("0,3-1").unwrap_err();
        assert_eq!(
            err,
            CpuListError::Reversed {
                item: "3-1".into(),
                start: 3,
                end: 1
            }
        );
        assert_eq!(err.to_string(), "range \"3-1\" is reversed; write 1-3");
    }

    #[test]
    fn duplicates_are_refused_naming_the_cpu() {
        for (text, cpu) in [("0,0", 0), ("0-3,2", 2), ("5,1-6", 5), ("1-2,2-3", 2)] {
            assert_eq!(
                CpuSet::parse(text),
                Err(CpuListError::Duplicate { cpu }),
                "{text:?}"
            );
        }
    }

    #[test]
    fn huge_numbers_are_refused_without_overflow_or_huge_allocations() {
        for (text, cpu) in [
            ("8192", "8192"),
            ("0-4294967295", "4294967295"),
            ("99999999999999999999999", "99999999999999999999999"),
            ("1,0-8192", "8192"),
        ] {
            let err = CpuSet::parse(text).unwrap_err();
            assert_eq!(err, CpuListError::TooLarge { cpu: cpu.into() }, "{text}");
            assert!(err.to_string().contains(cpu), "{err}");
        }
        assert_eq!(CpuSet::parse("0-8191").unwrap().len(), 8192);
    }

    #[test]
    fn formatting_is_canonical_and_round_trips() {
        for (text, canonical) in [
            ("0", "0"),
            ("0-3", "0-3"),
            ("3,2,1,0", "0-3"),
            ("0,2,5-7", "0,2,5-7"),
            ("7-8", "7-8"),
            ("1,3,5", "1,3,5"),
            ("0-1,3-4,6", "0-1,3-4,6"),
            ("", ""),
        ] {
            let parsed = CpuSet::parse(text).unwrap();
            assert_eq!(parsed.to_string(), canonical, "{text:?}");
            assert_eq!(CpuSet::parse(&parsed.to_string()).unwrap(), parsed);
        }
        // Every subset of 0..10 survives the round trip.
        for bits in 0u32..1024 {
            let cpus: Vec<u32> = (0..10).filter(|c| bits & (1 << c) != 0).collect();
            let s = set(&cpus);
            assert_eq!(CpuSet::parse(&s.to_string()).unwrap(), s, "{s}");
        }
    }

    #[test]
    fn first_outside_names_the_smallest_missing_cpu() {
        let wanted = set(&[0, 2, 3]);
        assert_eq!(wanted.first_outside(&set(&[0, 1, 2, 3])), None);
        assert_eq!(wanted.first_outside(&set(&[0, 3])), Some(2));
        assert_eq!(wanted.first_outside(&CpuSet::default()), Some(0));
    }

    #[test]
    fn availability_names_the_bad_cpu_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let machine = dir.path().join("machine");
        let allowed = dir.path().join("allowed");
        std::fs::write(&machine, "0-1\n").unwrap();
        std::fs::write(&allowed, "0\n").unwrap();
        check_available(&set(&[0]), &machine, &allowed).unwrap();
        let err = check_available(&set(&[0, 4]), &machine, &allowed)
            .unwrap_err()
            .to_string();
        assert!(err.contains("CPU 4 ") && err.contains("0-1"), "{err}");
        let err = check_available(&set(&[1]), &machine, &allowed)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("CPU 1 ") && err.contains(&allowed.display().to_string()),
            "{err}"
        );
        assert!(matches!(
            check_available(&CpuSet::default(), &machine, &allowed),
            Err(CgroupError::EmptyCpuSet)
        ));
        std::fs::write(&allowed, "zero\n").unwrap();
        let err = check_available(&set(&[0]), &machine, &allowed).unwrap_err();
        assert!(matches!(err, CgroupError::Parse { .. }), "{err}");
    }
}
