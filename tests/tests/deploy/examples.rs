//! The example configs in `deploy/etc` show every key: for each daemon, the
//! keys its settings struct accepts are found from the struct itself and
//! each must appear in the example file (set, or commented out as
//! `# key = …`) in its table; and the example, as shipped, loads.
//!
//! How the keys are found: every word of the workspace's Rust source is
//! offered to the struct as a key (`word = 1` in the table probed); the
//! struct refuses a word that is no key of it by name (serde's
//! `deny_unknown_fields`, or the daemons' `NoOtherKeys` beside `flatten`)
//! and accepts, or refuses for its value, a word that is. A key's value
//! that is itself a struct (it refuses an unknown key in it) is probed the
//! same way; a table of free names (such as `[selectors]`) must appear as a
//! table. A field added to a struct is thus a key the example must show,
//! with no list to keep up to date.

use std::collections::BTreeSet;
use std::path::Path;

use serde::de::DeserializeOwned;

use crate::workspace;

/// A word no struct has as a key.
const NONCE: &str = "zz_no_such_key_0d1f";

/// Whether `err` is the struct refusing `key` as unknown.
fn refuses(err: &str, key: &str) -> bool {
    err.contains(&format!("unknown key `{key}`")) || err.contains(&format!("unknown field `{key}`"))
}

/// Loads `table` as `T`: the error text, if any.
fn load<T: DeserializeOwned>(table: &toml::Table) -> Result<(), String> {
    toml::Value::Table(table.clone())
        .try_into::<T>()
        .map(drop)
        .map_err(|e| e.to_string())
}

/// `leaf` nested under the tables of `path`.
fn nest(path: &[String], leaf: toml::Table) -> toml::Table {
    path.iter().rev().fold(leaf, |inner, name| {
        let mut t = toml::Table::new();
        t.insert(name.clone(), toml::Value::Table(inner));
        t
    })
}

fn one(key: &str, value: toml::Value) -> toml::Table {
    let mut t = toml::Table::new();
    t.insert(key.to_string(), value);
    t
}

/// Whether the table at `path` accepts `key` (with some value).
fn knows<T: DeserializeOwned>(path: &[String], key: &str) -> bool {
    match load::<T>(&nest(path, one(key, toml::Value::Integer(1)))) {
        Ok(()) => true,
        Err(e) => !refuses(&e, key),
    }
}

/// The keys of the table at `path` of `T`, as `table.key` paths (`key` at
/// the top), and the tables of free names.
fn keys_of<T: DeserializeOwned>(path: &[String], words: &BTreeSet<String>, out: &mut Vec<String>) {
    assert!(
        !knows::<T>(path, NONCE),
        "the table [{}] accepts any key, so its keys cannot be found (and a typo in it is not caught)",
        path.join(".")
    );
    for word in words {
        if !knows::<T>(path, word) {
            continue;
        }
        let mut here = path.to_vec();
        here.push(word.clone());
        out.push(here.join("."));
        // A struct table refuses an unknown key in it: probe it too.
        let inner = nest(&here, one(NONCE, toml::Value::Integer(1)));
        if let Err(e) = load::<T>(&inner)
            && refuses(&e, NONCE)
        {
            keys_of::<T>(&here, words, out);
        }
    }
}

/// Every identifier-like word of the workspace's Rust source.
fn words() -> BTreeSet<String> {
    fn walk(dir: &Path, words: &mut BTreeSet<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name();
            if p.is_dir() {
                if name != "target" && !name.to_string_lossy().starts_with('.') {
                    walk(&p, words);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                for w in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                    if w.starts_with(|c: char| c.is_ascii_lowercase()) {
                        words.insert(w.to_string());
                    }
                }
            }
        }
    }
    let mut words = BTreeSet::new();
    walk(&workspace(), &mut words);
    words
}

/// The keys an example file shows, set or commented out, as `table.key`;
/// tables count as keys of their parents.
fn shown(text: &str) -> BTreeSet<String> {
    let mut shown = BTreeSet::new();
    let mut table = String::new();
    for line in text.lines() {
        let line = line.trim_start_matches(|c: char| c == '#' || c.is_whitespace());
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest.trim_start_matches('[');
            if let Some(end) = name.find(']') {
                table = name[..end].trim().to_string();
                let mut path = String::new();
                for part in table.split('.') {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(part.trim());
                    shown.insert(path.clone());
                }
            }
            continue;
        }
        let Some((key, _)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            continue;
        }
        shown.insert(if table.is_empty() {
            key.to_string()
        } else {
            format!("{table}.{key}")
        });
    }
    shown
}

/// Checks that `file` in deploy/etc loads as `T` and shows every key of `T`.
fn check<T: DeserializeOwned>(file: &str, words: &BTreeSet<String>) -> Vec<String> {
    let path = workspace().join("deploy/etc").join(file);
    let text = std::fs::read_to_string(&path).expect("read the example");
    let table: toml::Table =
        toml::from_str(&text).unwrap_or_else(|e| panic!("{} is not TOML: {e}", path.display()));
    if let Err(e) = load::<T>(&table) {
        panic!("{} does not load: {e}", path.display());
    }
    let mut keys = Vec::new();
    keys_of::<T>(&[], words, &mut keys);
    assert!(
        keys.len() > 5,
        "found only {keys:?} in {file}'s settings: the probe is broken"
    );
    let shown = shown(&text);
    keys.into_iter()
        .filter(|k| !shown.contains(k))
        .map(|k| format!("{file}: {k}"))
        .collect()
}

#[test]
fn every_daemons_example_config_shows_every_key_and_loads() {
    let words = words();
    let mut missing = Vec::new();
    missing.extend(check::<accountd::config::Settings>("accountd.toml", &words));
    missing.extend(check::<rexecd::config::Settings>("rexecd.toml", &words));
    missing.extend(check::<vexecd::daemon::config::Settings>(
        "vexecd.toml",
        &words,
    ));
    missing.extend(check::<batchd::config::Settings>("batchd.toml", &words));
    assert!(
        missing.is_empty(),
        "keys the example configs do not show:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_probe_finds_a_missing_key() {
    // The check itself: a file without `listen` is caught.
    let words = words();
    let mut keys = Vec::new();
    keys_of::<batchd::config::Settings>(&[], &words, &mut keys);
    assert!(keys.contains(&"listen".to_string()), "{keys:?}");
    assert!(keys.contains(&"store.path".to_string()), "{keys:?}");
    assert!(keys.contains(&"selectors".to_string()), "{keys:?}");
    assert!(
        !keys.iter().any(|k| k.starts_with("selectors.")),
        "{keys:?}"
    );
    let shown = shown("# listen = \"x\"\n[store]\n# path = \"q\"\n");
    assert!(shown.contains("listen") && shown.contains("store.path"));
    assert!(!shown.contains("selectors"));
}
