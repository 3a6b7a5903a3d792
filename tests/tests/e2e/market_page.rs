//! The live market page in a real browser: a charging market of two nodes
//! announcing on loopback multicast, a real vexecd serving its page at
//! `/market` on its metrics address, jobs bidding on the nodes; headless
//! Chromium loads the page, lets it refresh itself, and the rendered DOM names
//! every node and draws the bidding node's price chart with data points (stepping up from the idle price). A
//! screenshot is taken too (set `REXEC_MARKET_PAGE_PNG` to keep it). A second test
//! runs a node alone, one contended and one idle, and checks that the price metric,
//! `rexec nodes`, `rexec stats` and the page show one price for each, `rexec nodes` and
//! the page what each charges and whether it is contended, and the charts one scale with clock
//! times; `docs/market-page.png` is its screenshot.
//!
//! Needs Debian's `chromium` package (`deploy/setup-host` installs it).

use std::collections::HashMap;
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

    screenshot_then_stop(&m, &url, (1200, 400), stop, jobs);
}

/// A screenshot of the page at `url` (kept where `REXEC_MARKET_PAGE_PNG` says: that
/// is how `docs/market-page.png` is made), then the jobs stopped and waited for.
fn screenshot_then_stop(
    m: &MarketCluster,
    url: &str,
    size: (u32, u32),
    stop: rexec_tests::stop::StopFile,
    jobs: impl IntoIterator<Item = rexec_tests::rexec::Running>,
) {
    let png = m.dir.path().join("market-page.png");
    chromium::screenshot(
        &m.dir.path().join("chromium"),
        url,
        Duration::from_secs(1),
        size,
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

/// One node's price, charging rate and state as one view shows it.
#[derive(Debug, Clone, PartialEq)]
struct Shown {
    price: String,
    charging: Option<String>,
    state: Option<String>,
}

/// The text of `<td class="{class}">` (or a class starting so) in `row`.
fn cell(row: &str, class: &str) -> Option<String> {
    let at = row.find(&format!("<td class=\"{class}"))?;
    let rest = &row[at..];
    let rest = &rest[rest.find('>')? + 1..];
    Some(rest.split('<').next()?.to_string())
}

/// The value of the sample `name` (no labels) in a Prometheus exposition, as
/// credits the way the tables print them (`2`, `0`, `1.5`).
fn sample(text: &str, name: &str) -> Option<String> {
    let line = text
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))?;
    let value: f64 = line.rsplit(' ').next()?.parse().ok()?;
    Some(money::format_credits((value * 1e6).round() as i64))
}

/// The row of `table` starting with `first`, its cells by their column's name
/// (the header of the table, among those `table` holds, that the row is in).
fn table_row<'a>(table: &'a str, first: &str) -> Option<HashMap<&'a str, &'a str>> {
    // A table starts with its header line, after the text's start or a blank line.
    let mut header: Option<Vec<&str>> = None;
    for line in table.lines() {
        let cells: Vec<&str> = line.split_whitespace().collect();
        match &header {
            _ if cells.is_empty() => header = None,
            None => header = Some(cells),
            Some(names) if cells.first() == Some(&first) => {
                return Some(names.iter().copied().zip(cells).collect());
            }
            Some(_) => {}
        }
    }
    None
}

/// The last y of the price line in `row`'s chart, and the chart's zero line.
fn last_height(row: &str) -> Option<(f64, f64)> {
    let line = row
        .split("<polyline class=\"price\" points=\"")
        .nth(1)?
        .split('"')
        .next()?;
    let y: f64 = line.rsplit(' ').next()?.split(',').nth(1)?.parse().ok()?;
    let zero = row.split("class=\"zero\"").nth(1)?;
    let zero: f64 = zero
        .split("y1=\"")
        .nth(1)?
        .split('"')
        .next()?
        .parse()
        .ok()?;
    Some((y, zero))
}

/// The clock-time labels (`HH:MM`, the right one `HH:MM UTC`) of `row`'s chart.
fn time_labels(row: &str) -> Vec<String> {
    row.split("class=\"axis time\"")
        .skip(1)
        .filter_map(|s| s.split('>').nth(1)?.split('<').next().map(str::to_string))
        .collect()
}

fn is_clock(label: &str) -> bool {
    let hm = label.strip_suffix(" UTC").unwrap_or(label);
    let b = hm.as_bytes();
    b.len() == 5
        && b[2] == b':'
        && hm[..2].parse::<u32>().is_ok_and(|h| h < 24)
        && hm[3..].parse::<u32>().is_ok_and(|m| m < 60)
}

