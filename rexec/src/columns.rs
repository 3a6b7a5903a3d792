//! Aligned text tables as the admin commands print them: a header row, then one
//! row per item, columns two spaces apart, the first `text` columns (names,
//! addresses) to the left and the rest (numbers) to the right, no trailing
//! spaces.
//!
//! ```
//! let t = rexec::columns::aligned(&["NODE", "CPUS"], &[vec!["n1".into(), "4".into()]], 1);
//! assert_eq!(t, "NODE  CPUS\nn1       4\n");
//! ```

/// The table of `rows` under `header`, the first `text` columns left-aligned.
pub fn aligned(header: &[&str], rows: &[Vec<String>], text: usize) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (i, (cell, &w)) in cells.zip(&widths).enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            if i < text {
                out.push_str(&format!("{cell:<w$}"));
            } else {
                out.push_str(&format!("{cell:>w$}"));
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
        out
    };
    let mut out = line(&mut header.iter().copied());
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}
