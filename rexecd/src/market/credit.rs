//! Credit checks: whether a user may bid a positive rate on this node, asked of
//! accountd and cached for a short while; and, over the same connection path, claims
//! of signed batch ranks ([`Credit::claim`]) and the records of their ends
//! ([`Credit::record_end`]). [`Credit::payer`] tells which account a job is
//! charged to (accountd's resolve: the project named by `rexec -A`, else the
//! user's default project, else its personal account) and checks the
//! project's balance as [`Credit::check`] checks a user's; the cache holds
//! projects' balances beside users' (no user may hold a project's name).
//!
//! A positive balance read from accountd (or from a debit's receipt) is trusted for
//! `balance_cache`; a balance at or below zero is never trusted from the cache (it is
//! asked again, so a grant takes effect at once). While accountd cannot be reached a
//! positive balance seen within `balance_cache` still counts; past that, positive
//! bids are refused with a message saying that a zero bid still runs.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clients::account::{AccountClient, ClientError, LearntAddress, no_address};
use clients::instances::Instances;
use proto::account::{
    AccountOp, AccountReply, BalanceQuery, Claim, ErrorCode as AccountCode, RankEnd,
};
use proto::node::{ErrorCode, ErrorReply};
use proto::project::{ChargedAccount, ProjectOp, ProjectReply, WhichAccount};
use tokio_rustls::TlsConnector;

use crate::config::market_table::LedgerConfig;

/// The account a job is charged to, as a launch's checks found it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Payer {
    /// The project charged, `None` for the owner's personal account.
    pub project: Option<String>,
    /// The project's spending ceiling per job, micro-credits, if it has one
    /// (`accountctl project set P --max-cost-per-job C`).
    pub max_cost_per_job: Option<i64>,
}

impl Payer {
    fn personal() -> Payer {
        Payer::default()
    }
}

/// How long one balance query may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(3);

/// Balances as last seen, and how to ask for fresh ones.
pub struct Credit {
    node: String,
    ledger: Option<(LedgerConfig, TlsConnector)>,
    /// The configured accountd instances (none: the learnt address is used).
    instances: Instances,
    learnt: Option<LearntAddress>,
    ttl: Duration,
    cache: Mutex<HashMap<String, (i64, Instant)>>,
}

