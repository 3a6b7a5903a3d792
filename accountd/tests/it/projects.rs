//! Project accounts and income through the real binaries, each on both
//! backends (a SQLite file, and a real PostgreSQL): members spend from a
//! project and others are refused, member limits hold, income is granted
//! once per period across kill -9, clock jumps and two accountd on one
//! PostgreSQL, the forecast, and `accountctl migrate` carrying projects.

use std::time::Duration;

use certs::Role;
use clients::account::ClientError;
use proto::account::*;
use proto::project::*;

use crate::pgserver::Postgres;
use crate::support::*;

/// Where a test's ledger lives; the PostgreSQL server lives as long as the test.
enum Backend {
    Lite,
    Pg(Postgres),
}

impl Backend {
    fn pg() -> Backend {
        let pg = Postgres::with_database("ledger");
        Backend::Pg(pg)
    }

    async fn start(&self) -> Accountd {
        match self {
            Backend::Lite => Accountd::start().await,
            Backend::Pg(pg) => Accountd::start_pg(&pg.conninfo("ledger")).await,
        }
    }
}

fn spend(node: &str, job: &str, seq: u64, project: &str, user: &str, amount: i64) -> AccountOp {
    AccountOp::Project(ProjectOp::Debit(ProjectDebit {
        project: project.into(),
        debit: debit(node, job, seq, user, amount),
    }))
}

