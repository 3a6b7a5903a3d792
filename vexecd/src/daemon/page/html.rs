//! The market page's HTML: one self-contained document (inline style, inline SVG
//! charts from [`super::chart`] on one shared [`chart::Axis`], no external asset)
//! that refreshes itself every
//! [`REFRESH_SECONDS`]: a five-line inline script fetches the page again and swaps
//! the body in (so the view does not flash or lose its scroll position), and
//! without scripts `<meta http-equiv="refresh">` reloads it. Everything that came
//! from the network (node names, addresses) goes through [`escape`].

use super::escape::escape;
use std::fmt::Write;
use std::time::Duration;

use super::chart;

/// How often the page reloads itself.
pub const REFRESH_SECONDS: u32 = 5;

/// One node's line.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Its name, as announced.
    pub name: String,
    /// Its address, as announced.
    pub addr: String,
    /// Announced price (the sum of the bids competing there), micro-credits a minute.
    pub price: i64,
    /// What its ranks pay together now, micro-credits a minute.
    pub charging: i64,
    /// Whether its runnable demand exceeds its CPUs.
    pub contended: bool,
    /// CPUs it sells.
    pub cpus: u32,
    /// Idle CPUs, thousandths.
    pub idle_milli: u32,
    /// Load average, thousandths.
    pub load_milli: u32,
    /// Ranks running.
    pub running_jobs: u32,
    /// Their runnable threads.
    pub runnable: u32,
    /// Since its last announcement.
    pub age: Duration,
    /// Its price over the last hour (age, price), oldest first.
    pub points: Vec<(Duration, i64)>,
}

/// The page around the rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The selector's name.
    pub selector: String,
    /// Its cluster.
    pub cluster: String,
    /// Wall-clock time of the page, Unix seconds.
    pub unix_seconds: u64,
    /// How many pages were served (this one included).
    pub served: u64,
    /// Datagrams accepted and dropped so far.
    pub accepted: u64,
    /// Datagrams dropped so far.
    pub dropped: u64,
    /// Nodes, in the order shown.
    pub rows: Vec<Row>,
    /// Live nodes left off the page.
    pub more: usize,
    /// The ledger panel, on a page for admins (`[ledger]` configured).
    pub ledger: Option<super::ledger::Shown>,
}

/// Fetch the page again every `REFRESH_SECONDS` and swap its body in; on a failed
/// fetch (the selector restarting) try again at the next period.
const SCRIPT: &str = "<script>setTimeout(function refresh(){\
fetch(location.href,{cache:\"no-store\"}).then(function(r){return r.text()}).then(function(t){\
document.body.replaceWith(new DOMParser().parseFromString(t,\"text/html\").body);\
setTimeout(refresh,PERIOD)},function(){setTimeout(refresh,PERIOD)})},PERIOD)</script>";