impl std::fmt::Debug for Credit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credit")
            .field("node", &self.node)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl Credit {
    /// Checks against `ledger` (none: every bid passes, nobody is charged). A ledger
    /// without an address is reached at the address `learnt` holds at the time (from
    /// accountd's announcements); while it holds none, accountd counts as unreachable.
    pub fn new(
        node: &str,
        ledger: Option<(LedgerConfig, TlsConnector)>,
        learnt: Option<LearntAddress>,
        ttl: Duration,
    ) -> Credit {
        let addresses = ledger.as_ref().map(|(l, _)| l.addresses.clone());
        Credit {
            node: node.to_string(),
            instances: Instances::new(addresses.unwrap_or_default()),
            ledger,
            learnt,
            ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, (i64, Instant)>> {
        // Every update is one insert: a poisoned lock still holds a whole map.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a balance seen now (from a query or a debit's receipt).
    pub fn saw(&self, user: &str, balance: i64) {
        self.cache()
            .insert(user.to_string(), (balance, Instant::now()));
    }

    /// The last balance seen for `user` within the cache time.
    fn recent(&self, user: &str) -> Option<i64> {
        let cache = self.cache();
        let &(balance, at) = cache.get(user)?;
        (at.elapsed() <= self.ttl).then_some(balance)
    }

    /// Refuses a positive bid from a user whose balance is not positive; a zero bid
    /// always passes.
    pub async fn check(&self, user: &str, bid: money::Bid) -> Result<(), ErrorReply> {
        if bid.is_zero() {
            return Ok(());
        }
        let Some((ledger, connector)) = &self.ledger else {
            return Ok(());
        };
        if let Some(b) = self.recent(user)
            && b > 0
        {
            return Ok(());
        }
        let node = &self.node;
        let balance = match self.query(ledger, connector, user).await {
            Ok(b) => {
                self.saw(user, b);
                b
            }
            Err(Lookup::NoAccount(message)) => {
                return Err(ErrorReply::new(
                    ErrorCode::NoCredit,
                    format!(
                        "node {node}: {user} has no account ({message}); ask an admin to create \
                         one, or bid 0 (-r 0) to run on CPU that no bidding job wants"
                    ),
                ));
            }
            Err(Lookup::Unreachable(why)) => match self.recent(user) {
                Some(b) => b,
                None => {
                    return Err(ErrorReply::new(
                        ErrorCode::NoCredit,
                        format!(
                            "node {node}: cannot check {user}'s balance ({why}); a bid of {bid} \
                             credits per minute needs a known positive balance, but a zero bid \
                             (-r 0) still runs, on CPU that no bidding job wants"
                        ),
                    ));
                }
            },
        };
        if balance > 0 {
            Ok(())
        } else {
            Err(ErrorReply::new(
                ErrorCode::NoCredit,
                format!(
                    "node {node}: {user}'s balance is {} credits; a bid of {bid} credits per \
                     minute needs credit (ask an admin for a grant), but a zero bid (-r 0) still \
                     runs, on CPU that no bidding job wants",
                    money::format_credits(balance)
                ),
            ))
        }
    }
}

impl Credit {
    /// The account a job of `user` bidding `bid` is charged to (a project, with
    /// its ceiling per job, or the personal account), after the checks of a launch: `asked` (`rexec -A`)
    /// must name a project `user` belongs to (refused otherwise, also while
    /// accountd cannot be asked), and a positive bid needs a positive balance
    /// there. With none asked, accountd tells the user's default project; where
    /// it names none (or accountd predates projects, or cannot be asked, or the
    /// bid is zero and nothing is asked at all), the personal account is
    /// checked exactly as [`Credit::check`] does.
    pub async fn payer(
        &self,
        user: &str,
        asked: Option<&str>,
        bid: money::Bid,
    ) -> Result<Payer, ErrorReply> {
        let node = &self.node;
        let ledger = match (&self.ledger, asked) {
            (Some(l), Some(_)) => l,
            (Some(l), None) if !bid.is_zero() => l,
            _ => return self.check(user, bid).await.map(|()| Payer::personal()),
        };
        let (ledger, connector) = ledger;
        let which = match (self.resolve(ledger, connector, user, asked).await, asked) {
            (Ok(w), _) => w,
            (Err(_), None) => return self.check(user, bid).await.map(|()| Payer::personal()),
            (Err(Lookup::NoAccount(message)), Some(project)) => {
                return Err(ErrorReply::new(
                    ErrorCode::NoCredit,
                    format!("node {node}: {user} may not charge project {project}: {message}"),
                ));
            }
            (Err(Lookup::Unreachable(why)), Some(project)) => {
                return Err(ErrorReply::new(
                    ErrorCode::AccountUnavailable,
                    format!(
                        "node {node}: cannot check that {user} may charge project {project} \
                         ({why}); nothing was started"
                    ),
                ));
            }
        };
        let Some(project) = which.project else {
            self.saw(user, which.balance);
            return self.check(user, bid).await.map(|()| Payer::personal());
        };
        self.saw(&project, which.balance);
        if bid.is_zero() || which.balance > 0 {
            return Ok(Payer {
                project: Some(project),
                max_cost_per_job: which.max_cost_per_job,
            });
        }
        Err(ErrorReply::new(
            ErrorCode::NoCredit,
            format!(
                "node {node}: project {project}'s balance for {user} is {} credits; a bid of \
                 {bid} credits per minute needs credit (ask the project's admin), but a zero \
                 bid (-r 0) still runs, on CPU that no bidding job wants",
                money::format_credits(which.balance)
            ),
        ))
    }

    /// Claims a signed batch rank at accountd, so that it starts once in the
    /// cluster. A transport failure is tried once more (accountd answers a repeat
    /// from this node `Claimed`, so a lost reply strands nothing); a rank claimed
    /// before, by another node or for another spec, is refused as a replay; without
    /// a reachable accountd nothing may start (`AccountUnavailable`).
    pub async fn claim(&self, claim: Claim) -> Result<(), ErrorReply> {
        let node = &self.node;
        let what = format!(
            "rank {} of attempt {} of job {} of {}",
            claim.rank, claim.attempt, claim.job, claim.user
        );
        let unavailable = |why: String| {
            ErrorReply::new(
                ErrorCode::AccountUnavailable,
                format!(
                    "node {node}: cannot claim {what} at accountd ({why}); a signed rank runs \
                     only once claimed, nothing was started"
                ),
            )
        };
        let Some((ledger, connector)) = &self.ledger else {
            return Err(unavailable("no accountd is configured on this node".into()));
        };
        let mut last = String::new();
        for _ in 0..2 {
            let mut client = match self.connect(ledger, connector).await {
                Ok(c) => c,
                Err(why) => {
                    last = why;
                    continue;
                }
            };
            let reply = client.claim(claim.clone()).await;
            client.close().await;
            match reply {
                Ok(()) => return Ok(()),
                Err(ClientError::Server(e))
                    if matches!(
                        e.code,
                        AccountCode::AlreadyClaimed
                            | AccountCode::KeyConflict
                            | AccountCode::JobEnded
                    ) =>
                {
                    return Err(ErrorReply::new(
                        ErrorCode::NotAuthorized,
                        format!("node {node}: replayed signed job refused: {}", e.message),
                    ));
                }
                Err(e) if e.is_retryable() => last = e.to_string(),
                Err(e) => return Err(unavailable(e.to_string())),
            }
        }
        Err(unavailable(last))
    }
}

/// Why accountd did not record a rank's end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndNotRecorded {
    /// accountd refused it for good (the words are its own); sending it again
    /// would be refused again.
    #[error("accountd refused it: {0}")]
    Refused(String),
    /// accountd could not be asked, or could not answer now (also an accountd
    /// too old to know `RankEnd`); the end is to be sent again later.
    #[error("{0}")]
    Later(String),
}

impl Credit {
    /// Records at accountd that a rank this node claimed ended (once: a repeat
    /// is answered as the first). One attempt; the caller keeps the record and
    /// retries on [`EndNotRecorded::Later`].
    pub async fn record_end(&self, end: RankEnd) -> Result<(), EndNotRecorded> {
        let Some((ledger, connector)) = &self.ledger else {
            return Err(EndNotRecorded::Later(
                "no accountd is configured on this node".into(),
            ));
        };
        let mut client = self
            .connect(ledger, connector)
            .await
            .map_err(EndNotRecorded::Later)?;
        let reply = client.call(AccountOp::RankEnd(end)).await;
        client.close().await;
        match reply {
            Ok(AccountReply::Ended) => Ok(()),
            Ok(other) => Err(EndNotRecorded::Later(format!(
                "accountd answered a rank's end with {}",
                other.name()
            ))),
            Err(ClientError::Server(e))
                if !e.code.is_retryable() && e.code != AccountCode::Unsupported =>
            {
                Err(EndNotRecorded::Refused(e.message))
            }
            Err(e) => Err(EndNotRecorded::Later(e.to_string())),
        }
    }
}

enum Lookup {
    NoAccount(String),
    Unreachable(String),
}

impl Credit {
    /// A connection to the first configured accountd that answers (the one that
    /// answered last first), else to the learnt one; or why there is none.
    async fn connect(
        &self,
        ledger: &LedgerConfig,
        connector: &TlsConnector,
    ) -> Result<AccountClient, String> {
        let name = &ledger.server_name;
        if !self.instances.is_empty() {
            return self
                .instances
                .connect(connector, name, QUERY_TIMEOUT)
                .await
                .map_err(|e| e.to_string());
        }
        let address = self.learnt.as_ref().and_then(LearntAddress::get);
        let address = address.ok_or_else(|| no_address().to_string())?;
        AccountClient::connect(&address, connector, name, QUERY_TIMEOUT)
            .await
            .map_err(|e| e.to_string())
    }

    async fn query(
        &self,
        ledger: &LedgerConfig,
        connector: &TlsConnector,
        user: &str,
    ) -> Result<i64, Lookup> {
        let client = self
            .connect(ledger, connector)
            .await
            .map_err(Lookup::Unreachable)?;
        query_on(client, user).await
    }

    async fn resolve(
        &self,
        ledger: &LedgerConfig,
        connector: &TlsConnector,
        user: &str,
        asked: Option<&str>,
    ) -> Result<ChargedAccount, Lookup> {
        let client = self
            .connect(ledger, connector)
            .await
            .map_err(Lookup::Unreachable)?;
        resolve_on(client, user, asked).await
    }
}

/// accountd's answer to which account `user`'s job is charged to (`asked`, or
/// its default). A refusal (no member, no such project, no account) is
/// `NoAccount` with accountd's words; an accountd that predates projects is
/// `Unreachable`.
async fn resolve_on(
    mut client: AccountClient,
    user: &str,
    asked: Option<&str>,
) -> Result<ChargedAccount, Lookup> {
    let op = AccountOp::Project(ProjectOp::Resolve(WhichAccount {
        user: user.to_string(),
        project: asked.map(str::to_string),
        burn: false,
    }));
    let reply = client.call(op).await;
    client.close().await;
    match reply {
        Ok(AccountReply::Project(ProjectReply::Account(a))) => Ok(a),
        Ok(other) => Err(Lookup::Unreachable(format!(
            "accountd answered which account to charge with {}",
            other.name()
        ))),
        Err(ClientError::Server(e))
            if !e.code.is_retryable() && e.code != AccountCode::Unsupported =>
        {
            Err(Lookup::NoAccount(e.message))
        }
        Err(e) => Err(Lookup::Unreachable(e.to_string())),
    }
}

async fn query_on(mut client: AccountClient, user: &str) -> Result<i64, Lookup> {
    let op = AccountOp::Balance(BalanceQuery {
        user: Some(user.to_string()),
    });
    let reply = client.call(op).await;
    client.close().await;
    match reply {
        Ok(AccountReply::Balance(b)) => Ok(b.balance),
        Ok(other) => Err(Lookup::Unreachable(format!(
            "accountd answered a balance query with {}",
            other.name()
        ))),
        Err(ClientError::Server(e)) if e.code == AccountCode::UnknownUser => {
            Err(Lookup::NoAccount(e.message))
        }
        Err(e) => Err(Lookup::Unreachable(e.to_string())),
    }
}
