//! Who may do what, decided from the role and name in the caller's verified
//! certificate (the only identity accountd believes):
//!
//! | role | may |
//! |---|---|
//! | node | debit and refund, with its own name in the key (in a `Debits` frame, each debit on its own: one with another node's name is refused alone); read any user's balance (to refuse a paid job whose owner has no credit); claim a signed batch rank and record its end (both under its own name) |
//! | user | read its own balance and history |
//! | admin | create accounts, grant, adjust, read every balance and history, report, audit; create projects, set their income, change their members |
//!
//! Projects: a node (or batch queue) charges a project for one of its
//! members (own name in the key; the ledger checks membership and limits);
//! a user changes the members of a project it is the admin of (and its
//! spending ceiling per job), and its own default project; nodes, admins and
//! the user itself ask which account a user's job is charged to, with that
//! account's balance, ceiling and (for `rexec estimate`) 7-day burn rate: a
//! member so reads its project's, and nobody else's.
//! | service | nothing but `WhoAmI`; except a batch queue ([`is_batch_queue`]: named `batchd` or `batchd-*`), which charges its jobs as a node charges its ranks: debit with its own name in the key, and read any user's balance |
//!
//! | service named `ledger-reader` or `ledger-reader-*` ([`is_ledger_reader`]) | read the spend summary (`Spend`: each project's net charge per hour, aggregates only; what the market page's ledger panel shows), as admins may; nothing else |
//!
//! Everyone may ask `WhoAmI` and `Head` (the latest signed chain head: it
//! is meant to be kept by anyone, and shows nobody's account). Anything else is refused with
//! [`ErrorCode::Forbidden`], and the server records the refusal.

use certs::{PeerIdentity, Role};
use proto::account::{AccountError, AccountOp, Debit, ErrorCode, MAX_DEBITS_PER_FRAME};
use proto::project::ProjectOp;

/// Where an allowed operation goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// To the writer (group commit).
    Write(AccountOp),
    /// To the reader, with any "my own" user filled in.
    Read(AccountOp),
    /// Answered from the identity alone.
    WhoAmI,
    /// Answered with the latest signed chain head.
    Head,
    /// Several debits, each to be checked with [`debit_allowed`] and written
    /// on its own (the caller may charge; the count is within bounds).
    Debits(Vec<Debit>),
}

/// Whether `peer` is a batch queue: a service certificate named `batchd` or
/// `batchd-SOMETHING` (the queue daemon's certificate, see OPERATIONS.md).
pub fn is_batch_queue(peer: &PeerIdentity) -> bool {
    peer.role == Role::Service && (peer.name == "batchd" || peer.name.starts_with("batchd-"))
}

/// Whether `peer` is a ledger reader: a service certificate named
/// `ledger-reader` or `ledger-reader-SOMETHING`, which the CA's admin issues
/// on purpose to a selector whose market page admins read (OPERATIONS.md).
/// It may read the spend summary and nothing else.
pub fn is_ledger_reader(peer: &PeerIdentity) -> bool {
    peer.role == Role::Service
        && (peer.name == "ledger-reader" || peer.name.starts_with("ledger-reader-"))
}

/// The actor recorded in ledger entries: `role:name`.
pub fn actor(peer: &PeerIdentity) -> String {
    format!("{}:{}", peer.role, peer.name)
}

fn forbidden(peer: &PeerIdentity, what: &str) -> AccountError {
    AccountError::new(
        ErrorCode::Forbidden,
        format!("{} {} may not {what}", peer.role, peer.name),
    )
}

