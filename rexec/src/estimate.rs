//! `rexec estimate -r RATE -n N --length D`: what a run would cost, before it
//! starts. The nodes come from the selectors as a run would get them (`--policy`,
//! `--max-price`; or `--nodes`, looked up in a selector's listing), each with what
//! it announces of its market: CPUs, price (the sum of the bids competing there),
//! runnable demand, whether it is contended and what its ranks pay now. Each rank
//! is then quoted by stride's rules, the code the node charges by
//! ([`stride::quote`]): the node's present competitors taken as one job with their
//! summed bid and demand, the job's earlier ranks on the same node beside them,
//! and the newcomer with one runnable thread. It prints, per rank, the node, the
//! share of a CPU it would get and the rate it would pay; then the worst case
//! (bid × ranks × length: every rank paying its bid throughout), the expected cost
//! (the rates now, held for the length) and the caller's balance.
//!
//! The charging rule is `contention` (pay only while the node is contended), the
//! default; a node that announces a charge while not contended is charging under
//! the paper's rule (`paper`: pay whenever another job is there), and is quoted so.
//!
//! Beside it, the account the run would pay from (the project `-A` names, else
//! the caller's default project, else its personal account), its balance, its
//! burn rate over the last 7 days and the project's ceiling per job, asked of
//! accountd at `ACCOUNTD_ADDR` or the configuration's `[accountd] address`;
//! without either the balance is said to be unknown (see [`balance_line`]).

use std::path::Path;
use std::time::Duration;

use money::Bid;
use proto::announce::NodeStatus;
use proto::select::{NodeView, SelectQuery};
use stride::{Job, Policy};

use crate::cli::EstimateArgs;
use crate::exit::{Class, Error};
use crate::live::{ListError, Listed, listing};
use crate::reach::{connector, load};
use crate::say;
use crate::select::ASK_TIMEOUT;

/// One rank's quote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankQuote {
    /// The node.
    pub node: String,
    /// The share of the node's CPUs the rank would get, milli-CPUs (water-filled).
    pub share_milli: u64,
    /// What it would pay per minute now.
    pub rate: Bid,
    /// Under which rule the node was taken to charge.
    pub policy: Policy,
}

/// A whole estimate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Estimate {
    /// Per rank, in rank order.
    pub ranks: Vec<RankQuote>,
    /// Bid × ranks × length, micro-credits.
    pub worst: i64,
    /// The rates now held for the length, micro-credits.
    pub expected: i64,
}

/// The charging rule a node's announcement shows: a charge while not contended
/// is only the paper's rule.
pub fn policy_of(status: &NodeStatus) -> Policy {
    if status.charging > 0 && !status.contended {
        Policy::Paper
    } else {
        Policy::Contention
    }
}

/// Quotes `bid` on `nodes` (one per rank, in rank order) for `length`, by stride's
/// rules; see the module docs.
///
/// ```
/// use money::Bid;
/// use proto::announce::NodeStatus;
/// let busy = NodeStatus { cpus: 1, price: 3_000_000, charging: 0, contended: false,
///     running_jobs: 1, runnable: 1, load_milli: 0, idle_milli: 0, free_mem_mib: 0 };
/// let e = rexec::estimate::estimate(&[("n1".into(), busy)], Bid::from_credits(6),
///     std::time::Duration::from_secs(60)).unwrap();
/// // A busy competitor bidding 3 on one CPU: the newcomer bidding 6 gets 2/3 and pays 6.
/// assert_eq!(e.ranks[0].share_milli, 667);
/// assert_eq!(e.expected, 6_000_000);
/// assert_eq!(e.worst, 6_000_000);
/// ```
pub fn estimate(
    nodes: &[(String, NodeStatus)],
    bid: Bid,
    length: Duration,
) -> Result<Estimate, stride::Overflow> {
    let nanos = u64::try_from(length.as_nanos()).unwrap_or(u64::MAX);
    let mut ranks = Vec::with_capacity(nodes.len());
    let mut expected: i64 = 0;
    for (i, (name, status)) in nodes.iter().enumerate() {
        let policy = policy_of(status);
        let cpus = status.cpus.max(1);
        let mut jobs = Vec::new();
        if status.running_jobs > 0 {
            jobs.push(Job {
                bid: Bid::new(status.price.max(0)).unwrap_or(Bid::ZERO),
                demand: status.runnable,
            });
        }
        // This job's earlier ranks on the same node compete too.
        let earlier = nodes[..i].iter().filter(|(n, _)| n == name).count();
        jobs.extend((0..earlier).map(|_| Job { bid, demand: 1 }));
        let q = stride::quote(cpus, &jobs, bid, 1)?;
        let pays = match policy {
            Policy::Contention => !q.runs_free,
            // The paper's rule: a job pays whenever another is present.
            Policy::Paper => !jobs.is_empty(),
        };
        let rate = if pays { bid } else { Bid::ZERO };
        expected = expected.saturating_add(stride::charge_for(rate, nanos)?);
        ranks.push(RankQuote {
            node: name.clone(),
            share_milli: q.water_filled_milli_cpus,
            rate,
            policy,
        });
    }
    let one = stride::charge_for(bid, nanos)?;
    let worst = one.saturating_mul(i64::try_from(nodes.len()).unwrap_or(i64::MAX));
    Ok(Estimate {
        ranks,
        worst,
        expected,
    })
}

