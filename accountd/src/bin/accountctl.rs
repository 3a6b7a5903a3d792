//! `accountctl`: read and manage rexec credit accounts over mutual TLS. What
//! it may do follows the role in its certificate (users: their own balance
//! and history; admins: everything). Settings: see `accountd::ctl`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use accountd::ctl::format::Format;
use accountd::ctl::projects::{
    IncomeCmd, ProjectCmd, create_limits, income_op, project_op, render_forecast, render_income,
    render_projects,
};
use accountd::ctl::render::{render_entries, render_report};
use accountd::ctl::settings::{default_config_path, load_ctl_file};
use accountd::time::parse_time;
use anyhow::{anyhow, bail};
use clap::{Parser, Subcommand, ValueEnum};
use clients::account::{AccountClient, DEFAULT_SERVER_NAME};
use money::{format_credits_fixed as format_credits, parse_credits};
use proto::account::*;
use proto::project::{ProjectGrouping, ProjectOp, ProjectReply, ProjectReport};

/// Read and manage rexec credit accounts (amounts in credits, 6 decimals).
#[derive(Parser, Debug)]
#[command(
    name = "accountctl",
    version,
    after_help = "Settings come from flags, then ACCOUNTD_ADDR / REXEC_CA / REXEC_CERT / REXEC_KEY / REXEC_CRL, \
then the config file (--config, REXEC_CONFIG, $XDG_CONFIG_HOME/rexec/config.toml or ~/.config/rexec/config.toml) \
with `ca`, `cert`, `key`, `crl` at the top (shared with rexec) and `address`, `server_name` under [accountd].\n\
Exit status: 0 success, 1 error, 2 bad command line, 3 audit found problems."
)]
struct Cli {
    /// accountd address, host:port.
    #[arg(long, global = true, env = "ACCOUNTD_ADDR")]
    server: Option<String>,
    /// Name in accountd's certificate [default: accountd].
    #[arg(long, global = true)]
    server_name: Option<String>,
    /// Cluster CA certificate.
    #[arg(long, global = true, env = "REXEC_CA")]
    ca: Option<PathBuf>,
    /// Your certificate.
    #[arg(long, global = true, env = "REXEC_CERT")]
    cert: Option<PathBuf>,
    /// Your private key.
    #[arg(long, global = true, env = "REXEC_KEY")]
    key: Option<PathBuf>,
    /// Certificate revocation list.
    #[arg(long, global = true, env = "REXEC_CRL")]
    crl: Option<PathBuf>,
    /// Config file [default: ~/.config/rexec/config.toml].
    #[arg(long, global = true, env = "REXEC_CONFIG")]
    config: Option<PathBuf>,
    /// Seconds to wait for accountd.
    #[arg(long, global = true, default_value_t = 30)]
    timeout: u64,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum By {
    /// The account charged: a project, or a user's personal account.
    Project,
    /// The user who spent (a project's member, or a personal account's owner).
    User,
    Node,
    Day,
}

#[derive(clap::Args, Debug)]
struct Window {
    /// From this time (2026-11-22, 2026-11-22T13:00Z or @unix-seconds), UTC.
    #[arg(long)]
    since: Option<String>,
    /// Before this time, same forms.
    #[arg(long)]
    until: Option<String>,
    /// Print JSON.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV.
    #[arg(long)]
    csv: bool,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Show a balance (yours when USER is omitted).
    Balance { user: Option<String> },
    /// List ledger entries of a user (yours when USER is omitted).
    History {
        user: Option<String>,
        #[command(flatten)]
        window: Window,
    },
    /// Open an account (admin).
    Create {
        user: String,
        /// Initial grant in credits.
        #[arg(long)]
        initial: Option<String>,
    },
    /// Add credits to an account (admin).
    Grant {
        user: String,
        #[arg(allow_hyphen_values = true)]
        amount: String,
        #[arg(long)]
        reason: String,
    },
    /// Correct a balance up or down, e.g. -2.5 (admin).
    Adjust {
        user: String,
        #[arg(allow_hyphen_values = true)]
        amount: String,
        #[arg(long)]
        reason: String,
    },
    /// Credits charged, CPU minutes and jobs, by project, user, node or day;
    /// or with --forecast each project's balance, burn rate over the last 7
    /// days and the day it runs dry (admin).
    Report {
        #[arg(long, value_enum, required_unless_present = "forecast")]
        by: Option<By>,
        /// Each project's balance, burn per day and the day it runs dry.
        #[arg(long, conflicts_with = "by")]
        forecast: bool,
        #[command(flatten)]
        window: Window,
    },
    /// Check every balance against its entries, every key for uniqueness and the
    /// hash chain (admin); exits with status 3 when something is wrong.
    Audit {
        /// Also check the ledger against the signed chain heads in this file
        /// (accountd's `[store] anchors`); runs on the database itself, named
        /// by `--ledger`.
        #[arg(long, requires = "ledger")]
        anchors: Option<PathBuf>,
        /// accountd's config file, whose ledger (SQLite `database` or `[store]
        /// postgres`) and CA the audit with `--anchors` uses.
        #[arg(long, requires = "anchors")]
        ledger: Option<PathBuf>,
    },
    /// Project accounts: create, members, limits, defaults.
    Project {
        #[command(subcommand)]
        cmd: ProjectCmd,
    },
    /// Scheduled income of projects.
    Income {
        #[command(subcommand)]
        cmd: IncomeCmd,
    },
    /// Show the identity accountd sees in your certificate.
    Whoami,
    /// Print the latest chain head accountd signed, as a line of its anchors
    /// file, after checking its signature against the cluster CA; append it
    /// to a file of your own for `audit --anchors`. Exit status 1 when
    /// accountd signs none (no `[store] anchors`) or has not yet.
    Head,
    /// Copy a ledger into an empty one (SQLite to PostgreSQL or back), each
    /// named by an accountd config file, and check the copy; with accountd stopped.
    Migrate {
        /// accountd config file of the ledger to copy.
        #[arg(long)]
        from: PathBuf,
        /// accountd config file of the empty ledger to fill.
        #[arg(long)]
        to: PathBuf,
    },
}

impl Window {
    fn times(&self) -> anyhow::Result<(Option<i64>, Option<i64>)> {
        let since = self.since.as_deref().map(parse_time).transpose()?;
        let until = self.until.as_deref().map(parse_time).transpose()?;
        Ok((since, until))
    }