/// Decides whether `peer` may perform `op`, and routes it.
pub fn authorize(peer: &PeerIdentity, op: AccountOp) -> Result<Route, AccountError> {
    let role = peer.role;
    match op {
        AccountOp::WhoAmI => Ok(Route::WhoAmI),
        AccountOp::Head => Ok(Route::Head),
        AccountOp::Debit(ref d) => {
            own_key(peer, &d.key.node, "debit")?;
            Ok(Route::Write(op))
        }
        AccountOp::Debits(ds) => {
            may_charge(peer, "debit")?;
            if ds.is_empty() || ds.len() > MAX_DEBITS_PER_FRAME {
                return Err(AccountError::new(
                    ErrorCode::Malformed,
                    format!(
                        "a Debits frame carries 1 to {MAX_DEBITS_PER_FRAME} debits, not {}; split it",
                        ds.len()
                    ),
                ));
            }
            Ok(Route::Debits(ds))
        }
        AccountOp::Refund(ref r) => {
            own_key(peer, &r.key.node, "refund")?;
            Ok(Route::Write(op))
        }
        AccountOp::Claim(_) | AccountOp::RankEnd(_) => {
            if role != Role::Node {
                return Err(forbidden(
                    peer,
                    "claim batch ranks or record their ends: only node certificates are accepted",
                ));
            }
            Ok(Route::Write(op))
        }
        AccountOp::Balance(mut q) => {
            let target = target_user(peer, &q.user, "balance")?;
            match role {
                Role::Admin | Role::Node => {}
                Role::Service if is_batch_queue(peer) => {}
                Role::User if target == peer.name => {}
                Role::User => {
                    return Err(forbidden(
                        peer,
                        &format!("read the balance of {target:?}, only their own"),
                    ));
                }
                _ => {
                    return Err(forbidden(
                        peer,
                        "read balances: only user, node and admin certificates are accepted",
                    ));
                }
            }
            q.user = Some(target);
            Ok(Route::Read(AccountOp::Balance(q)))
        }
        AccountOp::History(mut q) => {
            let target = target_user(peer, &q.user, "history")?;
            match role {
                Role::Admin => {}
                Role::User if target == peer.name => {}
                Role::User => {
                    return Err(forbidden(
                        peer,
                        &format!("read the history of {target:?}, only their own"),
                    ));
                }
                _ => {
                    return Err(forbidden(
                        peer,
                        "read ledger history: only user and admin certificates are accepted",
                    ));
                }
            }
            q.user = Some(target);
            Ok(Route::Read(AccountOp::History(q)))
        }
        AccountOp::CreateAccount(_) | AccountOp::Grant(_) | AccountOp::Adjust(_) => {
            admin_only(peer, op, true)
        }
        AccountOp::Report(_) | AccountOp::Audit => admin_only(peer, op, false),
        AccountOp::Project(p) => project(peer, p),
        AccountOp::Spend(_) if is_ledger_reader(peer) => Ok(Route::Read(op)),
        AccountOp::Spend(_) => admin_only(peer, op, false),
        AccountOp::Unknown { tag } => Err(AccountError::new(
            ErrorCode::Unsupported,
            format!("this accountd does not know operation {tag}; upgrade accountd"),
        )),
        other => Err(AccountError::new(
            ErrorCode::Unsupported,
            format!("this accountd does not handle {}", other.name()),
        )),
    }
}

/// Routes an operation on projects. Whether a user may change a project
/// (its admin) or a default (its own) is decided by the ledger, which knows
/// the project ([`crate::store::projects`]).
fn project(peer: &PeerIdentity, p: ProjectOp) -> Result<Route, AccountError> {
    let op = |p| AccountOp::Project(p);
    match p {
        ProjectOp::Create(_) | ProjectOp::Income(_) => admin_only(peer, op(p), true),
        ProjectOp::List | ProjectOp::Report(_) | ProjectOp::Forecast => {
            admin_only(peer, op(p), false)
        }
        ProjectOp::Members(_) | ProjectOp::Default(_) | ProjectOp::Ceiling(_) => match peer.role {
            Role::Admin | Role::User => Ok(Route::Write(op(p))),
            _ => Err(forbidden(
                peer,
                "change projects: only admin and user certificates are accepted",
            )),
        },
        ProjectOp::Debit(ref d) => {
            own_key(peer, &d.debit.key.node, "debit")?;
            Ok(Route::Write(op(p)))
        }
        ProjectOp::Resolve(ref w) => match peer.role {
            Role::Admin | Role::Node => Ok(Route::Read(op(p))),
            Role::Service if is_batch_queue(peer) => Ok(Route::Read(op(p))),
            Role::User if w.user == peer.name => Ok(Route::Read(op(p))),
            _ => Err(forbidden(
                peer,
                &format!("ask which account {:?} is charged to", w.user),
            )),
        },
        ProjectOp::Tick => Err(forbidden(peer, "grant income: accountd does that itself")),
        ProjectOp::Unknown { tag } => Err(AccountError::new(
            ErrorCode::Unsupported,
            format!("this accountd does not know project operation {tag}; upgrade accountd"),
        )),
        other => Err(AccountError::new(
            ErrorCode::Unsupported,
            format!("this accountd does not handle {}", other.name()),
        )),
    }
}