/// The estimate as printed: one line per rank, then the totals.
///
/// ```
/// use money::Bid;
/// use rexec::estimate::{Estimate, RankQuote, report};
/// let e = Estimate {
///     ranks: vec![RankQuote { node: "n1".into(), share_milli: 500, rate: Bid::from_credits(2),
///         policy: stride::Policy::Contention }],
///     worst: 120_000_000, expected: 60_000_000,
/// };
/// let text = report(&e, Bid::from_credits(2), std::time::Duration::from_secs(3600));
/// assert!(text.contains("worst case: 120 credits"), "{text}");
/// assert!(text.contains("expected: 60 credits"), "{text}");
/// ```
pub fn report(e: &Estimate, bid: Bid, length: Duration) -> String {
    let mut out = String::new();
    for (rank, q) in e.ranks.iter().enumerate() {
        out.push_str(&format!(
            "rank {rank} on {}: share {} CPU, pays {} credits per minute now ({} rule)\n",
            q.node,
            crate::show::milli_cpus(u32::try_from(q.share_milli).unwrap_or(u32::MAX)),
            money::format_credits(q.rate.micros_per_minute()),
            q.policy
        ));
    }
    let ms = u64::try_from(length.as_millis()).unwrap_or(u64::MAX);
    out.push_str(&format!(
        "worst case: {} credits ({} credits per minute x {} rank(s) x {})\n",
        money::format_credits(e.worst),
        money::format_credits(bid.micros_per_minute()),
        e.ranks.len(),
        crate::show::show_ms(ms)
    ));
    let share: u64 = e.ranks.iter().map(|q| q.share_milli).sum();
    out.push_str(&format!(
        "expected: {} credits (at the nodes' competition now; {} CPU in all)\n",
        money::format_credits(e.expected),
        crate::show::milli_cpus(u32::try_from(share).unwrap_or(u32::MAX))
    ));
    out
}

/// What to quote: `count` ranks bidding `bid` for `length`, on `nodes` (looked up
/// in a selector's listing, cycled to `count`) or on the nodes a selector chooses
/// by `policy` under `max_price`.
#[derive(Debug, Clone)]
pub struct Ask<'a> {
    /// The bid on every node.
    pub bid: Bid,
    /// Ranks.
    pub count: u32,
    /// How long the run lasts.
    pub length: Duration,
    /// `--nodes`, if given.
    pub nodes: Option<&'a [String]>,
    /// The selection policy.
    pub policy: &'a str,
    /// `--max-price`, micro-credits per minute.
    pub max_price: Option<i64>,
    /// Say which selector answered.
    pub verbose: bool,
    /// The project the run would charge (`-A`), `None` for the default.
    pub account: Option<&'a str>,
}

