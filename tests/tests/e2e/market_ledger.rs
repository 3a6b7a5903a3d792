//! The market page's ledger panel, for admins: a real accountd, a node charging
//! through it, a real vexecd whose `[ledger]` table names accountd and a
//! `ledger-reader` certificate. A member's job charged to project chem shows on
//! the page, in headless Chromium, as chem's spend in the current hour, exactly
//! what `accountctl report --by project` counts from the start of that hour.
//! Then accountd is killed: the page keeps answering at once, its nodes still
//! listed, and the panel says the ledger is unreachable.
//!
//! Needs Debian's `chromium` package (`deploy/setup-host` installs it).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use certs::Role;
use rexec_tests::chromium;
use rexec_tests::cluster::TEST_USER;
use rexec_tests::market::{MarketCluster, MarketOptions};
use rexec_tests::prometheus::get;
use rexec_tests::selectors::{Channel, Vexecd};

/// The text of the first `<td class="{class}">` of project `project`'s row.
fn project_cell(html: &str, project: &str, class: &str) -> Option<String> {
    let start = html.find(&format!("data-project=\"{project}\""))?;
    let row = &html[start..];
    let row = &row[..row.find("</tr>")?];
    let at = row.find(&format!("<td class=\"{class}\">"))? + class.len() + 13;
    Some(row[at..].split('<').next()?.to_string())
}

/// The number in attribute `name="..."` of the ledger table.
fn table_attr(html: &str, name: &str) -> Option<i64> {
    let table = &html[html.find("<table id=\"ledger\"")?..];
    let at = table.find(&format!("{name}=\""))? + name.len() + 2;
    table[at..].split('"').next()?.parse().ok()
}

/// chem's net charge since `since_us` as `accountctl report --by project` prints it.
fn reported(m: &MarketCluster, since_us: i64) -> Option<i64> {
    let since = format!("@{}", since_us / 1_000_000);
    let out = m
        .accountd
        .admin(&["report", "--by", "project", "--since", &since])
        .ok()
        .to_string();
    let line = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some("chem"))?;
    money::parse_credits(line.split_whitespace().nth(1)?).ok()
}

