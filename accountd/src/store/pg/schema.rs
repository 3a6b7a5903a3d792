//! The PostgreSQL schema of the ledger, the same tables and rules as
//! SQLite's ([`crate::store::schema`]): `accounts` with running balances, the
//! append-only `entries` (a trigger refuses updates and deletes) with a
//! `UNIQUE` debit key, `refusals`, the append-only `claims` and `rank_ends`,
//! `meta` with the schema version, and `head`, the one row every write transaction locks
//! first (it holds the last entry id; see [`super`]).
//!
//! Created or migrated on start inside one transaction under an advisory
//! lock, so several accountd starting together do not race. Additive tables
//! (`rank_ends`, added after version 1 was released) come with the
//! `CREATE ... IF NOT EXISTS` on the first start of a newer accountd and keep
//! the version: an older accountd still opens the database, ignores the table
//! and answers `RankEnd` with `Unsupported`. A database
//! whose version is newer than this accountd's is refused in one line.

use postgres::Client;

use crate::store::StoreError;

/// Version stored in `meta.schema_version`.
pub const SCHEMA_VERSION: i64 = 1;

/// Advisory lock key taken while the schema is created or checked.
const SCHEMA_LOCK: i64 = 0x7265_7865_635f_6c64;

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS meta(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS accounts(
    "user" TEXT PRIMARY KEY,
    balance BIGINT NOT NULL,
    created_us BIGINT NOT NULL,
    created_by TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS head(
    one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    last_id BIGINT NOT NULL
);
INSERT INTO head(one, last_id) VALUES (TRUE, 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS entries(
    id BIGINT PRIMARY KEY,
    at_us BIGINT NOT NULL,
    "user" TEXT NOT NULL REFERENCES accounts("user"),
    amount BIGINT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('grant', 'adjust', 'debit', 'refund')),
    node TEXT,
    job TEXT,
    seq BIGINT,
    rank BIGINT,
    interval_start_us BIGINT,
    interval_end_us BIGINT,
    cpu_us BIGINT,
    idem_key TEXT UNIQUE,
    actor TEXT NOT NULL,
    reason TEXT,
    balance_after BIGINT NOT NULL,
    hash BYTEA NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_user ON entries("user", id);
CREATE OR REPLACE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION '% are append-only', TG_ARGV[0]; END $$;
CREATE OR REPLACE TRIGGER entries_append_only BEFORE UPDATE OR DELETE ON entries
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only('ledger entries');
CREATE TABLE IF NOT EXISTS refusals(
    id BIGSERIAL PRIMARY KEY,
    at_us BIGINT NOT NULL,
    role TEXT NOT NULL,
    name TEXT NOT NULL,
    op TEXT NOT NULL,
    code TEXT NOT NULL,
    message TEXT NOT NULL,
    count BIGINT NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS project_docs(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"#;

/// The append-only tables of batch ranks, `claims` and `rank_ends`: one key
/// (user, job, attempt, rank), the node and the spec's digest; a rank's end
/// holds the width of its attempt too. Each refuses updates and deletes.
fn claim_tables() -> String {
    let table = |name: &str, width: &str, what: &str| {
        format!(
            r#"CREATE TABLE IF NOT EXISTS {name}(
    "user" TEXT NOT NULL,
    job TEXT NOT NULL,
    attempt BIGINT NOT NULL,
    rank BIGINT NOT NULL,
    node TEXT NOT NULL,
    digest BYTEA NOT NULL,{width}
    at_us BIGINT NOT NULL,
    PRIMARY KEY ("user", job, attempt, rank)
);
CREATE OR REPLACE TRIGGER {name}_append_only BEFORE UPDATE OR DELETE ON {name}
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only('{what}');
"#
        )
    };
    table("claims", "", "batch claims")
        + &table(
            "rank_ends",
            "\n    width BIGINT NOT NULL,",
            "batch rank ends",
        )
}

fn sql(e: postgres::Error) -> StoreError {
    StoreError::Postgres(format!(
        "preparing the ledger schema: {}",
        super::link::describe(&e)
    ))
}

/// Checks the database's ledger schema, creating it when there is none and
/// `create` is set; a newer version than [`SCHEMA_VERSION`] is refused.
pub fn prepare(client: &mut Client, create: bool) -> Result<(), StoreError> {
    let mut tx = client.transaction().map_err(sql)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .map_err(sql)?;
    let has_meta: bool = tx
        .query_one("SELECT to_regclass('meta') IS NOT NULL", &[])
        .and_then(|r| r.try_get(0))
        .map_err(sql)?;
    let version: Option<String> = if has_meta {
        tx.query_opt("SELECT value FROM meta WHERE key = 'schema_version'", &[])
            .map_err(sql)?
            .map(|r| r.try_get(0))
            .transpose()
            .map_err(sql)?
    } else {
        None
    };
    match &version {
        None if !create => {
            return Err(StoreError::Postgres(
                "the PostgreSQL database holds no accountd ledger: check [store] postgres, or pass --init to create one"
                    .into(),
            ));
        }
        Some(v) if v.parse::<i64>().map_or(true, |v| v > SCHEMA_VERSION) => {
            return Err(StoreError::Postgres(format!(
                "the PostgreSQL ledger has schema version {v}, newer than this accountd's {SCHEMA_VERSION}: run a newer accountd"
            )));
        }
        _ => {}
    }
    tx.batch_execute(&format!("{SCHEMA}{}", claim_tables()))
        .map_err(sql)?;
    tx.execute(
        "INSERT INTO meta(key, value) VALUES ('schema_version', $1)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        &[&SCHEMA_VERSION.to_string()],
    )
    .map_err(sql)?;
    tx.commit().map_err(sql)
}