fn milli(v: u32) -> String {
    format!("{}.{:02}", v / 1000, (v % 1000) / 10)
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse}th,td{padding:.3em .7em;border-bottom:1px solid #ddd;text-align:right}td{white-space:nowrap}\
th:first-child,td:first-child{text-align:left}td.chart{padding:.2em}\
svg .frame{fill:#f6f8fa;stroke:#ccc}svg .price{fill:none;stroke:#c0392b;stroke-width:1.5}\
svg line.zero{stroke:#444;stroke-width:1}svg line.top{stroke:#ccc;stroke-dasharray:2 3}\
svg .axis{font:9px sans-serif;fill:#666}.note{color:#555;max-width:60em}\
td.contended{color:#c0392b;font-weight:600}\
svg.bars rect{fill:#2e86c1}.unreachable{color:#c0392b;font-weight:600}";

/// The whole document.
pub fn render(page: &Page) -> String {
    let mut out = String::with_capacity(2048 + page.rows.len() * 2048);
    let title = format!(
        "rexec market: cluster {} seen by selector {}",
        escape(&page.cluster),
        escape(&page.selector)
    );
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         {script}<noscript><meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\"></noscript>\
         <title>{title}</title><style>{STYLE}</style></head><body>\
         <h1>{title}</h1>",
        script = SCRIPT.replace("PERIOD", &(REFRESH_SECONDS * 1000).to_string()),
    );
    let (cpus, idle, ranks) = page.rows.iter().fold((0u64, 0u64, 0u64), |(c, i, r), row| {
        (
            c + u64::from(row.cpus),
            i + u64::from(row.idle_milli),
            r + u64::from(row.running_jobs),
        )
    });
    let _ = write!(
        out,
        "<p id=\"summary\">{} nodes, {cpus} CPUs ({} idle), {ranks} running ranks; \
         datagrams accepted {}, dropped {}. At {}, reloading every {REFRESH_SECONDS} s.</p>",
        page.rows.len() + page.more,
        milli(idle.min(u64::from(u32::MAX)) as u32),
        page.accepted,
        page.dropped,
        super::chart::clock(page.unix_seconds)
    );
    out.push_str(
        "<table id=\"nodes\"><thead><tr><th>node</th><th>address</th>\
         <th>price (credits/min)</th><th>charging now (credits/min)</th><th>state</th>\
         <th>CPUs</th><th>idle CPUs</th><th>load</th>\
         <th>running ranks</th><th>runnable threads</th><th>heard</th>\
         <th>price, last hour (one scale for all nodes)</th></tr></thead><tbody>",
    );
    let axis = chart::Axis::over(
        page.rows.iter().map(|r| r.points.as_slice()),
        page.rows.iter().map(|r| r.price),
        page.unix_seconds,
    );
    for r in &page.rows {
        let _ = write!(
            out,
            "<tr class=\"node\" data-node=\"{name}\"><td class=\"name\">{name}</td><td>{addr}</td>\
             <td class=\"price\">{price}</td><td class=\"charging\">{charging}</td>\
             <td class=\"state {state}\">{state}</td><td>{cpus}</td><td>{idle}</td><td>{load}</td>\
             <td>{jobs}</td><td>{runnable}</td><td>{age:.1} s ago</td><td class=\"chart\">{chart}</td></tr>",
            name = escape(&r.name),
            addr = escape(&r.addr),
            price = money::format_credits(r.price),
            charging = money::format_credits(r.charging),
            state = if r.contended { "contended" } else { "idle-cpu" },
            cpus = r.cpus,
            idle = milli(r.idle_milli),
            load = milli(r.load_milli),
            jobs = r.running_jobs,
            runnable = r.runnable,
            age = r.age.as_secs_f64(),
            chart = chart::svg(&r.points, &axis),
        );
    }
    out.push_str("</tbody></table>");
    if page.more > 0 {
        let _ = write!(
            out,
            "<p>{} more nodes are not shown; `rexec nodes` lists them all.</p>",
            page.more
        );
    }
    if let Some(ledger) = &page.ledger {
        super::ledger::render(&mut out, ledger);
    }
    let _ = writeln!(
        out,
        "<p class=\"note\">A node's price is the sum of the bids competing on it, whether \
         they pay or not; a newcomer bidding r expects C&nbsp;&times;&nbsp;r&nbsp;/&nbsp;(price&nbsp;+&nbsp;r) \
         of its C CPUs. What its ranks pay together is its <em>charging</em> rate: while it \
         has idle CPUs (state idle-cpu) they run free, so a job alone is never charged; \
         while it is contended (runnable threads above its CPUs) each competing rank pays \
         its bid. Every chart has the same scale, from the zero line to the top label, \
         and spans the same clock times (UTC). Its announcements carry its price and how \
         many ranks it runs, not each job's bid or share: <code>rexec jobs</code> lists \
         those, asking the nodes. This page is read-only and changes nothing.</p>\
         <footer class=\"note\">page <span id=\"served\">{}</span> served by this selector</footer>\
         </body></html>",
        page.served
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str) -> Row {
        Row {
            name: name.into(),
            addr: "127.0.0.1:7400".into(),
            price: 30_000_000,
            charging: 0,
            contended: false,
            cpus: 2,
            idle_milli: 1_500,
            load_milli: 2_250,
            running_jobs: 2,
            runnable: 2,
            age: Duration::from_millis(300),
            points: vec![(Duration::from_secs(60), 0), (Duration::ZERO, 30_000_000)],
        }
    }

    #[test]
    fn every_name_from_the_network_is_escaped() {
        let page = Page {
            selector: "v1".into(),
            cluster: "c<1>".into(),
            unix_seconds: 3_723,
            served: 7,
            accepted: 10,
            dropped: 1,
            rows: vec![row("<script>alert('x')</script>&\"")],
            more: 0,
            ledger: None,
        };
        let html = render(&page);
        // The page's own refresh script is the only one.
        assert_eq!(html.matches("<script").count(), 1, "{html}");
        assert!(!html.contains("alert('x')"), "{html}");
        assert!(!html.contains("c<1>"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"));
        assert!(html.contains("<td class=\"price\">30</td>"), "{html}");
        // A price of 30 charging nothing: its own column, and the state beside it.
        assert!(
            html.contains(
                "<td class=\"charging\">0</td><td class=\"state idle-cpu\">idle-cpu</td>"
            ),
            "{html}"
        );
        assert!(html.contains("<td>1.50</td><td>2.25</td>"), "{html}");
        assert!(html.contains("01:02:03 UTC"), "{html}");
        assert!(html.contains("<span id=\"served\">7</span>"), "{html}");
        assert!(html.contains("data-points=\"2\""), "{html}");
        assert!(
            html.contains("1 nodes, 2 CPUs (1.50 idle), 2 running ranks"),
            "{html}"
        );
    }

    #[test]
    fn control_characters_do_not_pass() {
        assert_eq!(escape("a\u{1b}[31mb\n"), "a\u{fffd}[31mb\u{fffd}");
    }
}