/// One node alone, one contended and one idle: the node's `price` metric, `rexec
/// nodes`, `rexec stats` and the market page all show the same price (the sum of
/// the bids competing there), and what the node charges now and whether it is
/// contended each in a column of its own. In Chromium, the charts of the nodes at 4
/// and 2 credits share one scale (the line of 2 is half as high above the zero
/// line as the line of 4) and are labelled with clock times.
#[test]
fn one_price_everywhere_for_a_node_alone_contended_and_idle() {
    if !rexec_tests::can_run("one_price_everywhere_for_a_node_alone_contended_and_idle") {
        return;
    }
    assert!(
        chromium::installed(),
        "chromium is not installed: run deploy/setup-host"
    );
    let channel = Channel::loopback();
    let node_metrics: Vec<SocketAddr> = (0..3)
        .map(|_| SocketAddr::from(([127, 0, 0, 1], testhost::net::port())))
        .collect();
    // The nodes announce themselves to the selector and are told accountd's address
    // (so that no job is launched before a node has heard where accountd is).
    let histories = tempfile::tempdir().unwrap();
    let mut options = MarketOptions {
        cluster: ClusterOptions {
            nodes: 3,
            ..ClusterOptions::default()
        },
        policy: "contention",
        ..MarketOptions::default()
    };
    for (i, addr) in node_metrics.iter().enumerate() {
        let name = format!("n{}", i + 1);
        let history = rexec_tests::selectors::history(histories.path(), &name);
        options.extra_node_config.insert(
            name,
            format!(
                "\n[metrics]\nlisten = \"{addr}\"\n{}[announce]\nhistory_file = {:?}\n\
                 find_accountd = false\n",
                channel.table(),
                history.display().to_string()
            ),
        );
    }
    let m = MarketCluster::start(options);
    let metrics = SocketAddr::from(([127, 0, 0, 1], testhost::net::port()));
    let v1 = Vexecd::start_with(
        &m.pki,
        m.dir.path(),
        "v1",
        &channel,
        &format!("[metrics]\nlisten = \"{metrics}\"\n"),
    );
    let config = rexec_tests::selectors::client_config(
        &m,
        "one-price.toml",
        &rexec_tests::selectors::selectors_table(&[&v1]),
    );

    // n1: one job bidding 2, alone on its 2 CPUs. n2: three single-threaded jobs
    // bidding 2, 1 and 1 on 2 CPUs, contended. n3: idle.
    let stop = rexec_tests::stop::StopFile::new();
    let spin = stop.perl_spin(300);
    let job = |rate: &str, node: &str| {
        m.rexec()
            .args(["-r", rate, "--nodes", node, "perl", "-e", &spin])
            .spawn()
    };
    let jobs = [
        job("2", "n1"),
        job("2", "n2"),
        job("1", "n2"),
        job("1", "n2"),
    ];
    let expected = [
        ("n1", "2", "0", "idle-cpu"),
        ("n2", "4", "4", "contended"),
        ("n3", "0", "0", "idle-cpu"),
    ];

    // Every view of every node, read again until they all show the expected figures
    // (the jobs take a moment to start and be measured).
    let views = || -> Vec<(&'static str, &'static str, Option<Shown>)> {
        let nodes_out = m.rexec().config(&config).args(["nodes"]).run().out();
        let stats_out = m.rexec().config(&config).args(["stats"]).run().out();
        let page = get(metrics, "/market")
            .map(|(_, body)| body)
            .unwrap_or_default();
        let mut seen = Vec::new();
        for (i, (node, ..)) in expected.iter().enumerate() {
            let text = get(node_metrics[i], "/metrics")
                .map(|(_, body)| body)
                .unwrap_or_default();
            let metric = sample(&text, "rexec_node_price_credits_per_minute").map(|price| Shown {
                price,
                charging: sample(&text, "rexec_node_charging_credits_per_minute"),
                state: sample(&text, "rexec_node_contended")
                    .map(|c| if c == "0" { "idle-cpu" } else { "contended" }.to_string()),
            });
            seen.push((*node, "metrics", metric));
            let column = |r: &HashMap<&str, &str>, name: &str| r.get(name).map(|c| c.to_string());
            let listed = table_row(&nodes_out, node).map(|r| Shown {
                price: column(&r, "PRICE/MIN").unwrap_or_default(),
                charging: column(&r, "CHARGING/MIN"),
                state: column(&r, "STATE"),
            });
            seen.push((*node, "rexec nodes", listed));
            let stats = table_row(&stats_out, node).map(|r| Shown {
                price: column(&r, "PRICE/MIN").unwrap_or_default(),
                charging: None,
                state: column(&r, "STATE"),
            });
            seen.push((*node, "rexec stats", stats));
            let on_page = row(&page, node).and_then(|r| {
                Some(Shown {
                    price: price_of(r)?,
                    charging: cell(r, "charging"),
                    state: cell(r, "state"),
                })
            });
            seen.push((*node, "page", on_page));
        }
        seen
    };
    let agrees = |seen: &[(&str, &str, Option<Shown>)]| {
        seen.iter().all(|(node, view, shown)| {
            let (_, price, charging, state) = expected.iter().find(|e| e.0 == *node).unwrap();
            let Some(s) = shown else { return false };
            let charging_ok = match *view {
                "metrics" | "page" | "rexec nodes" => s.charging.as_deref() == Some(*charging),
                _ => true,
            };
            let state_ok = s.state.as_deref() == Some(*state);
            s.price == *price && charging_ok && state_ok
        })
    };
    let mut last = Vec::new();
    let agreed = testhost::wait::until(Duration::from_secs(120), || {
        last = views();
        agrees(&last).then_some(())
    });
    if agreed.is_none() {
        stop.stop();
        let outcomes: Vec<String> = jobs
            .into_iter()
            .map(|j| format!("  {:?}", j.wait(Duration::from_secs(60))))
            .collect();
        panic!(
            "the views never agreed on {expected:?}; last seen:\n{}\nthe jobs:\n{}",
            last.iter()
                .map(|(n, v, s)| format!("  {n} {v}: {s:?}"))
                .collect::<Vec<_>>()
                .join("\n"),
            outcomes.join("\n")
        );
    }
    // The lone job runs free.
    let (ranks, _) = m.jobs();
    let alone: Vec<_> = ranks.iter().filter(|r| r.node == "n1").collect();
    assert_eq!(alone.len(), 1, "{ranks:?}");
    assert_eq!(alone[0].charged, 0, "{ranks:?}");

    // The charts, once the page has sampled the prices of n1 and n2 as they are now.
    let mut page = String::new();
    let settled = testhost::wait::until(Duration::from_secs(60), || {
        page = get(metrics, "/market")
            .map(|(_, body)| body)
            .unwrap_or_default();
        let (y1, zero) = last_height(row(&page, "n1")?)?;
        let (y2, _) = last_height(row(&page, "n2")?)?;
        ((zero - y1) > 0.0 && ((zero - y1) * 2.0 - (zero - y2)).abs() < 0.5).then_some(())
    });
    assert!(
        settled.is_some(),
        "the charts of n1 (2) and n2 (4) never drew 2 at half the height of 4:\n{page}"
    );
    let url = format!("http://{metrics}/market");
    let dom = chromium::dump_dom(&m.dir.path().join("chromium"), &url, Duration::from_secs(2));
    let (n1, n2, n3) = (
        row(&dom, "n1").unwrap_or_else(|| panic!("no n1:\n{dom}")),
        row(&dom, "n2").unwrap_or_else(|| panic!("no n2:\n{dom}")),
        row(&dom, "n3").unwrap_or_else(|| panic!("no n3:\n{dom}")),
    );
    let (y1, zero1) = last_height(n1).unwrap_or_else(|| panic!("n1's chart:\n{n1}"));
    let (y2, zero2) = last_height(n2).unwrap_or_else(|| panic!("n2's chart:\n{n2}"));
    assert_eq!(zero1, zero2, "one zero line");
    assert!(
        ((zero1 - y1) * 2.0 - (zero2 - y2)).abs() < 0.5,
        "2 is not drawn half as high as 4 ({y1} and {y2} above {zero1}):\n{n1}\n{n2}"
    );
    let top = |r: &str| {
        r.split("data-top=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .map(str::to_string)
    };
    assert_eq!(top(n1), top(n2), "one scale");
    assert_eq!(top(n1), top(n3), "one scale");
    for r in [n1, n2, n3] {
        let labels = time_labels(r);
        assert_eq!(labels.len(), 2, "{r}");
        assert!(labels.iter().all(|l| is_clock(l)), "{labels:?}");
        assert!(labels[1].ends_with(" UTC"), "{labels:?}");
    }
    assert_eq!(cell(n2, "state").as_deref(), Some("contended"), "{n2}");

    screenshot_then_stop(&m, &url, (1400, 520), stop, jobs);
    drop(v1);
}
