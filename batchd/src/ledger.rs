//! The queue's side of the ledger: one connection to accountd (redialled after
//! a failure), used to read an owner's balance at submission and before a start,
//! and to debit a job's charges. Every debit is keyed `(queue name, job id,
//! seq)`, so a debit repeated after a lost answer or a restart changes nothing;
//! `accountctl history` shows the job id in the key.
//!
//! accountd's addresses are the configured ones (its instances, tried in turn,
//! the one that answered last first: [`clients::instances`]), else the one the
//! selectors' `Services` answer names ([`Ledger::learn`]).

use std::sync::RwLock;
use std::time::Duration;

use clients::account::{AccountClient, ClientError, no_address};
use clients::instances::Instances;
use proto::account::{AccountOp, AccountReply, BalanceQuery, Debit, DebitKey, MeterInterval};
use proto::project::{ChargedAccount, ProjectDebit, ProjectOp, ProjectReply, WhichAccount};
use tokio_rustls::TlsConnector;

/// How long one call to accountd may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The connection to accountd.
pub struct Ledger {
    connector: TlsConnector,
    name: String,
    addr: RwLock<Instances>,
    conn: tokio::sync::Mutex<Option<AccountClient>>,
    queue: String,
}

impl Ledger {
    /// A ledger client as `queue` (the name in the queue's certificate, used in
    /// debit keys), to accountd `name` at `addr` (its instances; none: learnt later).
    pub fn new(connector: TlsConnector, name: String, addr: Vec<String>, queue: String) -> Ledger {
        Ledger {
            connector,
            name,
            addr: RwLock::new(Instances::new(addr)),
            conn: tokio::sync::Mutex::new(None),
            queue,
        }
    }

    /// The queue's name in debit keys.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// Takes an address heard from the selectors, unless one is configured or known.
    pub fn learn(&self, addr: String) {
        let mut a = self.addr.write().unwrap_or_else(|p| p.into_inner());
        if a.is_empty() {
            *a = Instances::new(vec![addr]);
        }
    }

    async fn call(&self, op: AccountOp) -> Result<AccountReply, ClientError> {
        let mut guard = self.conn.lock().await;
        for _ in 0..2 {
            if guard.is_none() {
                let instances = self.addr.read().unwrap_or_else(|p| p.into_inner()).clone();
                if instances.is_empty() {
                    return Err(no_address());
                }
                *guard = Some(
                    instances
                        .connect(&self.connector, &self.name, CALL_TIMEOUT)
                        .await?,
                );
            }
            let Some(client) = guard.as_mut() else {
                continue;
            };
            match client.call(op.clone()).await {
                Ok(r) => return Ok(r),
                Err(e @ clients::rpc::RpcError::Server(_)) => return Err(e),
                Err(e) => {
                    *guard = None;
                    tracing::debug!(error = %e, "accountd call failed; redialling once");
                }
            }
        }
        Err(clients::rpc::RpcError::Closed {
            service: "accountd",
            addr: self
                .addr
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .list()
                .join(","),
        })
    }

    /// `user`'s balance, micro-credits.
    pub async fn balance(&self, user: &str) -> Result<i64, ClientError> {
        match self
            .call(AccountOp::Balance(BalanceQuery {
                user: Some(user.to_string()),
            }))
            .await?
        {
            AccountReply::Balance(b) => Ok(b.balance),
            _ => Err(clients::rpc::RpcError::Closed {
                service: "accountd",
                addr: "(wrong reply to a balance query)".into(),
            }),
        }
    }

    /// The account `user`'s job charged to `project` (`None`: the user's
    /// default project, or its personal account) pays from, its balance and
    /// the project's ceiling per job (accountd's resolve: refused when `user`
    /// is no member).
    pub async fn resolve(
        &self,
        user: &str,
        project: Option<&str>,
    ) -> Result<ChargedAccount, ClientError> {
        let op = AccountOp::Project(ProjectOp::Resolve(WhichAccount {
            user: user.to_string(),
            project: project.map(str::to_string),
            burn: false,
        }));
        match self.call(op).await? {
            AccountReply::Project(ProjectReply::Account(a)) => Ok(a),
            _ => Err(clients::rpc::RpcError::Closed {
                service: "accountd",
                addr: "(wrong reply to which account to charge)".into(),
            }),
        }
    }

    /// Debits `amount` from `user` (or, with `project`, from that project for its
    /// member `user`) for job `job` under sequence `seq` (idempotent).
    pub async fn debit(
        &self,
        user: &str,
        project: Option<&str>,
        job: u64,
        seq: u64,
        amount: i64,
        interval: MeterInterval,
    ) -> Result<(), ClientError> {
        let debit = Debit {
            key: DebitKey {
                node: self.queue.clone(),
                job: format!("{job:016x}"),
                seq,
            },
            user: user.to_string(),
            amount,
            rank: 0,
            interval,
            cpu_us: 0,
        };
        let op = match project {
            None => AccountOp::Debit(debit),
            Some(project) => AccountOp::Project(ProjectOp::Debit(ProjectDebit {
                project: project.to_string(),
                debit,
            })),
        };
        self.call(op).await.map(|_| ())
    }
}
