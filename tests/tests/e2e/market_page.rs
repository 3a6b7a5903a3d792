//! The live market page in a real browser: a charging market of two nodes
//! announcing on loopback multicast, a real vexecd serving its page at
//! `/market` on its metrics address, jobs bidding on the nodes; headless
//! Chromium loads the page, lets it refresh itself, and the rendered DOM names
//! every node and draws the bidding node's price chart with data points (stepping up from the idle price). A
//! screenshot is taken too (set `REXEC_MARKET_PAGE_PNG` to keep it: that is how
//! `docs/market-page.png` was made).
//!
//! Needs Debian's `chromium` package (`deploy/setup-host` installs it).

use std::net::SocketAddr;
use std::time::Duration;

use rexec_tests::chromium;
use rexec_tests::cluster::ClusterOptions;
use rexec_tests::market::{MarketCluster, MarketOptions};
use rexec_tests::prometheus::get;
use rexec_tests::selectors::{Channel, Vexecd};

/// The `<tr>` of `node` in the page, if listed.
fn row<'a>(html: &'a str, node: &str) -> Option<&'a str> {
    let start = html.find(&format!("data-node=\"{node}\""))?;
    let rest = &html[start..];
    Some(&rest[..rest.find("</tr>")?])
}

/// The number right after `prefix` in `text`.
fn number_after(text: &str, prefix: &str) -> Option<u64> {
    let at = text.find(prefix)? + prefix.len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn price_of(row: &str) -> Option<String> {
    let at = row.find("<td class=\"price\">")? + "<td class=\"price\">".len();
    Some(row[at..].split('<').next()?.to_string())
}

#[test]
fn the_market_page_in_chromium_names_every_node_and_charts_the_price() {
    if !rexec_tests::can_run("the_market_page_in_chromium_names_every_node_and_charts_the_price") {
        return;
    }
    assert!(
        chromium::installed(),
        "chromium is not installed: run deploy/setup-host"
    );
    let channel = Channel::loopback();
    let m = MarketCluster::start(MarketOptions {
        cluster: ClusterOptions {
            nodes: 2,
            ..ClusterOptions::default()
        },
        // Under `paper` the two jobs on n1 pay, and make its price, whether or not
        // they contend.
        policy: "paper",
        discovery: Some(channel.table()),
        ..MarketOptions::default()
    });
    let metrics = SocketAddr::from(([127, 0, 0, 1], testhost::net::port()));
    let _v1 = Vexecd::start_with(
        &m.pki,
        m.dir.path(),
        "v1",
        &channel,
        &format!("[metrics]\nlisten = \"{metrics}\"\n"),
    );
    let (code, index) = get(metrics, "/").unwrap();
    assert_eq!(code, 200);
    assert!(index.contains("GET /market"), "{index}");

    // Both nodes listed, and their idle price charted, before any job bids.
    let page = || {
        get(metrics, "/market")
            .map(|(_, body)| body)
            .unwrap_or_default()
    };
    let charted =
        |html: &str, node: &str| row(html, node).and_then(|r| number_after(r, "data-points=\""));
    let mut last = String::new();
    let listed = testhost::wait::until(Duration::from_secs(60), || {
        last = page();
        (charted(&last, "n1")? >= 2 && charted(&last, "n2")? >= 2).then_some(())
    });
    assert!(
        listed.is_some(),
        "the page never listed both nodes:\n{last}"
    );

    let job = |rate: &str, node: &str, argv: &[&str]| {
        m.rexec()
            .args(["-r", rate, "--nodes", node])
            .args(argv)
            .spawn()
    };
    // The jobs run until the page has been checked, 60 s at most.
    let stop = rexec_tests::stop::StopFile::new();
    let spin = stop.perl_spin(60);
    let jobs = [
        job("20", "n1", &["perl", "-e", &spin]),
        job("10", "n1", &["perl", "-e", &spin]),
        job("5", "n2", &["sh", "-c", &stop.sh_idle(60)]),
    ];

    // The selector hears n1's price, and has sampled it again (the points are
    // 10 s apart).
    let ready = testhost::wait::until(Duration::from_secs(90), || {
        last = page();
        let n1 = row(&last, "n1")?;
        let priced = price_of(n1).is_some_and(|p| p != "0");
        (charted(&last, "n1")? >= 3 && priced).then_some(())
    });
    assert!(
        ready.is_some(),
        "the page never showed n1 priced and charted:\n{last}"
    );

    // In the browser, after it has refreshed itself (every 5 s; 12 s of the
    // page's time allow two).
    let served = number_after(&page(), "<span id=\"served\">").unwrap_or(0);
    let url = format!("http://{metrics}/market");
    let dom = chromium::dump_dom(
        &m.dir.path().join("chromium"),
        &url,
        Duration::from_secs(12),
    );
    let shown = number_after(&dom, "<span id=\"served\">").unwrap_or(0);
    assert!(
        shown >= served + 2,
        "the page did not refresh itself (served {served} before, showing {shown}):\n{dom}"
    );
    for node in ["n1", "n2"] {
        let r = row(&dom, node).unwrap_or_else(|| panic!("{node} is not on the page:\n{dom}"));
        assert!(
            r.contains(&format!("<td class=\"name\">{node}</td>")),
            "{r}"
        );
    }
    let n1 = row(&dom, "n1").unwrap();
    assert!(number_after(n1, "data-points=\"").unwrap_or(0) >= 2, "{n1}");
    let line = n1
        .split("<polyline class=\"price\" points=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| panic!("n1 has no price line:\n{n1}"));
    // It steps up from the idle price and never down (the jobs bid until the end):
    // the heights (SVG y, growing downwards) never grow, and the last is below the
    // first.
    let heights: Vec<f64> = line
        .split(' ')
        .filter_map(|xy| xy.split(',').nth(1)?.parse().ok())
        .collect();
    assert!(
        heights.windows(2).all(|w| w[1] <= w[0]),
        "the price line steps down: {line}"
    );
    assert!(
        heights.len() >= 2 && heights[heights.len() - 1] < heights[0],
        "the price line never steps up: {line}"
    );
    assert_ne!(price_of(n1).as_deref(), Some("0"), "{n1}");

    let png = m.dir.path().join("market-page.png");
    chromium::screenshot(
        &m.dir.path().join("chromium"),
        &url,
        Duration::from_secs(1),
        (1200, 400),
        &png,
    );
    if let Some(keep) = std::env::var_os("REXEC_MARKET_PAGE_PNG") {
        std::fs::copy(&png, keep).expect("cannot keep the screenshot");
    }
    stop.stop();
    for j in jobs {
        let out = j.wait(Duration::from_secs(120));
        assert!(out.code.is_some(), "{out:?}");
    }
}