/// The user a query is about: the one named, or for a user certificate its own.
fn target_user(
    peer: &PeerIdentity,
    named: &Option<String>,
    what: &str,
) -> Result<String, AccountError> {
    match (named, peer.role) {
        (Some(u), _) => Ok(u.clone()),
        (None, Role::User) => Ok(peer.name.clone()),
        (None, _) => Err(AccountError::new(
            ErrorCode::Malformed,
            format!(
                "{} {} has no account of its own: name the user (accountctl {what} USER)",
                peer.role, peer.name
            ),
        )),
    }
}

/// Whether `peer` may debit `d` (one debit of a [`Route::Debits`]): exactly
/// what [`authorize`] decides for a single `Debit`.
pub fn debit_allowed(peer: &PeerIdentity, d: &Debit) -> Result<(), AccountError> {
    own_key(peer, &d.key.node, "debit")
}

/// Whether `peer`'s role may charge at all (a node, or a batch queue).
fn may_charge(peer: &PeerIdentity, what: &str) -> Result<(), AccountError> {
    if peer.role != Role::Node && !is_batch_queue(peer) {
        return Err(forbidden(
            peer,
            &format!("{what}: only node certificates are accepted"),
        ));
    }
    Ok(())
}

fn own_key(peer: &PeerIdentity, node: &str, what: &str) -> Result<(), AccountError> {
    may_charge(peer, what)?;
    if node != peer.name {
        return Err(AccountError::new(
            ErrorCode::Forbidden,
            format!(
                "{} {} may only {what} with its own name in the key, not {node:?}",
                peer.role, peer.name
            ),
        ));
    }
    Ok(())
}