#[test]
fn the_ledger_panel_shows_a_projects_spend_this_hour_and_survives_accountd() {
    if !rexec_tests::can_run(
        "the_ledger_panel_shows_a_projects_spend_this_hour_and_survives_accountd",
    ) {
        return;
    }
    assert!(
        chromium::installed(),
        "chromium is not installed: run deploy/setup-host"
    );
    let channel = Channel::loopback();
    let mut m = MarketCluster::start(MarketOptions {
        initial: Some("100"),
        discovery: Some(channel.table()),
        ..MarketOptions::paper_with_one_second_ticks()
    });
    m.accountd
        .admin(&["project", "create", "chem", "--members", TEST_USER])
        .ok();
    m.accountd
        .admin(&["grant", "chem", "100", "--reason", "allocation"])
        .ok();

    // The selector's page, with the panel read through a ledger-reader certificate.
    let reader = m.pki.tls_paths(Role::Service, "ledger-reader-v1");
    let metrics = SocketAddr::from(([127, 0, 0, 1], testhost::net::port()));
    let _v1 = Vexecd::start_with(
        &m.pki,
        m.dir.path(),
        "v1",
        &channel,
        &format!(
            "[metrics]\nlisten = \"{metrics}\"\n[ledger]\naccountd = \"{}\"\ncert = {:?}\n\
             key = {:?}\nhours = 6\nevery = \"1s\"\n",
            m.accountd.addr,
            reader.cert.display().to_string(),
            reader.key.display().to_string()
        ),
    );
    let page = || {
        get(metrics, "/market")
            .map(|(_, body)| body)
            .unwrap_or_default()
    };
    let mut last = String::new();
    let read = testhost::wait::until(Duration::from_secs(60), || {
        last = page();
        (last.contains("<table id=\"ledger\"") && last.contains("data-node=\"n1\"")).then_some(())
    });
    assert!(
        read.is_some(),
        "the page never showed the ledger's table and n1:\n{last}"
    );
    assert!(
        project_cell(&last, "chem", "hour").is_none(),
        "chem shows a spend before any job ran:\n{last}"
    );

    // A member's job charged to chem: two ranks bidding 6 a minute for 2 s.
    let out = m
        .rexec()
        .args(["-r", "6", "-A", "chem", "--nodes", "n1,n1", "sleep", "2"])
        .run();
    assert_eq!(out.code, Some(0), "{out:?}\n{}", m.logs());
    let chem = m
        .settled_balance("chem", Duration::from_secs(2), Duration::from_secs(30))
        .expect("chem's balance never settled");
    assert!(chem < 100_000_000, "chem was not charged\n{}", m.logs());

    // The page's current hour for chem equals the report since that hour began
    // (read again should the hour turn meanwhile).
    let mut agreed = None;
    let matched = testhost::wait::until(Duration::from_secs(60), || {
        last = page();
        let hour = table_attr(&last, "data-hour")?;
        let shown = money::parse_credits(&project_cell(&last, "chem", "hour")?).ok()?;
        let report = reported(&m, hour)?;
        agreed = Some((hour, shown, report));
        (shown == report && shown > 0).then_some((hour, shown))
    });
    let (hour, spent) = matched.unwrap_or_else(|| {
        panic!("the panel never showed chem's spend as the report does (hour, page, report: {agreed:?}):\n{last}")
    });
    eprintln!(
        "chem spent {} this hour, page and report agree",
        money::format_credits_fixed(spent)
    );

    // In the browser, after the page has refreshed itself.
    let url = format!("http://{metrics}/market");
    let dom = chromium::dump_dom(&m.dir.path().join("chromium"), &url, Duration::from_secs(7));
    let shown = project_cell(&dom, "chem", "hour")
        .unwrap_or_else(|| panic!("chem is not on the page in Chromium:\n{dom}"));
    let hour_now = table_attr(&dom, "data-hour");
    if hour_now == Some(hour) {
        assert_eq!(money::parse_credits(&shown), Ok(spent), "{dom}");
    } else {
        // The hour turned since: the page shows what the report says of it.
        let report = reported(&m, hour_now.unwrap_or(hour));
        assert_eq!(money::parse_credits(&shown).ok(), report, "{dom}");
    }
    assert!(dom.contains("<svg class=\"bars\""), "{dom}");

    // accountd stalled (stopped: connections open, nothing answers) and then
    // gone: the page answers at once every time, its nodes listed, and the
    // panel says the ledger is unreachable and why.
    let pid = nix::unistd::Pid::from_raw(m.accountd.pid().expect("accountd runs") as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).expect("cannot stop accountd");
    let mut slowest = Duration::ZERO;
    let mut unreachable = |why: &str, last: &mut String| {
        testhost::wait::until(Duration::from_secs(60), || {
            let t = Instant::now();
            *last = page();
            slowest = slowest.max(t.elapsed());
            (last.contains("the ledger is unreachable") && last.contains(why)).then_some(())
        })
    };
    let stalled = unreachable("did not answer within", &mut last);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).expect("cannot resume accountd");
    assert!(
        stalled.is_some(),
        "the panel never said a stalled ledger is unreachable:\n{last}"
    );
    assert!(last.contains("data-node=\"n1\""), "{last}");
    assert!(!last.contains("<table id=\"ledger\""), "{last}");
    m.accountd.kill9();
    let gone = unreachable("cannot reach", &mut last);
    assert!(
        gone.is_some(),
        "the panel never said a dead ledger is unreachable:\n{last}"
    );
    assert!(last.contains("data-node=\"n1\""), "{last}");
    eprintln!("the slowest page took {slowest:?} while accountd was stalled or down");
    // A try waits up to 5 s for a stalled accountd; the page never waits for it.
    assert!(
        slowest < Duration::from_secs(3),
        "the page waited for accountd: {slowest:?}"
    );
}
