//! accountctl's three output formats for any listing: rows of named cells become
//! aligned columns for people, a JSON array of objects, or RFC 4180 CSV with a
//! header line. What the columns of a ledger listing are is [`super::render`]'s.

use std::fmt::Write as _;

/// Output format of listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned columns for people.
    Table,
    /// A JSON array of objects.
    Json,
    /// RFC 4180 CSV with a header line.
    Csv,
}

/// One cell of a row: (column, text, is_number). Numbers are right-aligned in
/// a table and unquoted in JSON; an empty text is JSON `null`.
pub(crate) type Cell = (&'static str, String, bool);

/// Renders `rows` (cells in the order of `header`) in format `fmt`.
pub(crate) fn render(rows: Vec<Vec<Cell>>, header: &[&str], fmt: Format) -> String {
    match fmt {
        Format::Json => json(&rows),
        Format::Csv => csv(&rows, header),
        Format::Table => table(&rows, header),
    }
}

fn json(rows: &[Vec<Cell>]) -> String {
    let mut out = String::new();
    out.push('[');
    for (i, row) in rows.iter().enumerate() {
        out.push_str(if i == 0 { "\n  {" } else { ",\n  {" });
        for (j, (k, v, num)) in row.iter().enumerate() {
            if j > 0 {
                out.push_str(", ");
            }
            let value = if v.is_empty() {
                "null".to_string()
            } else if *num {
                v.clone()
            } else {
                json_str(v)
            };
            let _ = write!(out, "{}: {value}", json_str(k));
        }
        out.push('}');
    }
    out.push_str(if rows.is_empty() { "]\n" } else { "\n]\n" });
    out
}

fn csv(rows: &[Vec<Cell>], header: &[&str]) -> String {
    let mut out = header.join(",");
    out.push('\n');
    for row in rows {
        let line: Vec<String> = row.iter().map(|(_, v, _)| csv_field(v)).collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}

fn table(rows: &[Vec<Cell>], header: &[&str]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, (_, v, _)) in row.iter().enumerate() {
            widths[i] = widths[i].max(v.chars().count());
        }
    }
    let line = |cells: Vec<(&str, bool)>| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, (v, num))| {
                if *num {
                    format!("{v:>w$}", w = widths[i])
                } else {
                    format!("{v:<w$}", w = widths[i])
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(header.iter().map(|h| (*h, false)).collect());
    for row in rows {
        out.push_str(&line(
            row.iter().map(|(_, v, n)| (v.as_str(), *n)).collect(),
        ));
    }
    out
}

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