/// The server's refusal: its code and message.
fn refusal(r: Result<AccountReply, ClientError>) -> (ErrorCode, String) {
    match r {
        Err(ClientError::Server(e)) => (e.code, e.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The entries of `account` as accountctl prints them in CSV, header dropped.
fn history(d: &Accountd, account: &str) -> Vec<String> {
    let out = d.admin(&["history", account, "--csv"]);
    out.ok().lines().skip(1).map(str::to_string).collect()
}

/// The income grants of `project`: the period of each, in ledger order.
fn income_periods(d: &Accountd, project: &str) -> Vec<i64> {
    history(d, project)
        .iter()
        .filter_map(|l| l.split("income for period ").nth(1))
        .map(|p| {
            p.trim_matches(|c: char| !c.is_ascii_digit())
                .parse()
                .unwrap()
        })
        .collect()
}

/// Opens project chem of alice and bob (with `extra` flags), grants it 100
/// credits, and connects as node n1.
async fn chem_of_alice_and_bob(d: &Accountd, extra: &[&str]) -> clients::account::AccountClient {
    let mut args = vec!["project", "create", "chem", "--members", "alice,bob"];
    args.extend(extra);
    d.admin(&args).ok();
    d.admin(&["grant", "chem", "100", "--reason", "allocation"])
        .ok();
    d.client(Role::Node, "n1").await
}

async fn members_spend_and_others_are_refused(b: Backend) {
    let d = b.start().await;
    let mut node = chem_of_alice_and_bob(&d, &["--admin", "carol"]).await;
    let AccountReply::Project(ProjectReply::Charged(r)) = node
        .call(spend("n1", "j1", 1, "chem", "alice", 10 * C))
        .await
        .unwrap()
    else {
        panic!("no receipt")
    };
    assert_eq!(r.balance_after, 90 * C);
    // A repeat is the same charge, not a second one.
    node.call(spend("n1", "j1", 1, "chem", "alice", 10 * C))
        .await
        .unwrap();
    let (code, msg) = refusal(node.call(spend("n1", "j2", 1, "chem", "dave", C)).await);
    assert_eq!(code, ErrorCode::Forbidden);
    assert_eq!(
        msg,
        "dave is not a member of project chem: its admin can add them"
    );
    // A plain debit may not take a project's money past its members.
    let (code, _) = refusal(
        node.call(AccountOp::Debit(debit("n1", "j3", 1, "chem", C)))
            .await,
    );
    assert_eq!(code, ErrorCode::Forbidden);
    // The project's admin adds dave; a member who is not its admin may not.
    d.ctl(Role::User, "bob", &["project", "add-member", "chem", "eve"])
        .fails_with("user:bob may not change the members of \"chem\"");
    d.ctl(
        Role::User,
        "carol",
        &["project", "add-member", "chem", "dave"],
    )
    .ok();
    node.call(spend("n1", "j2", 2, "chem", "dave", 5 * C))
        .await
        .unwrap();
    d.ctl(
        Role::User,
        "carol",
        &["project", "remove-member", "chem", "dave"],
    )
    .ok();
    let (code, _) = refusal(node.call(spend("n1", "j2", 3, "chem", "dave", C)).await);
    assert_eq!(code, ErrorCode::Forbidden);
    // Only admins create projects.
    d.ctl(Role::User, "carol", &["project", "create", "bio"])
        .fails_with("may not");

    // Who spent from which account: the entries, and the reports.
    let h = history(&d, "chem");
    assert_eq!(h.len(), 3, "{h:?}");
    assert!(h[1].contains("spent by alice"), "{h:?}");
    assert!(h[2].contains("spent by dave"), "{h:?}");
    let by_user = d.admin(&["report", "--by", "user", "--csv"]);
    assert_eq!(
        by_user.ok().lines().skip(1).collect::<Vec<_>>(),
        ["alice,10.000000,0.008,1", "dave,5.000000,0.008,1"]
    );
    let by_project = d.admin(&["report", "--by", "project", "--csv"]);
    assert_eq!(
        by_project.ok().lines().skip(1).collect::<Vec<_>>(),
        ["chem,15.000000,0.016,2"]
    );

    // The default project: a job without -A is charged to it.
    let mut ops = d.client(Role::Node, "n1").await;
    let which = |user: &str| {
        AccountOp::Project(ProjectOp::Resolve(WhichAccount {
            user: user.into(),
            project: None,
            burn: false,
        }))
    };
    d.admin(&["create", "alice", "--initial", "3"]).ok();
    let AccountReply::Project(ProjectReply::Account(a)) = ops.call(which("alice")).await.unwrap()
    else {
        panic!()
    };
    assert_eq!((a.project, a.balance), (None, 3 * C));
    d.ctl(
        Role::User,
        "alice",
        &["project", "default", "alice", "chem"],
    )
    .ok();
    d.ctl(Role::User, "bob", &["project", "default", "alice", "none"])
        .fails_with("may not set the default project");
    let AccountReply::Project(ProjectReply::Account(a)) = ops.call(which("alice")).await.unwrap()
    else {
        panic!()
    };
    assert_eq!((a.project.as_deref(), a.balance), (Some("chem"), 85 * C));
    let (code, _) = refusal(
        ops.call(AccountOp::Project(ProjectOp::Resolve(WhichAccount {
            user: "dave".into(),
            project: Some("chem".into()),
            burn: false,
        })))
        .await,
    );
    assert_eq!(code, ErrorCode::Forbidden);
    let audit = d.admin(&["audit"]);
    assert!(audit.ok().starts_with("audit passed"), "{audit:?}");
}

/// The project's ceiling per job: its admin (or an admin) sets and lifts
/// it, a member who is not its admin may not; a member reads its project's
/// balance, 7-day burn and ceiling (what `rexec estimate` shows), a user who
/// is no member reads nothing of it.
#[tokio::test]
async fn a_project_ceiling_is_set_by_its_admin_and_members_read_balance_burn_and_ceiling() {
    let d = Backend::Lite.start().await;
    let mut node = chem_of_alice_and_bob(&d, &["--admin", "carol"]).await;
    node.call(spend("n1", "j1", 1, "chem", "alice", 14 * C))
        .await
        .unwrap();
    d.ctl(
        Role::User,
        "bob",
        &["project", "set", "chem", "--max-cost-per-job", "5"],
    )
    .fails_with("user:bob may not set the spending ceiling of \"chem\"");
    d.ctl(
        Role::User,
        "carol",
        &["project", "set", "chem", "--max-cost-per-job", "5"],
    )
    .ok();
    d.ctl(
        Role::User,
        "carol",
        &["project", "set", "chem", "--max-cost-per-job", "0"],
    )
    .fails_with("");
    let ask = |user: &str, project: Option<&str>| {
        AccountOp::Project(ProjectOp::Resolve(WhichAccount {
            user: user.into(),
            project: project.map(str::to_string),
            burn: true,
        }))
    };
    let mut bob = d.client(Role::User, "bob").await;
    let AccountReply::Project(ProjectReply::Account(a)) =
        bob.call(ask("bob", Some("chem"))).await.unwrap()
    else {
        panic!("no account")
    };
    assert_eq!(a.project.as_deref(), Some("chem"));
    assert_eq!(a.balance, 86 * C);
    assert_eq!(a.max_cost_per_job, Some(5 * C));
    assert_eq!(a.burn_per_day, Some(2 * C), "14 credits over 7 days");
    // The node asks without burn, and learns the ceiling.
    let AccountReply::Project(ProjectReply::Account(a)) =
        node.call(ask("alice", Some("chem"))).await.unwrap()
    else {
        panic!("no account")
    };
    assert_eq!(a.max_cost_per_job, Some(5 * C));
    // No member, no reading; nor another user's.
    let mut dave = d.client(Role::User, "dave").await;
    let (code, msg) = refusal(dave.call(ask("dave", Some("chem"))).await);
    assert_eq!(code, ErrorCode::Forbidden, "{msg}");
    let (code, _) = refusal(dave.call(ask("bob", Some("chem"))).await);
    assert_eq!(code, ErrorCode::Forbidden);
    // An admin lifts it.
    d.admin(&["project", "set", "chem", "--max-cost-per-job", "none"])
        .ok();
    let AccountReply::Project(ProjectReply::Account(a)) =
        bob.call(ask("bob", Some("chem"))).await.unwrap()
    else {
        panic!("no account")
    };
    assert_eq!(a.max_cost_per_job, None);
}

#[tokio::test]
async fn members_spend_from_a_project_and_others_are_refused() {
    members_spend_and_others_are_refused(Backend::Lite).await;
}

#[tokio::test]
async fn members_spend_from_a_project_and_others_are_refused_on_postgres() {
    members_spend_and_others_are_refused(Backend::pg()).await;
}

async fn member_limits(b: Backend) {
    let d = b.start().await;
    let mut node = chem_of_alice_and_bob(&d, &["--member-limit", "alice=15/month"]).await;
    node.call(spend("n1", "j", 1, "chem", "alice", 10 * C))
        .await
        .unwrap();
    let (code, msg) = refusal(node.call(spend("n1", "j", 2, "chem", "alice", 6 * C)).await);
    assert_eq!(code, ErrorCode::Forbidden);
    assert!(
        msg.contains("alice has spent 10 of its 15/month limit"),
        "{msg}"
    );
    node.call(spend("n1", "j", 3, "chem", "alice", 5 * C))
        .await
        .unwrap();
    node.call(spend("n1", "j", 4, "chem", "bob", 50 * C))
        .await
        .unwrap();
    let list = d.admin(&["project", "list"]);
    assert!(
        list.ok()
            .contains("member alice limit 15.000000/month spent 15.000000"),
        "{list:?}"
    );
    // A limit for someone not in --members is refused before anything is created.
    d.admin(&[
        "project",
        "create",
        "bio",
        "--members",
        "alice",
        "--member-limit",
        "zed=1/day",
    ])
    .fails_with("--member-limit names zed, who is not in --members");
    assert!(!d.admin(&["project", "list"]).ok().contains("project bio"));
    d.admin(&["project", "limit", "chem", "alice=none"]).ok();
    node.call(spend("n1", "j", 5, "chem", "alice", 6 * C))
        .await
        .unwrap();
    assert_eq!(history(&d, "chem").len(), 5);
}

#[tokio::test]
async fn member_limits_hold() {
    member_limits(Backend::Lite).await;
}

#[tokio::test]
async fn member_limits_hold_on_postgres() {
    member_limits(Backend::pg()).await;
}

/// Waits until `project` has at least `n` income grants; returns them.
async fn grants_reach(d: &Accountd, project: &str, n: usize) -> Vec<i64> {
    testhost::wait::until_async(Duration::from_secs(30), || {
        let got = income_periods(d, project);
        std::future::ready((got.len() >= n).then_some(got))
    })
    .await
    .unwrap_or_else(|| panic!("fewer than {n} grants: {:?}", income_periods(d, project)))
}

/// Each period granted once, in order, and the periods follow one another.
fn once_each(periods: &[i64]) {
    assert!(
        periods.windows(2).all(|w| w[1] > w[0]),
        "a period granted twice or out of order: {periods:?}"
    );
}

async fn income_across_kill9(b: Backend) {
    let mut d = b.start().await;
    d.admin(&["project", "create", "chem"]).ok();
    d.admin(&["income", "set", "chem", "1", "--every", "1s"])
        .ok();
    for round in 1..=4 {
        // Kill -9 as soon as a new grant shows: the moment of the grant.
        grants_reach(&d, "chem", round).await;
        d.kill9();
        d.spawn(false).await.unwrap();
    }
    let periods = grants_reach(&d, "chem", 5).await;
    once_each(&periods);
    let balance = d.admin(&["balance", "chem"]);
    let want = format!("chem {}.000000\n", income_periods(&d, "chem").len());
    assert_eq!(balance.ok(), want);
    let audit = d.admin(&["audit"]);
    assert!(audit.ok().starts_with("audit passed"), "{audit:?}");
    let listed = d.admin(&["income", "list"]);
    assert_eq!(listed.ok(), "chem 1.000000 every 1s cap none\n");
}

#[tokio::test]
async fn income_is_granted_once_per_period_across_kill9() {
    income_across_kill9(Backend::Lite).await;
}

#[tokio::test]
async fn income_is_granted_once_per_period_across_kill9_on_postgres() {
    income_across_kill9(Backend::pg()).await;
}

async fn income_and_clock(b: Backend) {
    let mut d = b.start().await;
    d.admin(&["project", "create", "chem"]).ok();
    d.admin(&[
        "income", "set", "chem", "600", "--every", "1d", "--cap", "1000",
    ])
    .ok();
    let first = grants_reach(&d, "chem", 1).await;
    let restart = |d: &mut Accountd, shift: i64| {
        d.kill9();
        d.env = vec![(
            accountd::time::CLOCK_SHIFT_ENV.to_string(),
            shift.to_string(),
        )];
    };
    // A restart in the same day grants nothing more.
    restart(&mut d, 0);
    d.spawn(false).await.unwrap();
    let ticked = d.entry_count_any().await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(d.entry_count_any().await, ticked);
    assert_eq!(income_periods(&d, "chem"), first);
    // The clock a day ahead: the next period's grant, cut to the cap.
    restart(&mut d, 86_400);
    d.spawn(false).await.unwrap();
    let two = grants_reach(&d, "chem", 2).await;
    assert_eq!(two, [first[0], first[0] + 1]);
    assert_eq!(d.admin(&["balance", "chem"]).ok(), "chem 1000.000000\n");
    // Back, then ahead again: no period twice.
    restart(&mut d, 0);
    d.spawn(false).await.unwrap();
    restart(&mut d, 86_400);
    d.spawn(false).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(income_periods(&d, "chem"), two);
    let h = history(&d, "chem");
    assert!(h[1].contains(",400.000000,1000.000000,"), "{h:?}");
}

impl Accountd {
    /// The number of entries, through the admin's audit (either backend).
    async fn entry_count_any(&self) -> u64 {
        let mut c = self.client(Role::Admin, "ops").await;
        let AccountReply::Audit(a) = c.call(AccountOp::Audit).await.unwrap() else {
            panic!()
        };
        a.entries
    }
}

#[tokio::test]
async fn income_follows_the_clock_once_per_period_and_up_to_the_cap() {
    income_and_clock(Backend::Lite).await;
}

#[tokio::test]
async fn income_follows_the_clock_once_per_period_and_up_to_the_cap_on_postgres() {
    income_and_clock(Backend::pg()).await;
}

#[tokio::test]
async fn two_accountd_on_one_postgres_grant_each_period_once() {
    let b = Backend::pg();
    let Backend::Pg(pg) = &b else { unreachable!() };
    let one = b.start().await;
    let two = Accountd::start_pg(&pg.conninfo("ledger")).await;
    one.admin(&["project", "create", "chem"]).ok();
    one.admin(&["income", "set", "chem", "1", "--every", "1s"])
        .ok();
    let periods = grants_reach(&two, "chem", 6).await;
    once_each(&periods);
    let rows = pg.psql(
        "ledger",
        "SELECT count(*) = count(DISTINCT seq) FROM entries WHERE node = 'income'",
    );
    assert_eq!(rows, "t");
    // Both granted: each accountd ticks, whichever comes first in a period wins.
    let actors = pg.psql(
        "ledger",
        "SELECT count(*) FROM entries WHERE actor = 'accountd:income'",
    );
    assert!(actors.parse::<usize>().unwrap() >= 6, "{actors}");
    let audit = two.admin(&["audit"]);
    assert!(audit.ok().starts_with("audit passed"), "{audit:?}");
}

#[tokio::test]
async fn the_forecast_shows_burn_and_the_day_the_money_runs_out() {
    let d = Accountd::start().await;
    d.admin(&["project", "create", "chem", "--members", "alice"])
        .ok();
    d.admin(&["project", "create", "idle"]).ok();
    d.admin(&["grant", "chem", "170", "--reason", "allocation"])
        .ok();
    let mut node = d.client(Role::Node, "n1").await;
    for seq in 1..=7 {
        node.call(spend("n1", "j", seq, "chem", "alice", 10 * C))
            .await
            .unwrap();
    }
    let day = |us: i64| accountd::time::format_time(us + 10 * 86_400_000_000)[..10].to_string();
    let before = day(accountd::time::now_us());
    let out = d.admin(&["report", "--forecast", "--csv"]);
    let after = day(accountd::time::now_us());
    let lines: Vec<_> = out.ok().lines().collect();
    assert_eq!(lines[0], "project,balance,burn_per_day,dry_on");
    // 100 left, 70 burnt in 7 days: dry in 10 days (either side of a midnight).
    assert!(
        [before, after]
            .iter()
            .any(|dry| lines[1] == format!("chem,100.000000,10.000000,{dry}")),
        "{lines:?}"
    );
    assert_eq!(lines[2], "idle,0.000000,0.000000,never");
}

#[tokio::test]
async fn migrate_carries_projects_and_income_both_ways() {
    let mut d = Accountd::start().await;
    d.admin(&[
        "project",
        "create",
        "chem",
        "--members",
        "alice",
        "--member-limit",
        "alice=20/week",
    ])
    .ok();
    d.admin(&["income", "set", "chem", "50", "--every", "30d"])
        .ok();
    grants_reach(&d, "chem", 1).await;
    d.admin(&["project", "default", "alice", "chem"]).ok();
    d.terminate().await;
    let pg = Postgres::with_database("ledger");
    let lite = d.dir.path().join("lite.toml");
    std::fs::write(&lite, format!("database = {:?}\n", d.db)).unwrap();
    let pgconf = d.dir.path().join("pg-ledger.toml");
    std::fs::write(
        &pgconf,
        format!("[store]\npostgres = \"{}\"\n", pg.conninfo("ledger")),
    )
    .unwrap();
    let migrate = |from: &std::path::Path, to: &std::path::Path| {
        let out = isolated_ctl(d.dir.path())
            .args(["migrate", "--from"])
            .arg(from)
            .arg("--to")
            .arg(to)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let text = migrate(&lite, &pgconf);
    assert!(text.contains(", 2 project records;"), "{text}");
    let on_pg = Accountd::start_pg(&pg.conninfo("ledger")).await;
    let want = "project chem balance 50.000000 admin -\n  member alice limit 20.000000/week spent 0.000000\n";
    assert_eq!(on_pg.admin(&["project", "list"]).ok(), want);
    assert_eq!(
        on_pg.admin(&["income", "list"]).ok(),
        "chem 50.000000 every 30d cap none\n"
    );
    drop(on_pg);
    // And back into a new SQLite file.
    let back = d.dir.path().join("back.db");
    let back_conf = d.dir.path().join("back.toml");
    std::fs::write(&back_conf, format!("database = {back:?}\n")).unwrap();
    let text = migrate(&pgconf, &back_conf);
    assert!(text.contains(", 2 project records;"), "{text}");
    let docs: i64 = rusqlite::Connection::open(&back)
        .unwrap()
        .query_row("SELECT count(*) FROM project_docs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(docs, 2);
}

#[tokio::test]
async fn a_ledger_from_before_projects_keeps_working() {
    let mut d = Accountd::start().await;
    d.admin(&["create", "alice", "--initial", "10"]).ok();
    d.terminate().await;
    // The ledger as an accountd before projects left it: no project table.
    rusqlite::Connection::open(&d.db)
        .unwrap()
        .execute_batch("DROP TABLE project_docs;")
        .unwrap();
    d.spawn(false).await.unwrap();
    assert_eq!(d.admin(&["balance", "alice"]).ok(), "alice 10.000000\n");
    let mut node = d.client(Role::Node, "n1").await;
    node.call(AccountOp::Debit(debit("n1", "j", 1, "alice", C)))
        .await
        .unwrap();
    d.admin(&["project", "create", "chem", "--members", "alice"])
        .ok();
    assert!(d.admin(&["audit"]).ok().starts_with("audit passed"));
}
