//! Memory sizes as people write them in flags and config files (`512M`, `2G`,
//! `1536K`, `1.5G`, a bare number of bytes): the one parser `rexec --mem`, `rexec
//! submit --mem` and rexecd's `max_mem_per_rank` share, and the one formatter their
//! messages use. Units are powers of 1024 (as Slurm's `--mem`); a trailing `B` or `iB`
//! is accepted (`512MiB`, `2GB`). Decimals are exact (integer arithmetic).

/// The largest size accepted: 1 PiB (no node has more, and it keeps sums in range).
pub const MAX_SIZE: u64 = 1 << 50;

/// Why a text is not a memory size; says how to write one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{text:?} is not a memory size ({why}); write bytes or a number with K, M, G or T, e.g. 512M or 2G"
)]
pub struct SizeError {
    text: String,
    why: &'static str,
}

/// Parses a memory size into bytes.
///
/// ```
/// use proto::size::parse_size;
/// assert_eq!(parse_size("4096").unwrap(), 4096);
/// assert_eq!(parse_size("512M").unwrap(), 512 << 20);
/// assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
/// assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
/// assert!(parse_size("0").is_err());
/// assert!(parse_size("-1G").is_err());
/// assert!(parse_size("lots").is_err());
/// ```
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let bad = |why| SizeError {
        text: text.to_string(),
        why,
    };
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix("ib"))
        .or_else(|| {
            t.strip_suffix('B')
                .filter(|r| r.ends_with(|c: char| c.is_ascii_alphabetic()))
        })
        .unwrap_or(t);
    let (number, shift) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 30),
        Some('t' | 'T') => (&t[..t.len() - 1], 40),
        Some('b' | 'B') => (&t[..t.len() - 1], 0),
        _ => (t, 0),
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| !s.is_empty() && s.len() <= 18 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !(frac.is_empty() || digits(frac)) || number.ends_with('.') {
        return Err(bad("not a number with an optional unit"));
    }
    let whole: u128 = whole.parse().map_err(|_| bad("not a number"))?;
    let mut bytes = whole << shift;
    if !frac.is_empty() {
        let scale = 10u128.pow(frac.len() as u32);
        let f: u128 = frac.parse().map_err(|_| bad("not a number"))?;
        let part = (f << shift) / scale;
        if part * scale != f << shift {
            return Err(bad("not a whole number of bytes"));
        }
        bytes += part;
    }
    if bytes == 0 {
        return Err(bad("must be more than zero"));
    }
    if bytes > u128::from(MAX_SIZE) {
        return Err(bad("more than 1 PiB"));
    }
    Ok(bytes as u64)
}

/// A size for people: whole units where exact (`512M`, `2G`), else bytes.
///
/// ```
/// use proto::size::format_size;
/// assert_eq!(format_size(512 << 20), "512M");
/// assert_eq!(format_size(3 << 29), "1536M");
/// assert_eq!(format_size(1000), "1000");
/// ```
pub fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(40, 'T'), (30, 'G'), (20, 'M'), (10, 'K')] {
        if bytes != 0 && bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_trip_and_bad_ones_explain() {
        for n in [1u64, 1024, 512 << 20, 2 << 30, 7 << 40] {
            assert_eq!(parse_size(&format_size(n)).unwrap(), n);
        }
        assert_eq!(parse_size("64k").unwrap(), 64 << 10);
        assert_eq!(parse_size(" 10MB ").unwrap(), 10 << 20);
        for bad in [
            "",
            "M",
            "1.M",
            "1..5G",
            "1e9",
            "2P",
            "0.0001K",
            "99999999999T",
        ] {
            let err = parse_size(bad).unwrap_err().to_string();
            assert!(err.contains("512M"), "{bad:?}: {err}");
        }
    }
}
