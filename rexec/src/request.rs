//! The run form's request, checked before anything starts: the rate
//! against the client's own limits, the heartbeat timeout, the
//! configuration, and where the ranks go (the `[nodes]` table, `--nodes`,
//! or the selectors). Every failure is an [`Error`] of the class the
//! documented exit table gives it.

use std::time::Duration;

use money::Bid;
use tokio_rustls::TlsConnector;

use crate::cli::RunArgs;
use crate::config::Config;
use crate::exit::Error;
use crate::plan::{JobSpec, RankTarget, place};
use crate::reach::{listed_nodes, load};
use clients::node::Session;

/// The request after the local checks.
#[derive(Debug)]
pub struct Request {
    /// The bid on every node.
    pub bid: Bid,
    /// `--max-cost`: the most the whole job may be charged, micro-credits.
    pub max_cost: Option<i64>,
    /// `-A`: the project charged, `None` for the default.
    pub account: Option<String>,
    /// How long a node may stay silent.
    pub timeout: Duration,
    /// The client configuration.
    pub config: Config,
}

/// Check the rate, the timeout and the configuration.
pub fn check(args: &RunArgs) -> Result<Request, Error> {
    let timeout = crate::clock::timeout_from_env().map_err(Error::Usage)?;
    let config = load(args.config.as_deref())?;
    let bid = bid(&args.rate, "-r", &config)?;
    Ok(Request {
        bid,
        max_cost: args.spending.max_cost()?,
        account: args.spending.account.clone(),
        timeout,
        config,
    })
}

/// `--mem`: a size, or a usage error saying how to write one.
pub fn mem(text: Option<&str>) -> Result<Option<u64>, Error> {
    text.map(|t| proto::size::parse_size(t).map_err(|e| Error::Usage(format!("--mem: {e}"))))
        .transpose()
}

/// The bid `text` (given as `flag`): malformed is a usage error; negative,
/// or over the configuration's `max_rate`, is refused as a node would
/// refuse it, saying where the limit comes from.
///
/// ```
/// use rexec::exit::Class;
/// let base = "ca = \"c\"\ncert = \"u\"\nkey = \"k\"\n";
/// let c = rexec::config::Config::parse("/x/a.toml".as_ref(), base).unwrap();
/// let e = rexec::request::bid("1000.5", "-r", &c).unwrap_err();
/// assert_eq!(e.class(), Class::Refused);
/// assert!(e.to_string().contains("the default of 1000 credits per minute"), "{e}");
/// assert_eq!(rexec::request::bid("-1", "-r", &c).unwrap_err().class(), Class::Refused);
/// assert_eq!(rexec::request::bid("lots", "-r", &c).unwrap_err().class(), Class::Usage);
/// ```
pub fn bid(text: &str, flag: &str, config: &Config) -> Result<Bid, Error> {
    let bid: Bid = text.parse().map_err(|e| match e {
        money::BidError::Negative(_) => Error::Refused(format!("{flag} {text}: {e}")),
        other => Error::Usage(format!("{flag} {text}: {other}")),
    })?;
    if bid > config.max_rate {
        return Err(Error::Refused(format!(
            "{flag} {text}: a bid of {bid} credits per minute is over the largest this client \
             sends, {}",
            config.max_rate_source()
        )));
    }
    Ok(bid)
}

/// Where the ranks go, with the sessions already opened to check them
/// (when a selector chose the nodes).
pub async fn place_ranks(
    args: &RunArgs,
    request: &Request,
    connector: &TlsConnector,
) -> Result<(Vec<RankTarget>, Vec<Option<Session>>), Error> {
    let config = &request.config;
    if args.nodes.is_none() && config.selects() {
        return choose_ranks(args, request, connector).await;
    }
    // `--nodes` with no [nodes] table: the names are looked up in a
    // selector's listing of the live nodes (an unknown name is refused
    // there, naming the live ones; repeats still give a node several ranks).
    let listed;
    let pool = if config.nodes.is_empty() && config.selects() {
        listed = Config {
            nodes: listed_nodes(config, args.nodes.as_deref(), connector).await?,
            ..config.clone()
        };
        &listed
    } else {
        config
    };
    let ranks =
        place(pool, args.nodes.as_deref(), args.nranks).map_err(|e| Error::Usage(e.to_string()))?;
    Ok((ranks, Vec::new()))
}

/// Nodes chosen by the selectors, each with its open session.
async fn choose_ranks(
    args: &RunArgs,
    request: &Request,
    connector: &TlsConnector,
) -> Result<(Vec<RankTarget>, Vec<Option<Session>>), Error> {
    let wanted = wanted(args)?;
    // Check what can be checked before asking anyone (the node names are
    // not known yet; the full check follows the choice).
    let placeholder = [RankTarget {
        rank: 0,
        node: crate::config::NodeEntry {
            name: "node".into(),
            addr: String::new(),
        },
    }];
    validate(&JobSpec::from_process(
        &placeholder,
        request.bid,
        args.command.clone(),
        None,
    ))?;
    let note = |m: &str| {
        if args.verbose {
            crate::say(m);
        }
    };
    let mut selectors = crate::find::selectors(&request.config, connector, &note)
        .await
        .map_err(|e| Error::Failed(e.to_string()))?;
    let chosen = crate::choose::choose(connector, &mut selectors, &wanted, request.timeout, &note)
        .await
        .map_err(crate::choose::ChooseError::into_error)?;
    Ok((chosen.ranks, chosen.sessions))
}

/// Whether the launch message of rank 0 is one a node would accept.
pub fn validate(spec: &JobSpec) -> Result<(), Error> {
    spec.launch(0)
        .validate()
        .map_err(|e| Error::Usage(format!("cannot launch this: {e}")))
}

/// What to ask a selector for, from `-n`, `--policy`, `--max-price` and
/// `--length`; an error is a usage error.
pub fn wanted(args: &RunArgs) -> Result<crate::choose::Wanted, Error> {
    let max_price = args.choice.max_price()?;
    let expected_cpu_ms = length(args.length.as_deref(), Some(&args.choice.policy))?;
    Ok(crate::choose::Wanted {
        count: args.nranks.unwrap_or(1),
        policy: args.choice.policy.clone(),
        max_price,
        expected_cpu_ms,
    })
}

/// `--length` in milliseconds of CPU; `--policy history` needs it.
pub fn length(text: Option<&str>, policy: Option<&str>) -> Result<Option<u64>, Error> {
    let ms = match text {
        None => None,
        Some(text) => Some(
            timespan::parse_duration(text)
                .map_err(|e| Error::Usage(format!("--length {text}: {e}")))?
                .as_millis() as u64,
        ),
    };
    if policy == Some("history") && ms.is_none() {
        return Err(Error::Usage(
            "--policy history needs --length, the job's expected CPU time (e.g. --length 20m): \
             it places the job where that much CPU would finish soonest"
                .to_string(),
        ));
    }
    Ok(ms)
}
