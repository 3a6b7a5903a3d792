//! `docs/ARCHITECTURE.md`'s crate table held against the workspace as built: every
//! workspace package has one row, every row names a workspace package, and each row's
//! "depends on" column lists exactly the package's normal (not dev, not build)
//! dependencies on workspace packages, as `cargo metadata` reads them from the
//! manifests. It lives here because this crate depends on nothing of ours, so the
//! check builds in seconds.
//!
//! The table's form: the first cell names the crate in backticks (a package named
//! otherwise follows in parentheses: `` `tests` (`rexec-tests`) ``); the last cell is
//! "nothing of ours" or the crates in backticks, and anything in parentheses there is
//! a note, not a dependency (`` `stride` (`BID_HELP`) ``).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

/// The header row the table starts under.
const HEADER: &str = "| crate | kind | depends on |";

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testhost/ has a parent")
        .to_path_buf()
}

/// Every workspace package's normal dependencies on workspace packages.
fn metadata() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(workspace().join("Cargo.toml"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo} metadata: {e}"));
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let packages = meta["packages"].as_array().expect("a packages array");
    let names: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().expect("a package name").to_string())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .expect("a dependencies array")
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().expect("a dependency name").to_string())
                .filter(|d| names.contains(d))
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

/// The names in backticks in `cell`, leaving out those inside parentheses.
fn ticked(cell: &str) -> Vec<String> {
    let mut plain = String::new();
    let mut depth = 0usize;
    for c in cell.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    plain
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The table's rows: package name, the dependencies its last cell lists (with the
/// line number, for the messages).
fn table() -> Vec<(usize, String, BTreeSet<String>)> {
    let path = workspace().join("docs/ARCHITECTURE.md");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim() == HEADER)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no line {HEADER:?}"));
    let mut rows = Vec::new();
    for (i, line) in lines.iter().enumerate().skip(start + 2) {
        let line = line.trim();
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        assert!(
            cells.len() == 3,
            "ARCHITECTURE.md:{}: a crate row has three cells: {line}",
            i + 1
        );
        // The package's name: the one in parentheses if there is one, else the crate's.
        let first = cells[0];
        let name = match first.split_once('(') {
            Some((_, rest)) => ticked(rest.trim_end_matches(')')),
            None => ticked(first),
        };
        assert!(
            name.len() == 1,
            "ARCHITECTURE.md:{}: the first cell names one crate in backticks: {first}",
            i + 1
        );
        let deps_cell = cells[2];
        let deps: BTreeSet<String> = ticked(deps_cell).into_iter().collect();
        let nothing = deps_cell.starts_with("nothing of ours");
        assert!(
            nothing == deps.is_empty(),
            "ARCHITECTURE.md:{}: \"depends on\" is either \"nothing of ours\" or crates in backticks: {deps_cell}",
            i + 1
        );
        rows.push((i + 1, name[0].clone(), deps));
    }
    rows
}

#[test]
fn the_crate_table_lists_every_crate_with_its_workspace_dependencies() {
    let built = metadata();
    let rows = table();
    let mut wrong = Vec::new();
    let mut seen = BTreeSet::new();
    for (line, name, listed) in &rows {
        if !seen.insert(name.clone()) {
            wrong.push(format!("ARCHITECTURE.md:{line}: `{name}` has a second row"));
            continue;
        }
        let Some(actual) = built.get(name) else {
            wrong.push(format!(
                "ARCHITECTURE.md:{line}: `{name}` is not a workspace package"
            ));
            continue;
        };
        let missing: Vec<_> = actual.difference(listed).collect();
        let extra: Vec<_> = listed.difference(actual).collect();
        if !missing.is_empty() || !extra.is_empty() {
            wrong.push(format!(
                "ARCHITECTURE.md:{line}: `{name}` depends on {actual:?}; the table misses {missing:?} and lists {extra:?} it does not use"
            ));
        }
    }
    for name in built.keys().filter(|n| !seen.contains(*n)) {
        wrong.push(format!(
            "ARCHITECTURE.md: workspace package `{name}` has no row in the crate table"
        ));
    }
    assert!(
        wrong.is_empty(),
        "the crate table disagrees with cargo metadata:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_note_in_parentheses_is_not_a_dependency() {
    assert_eq!(
        ticked("`money`, `stride` (`BID_HELP`), `proto`"),
        ["money", "stride", "proto"]
    );
    assert!(ticked("nothing of ours (used by `x`)").is_empty());
}