/// Run `rexec estimate`.
pub async fn run(
    args: &EstimateArgs,
    nodes: Option<&[String]>,
    config: Option<&Path>,
) -> Result<(), Error> {
    let config = load(config)?;
    let bid = crate::request::bid(&args.rate, "-r", &config)?;
    let length = timespan::parse_duration(&args.length)
        .map_err(|e| Error::Usage(format!("--length {}: {e}", args.length)))?;
    let ask = Ask {
        bid,
        count: args
            .nranks
            .unwrap_or_else(|| nodes.map_or(1, |n| n.len() as u32)),
        length,
        nodes,
        policy: &args.choice.policy,
        max_price: args.choice.max_price()?,
        verbose: args.verbose,
        account: args.account.as_deref(),
    };
    print(&config, &ask).await
}

/// Prints the estimate `ask` describes and the caller's balance.
pub async fn print(config: &crate::config::Config, ask: &Ask<'_>) -> Result<(), Error> {
    let count = ask.count;
    let connector = connector(config)?;
    let note = |m: &str| {
        if ask.verbose {
            say(m);
        }
    };
    let Listed {
        selectors,
        by,
        list,
    } = listing(config, &connector, None, &note)
        .await
        .map_err(ListError::into_error)?;
    let chosen: Vec<NodeView> = match ask.nodes {
        Some(names) if !names.is_empty() => {
            let mut chosen = Vec::new();
            for name in names.iter().cycle().take(count as usize) {
                let Some(view) = list.nodes.iter().find(|v| &v.name == name) else {
                    return Err(Error::Usage(format!(
                        "--nodes: no live node {name} (a selector knows {})",
                        list.nodes
                            .iter()
                            .map(|v| v.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                };
                chosen.push(view.clone());
            }
            chosen
        }
        _ => {
            let mut q = SelectQuery::new(count, ask.policy);
            q.max_price = ask.max_price;
            let mut one = selectors;
            one.set_list(one.list()[by..=by].to_vec());
            let (_, picked) =
                one.ask(&connector, &q, ASK_TIMEOUT)
                    .await
                    .map_err(|e| Error::Lines {
                        lines: crate::exit::selector_lines(&e, ask.verbose),
                        class: crate::exit::selector_class(&e),
                    })?;
            picked
        }
    };
    if chosen.len() < count as usize {
        return Err(Error::Lines {
            lines: vec![format!(
                "a selector offers {} node(s) for {count} rank(s)",
                chosen.len()
            )],
            class: Class::Incomplete,
        });
    }
    let nodes: Vec<(String, NodeStatus)> = chosen.into_iter().map(|v| (v.name, v.status)).collect();
    let e = estimate(&nodes, ask.bid, ask.length)
        .map_err(|e| Error::Usage(format!("this estimate overflows: {e}")))?;
    print!("{}", report(&e, ask.bid, ask.length));
    println!("{}", balance_line(config, ask.account).await);
    Ok(())
}

/// `balance: ...` for the account the run would pay from: the project `account`
/// names (`-A`), else the caller's default project, else its personal account,
/// as accountd resolves it for the caller (a member reads its project's
/// balance, nobody else's), with its burn rate over the last 7 days (as
/// `accountctl report --forecast` counts it) and the project's ceiling per job.
pub async fn balance_line(config: &crate::config::Config, account: Option<&str>) -> String {
    match paying_account(config, account).await {
        Ok(p) => p.line(),
        Err(why) => format!("balance: unknown ({why})"),
    }
}

/// The account a run pays from, as accountd told it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paying {
    /// The caller.
    pub user: String,
    /// The project, `None` for the personal account.
    pub project: Option<String>,
    /// What the caller may spend there, micro-credits (a project's balance,
    /// lowered to what is left of the member's limit).
    pub balance: i64,
    /// Net charges per day over the last 7 days, when accountd tells them.
    pub burn_per_day: Option<i64>,
    /// The project's ceiling per job, micro-credits.
    pub max_cost_per_job: Option<i64>,
}

impl Paying {
    /// The line `rexec estimate` prints.
    ///
    /// ```
    /// use rexec::estimate::Paying;
    /// let p = Paying { user: "alice".into(), project: Some("chem".into()), balance: 90_000_000,
    ///     burn_per_day: Some(1_500_000), max_cost_per_job: Some(5_000_000) };
    /// assert_eq!(p.line(), "balance: 90 credits (project chem, spent by alice); burn 1.5 \
    ///     credits a day over the last 7 days; ceiling per job 5 credits (the project's)");
    /// let p = Paying { project: None, burn_per_day: None, max_cost_per_job: None, ..p };
    /// assert_eq!(p.line(), "balance: 90 credits (alice, personal account)");
    /// ```
    pub fn line(&self) -> String {
        let mut out = match &self.project {
            Some(p) => format!(
                "balance: {} credits (project {p}, spent by {})",
                money::format_credits(self.balance),
                self.user
            ),
            None => format!(
                "balance: {} credits ({}, personal account)",
                money::format_credits(self.balance),
                self.user
            ),
        };
        if let Some(b) = self.burn_per_day {
            out += &format!(
                "; burn {} credits a day over the last 7 days",
                money::format_credits(b)
            );
        }
        if let Some(c) = self.max_cost_per_job {
            out += &format!(
                "; ceiling per job {} credits (the project's)",
                money::format_credits(c)
            );
        }
        out
    }
}

/// Asks accountd which account the caller's run pays from (`account`, else
/// its default), with its balance and burn; an accountd that predates
/// projects tells the personal balance alone (and cannot honour `-A`).
async fn paying_account(
    config: &crate::config::Config,
    account: Option<&str>,
) -> Result<Paying, String> {
    use proto::account::{AccountOp, AccountReply, BalanceQuery, ErrorCode};
    use proto::project::{ProjectOp, ProjectReply, WhichAccount};
    let (address, server_name) = accountd_address(config).ok_or_else(|| {
        "no accountd address: set ACCOUNTD_ADDR or address under [accountd] in the config file"
            .to_string()
    })?;
    let connector = crate::reach::connector(config).map_err(|e| e.to_string())?;
    let mut client = clients::account::AccountClient::connect(
        &address,
        &connector,
        &server_name,
        Duration::from_secs(3),
    )
    .await
    .map_err(|e| e.to_string())?;
    let user = match client.call(AccountOp::WhoAmI).await {
        Ok(AccountReply::WhoAmI(i)) => i.name,
        Ok(other) => {
            client.close().await;
            return Err(format!("accountd answered {}", other.name()));
        }
        Err(e) => {
            client.close().await;
            return Err(e.to_string());
        }
    };
    let which = client
        .call(AccountOp::Project(ProjectOp::Resolve(WhichAccount {
            user: user.clone(),
            project: account.map(str::to_string),
            burn: true,
        })))
        .await;
    let answer = match which {
        Ok(AccountReply::Project(ProjectReply::Account(a))) => Ok(Paying {
            user,
            project: a.project,
            balance: a.balance,
            burn_per_day: a.burn_per_day,
            max_cost_per_job: a.max_cost_per_job,
        }),
        Err(clients::rpc::RpcError::Server(e))
            if e.code == ErrorCode::Unsupported && account.is_none() =>
        {
            let own = client
                .call(AccountOp::Balance(BalanceQuery { user: None }))
                .await;
            match own {
                Ok(AccountReply::Balance(b)) => Ok(Paying {
                    user,
                    project: None,
                    balance: b.balance,
                    burn_per_day: None,
                    max_cost_per_job: None,
                }),
                Ok(other) => Err(format!("accountd answered {}", other.name())),
                Err(e) => Err(e.to_string()),
            }
        }
        Ok(other) => Err(format!("accountd answered {}", other.name())),
        Err(clients::rpc::RpcError::Server(e)) => Err(e.message),
        Err(e) => Err(e.to_string()),
    };
    client.close().await;
    answer
}

/// accountd's address and certificate name: `ACCOUNTD_ADDR`, else the config file's
/// `[accountd]` table.
fn accountd_address(config: &crate::config::Config) -> Option<(String, String)> {
    let table = std::fs::read_to_string(&config.path)
        .ok()
        .and_then(|text| text.parse::<toml::Table>().ok())
        .and_then(|t| t.get("accountd").and_then(|a| a.as_table()).cloned());
    let from_file = |key: &str| {
        table
            .as_ref()
            .and_then(|t| t.get(key))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    let address = std::env::var("ACCOUNTD_ADDR")
        .ok()
        .filter(|a| !a.is_empty())
        .or_else(|| from_file("address"))?;
    let name = from_file("server_name")
        .unwrap_or_else(|| clients::account::DEFAULT_SERVER_NAME.to_string());
    Some((address, name))
}
