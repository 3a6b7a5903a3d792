//! Unit tests of config resolution: flags over file, required keys, refusals.

use std::io::Write;
use std::time::Duration;

use super::*;

fn file(text: &str) -> toml::Table {
    Settings::parse(Path::new("test.toml"), text).unwrap()
}

const BASE: &str = r#"
    name = "n1"
    cert = "/f/c.pem"
    key = "/f/c.key"
    ca = "/f/ca.pem"
"#;

#[test]
fn flags_override_the_file_and_defaults_fill_the_rest() {
    let text = format!("{BASE}\nlisten = \"0.0.0.0:1\"\nallowed_users = [\"ann\"]\n");
    let flags = Flags {
        name: Some("n2".into()),
        tls: daemon::config::TlsFlags {
            cert: Some("/flag/c.pem".into()),
            ..Default::default()
        },
        common: daemon::flags::CommonFlags {
            listen: Some("127.0.0.1:0".into()),
            ..Default::default()
        },
        allowed_users: Some(vec!["bob".into(), "eve".into()]),
        heartbeat_timeout: Some("2s".into()),
        allow_root: true,
        ..Flags::default()
    };
    let c = Config::resolve(file(&text), &flags).unwrap();
    assert_eq!(c.name, "n2");
    assert_eq!(c.listen, "127.0.0.1:0");
    assert_eq!(c.tls.cert, std::path::Path::new("/flag/c.pem"));
    assert_eq!(c.tls.key, std::path::Path::new("/f/c.key"));
    assert_eq!(c.tls.crl, None);
    assert_eq!(
        c.allowed_users,
        Some(vec!["bob".to_string(), "eve".to_string()])
    );
    assert!(c.allow_root);
    assert_eq!(c.heartbeat_timeout, Duration::from_secs(2));
    assert_eq!(c.heartbeat_interval, DEFAULT_HEARTBEAT_INTERVAL);
    assert_eq!(c.max_frame, proto::DEFAULT_MAX_FRAME);
    assert!(c.env.denies("LD_PRELOAD"));
}

#[test]
fn a_missing_key_names_both_the_key_and_the_flag() {
    let e = Config::resolve(file(r#"name = "n1""#), &Flags::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no cert configured; set `cert` in the config file or pass --cert"
    );
}

#[test]
fn bad_values_are_refused_with_the_key() {
    for (extra, key) in [
        ("heartbeat_timeout = \"0s\"", "heartbeat_timeout"),
        ("heartbeat_interval = \"soon\"", "heartbeat_interval"),
        ("cgroup_parent = \"../up\"", "cgroup_parent"),
        ("max_frame = 10", "max_frame"),
        ("cgroup_weight = 0", "cgroup_weight"),
        ("cgroup_weight = 10001", "cgroup_weight"),
    ] {
        let e = Config::resolve(file(&format!("{BASE}\n{extra}")), &Flags::default());
        let text = e.unwrap_err().to_string();
        assert!(text.starts_with(&format!("invalid {key} ")), "{text}");
    }
    let bad_name = Flags {
        name: Some("bad name".into()),
        ..Flags::default()
    };
    assert!(Config::resolve(file(BASE), &bad_name).is_err());
}

#[test]
fn an_env_deny_list_replaces_the_default() {
    let c = Config::resolve(
        file(&format!("{BASE}\nenv_deny = [\"SECRET_*\"]")),
        &Flags::default(),
    )
    .unwrap();
    assert!(c.env.denies("SECRET_TOKEN"));
    assert!(!c.env.denies("LD_PRELOAD"));
}

#[test]
fn unknown_keys_and_broken_files_name_the_file() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    writeln!(f, "{BASE}\nlisten_addr = \"x\"").unwrap();
    let e = Settings::read(f.path()).unwrap_err().to_string();
    assert!(
        e.contains(&f.path().display().to_string()) && e.contains("listen_addr"),
        "{e}"
    );
    let e = Settings::read(std::path::Path::new("/no/such/rexecd.toml")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cannot read config file /no/such/rexecd.toml"),
        "{e}"
    );
}

