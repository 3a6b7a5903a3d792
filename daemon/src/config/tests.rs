//! The loader against a settings struct shaped like the daemons': flags over the
//! file over the defaults, a flag for a key of a table, unknown keys refused by name
//! (beside the flattened shared tables, and in a table), errors on one line.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::*;

#[derive(Debug, Deserialize)]
struct Settings {
    listen: Option<String>,
    allow_root: Option<bool>,
    idle_timeout: Option<String>,
    #[serde(flatten)]
    tls: TlsSettings,
    #[serde(flatten)]
    caps: CapSettings,
    market: Option<Market>,
    #[serde(flatten)]
    _unknown: NoOtherKeys,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Market {
    accountd: Option<String>,
    journal: Option<String>,
}

#[derive(Debug, Default, Serialize)]
struct Flags {
    #[serde(skip)]
    #[allow(dead_code)] // a flag that is no key: the loader never sees it
    config: Option<std::path::PathBuf>,
    listen: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    allow_root: bool,
    cert: Option<std::path::PathBuf>,
    max_connections_per_address: Option<usize>,
    #[serde(rename = "market.accountd")]
    accountd: Option<String>,
    #[serde(serialize_with = "millis")]
    idle_timeout: Option<std::time::Duration>,
}

const FILE: &str = "listen = \"0.0.0.0:1\"\nallow_root = true\nca = \"/ca\"\ncert = \"/c\"\nkey = \"/k\"\nmax_connections = 9\n[market]\naccountd = \"a:1\"\njournal = \"/j\"\n";

fn file(text: &str) -> toml::Table {
    parse::<Settings>(Path::new("t.toml"), text).unwrap()
}

#[test]
fn flags_given_win_and_the_file_fills_the_rest() {
    let flags = Flags {
        config: Some("/ignored".into()),
        listen: Some("127.0.0.1:0".into()),
        cert: Some("/flag/c".into()),
        max_connections_per_address: Some(3),
        accountd: Some("b:2".into()),
        idle_timeout: Some(std::time::Duration::from_millis(1500)),
        ..Flags::default()
    };
    let s: Settings = layer(file(FILE), &flags).unwrap();
    assert_eq!(s.idle_timeout.as_deref(), Some("1500ms"));
    assert_eq!(s.listen.as_deref(), Some("127.0.0.1:0"));
    assert_eq!(
        s.allow_root,
        Some(true),
        "an unset boolean flag left the file's"
    );
    let tls = s.tls.paths().unwrap();
    assert_eq!(tls.cert, Path::new("/flag/c"));
    assert_eq!(tls.key, Path::new("/k"));
    let market = s.market.unwrap();
    assert_eq!(market.accountd.as_deref(), Some("b:2"));
    assert_eq!(
        market.journal.as_deref(),
        Some("/j"),
        "the rest of the table stays"
    );
    let defaults = AcceptLimits {
        max_connections: 1,
        per_address: 2,
        per_identity: 5,
    };
    let limits = s.caps.limits(defaults).unwrap();
    assert_eq!(
        (
            limits.max_connections,
            limits.per_address,
            limits.per_identity
        ),
        (9, 3, 5)
    );
}

#[test]
fn without_a_file_the_flags_alone_count_and_make_their_tables() {
    let flags = Flags {
        accountd: Some("b:2".into()),
        ..Flags::default()
    };
    let s: Settings = load(None, &flags).unwrap();
    assert_eq!(s.listen, None);
    assert_eq!(s.market.unwrap().accountd.as_deref(), Some("b:2"));
    assert_eq!(
        s.tls.paths().unwrap_err().to_string(),
        "certificate (--cert)"
    );
}

#[test]
fn unknown_keys_are_refused_by_name_on_one_line() {
    for (text, key) in [
        ("listen_addr = \"x\"\n", "listen_addr"),
        ("ca = \"/ca\"\nmax_conections = 1\n", "max_conections"),
        ("[market]\njournl = \"/j\"\n", "journl"),
        ("[colour]\nred = 1\n", "colour"),
    ] {
        let e = parse::<Settings>(Path::new("t.toml"), text)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("config file t.toml is invalid: "), "{e}");
        assert!(e.contains(&format!("`{key}`")), "{text}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
    let e = parse::<Settings>(Path::new("t.toml"), "\n[market]\njournl = 1\n").unwrap_err();
    assert!(e.to_string().contains("line 3: "), "{e}");
    let e = read::<Settings>(Path::new("/no/such/d.toml")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cannot read config file /no/such/d.toml: "),
        "{e}"
    );
    assert!(
        std::error::Error::source(&e).is_none(),
        "the cause would print twice"
    );
}

#[test]
fn a_zero_cap_is_refused_naming_its_key() {
    let caps = CapSettings {
        max_connections_per_identity: Some(0),
        ..CapSettings::default()
    };
    let defaults = AcceptLimits {
        max_connections: 1,
        per_address: 1,
        per_identity: 1,
    };
    let e = caps.limits(defaults).unwrap_err();
    assert_eq!(e.key, "max_connections_per_identity");
    assert!(e.to_string().contains("at least 1"), "{e}");
}

#[test]
fn a_config_error_names_the_setting_and_says_how_to_give_it() {
    let missing: ConfigError = TlsSettings::default().paths().unwrap_err().into();
    assert_eq!(
        missing.to_string(),
        "no certificate (--cert) configured: set it in the config file or pass the flag"
    );
    let caps = CapSettings {
        max_connections: Some(0),
        ..CapSettings::default()
    };
    let defaults = AcceptLimits {
        max_connections: 1,
        per_address: 1,
        per_identity: 1,
    };
    let invalid: ConfigError = caps.limits(defaults).unwrap_err().into();
    assert_eq!(
        invalid.to_string(),
        "invalid max_connections: must be at least 1"
    );
}
