//! `rexec nodes [--length DURATION] [--policy P] [-v]`: the nodes one
//! selector knows, as an aligned table: name, address, price (credits per
//! minute: the sum of the bids competing there, paid or not), CPUs, idle
//! CPUs, jobs, load, predicted completion of a job of `--length` CPU time,
//! the age of the node's last announcement, what its ranks pay together now
//! (credits per minute; 0 while charging does not apply) and whether it is contended
//! ([`crate::show::state_column`]), as `rexec stats` and the market page show
//! them. The last two columns come last so the others keep their places. `-`
//! marks what is unknown. Rows come by name, or in the order `--policy`
//! would choose them (the selector ranks every node it knows).
//!
//! Exit status: 0 with a table, 1 when no selector answered, 2 for a usage
//! or configuration error (a policy every selector refuses is one).

use proto::select::{NodeView, SelectQuery};

use crate::cli::NodesArgs;
use crate::exit::{Class, Error};
use crate::live::{ListError, Listed, listing};
use crate::reach::{connector, load};
use crate::say;
use crate::select::ASK_TIMEOUT;
use crate::show::{milli, show_ms, state_column};

/// Run `rexec nodes`.
pub async fn run(args: &NodesArgs, config: Option<&std::path::Path>) -> Result<(), Error> {
    let config = load(config)?;
    let expected_cpu_ms = crate::request::length(args.length.as_deref(), args.policy.as_deref())?;
    let connector = connector(&config)?;
    let note = |m: &str| {
        if args.verbose {
            say(m);
        }
    };
    let Listed {
        selectors,
        by,
        list,
    } = listing(&config, &connector, expected_cpu_ms, &note)
        .await
        .map_err(ListError::into_error)?;
    let mut nodes = list.nodes;
    if let Some(policy) = &args.policy
        && !nodes.is_empty()
    {
        let count = nodes.len().min(proto::select::MAX_SELECT as usize) as u32;
        let mut q = SelectQuery::new(count, policy);
        q.expected_cpu_ms = expected_cpu_ms;
        // Ask the selector that listed them (on its open connection), so the
        // ranking covers the same nodes.
        let mut one = selectors;
        one.set_list(one.list()[by..=by].to_vec());
        match one.ask(&connector, &q, ASK_TIMEOUT).await {
            Ok((_, ranked)) => nodes = ranked,
            Err(e) => {
                let class = match crate::exit::selector_class(&e) {
                    Class::Usage => Class::Usage,
                    _ => Class::Incomplete,
                };
                let mut lines = crate::exit::selector_lines(&e, args.verbose);
                lines[0] = format!("--policy {policy}: {}", lines[0]);
                return Err(Error::Lines { lines, class });
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
    Ok(())
}

/// The table `rexec nodes` prints, header first, columns aligned.
///
/// ```
/// use proto::announce::NodeStatus;
/// use proto::select::NodeView;
/// let v = NodeView {
///     name: "n1".into(),
///     addr: "127.0.0.1:7001".parse().unwrap(),
///     status: NodeStatus { cpus: 4, price: 1_500_000, charging: 0, contended: true,
///                          running_jobs: 2, runnable: 3, load_milli: 2_250,
///                          idle_milli: 1_500, free_mem_mib: 1 },
///     idle_milli: 1_500,
///     speed_milli: None,
///     predicted_ms: None,
///     age_ms: 800,
/// };
/// let t = rexec::nodes::table(&[v]);
/// let rows: Vec<Vec<&str>> = t.lines().map(|l| l.split_whitespace().collect()).collect();
/// let cell = |name: &str| rows[1][rows[0].iter().position(|h| *h == name).unwrap()];
/// let shown = ["NODE", "ADDRESS", "PRICE/MIN", "CHARGING/MIN", "STATE", "CPUS", "IDLE", "JOBS",
///              "LOAD", "PREDICTED", "AGE"].map(cell);
/// assert_eq!(shown, ["n1", "127.0.0.1:7001", "1.5", "0", "contended", "4", "1.5", "2", "2.25",
///                    "-", "800ms"]);
/// assert_eq!(rows[0].len(), rows[1].len());
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
        "CHARGING/MIN",
        "STATE",
    ];
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|v| {
            vec![
                v.name.clone(),
                v.addr.to_string(),
                money::format_credits(v.status.price),
                v.status.cpus.to_string(),
                milli(u64::from(v.idle_milli)),
                v.status.running_jobs.to_string(),
                milli(u64::from(v.status.load_milli)),
                v.predicted_ms.map_or("-".into(), show_ms),
                show_ms(v.age_ms),
                money::format_credits(v.status.charging),
                state_column(v.status.contended).to_string(),
            ]
        })
        .collect();
    // Text columns (name, address) to the left, numbers to the right.
    crate::columns::aligned(&header, &rows, 2)
}