#[test]
fn a_tiny_heartbeat_timeout_in_the_file_is_refused_not_zero() {
    let text = format!("{BASE}\nheartbeat_timeout = \"1e-300s\"\n");
    let e = Config::resolve(file(&text), &Flags::default()).unwrap_err();
    assert!(e.to_string().contains("heartbeat_timeout"), "{e}");
}

#[test]
fn connection_and_rank_limits_have_defaults_flags_and_refuse_zero() {
    let config = Config::resolve(file(BASE), &Flags::default()).unwrap();
    assert_eq!(config.max_connections, DEFAULT_MAX_CONNECTIONS);
    assert_eq!(config.max_ranks_per_user, DEFAULT_MAX_RANKS_PER_USER);
    let text = format!("{BASE}\nmax_connections = 10\nmax_ranks_per_user = 3\n");
    let config = Config::resolve(file(&text), &Flags::default()).unwrap();
    assert_eq!((config.max_connections, config.max_ranks_per_user), (10, 3));
    let flags = Flags {
        max_connections: Some(4),
        ..Flags::default()
    };
    let config = Config::resolve(file(&text), &flags).unwrap();
    assert_eq!((config.max_connections, config.max_ranks_per_user), (4, 3));
    for key in ["max_connections", "max_ranks_per_user"] {
        let text = format!("{BASE}\n{key} = 0\n");
        let e = Config::resolve(file(&text), &Flags::default()).unwrap_err();
        assert!(e.to_string().contains(key), "{e}");
        assert!(e.to_string().contains("at least 1"), "{e}");
    }
}

#[test]
fn the_example_config_in_deploy_resolves() {
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/etc/rexecd.toml"
    ));
    let config = Config::resolve(Settings::read(path).unwrap(), &Flags::default()).unwrap();
    assert_eq!(config.name, "n1");
    assert_eq!(config.heartbeat_timeout, Duration::from_secs(5));
    assert!(config.tls.crl.is_some());
}

#[test]
fn market_flags_override_the_market_table() {
    let text = format!(
        "{BASE}\n[market]\naccountd = \"10.0.0.9:7071\"\njournal = \"/file/j\"\npolicy = \"paper\"\n"
    );
    let flags = Flags {
        accountd: Some("127.0.0.1:9".into()),
        journal: Some("/flag/j".into()),
        ..Flags::default()
    };
    let c = Config::resolve(file(&text), &flags).unwrap();
    let ledger = c.market.ledger.unwrap();
    assert_eq!(ledger.addresses, ["127.0.0.1:9"]);
    assert_eq!(ledger.journal, std::path::PathBuf::from("/flag/j"));
    assert_eq!(c.market.policy, stride::Policy::Paper);
    // Without the table the node meters but charges nobody.
    let bare = Config::resolve(file(BASE), &Flags::default()).unwrap();
    assert_eq!(bare.market.ledger, None);
}

#[test]
fn job_hardening_and_client_bounds_have_safe_defaults_and_refuse_bad_values() {
    let base = "name = \"n1\"\ncert = \"/c\"\nkey = \"/k\"\nca = \"/ca\"\n";
    let resolve = |extra: &str| Config::resolve(file(&format!("{base}{extra}")), &Flags::default());
    let config = resolve("").unwrap();
    assert!(config.job_limits.no_new_privs);
    assert_eq!(config.job_limits.umask, 0o022);
    assert!(config.job_limits.rlimits.is_empty());
    assert_eq!(config.stopped_client_limit, Duration::from_secs(3600));
    assert_eq!(config.tcp_user_timeout, Duration::from_secs(300));
    assert!(config.favor_dynmods, "fast cgroup migrations by default");
    assert!(!resolve("favor_dynmods = false\n").unwrap().favor_dynmods);

    let config = resolve(
        "stopped_client_limit = \"90s\"\nno_new_privs = false\n[rlimits]\nnproc = \"unlimited\"\n",
    )
    .unwrap();
    assert_eq!(config.stopped_client_limit, Duration::from_secs(90));
    assert!(!config.job_limits.no_new_privs);
    assert_eq!(config.job_limits.rlimits[0].1, nix::libc::RLIM_INFINITY);

    for (extra, key) in [
        ("umask = \"0999\"\n", "umask"),
        ("umask = \"rw\"\n", "umask"),
        ("[rlimits]\nfiles = 10\n", "rlimits"),
        ("[rlimits]\nnofile = [20, 10]\n", "rlimits"),
        ("[rlimits]\nnofile = \"lots\"\n", "rlimits"),
        ("tcp_user_timeout = \"0s\"\n", "tcp_user_timeout"),
    ] {
        let e = resolve(extra).unwrap_err();
        assert!(e.to_string().contains(key), "{extra}: {e}");
    }
}

