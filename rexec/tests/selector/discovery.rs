//! Selectors found on the discovery group, and the cache of them: heard once, asked
//! at once next time, and passed over silently when dead, misplaced or damaged.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use certs::Role;
use certs::testing::TestPki;
use proto::select::SelectorOp;
use testhost::net::Channel;

use crate::peers::*;

/// A client configuration for alice with a `[discovery]` table on loopback.
pub(crate) fn discovery_config(pki: &TestPki, dir: &Path, channel: Channel) -> PathBuf {
    let tls = pki.tls_paths(Role::User, "alice");
    let text = format!(
        "ca = {:?}\ncert = {:?}\nkey = {:?}\n[discovery]\ncluster = \"lab\"\ngroup = \"{}\"\n\
         port = {}\ninterface = \"127.0.0.1\"\nttl = 0\nperiod = \"200ms\"\n",
        tls.ca, tls.cert, tls.key, channel.group, channel.port
    );
    let path = dir.join(format!("client-discovery-{}.toml", channel.port));
    std::fs::write(&path, text).unwrap();
    path
}

/// Announce selector `name` at `addr` on the loopback group of
/// [`discovery_config`] until the task is dropped.
pub(crate) fn announce_selector(
    channel: Channel,
    cluster: &str,
    name: &str,
    addr: SocketAddr,
) -> tokio::task::JoinHandle<()> {
    let cfg = discovery::config::DiscoveryFile {
        cluster: Some(cluster.into()),
        group: Some(channel.group.to_string()),
        port: Some(channel.port),
        interface: Some("127.0.0.1".into()),
        ttl: Some(0),
        period: Some("200ms".into()),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    let sender = discovery::net::Sender::new(&cfg).unwrap();
    let (cluster, name) = (cluster.to_string(), name.to_string());
    tokio::spawn(discovery::net::announce_loop(
        sender,
        cfg.period,
        Arc::new(tokio::sync::Notify::new()),
        move || proto::announce::Announcement {
            cluster: cluster.clone(),
            name: name.clone(),
            addr,
            incarnation: 0,
            seq: 0,
            period_ms: 0,
            kind: proto::announce::Kind::Selector,
            summary: None,
        },
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn selectors_are_found_from_announcements_on_the_group() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let channel = testhost::net::channel();
    let nodes = vec![view("n1", "127.0.0.1:7001".parse().unwrap(), 0)];
    let v1 = selector_peer(&pki, "v1", listing(nodes)).await;
    // Another cluster's selector on the same group is not asked.
    let foreign = selector_peer(&pki, "w1", listing(Vec::new())).await;
    let _a = announce_selector(channel, "lab", "v1", v1.addr);
    let _b = announce_selector(channel, "other", "w1", foreign.addr);
    let config = discovery_config(&pki, dir.path(), channel);
    let out = rexec(&config, &["nodes", "-v"]).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("heard selector v1 ({})", v1.addr)),
        "{stderr}"
    );
    assert!(
        stdout.lines().nth(1).unwrap_or("").starts_with("n1 "),
        "{stdout}"
    );
    // It asked v1 for the other services, then for the nodes.
    let ops: Vec<_> = v1.requests().into_iter().map(|r| r.op).collect();
    assert!(
        matches!(ops[..], [SelectorOp::Services, SelectorOp::Nodes(_)]),
        "{ops:?}"
    );
    assert!(foreign.requests().is_empty());
    // Both on one connection: a single handshake.
    assert_eq!(v1.handshakes(), 1);

    // The next run asks the remembered selector at once, without listening.
    let out = rexec(&config, &["nodes", "-v"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("asking the selectors remembered in "),
        "{stderr}"
    );
    assert!(!stderr.contains("heard selector"), "{stderr}");
    let ops: Vec<_> = v1.requests().into_iter().map(|r| r.op).collect();
    assert!(
        matches!(ops[..], [_, _, SelectorOp::Services, SelectorOp::Nodes(_)]),
        "{ops:?}"
    );
    assert_eq!(v1.handshakes(), 2, "one connection per run");
}

/// A remembered list that cannot be used: the client listens after all, and says
/// nothing about it without `-v`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn a_dead_misplaced_or_damaged_cache_falls_back_to_listening_silently() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let channel = testhost::net::channel();
    let nodes = vec![view("n1", "127.0.0.1:7001".parse().unwrap(), 0)];
    let v1 = selector_peer(&pki, "v1", listing(nodes)).await;
    // Something else, with a certificate of the cluster but another name.
    let other = selector_peer(&pki, "w1", listing(Vec::new())).await;
    let _a = announce_selector(channel, "lab", "v1", v1.addr);
    let config = discovery_config(&pki, dir.path(), channel);
    let discovery = discovery::config::DiscoveryConfig {
        cluster: "lab".into(),
        group: channel.group,
        port: channel.port,
        ..Default::default()
    };
    let cache = discovery::cache::Cache::new(&dir.path().join("cache"), "selectors", &discovery);
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = format!("rexec-market service cache 1\nwritten {secs}\n");
    let cases = [
        ("a dead selector", format!("{header}v1 {closed}\n")),
        (
            "an address held by another",
            format!("{header}v1 {}\n", other.addr),
        ),
        (
            "a damaged file",
            "rexec-market service cache 1\nwritten x\n\u{0}".to_string(),
        ),
    ];
    for (what, text) in cases {
        std::fs::create_dir_all(cache.path().parent().unwrap()).unwrap();
        std::fs::write(cache.path(), text).unwrap();
        let out = rexec(&config, &["nodes"]).await;
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(0), "{what}: {stderr}");
        assert_eq!(stderr, "", "{what}: printed without -v");
        assert!(
            stdout.lines().nth(1).unwrap_or("").starts_with("n1 "),
            "{what}: {stdout}"
        );
        // What was heard replaced the bad entry.
        let (kept, _) = cache
            .load(discovery::cache::MAX_AGE, std::time::SystemTime::now())
            .unwrap_or_else(|| panic!("{what}: nothing remembered"));
        assert_eq!(kept.len(), 1, "{what}: {kept:?}");
        assert_eq!(
            (kept[0].name.as_str(), kept[0].addr.clone()),
            ("v1", v1.addr.to_string()),
            "{what}"
        );
    }
    assert!(
        other.requests().is_empty(),
        "the misplaced address was asked"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(crate) async fn no_selector_heard_is_a_clear_error_after_one_and_a_half_periods() {
    let pki = TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    let channel = testhost::net::channel();
    let config = discovery_config(&pki, dir.path(), channel);
    let out = rexec(&config, &["nodes"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "no selector heard on {}:{} (cluster lab) within 300ms",
            channel.group, channel.port
        )),
        "{stderr}"
    );
}
