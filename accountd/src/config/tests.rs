//! The config file's example, the deployed examples, per-peer limits, unknown keys.

use super::*;

/// The settings of config text, with no flags.
fn settings(path: &Path, text: &str) -> Settings {
    Settings::layered(Settings::parse(path, text).unwrap(), &Flags::default()).unwrap()
}

#[test]
fn the_documented_example_parses() {
    let example = daemon::config::toml_example(include_str!("../config.rs"));
    let c = settings(Path::new("example"), &example);
    assert_eq!(c.limits.max_batch, Some(1024));
    assert_eq!(c.tls.crl.as_deref(), Some(Path::new("/etc/rexec/crl.pem")));
    let d = c.discovery.as_ref().unwrap().resolve().unwrap();
    assert_eq!((d.cluster.as_str(), d.port), ("rexec", 7477));
    let peers = c.limits.peer_limits().unwrap();
    assert_eq!(peers, crate::server::PeerLimits::default());
}

#[test]
fn the_example_configs_in_deploy_parse() {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/etc"));
    let text = std::fs::read_to_string(dir.join("accountd.toml")).unwrap();
    let c = settings(&dir.join("accountd.toml"), &text);
    assert_eq!(c.listen.as_deref(), Some(DEFAULT_LISTEN));
    assert!(c.tls.crl.is_some());
    let client = crate::ctl::settings::load_ctl_file(&dir.join("client.toml"), true).unwrap();
    assert_eq!(
        client.accountd.address.map(|a| a.into_vec()),
        Some(vec!["10.0.0.9:7071".to_string()])
    );
    assert!(client.cert.is_some() && client.key.is_some() && client.ca.is_some());
}

#[test]
fn client_file_paths_are_relative_to_the_file_as_for_rexec() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(
        &path,
        "ca = \"ca.pem\"\ncert = \"/abs/u.pem\"\nkey = \"keys/u.key\"\n",
    )
    .unwrap();
    let c = crate::ctl::settings::load_ctl_file(&path, true).unwrap();
    assert_eq!(c.ca, Some(dir.path().join("ca.pem")));
    assert_eq!(c.cert, Some(PathBuf::from("/abs/u.pem")));
    assert_eq!(c.key, Some(dir.path().join("keys/u.key")));
    assert_eq!(c.crl, None);
}

#[test]
fn per_peer_caps_default_below_the_global_limit_and_zero_is_refused() {
    let d = crate::server::PeerLimits::default();
    assert!(d.per_identity < d.per_address && d.per_address < 1024);
    let l = settings(
        Path::new("t.toml"),
        "[limits]\nmax_connections_per_identity = 0\n",
    )
    .limits;
    let e = l.peer_limits().unwrap_err();
    assert!(
        e.to_string().contains("max_connections_per_identity"),
        "{e}"
    );
    let flags = Flags {
        max_connections_per_address: Some(9),
        ..Flags::default()
    };
    let s = Settings::layered(toml::Table::new(), &flags).unwrap();
    assert_eq!(s.limits.peer_limits().unwrap().per_address, 9);
}

#[test]
fn unknown_keys_are_errors_on_one_line() {
    let e = Settings::parse(Path::new("x.toml"), "listne = \"a\"\n").unwrap_err();
    let text = e.to_string();
    assert!(text.contains("x.toml") && !text.contains('\n'), "{text}");
    assert!(text.contains("`listne`"), "{text}");
}

#[test]
fn metrics_are_off_by_default_and_a_bad_address_is_named() {
    let example = daemon::config::toml_example(include_str!("../config.rs"));
    let c = settings(Path::new("example"), &example);
    assert_eq!(
        c.metrics_addr().unwrap(),
        Some("127.0.0.1:9471".parse().unwrap())
    );
    let c = settings(Path::new("t"), "database = \"/l.db\"\n");
    assert_eq!(c.metrics_addr().unwrap(), None);
    let c = settings(Path::new("t"), "[metrics]\nlisten = \"anywhere\"\n");
    let e = c.metrics_addr().unwrap_err().to_string();
    assert!(
        e.contains("[metrics] listen") && e.contains("\"anywhere\""),
        "{e}"
    );
}