#[test]
fn cpus_pin_the_node_and_set_what_the_market_sells() {
    // Without the key: no pinning, and the market sells what rexecd may use, as before.
    let bare = Config::resolve(file(BASE), &Flags::default()).unwrap();
    assert_eq!(bare.cpus, None);
    assert_eq!(bare.market.cpus, market_table::available_cpus());

    let c = Config::resolve(
        file(&format!("{BASE}\ncpus = \"0,2,5-7\"\n")),
        &Flags::default(),
    )
    .unwrap();
    assert_eq!(c.cpus.as_ref().unwrap().to_string(), "0,2,5-7");
    assert_eq!(
        c.market.cpus, 5,
        "the market sells the pinned set by default"
    );

    // The flag wins over the file.
    let flags = Flags {
        cpus: Some("1".into()),
        ..Flags::default()
    };
    let c = Config::resolve(file(&format!("{BASE}\ncpus = \"0-3\"\n")), &flags).unwrap();
    assert_eq!(c.cpus.as_ref().unwrap().to_string(), "1");
    assert_eq!(c.market.cpus, 1);

    // The market may sell fewer than the set, never more.
    let fewer = format!("{BASE}\ncpus = \"0-3\"\n[market]\ncpus = 2\n");
    assert_eq!(
        Config::resolve(file(&fewer), &Flags::default())
            .unwrap()
            .market
            .cpus,
        2
    );
    let more = format!("{BASE}\ncpus = \"0-1\"\n[market]\ncpus = 3\n");
    let e = Config::resolve(file(&more), &Flags::default())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "invalid market.cpus \"3\": the node is pinned to 2 CPUs (cpus = \"0-1\"); sell at most 2"
    );
}

#[test]
fn bad_cpu_lists_are_refused_in_one_line_naming_the_key() {
    for (list, says) in [
        ("0-", "not a CPU number"),
        ("3-1", "reversed"),
        ("0,0", "CPU 0 is listed twice"),
        ("0-99999", "CPU 99999 is beyond"),
        ("", "at least one CPU"),
        ("1,,2", "empty item"),
    ] {
        let text = format!("{BASE}\ncpus = \"{list}\"\n");
        let e = Config::resolve(file(&text), &Flags::default())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid cpus "), "{list:?}: {e}");
        assert!(e.contains(says), "{list:?}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
    let flags = Flags {
        cpus: Some("x".into()),
        ..Flags::default()
    };
    let e = Config::resolve(file(BASE), &flags).unwrap_err().to_string();
    assert!(e.starts_with("invalid cpus \"x\""), "{e}");
}

#[test]
fn metrics_are_off_by_default_and_a_bad_address_is_named() {
    let c = Config::resolve(file(BASE), &Flags::default()).unwrap();
    assert_eq!(c.metrics, None);
    let text = format!("{BASE}\n[metrics]\nlisten = \"127.0.0.1:9474\"\n");
    let c = Config::resolve(file(&text), &Flags::default()).unwrap();
    assert_eq!(c.metrics, Some("127.0.0.1:9474".parse().unwrap()));
    let text = format!("{BASE}\n[metrics]\nlisten = \"localhost\"\n");
    let e = Config::resolve(file(&text), &Flags::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid [metrics] listen \"localhost\": not an address like 127.0.0.1:9474"
    );
}
