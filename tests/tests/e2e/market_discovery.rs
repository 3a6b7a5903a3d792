//! A node with no accountd address finds accountd from its announcements: the
//! real accountd announces itself on loopback multicast (a group and port of this
//! test's own, TTL 0), the node, whose `[market]` names no accountd but which has
//! the same `[discovery]` table, learns the address, checks the user's balance
//! there and charges the user's jobs there (seen in the ledger's history).

use std::time::Duration;

use rexec_tests::cluster::ClusterOptions;
use rexec_tests::market::{MarketCluster, MarketOptions, parse_bills};
use rexec_tests::wait_until;

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn a_node_finds_accountd_from_its_announcements_and_charges_there() {
    if !rexec_tests::can_run("a_node_finds_accountd_from_its_announcements_and_charges_there") {
        return;
    }
    let testhost::net::Channel { group, port } = testhost::net::channel();
    let table = format!(
        "[discovery]\ncluster = \"e2e-discovery\"\ngroup = \"{group}\"\nport = {port}\n\
         interface = \"127.0.0.1\"\nttl = 0\nperiod = \"300ms\"\n"
    );
    let m = MarketCluster::start(MarketOptions {
        cluster: ClusterOptions {
            nodes: 1,
            ..ClusterOptions::default()
        },
        // Under `paper` two jobs on one node pay whether or not they contend.
        policy: "paper",
        discovery: Some(table.to_string()),
        ..MarketOptions::default()
    });
    let config = std::fs::read_to_string(m.dir.path().join("n1.toml")).unwrap();
    assert!(!config.contains("accountd = "), "{config}");
    let log = &m.node("n1").log;
    // accountctl with no address but the table finds accountd too.
    let user_config = m.dir.path().join("user-discovery.toml");
    let tls = m
        .pki
        .tls_paths(certs::Role::User, rexec_tests::cluster::TEST_USER);
    std::fs::write(
        &user_config,
        format!(
            "ca = {:?}\ncert = {:?}\nkey = {:?}\n{table}",
            tls.ca, tls.cert, tls.key
        ),
    )
    .unwrap();
    let cache_dir = m.dir.path().join("ctl-cache");
    let balance = || {
        let out = std::process::Command::new(rexec_tests::cluster::bin("accountctl"))
            .args(["--config"])
            .arg(&user_config)
            .arg("balance")
            .env_remove("ACCOUNTD_ADDR")
            .env("REXEC_CACHE_DIR", &cache_dir)
            .output()
            .unwrap();
        let printed = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success() && printed.starts_with(rexec_tests::cluster::TEST_USER),
            "accountctl did not find accountd: {printed} {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    balance();
    // It remembered where accountd answered; the next run goes there at once, and a
    // damaged memory is as if absent.
    let cached: Vec<_> = std::fs::read_dir(&cache_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(cached.len(), 1, "{cached:?}");
    let text = std::fs::read_to_string(&cached[0]).unwrap();
    assert!(text.contains("accountd "), "{text}");
    balance();
    std::fs::write(&cached[0], "rexec-market service cache 1\nwritten 0\njunk").unwrap();
    balance();
    assert_eq!(
        std::fs::read_to_string(&cached[0]).unwrap().lines().nth(2),
        text.lines().nth(2)
    );
    let found = wait_until(Duration::from_secs(10), || {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .contains("accountd found from its announcements")
    });
    assert!(found.is_some(), "n1 never found accountd:\n{}", m.logs());

    let script = "$|=1; print \"$ENV{REXEC_JOB}\\n\"; $e=time+2; 1 while time<$e";
    let spin = |rate: &str| {
        m.rexec()
            .args(["-v", "-r", rate, "--nodes", "n1", "perl", "-e", script])
            .spawn()
    };
    let (a, b) = (spin("20"), spin("10"));
    for client in [a, b] {
        let out = client.wait(LIMIT);
        assert_eq!(out.code, Some(0), "{out:?}\n{}", m.logs());
        let job = out.out().trim().to_string();
        let bills = parse_bills(&out.stderr);
        assert_eq!(bills.len(), 1, "{out:?}");
        assert!(bills[0].charged > 0, "job {job} paid nothing: {out:?}");
        let mut debits = Vec::new();
        let matched = wait_until(LIMIT, || {
            debits = m.debits_of(&job);
            -debits.iter().map(|e| e.amount).sum::<i64>() == bills[0].charged
        });
        assert!(
            matched.is_some(),
            "ledger debits of {job} {debits:?} do not add up to {}",
            bills[0].charged
        );
    }
}