    fn format(&self) -> Format {
        if self.json {
            Format::Json
        } else if self.csv {
            Format::Csv
        } else {
            Format::Table
        }
    }
}

/// Connects to accountd; the client and the cluster CA it trusts.
async fn connect(cli: &Cli) -> anyhow::Result<(AccountClient, PathBuf)> {
    let (path, explicit) = match &cli.config {
        Some(p) => (Some(p.clone()), true),
        None => (default_config_path(), false),
    };
    let file = match &path {
        Some(p) => load_ctl_file(p, explicit)?,
        None => Default::default(),
    };
    let need = |v: Option<PathBuf>, what: &str, flag: &str, env: &str| {
        v.ok_or_else(|| {
            anyhow!(
                "no {what} given: pass {flag}, set {env}, or set it at the top of the config file"
            )
        })
    };
    let paths = certs::TlsPaths {
        ca: need(
            cli.ca.clone().or(file.ca),
            "CA certificate",
            "--ca",
            "REXEC_CA",
        )?,
        cert: need(
            cli.cert.clone().or(file.cert),
            "certificate",
            "--cert",
            "REXEC_CERT",
        )?,
        key: need(
            cli.key.clone().or(file.key),
            "private key",
            "--key",
            "REXEC_KEY",
        )?,
        crl: cli.crl.clone().or(file.crl),
    };
    let name = cli
        .server_name
        .clone()
        .or(file.accountd.server_name)
        .unwrap_or_else(|| DEFAULT_SERVER_NAME.to_string());
    let connector = certs::connector(&paths)?;
    let timeout = Duration::from_secs(cli.timeout);
    let configured = file.accountd.address.map(|a| a.into_vec());
    let addr = match cli.server.clone().map(|s| vec![s]).or(configured) {
        Some(addr) if !addr.is_empty() => addr,
        _ => match &file.discovery {
            Some(d) => {
                let c = discover(&d.resolve()?, &name, &connector, timeout).await?;
                return Ok((c, paths.ca));
            }
            None => bail!(
                "no accountd address: pass --server HOST:PORT, set ACCOUNTD_ADDR, set address under [accountd] in the config file, or give a [discovery] table to hear accountd announce itself"
            ),
        },
    };
    // Several instances: the first that answers (nothing is sent before).
    let c = clients::instances::Instances::new(addr)
        .connect(&connector, &name, timeout)
        .await?;
    Ok((c, paths.ca))
}

/// accountd `name` found through the group of `d`: at the address remembered from
/// an earlier run (`discovery::cache`) when it still answers there with its
/// certificate, else as heard announcing itself (then remembered).
async fn discover(
    d: &discovery::config::DiscoveryConfig,
    name: &str,
    connector: &tokio_rustls::TlsConnector,
    timeout: Duration,
) -> anyhow::Result<AccountClient> {
    use discovery::cache::{Cache, MAX_AGE, Remembered};
    let cache = Cache::for_user(&format!("accountd-{name}"), d);
    let now = std::time::SystemTime::now();
    if let Some(cache) = &cache
        && let Some((remembered, _)) = cache.load(MAX_AGE, now)
        && let Some(first) = remembered.first()
    {
        if let Ok(c) = AccountClient::connect(&first.addr, connector, name, timeout).await {
            return Ok(c);
        }
        cache.forget();
    }
    let addr = hear_accountd(d, name).await?;
    let c = AccountClient::connect(&addr, connector, name, timeout).await?;
    if let Some(cache) = &cache {
        let entry = Remembered {
            name: name.to_string(),
            addr,
        };
        // Only a hint for the next run: failing to write it changes nothing now.
        let _ = cache.store(&[entry], now);
    }
    Ok(c)
}

/// The address accountd `name` announces on the group of `d` (heard within
/// one and a half announcement periods; the certificate is checked on connect).
async fn hear_accountd(
    d: &discovery::config::DiscoveryConfig,
    name: &str,
) -> anyhow::Result<String> {
    let limit = d.period.mul_f64(1.5);
    let heard = discovery::net::hear(d, limit, Duration::ZERO, |a| {
        a.kind == proto::announce::Kind::Account && a.name == name
    })
    .await?;
    match heard.first() {
        Some(a) => Ok(a.addr.to_string()),
        None => bail!(
            "no accountd address configured, and no accountd named {name} announced itself on {}:{} (cluster {}) within {:?}; pass --server HOST:PORT",
            d.group,
            d.port,
            d.cluster,
            limit
        ),
    }
}

fn amount(text: &str) -> anyhow::Result<i64> {
    Ok(parse_credits(text)?)
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let (mut c, ca) = connect(&cli).await?;
    match &cli.cmd {
        Cmd::Balance { user } => {
            let AccountReply::Balance(b) = c
                .call(AccountOp::Balance(BalanceQuery { user: user.clone() }))
                .await?
            else {
                bail!("accountd gave an unexpected answer to balance");
            };
            println!("{} {}", b.user, format_credits(b.balance));
        }
        Cmd::History { user, window } => {
            let (since_us, until_us) = window.times()?;
            let mut entries = Vec::new();
            let mut after_id = None;
            loop {
                let q = HistoryQuery {
                    user: user.clone(),
                    since_us,
                    until_us,
                    after_id,
                    limit: MAX_HISTORY_PAGE,
                };
                let AccountReply::History(page) = c.call(AccountOp::History(q)).await? else {
                    bail!("accountd gave an unexpected answer to history");
                };
                entries.extend(page.entries);
                match page.next_after {
                    Some(a) => after_id = Some(a),
                    None => break,
                }
            }
            print!("{}", render_entries(&entries, window.format()));
        }
        Cmd::Create { user, initial } => {
            let initial = initial.as_deref().map(amount).transpose()?.unwrap_or(0);
            let AccountReply::Created(b) = c
                .call(AccountOp::CreateAccount(CreateAccount {
                    user: user.clone(),
                    initial,
                }))
                .await?
            else {
                bail!("accountd gave an unexpected answer to create");
            };
            println!(
                "created {} with balance {}",
                b.user,
                format_credits(b.balance)
            );
        }
        Cmd::Grant {
            user,
            amount: a,
            reason,
        }
        | Cmd::Adjust {
            user,
            amount: a,
            reason,
        } => {
            let e = AdminEntry {
                user: user.clone(),
                amount: amount(a)?,
                reason: reason.clone(),
            };
            let (verb, op) = match &cli.cmd {
                Cmd::Grant { .. } => ("granted", AccountOp::Grant(e)),
                _ => ("adjusted", AccountOp::Adjust(e)),
            };
            let AccountReply::Entry(r) = c.call(op).await? else {
                bail!("accountd gave an unexpected answer");
            };
            println!(
                "{verb} {user} {a}: entry {}, balance {}",
                r.entry_id,
                format_credits(r.balance_after)
            );
        }
        Cmd::Report {
            forecast: true,
            window,
            ..
        } => {
            let ProjectReply::Forecast(rows) = project(&mut c, ProjectOp::Forecast).await? else {
                bail!("accountd gave an unexpected answer to report --forecast");
            };
            print!("{}", render_forecast(&rows, window.format()));
        }
        Cmd::Report {
            by: Some(by @ (By::Project | By::User)),
            window,
            ..
        } => {
            let (since_us, until_us) = window.times()?;
            let (by, name) = match by {
                By::Project => (ProjectGrouping::Account, "account"),
                _ => (ProjectGrouping::User, "user"),
            };
            let op = ProjectOp::Report(ProjectReport {
                by,
                since_us,
                until_us,
            });
            let ProjectReply::Report(rows) = project(&mut c, op).await? else {
                bail!("accountd gave an unexpected answer to report");
            };
            print!("{}", render_report(&rows, name, window.format()));
        }
        Cmd::Report { by, window, .. } => {
            let (since_us, until_us) = window.times()?;
            let (by, name) = match by {
                Some(By::Node) => (ReportBy::Node, "node"),
                _ => (ReportBy::Day, "day"),
            };
            let AccountReply::Report(rows) = c
                .call(AccountOp::Report(ReportQuery {
                    by,
                    since_us,
                    until_us,
                }))
                .await?
            else {
                bail!("accountd gave an unexpected answer to report");
            };
            print!("{}", render_report(&rows, name, window.format()));
        }
        Cmd::Audit { .. } => {
            let AccountReply::Audit(a) = c.call(AccountOp::Audit).await? else {
                bail!("accountd gave an unexpected answer to audit");
            };
            if let Some(code) = print_audit(&a) {
                return Ok(code);
            }
        }
        Cmd::Migrate { .. } => bail!("migrate runs without accountd"),
        Cmd::Head => {
            let AccountReply::Head(head) = c.call(AccountOp::Head).await? else {
                bail!("accountd gave an unexpected answer to head");
            };
            let Some(head) = head else {
                bail!(
                    "accountd has signed no chain head: it signs none without [store] anchors, and its first only after the first entry"
                );
            };
            let anchor = accountd::store::anchors::Anchor::from_signed_head(&head)
                .ok_or_else(|| anyhow!("accountd sent a chain head whose hash is not 32 bytes"))?;
            anchor.verify(&ca)?;
            println!("{}", anchor.line());
        }
        Cmd::Project { cmd } => {
            let op = project_op(cmd)?;
            let then = create_limits(cmd)?;
            let reply = project(&mut c, op).await?;
            let reply = match then {
                Some(op) => project(&mut c, op).await?,
                None => reply,
            };
            match (cmd, reply) {
                (ProjectCmd::List { json: true }, ProjectReply::Projects(ps)) => {
                    println!("{}", serde_json::to_string(&ps)?);
                }
                (_, ProjectReply::Projects(ps)) => print!("{}", render_projects(&ps)),
                (_, ProjectReply::Project(p)) => print!("{}", render_projects(&[p])),
                (ProjectCmd::Default { user, project }, ProjectReply::Done) => {
                    println!("default of {user}: {project}");
                }
                (
                    ProjectCmd::Set {
                        project,
                        max_cost_per_job,
                    },
                    ProjectReply::Done,
                ) => {
                    println!("{project}: max cost per job {max_cost_per_job}");
                }
                _ => bail!("accountd gave an unexpected answer"),
            }
        }
        Cmd::Income { cmd } => match project(&mut c, income_op(cmd)?).await? {
            ProjectReply::Projects(ps) => print!("{}", render_income(&ps)),
            ProjectReply::Project(p) => match p.income {
                Some(_) => print!("{}", render_income(&[p])),
                None => println!("{} has no income", p.name),
            },
            _ => bail!("accountd gave an unexpected answer to income"),
        },
        Cmd::Whoami => {
            let AccountReply::WhoAmI(i) = c.call(AccountOp::WhoAmI).await? else {
                bail!("accountd gave an unexpected answer to whoami");
            };
            println!("{} {}", i.role, i.name);
        }
    }
    c.close().await;
    Ok(ExitCode::SUCCESS)
}

/// Sends an operation on projects.
async fn project(c: &mut AccountClient, op: ProjectOp) -> anyhow::Result<ProjectReply> {
    match c.call(AccountOp::Project(op)).await? {
        AccountReply::Project(r) => Ok(r),
        _ => bail!("accountd gave an unexpected answer"),
    }
}

/// Prints an audit report; `Some(3)` when it found problems (3, not 2: clap
/// already exits 2 for a bad command line, and a script must be able to tell
/// "the ledger is wrong" from a typo).
fn print_audit(a: &AuditReport) -> Option<ExitCode> {
    if a.problems.is_empty() {
        println!(
            "audit passed: {} accounts, {} entries, every balance equals its entries, every key unique, the hash chain intact",
            a.accounts, a.entries
        );
        return None;
    }
    println!(
        "audit FAILED: {} problems in {} accounts, {} entries",
        a.problems.len(),
        a.accounts,
        a.entries
    );
    for p in &a.problems {
        let ids: Vec<String> = p.entry_ids.iter().map(|i| i.to_string()).collect();
        let user = p
            .user
            .as_deref()
            .map(|u| format!(" [user {u}]"))
            .unwrap_or_default();
        let rows = if ids.is_empty() {
            String::new()
        } else {
            format!(" [entries {}]", ids.join(","))
        };
        println!("  {}{user}{rows}", p.what);
    }
    Some(ExitCode::from(3))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Cmd::Migrate { from, to } = &cli.cmd {
        return match accountd::ctl::migrate::run(from, to) {
            Ok(m) => {
                println!(
                    "migrated {} accounts, {} entries, {} claims, {} rank ends, {} project records; every balance, the entry count and the chain head match, and the copy audits clean",
                    m.accounts, m.entries, m.claims, m.ends, m.projects
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("accountctl: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if let Cmd::Audit {
        anchors: Some(anchors),
        ledger: Some(ledger),
    } = &cli.cmd
    {
        return match accountd::ctl::audit::offline(ledger, anchors) {
            Ok(a) => print_audit(&a).unwrap_or(ExitCode::SUCCESS),
            Err(e) => {
                eprintln!("accountctl: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("accountctl: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("accountctl: {}", format!("{e:#}").replace('\n', " "));
            ExitCode::FAILURE
        }
    }
}