fn admin_only(peer: &PeerIdentity, op: AccountOp, write: bool) -> Result<Route, AccountError> {
    if peer.role != Role::Admin {
        return Err(forbidden(
            peer,
            &format!("{}: only admin certificates are accepted", op.name()),
        ));
    }
    Ok(if write {
        Route::Write(op)
    } else {
        Route::Read(op)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::account::*;

    fn id(role: Role, name: &str) -> PeerIdentity {
        PeerIdentity::new(role, name).unwrap()
    }

    fn debit(node: &str) -> AccountOp {
        AccountOp::Debit(Debit {
            key: DebitKey {
                node: node.into(),
                job: "j".into(),
                seq: 1,
            },
            user: "alice".into(),
            amount: 1,
            rank: 0,
            interval: MeterInterval::default(),
            cpu_us: 0,
        })
    }

    fn balance(user: Option<&str>) -> AccountOp {
        AccountOp::Balance(BalanceQuery {
            user: user.map(str::to_string),
        })
    }

    #[test]
    fn the_role_table() {
        let node = id(Role::Node, "n1");
        let alice = id(Role::User, "alice");
        let admin = id(Role::Admin, "ops");
        let svc = id(Role::Service, "vexecd");
        let grant = AccountOp::Grant(AdminEntry {
            user: "alice".into(),
            amount: 1,
            reason: "x".into(),
        });
        assert!(matches!(authorize(&node, debit("n1")), Ok(Route::Write(_))));
        assert_eq!(
            authorize(&node, debit("n2")).unwrap_err().code,
            ErrorCode::Forbidden
        );
        for who in [&alice, &admin, &svc] {
            assert_eq!(
                authorize(who, debit("n1")).unwrap_err().code,
                ErrorCode::Forbidden
            );
        }
        assert_eq!(
            authorize(&alice, balance(None)).unwrap(),
            Route::Read(balance(Some("alice")))
        );
        assert!(authorize(&alice, balance(Some("bob"))).is_err());
        assert!(authorize(&node, balance(Some("bob"))).is_ok());
        assert!(authorize(&admin, balance(Some("bob"))).is_ok());
        assert!(authorize(&svc, balance(Some("bob"))).is_err());
        // A batch queue debits its jobs under its own name, and reads balances.
        let queue = id(Role::Service, "batchd");
        assert!(matches!(
            authorize(&queue, debit("batchd"),),
            Ok(Route::Write(_))
        ));
        assert!(authorize(&queue, debit("n1")).is_err());
        assert!(authorize(&queue, balance(Some("bob"))).is_ok());
        assert!(authorize(&id(Role::Service, "batchdx"), balance(Some("bob"))).is_err());
        for who in [&node, &alice, &svc] {
            assert!(authorize(who, grant.clone()).is_err());
            assert!(authorize(who, AccountOp::Audit).is_err());
        }
        assert!(matches!(authorize(&admin, grant), Ok(Route::Write(_))));
        let key = Claim {
            user: "alice".into(),
            job: proto::node::JobId(1),
            attempt: 0,
            rank: 0,
            digest: [0; 32],
        };
        let end = AccountOp::RankEnd(proto::account::RankEnd {
            claim: key.clone(),
            width: 1,
        });
        for op in [AccountOp::Claim(key), end] {
            assert!(matches!(authorize(&node, op.clone()), Ok(Route::Write(_))));
            for who in [&alice, &admin, &svc] {
                assert_eq!(
                    authorize(who, op.clone()).unwrap_err().code,
                    ErrorCode::Forbidden
                );
            }
        }
        // A Debits frame: the role is checked for the frame, the key per debit.
        let one = |n: &str| match debit(n) {
            AccountOp::Debit(d) => d,
            _ => unreachable!(),
        };
        let frame = AccountOp::Debits(vec![one("n1"), one("n2")]);
        assert!(matches!(authorize(&node, frame.clone()), Ok(Route::Debits(ds)) if ds.len() == 2));
        assert!(debit_allowed(&node, &one("n1")).is_ok());
        assert_eq!(
            debit_allowed(&node, &one("n2")).unwrap_err().code,
            ErrorCode::Forbidden
        );
        for who in [&alice, &admin, &svc] {
            assert_eq!(
                authorize(who, frame.clone()).unwrap_err().code,
                ErrorCode::Forbidden
            );
        }
        for n in [0, MAX_DEBITS_PER_FRAME + 1] {
            let frame = AccountOp::Debits(vec![one("n1"); n]);
            assert_eq!(
                authorize(&node, frame).unwrap_err().code,
                ErrorCode::Malformed
            );
        }
        // The spend summary: admins and ledger readers, nobody else; a ledger
        // reader reads nothing else.
        let spend = AccountOp::Spend(proto::spend::SpendQuery { hours: 24 });
        let reader = id(Role::Service, "ledger-reader-v1");
        for who in [&admin, &reader, &id(Role::Service, "ledger-reader")] {
            assert_eq!(
                authorize(who, spend.clone()),
                Ok(Route::Read(spend.clone()))
            );
        }
        for who in [
            &node,
            &alice,
            &svc,
            &queue,
            &id(Role::Service, "ledger-readerx"),
        ] {
            assert_eq!(
                authorize(who, spend.clone()).unwrap_err().code,
                ErrorCode::Forbidden
            );
        }
        for op in [
            balance(Some("bob")),
            AccountOp::Audit,
            debit("ledger-reader-v1"),
        ] {
            assert_eq!(
                authorize(&reader, op).unwrap_err().code,
                ErrorCode::Forbidden
            );
        }
        let report = AccountOp::Report(ReportQuery {
            by: ReportBy::User,
            since_us: None,
            until_us: None,
        });
        assert!(authorize(&reader, report).is_err());
        assert_eq!(authorize(&svc, AccountOp::WhoAmI), Ok(Route::WhoAmI));
        assert_eq!(authorize(&svc, AccountOp::Head), Ok(Route::Head));
        assert_eq!(
            authorize(&admin, AccountOp::Unknown { tag: 99 })
                .unwrap_err()
                .code,
            ErrorCode::Unsupported
        );
    }
}
