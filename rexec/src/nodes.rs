//! `rexec nodes [--length DURATION] [--policy P] [-v]`: the nodes one
//! selector knows, as an aligned table: name, address, price (credits per
//! minute), CPUs, idle CPUs, jobs, load, predicted completion of a job of
//! `--length` CPU time, and the age of the node's last announcement. `-`
//! marks what is unknown. Rows come by name, or in the order `--policy`
//! would choose them (the selector ranks every node it knows).
//!
//! Exit status: 0 with a table, 1 when no selector answered, 2 for a usage
//! or configuration error.

use proto::select::{NodeView, NodesQuery, SelectQuery, SelectorOp, SelectorReply};

use crate::cli::NodesArgs;
use crate::config::{Config, config_path};
use crate::run::USAGE;
use crate::say;
use crate::select::{ASK_TIMEOUT, ask_any};

/// Run `rexec nodes`; returns the exit status.
pub async fn run(args: &NodesArgs, config: Option<&std::path::Path>) -> i32 {
    let config = match config_path(config).and_then(|p| Config::load(&p)) {
        Ok(c) => c,
        Err(e) => {
            say(&e.to_string());
            return USAGE;
        }
    };
    let expected_cpu_ms = match &args.length {
        None => None,
        Some(l) => match proto::duration::parse_duration(l) {
            Ok(d) => Some(d.as_millis() as u64),
            Err(e) => {
                say(&format!("--length {l}: {e}"));
                return USAGE;
            }
        },
    };
    if args.policy.as_deref() == Some("history") && expected_cpu_ms.is_none() {
        say("--policy history needs --length, the job's expected CPU time (e.g. --length 20m)");
        return USAGE;
    }
    let connector = match certs::connector(&config.tls) {
        Ok(c) => c,
        Err(e) => {
            say(&format!(
                "client configuration {}: {e}",
                config.path.display()
            ));
            return 255;
        }
    };
    let note = |m: &str| {
        if args.verbose {
            say(m);
        }
    };
    let selectors = match crate::find::selectors(&config, &connector, &note).await {
        Ok(s) => s,
        Err(e) => {
            say(&e.to_string());
            return 1;
        }
    };
    let op = SelectorOp::Nodes(NodesQuery { expected_cpu_ms });
    let (by, list) = match ask_any(&connector, &selectors, &op, ASK_TIMEOUT).await {
        Ok((by, SelectorReply::Nodes(list))) => (by, list),
        Ok(_) => unreachable!("ask_one checks the answer fits the question"),
        Err(e) => {
            say(&e.to_string());
            return 1;
        }
    };
    let mut nodes = list.nodes;
    note(&format!(
        "selector {} at {} answered: {} live node{}",
        selectors[by].name,
        selectors[by].addr,
        list.total,
        if list.total == 1 { "" } else { "s" }
    ));
    if let Some(policy) = &args.policy
        && !nodes.is_empty()
    {
        let count = nodes.len().min(proto::select::MAX_SELECT as usize) as u32;
        let mut q = SelectQuery::new(count, policy);
        q.expected_cpu_ms = expected_cpu_ms;
        // Ask the selector that listed them, so the ranking covers the same nodes.
        let one = &selectors[by..=by];
        match ask_any(&connector, one, &SelectorOp::Select(q), ASK_TIMEOUT).await {
            Ok((_, SelectorReply::Selected(ranked))) => nodes = ranked,
            Ok(_) => unreachable!("ask_one checks the answer fits the question"),
            Err(e) => {
                say(&format!("--policy {policy}: {e}"));
                return 1;
            }
        }
    } else {
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
    }
    print!("{}", table(&nodes));
    if list.total > nodes.len() as u64 {
        say(&format!(
            "{} more nodes not listed (a listing holds at most {})",
            list.total - nodes.len() as u64,
            proto::select::MAX_LISTED
        ));
    }
    0
}

/// The table `rexec nodes` prints, header first, columns aligned.
///
/// ```
/// use proto::announce::NodeStatus;
/// use proto::select::NodeView;
/// let v = NodeView {
///     name: "n1".into(),
///     addr: "127.0.0.1:7001".parse().unwrap(),
///     status: NodeStatus { cpus: 4, price: 1_500_000, running_jobs: 2, runnable: 3,
///                          load_milli: 2_250, idle_milli: 1_500, free_mem_mib: 1 },
///     idle_milli: 1_500,
///     speed_milli: None,
///     predicted_ms: None,
///     age_ms: 800,
/// };
/// let t = rexec::nodes::table(&[v]);
/// let rows: Vec<Vec<&str>> = t.lines().map(|l| l.split_whitespace().collect()).collect();
/// assert_eq!(rows[0], ["NODE", "ADDRESS", "PRICE/MIN", "CPUS", "IDLE", "JOBS", "LOAD", "PREDICTED", "AGE"]);
/// assert_eq!(rows[1], ["n1", "127.0.0.1:7001", "1.5", "4", "1.5", "2", "2.25", "-", "800ms"]);
/// ```
pub fn table(nodes: &[NodeView]) -> String {
    let header = [
        "NODE",
        "ADDRESS",
        "PRICE/MIN",
        "CPUS",
        "IDLE",
        "JOBS",
        "LOAD",
        "PREDICTED",
        "AGE",
    ];
    let rows: Vec<[String; 9]> = nodes
        .iter()
        .map(|v| {
            [
                v.name.clone(),
                v.addr.to_string(),
                stride::format_credits(v.status.price),
                v.status.cpus.to_string(),
                crate::choose::milli(u64::from(v.idle_milli)),
                v.status.running_jobs.to_string(),
                crate::choose::milli(u64::from(v.status.load_milli)),
                v.predicted_ms.map_or("-".into(), show_ms),
                show_ms(v.age_ms),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    // Text columns (name, address) to the left, numbers to the right.
    let line = |cells: [&str; 9]| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            if i < 2 {
                out.push_str(&format!("{cell:<w$}"));
            } else {
                out.push_str(&format!("{cell:>w$}"));
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
        out
    };
    let mut text = line(header);
    for row in &rows {
        text.push_str(&line(std::array::from_fn(|i| row[i].as_str())));
    }
    text
}

/// Milliseconds as people read them: `850ms`, `12.5s`, `3m20s`, `2h05m`.
///
/// ```
/// use rexec::nodes::show_ms;
/// assert_eq!(show_ms(850), "850ms");
/// assert_eq!(show_ms(12_500), "12.5s");
/// assert_eq!(show_ms(200_000), "3m20s");
/// assert_eq!(show_ms(7_500_000), "2h05m");
/// assert_eq!(show_ms(200_000_000), "2d07h");
/// ```
pub fn show_ms(ms: u64) -> String {
    let s = ms / 1000;
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 => {
            let tenths = (ms % 1000) / 100;
            if tenths == 0 {
                format!("{s}s")
            } else {
                format!("{s}.{tenths}s")
            }
        }
        60_000..3_600_000 => format!("{}m{:02}s", s / 60, s % 60),
        3_600_000..86_400_000 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
    }
}
