//! The queue's canonical dump: every row of every table ([`TABLES`]), each
//! value typed the same way on both backends ([`Val`]) and the rows of each
//! table sorted, so that two stores hold the same queue exactly when their
//! dumps are equal, whichever backend each is on. [`Tables`] is what a
//! backend offers for it: reading a table whole and writing tables in one
//! transaction (what [`super::migrate`] copies with).

use postgres::types::ToSql;

use super::StoreError;

/// A column's type (SQLite `INTEGER`/`TEXT`/`BLOB`, PostgreSQL
/// `BIGINT`/`TEXT`/`BYTEA`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// An integer.
    Int,
    /// Text.
    Text,
    /// Bytes.
    Blob,
}

/// One value of a row.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Val {
    /// NULL.
    Null,
    /// An integer.
    Int(i64),
    /// Text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

/// A table and its columns, as both backends have it.
#[derive(Debug)]
pub struct Table {
    /// Its name.
    pub name: &'static str,
    /// Its columns, in the dump's order.
    pub cols: &'static [(&'static str, Ty)],
}

use Ty::{Blob, Int, Text};

/// Every table of the queue.
pub const TABLES: &[Table] = &[
    Table {
        name: "meta",
        cols: &[("key", Text), ("value", Text)],
    },
    Table {
        name: "arrays",
        cols: &[
            ("id", Int),
            ("user", Text),
            ("signed", Blob),
            ("submitted_ms", Int),
            ("first_seq", Int),
            ("count", Int),
        ],
    },
    Table {
        name: "jobs",
        cols: &[
            ("seq", Int),
            ("id", Int),
            ("user", Text),
            ("signed", Blob),
            ("submitted_ms", Int),
            ("state", Int),
            ("attempts", Int),
            ("started_ms", Int),
            ("ended_ms", Int),
            ("nodes", Text),
            ("charged", Int),
            ("charge_seq", Int),
            ("done_ms", Int),
            ("exit", Blob),
            ("reason", Text),
            ("truncated", Int),
        ],
    },
    Table {
        name: "output",
        cols: &[
            ("job", Int),
            ("stream", Int),
            ("offset", Int),
            ("data", Blob),
        ],
    },
    Table {
        name: "debits",
        cols: &[
            ("job", Int),
            ("seq", Int),
            ("user", Text),
            ("amount", Int),
            ("start_us", Int),
            ("end_us", Int),
            ("refused", Text),
            ("account", Text),
        ],
    },
    Table {
        name: "job_payer",
        cols: &[("job", Int), ("account", Text), ("max_cost", Int)],
    },
    Table {
        name: "rank_usage",
        cols: &[
            ("job", Int),
            ("attempt", Int),
            ("rank", Int),
            ("node", Text),
            ("cpu_nanos", Int),
            ("peak_memory", Int),
            ("ended_ms", Int),
        ],
    },
];

impl Table {
    /// The quoted column list (quoted: `user` and `offset` are keywords in PostgreSQL).
    fn columns(&self) -> String {
        let cols: Vec<String> = self.cols.iter().map(|(c, _)| format!("\"{c}\"")).collect();
        cols.join(", ")
    }

    fn select(&self) -> String {
        format!("SELECT {} FROM {}", self.columns(), self.name)
    }
}

/// The rows of one table.
pub type Rows = Vec<Vec<Val>>;

/// Every table's rows, each table's sorted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dump(pub Vec<(&'static str, Rows)>);

impl Dump {
    /// The rows of `table`.
    pub fn rows(&self, table: &str) -> &[Vec<Val>] {
        self.0
            .iter()
            .find(|(n, _)| *n == table)
            .map_or(&[], |(_, r)| r.as_slice())
    }

    /// Where `self` and `other` first differ, `None` when equal.
    pub fn first_difference(&self, other: &Dump) -> Option<String> {
        for ((name, a), (_, b)) in self.0.iter().zip(&other.0) {
            if let Some(i) = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i)) {
                return Some(format!(
                    "table {name} ({} rows against {}), row {i}: {:?} against {:?}",
                    a.len(),
                    b.len(),
                    a.get(i),
                    b.get(i)
                ));
            }
        }
        None
    }
}

/// What a backend offers the dump and the migration.
pub trait Tables {
    /// Every row of `t`, in any order.
    fn read(&mut self, t: &Table) -> Result<Rows, StoreError>;

    /// In one transaction: replaces `meta` and adds the rows of each table.
    fn write(&mut self, tables: &[(&Table, &Rows)]) -> Result<(), StoreError>;

    /// The canonical dump.
    fn dump(&mut self) -> Result<Dump, StoreError> {
        let mut out = Vec::with_capacity(TABLES.len());
        for t in TABLES {
            let mut rows = self.read(t)?;
            rows.sort_unstable();
            out.push((t.name, rows));
        }
        Ok(Dump(out))
    }
}

/// A SQLite queue file.
pub struct LiteTables(pub rusqlite::Connection);

impl LiteTables {
    fn sql(e: rusqlite::Error) -> StoreError {
        StoreError::Commit(e.to_string())
    }
}

impl Tables for LiteTables {
    fn read(&mut self, t: &Table) -> Result<Rows, StoreError> {
        use rusqlite::types::ValueRef;
        let mut stmt = self.0.prepare(&t.select()).map_err(Self::sql)?;
        let mut rows = stmt.query([]).map_err(Self::sql)?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(Self::sql)? {
            let mut row = Vec::with_capacity(t.cols.len());
            for i in 0..t.cols.len() {
                row.push(match r.get_ref(i).map_err(Self::sql)? {
                    ValueRef::Null => Val::Null,
                    ValueRef::Integer(n) => Val::Int(n),
                    ValueRef::Text(s) => Val::Text(String::from_utf8_lossy(s).into_owned()),
                    ValueRef::Blob(b) => Val::Blob(b.to_vec()),
                    ValueRef::Real(x) => {
                        return Err(StoreError::Corrupt {
                            store: "(SQLite)".into(),
                            detail: format!("{}.{} holds a real number {x}", t.name, t.cols[i].0),
                        });
                    }
                });
            }
            out.push(row);
        }
        Ok(out)
    }

    fn write(&mut self, tables: &[(&Table, &Rows)]) -> Result<(), StoreError> {
        use rusqlite::types::Value;
        let tx = self.0.transaction().map_err(Self::sql)?;
        tx.execute("DELETE FROM meta", []).map_err(Self::sql)?;
        for (t, rows) in tables {
            let marks = vec!["?"; t.cols.len()].join(", ");
            let sql = format!("INSERT INTO {}({}) VALUES ({marks})", t.name, t.columns());
            let mut stmt = tx.prepare(&sql).map_err(Self::sql)?;
            for row in rows.iter() {
                let values = row.iter().map(|v| match v {
                    Val::Null => Value::Null,
                    Val::Int(n) => Value::Integer(*n),
                    Val::Text(s) => Value::Text(s.clone()),
                    Val::Blob(b) => Value::Blob(b.clone()),
                });
                stmt.execute(rusqlite::params_from_iter(values))
                    .map_err(Self::sql)?;
            }
        }
        tx.commit().map_err(Self::sql)
    }
}

/// A PostgreSQL queue database.
pub struct PgTables(pub postgres::Client);

/// Rows per `INSERT` when copying into PostgreSQL.
const PG_CHUNK: usize = 10_000;

fn pg(e: postgres::Error) -> StoreError {
    super::pg::pg_error(&e)
}

impl Tables for PgTables {
    fn read(&mut self, t: &Table) -> Result<Rows, StoreError> {
        let rows = self.0.query(&t.select(), &[]).map_err(pg)?;
        Ok(rows
            .iter()
            .map(|r| {
                t.cols
                    .iter()
                    .enumerate()
                    .map(|(i, (_, ty))| {
                        let v = match ty {
                            Int => r.get::<_, Option<i64>>(i).map(Val::Int),
                            Text => r.get::<_, Option<String>>(i).map(Val::Text),
                            Blob => r.get::<_, Option<Vec<u8>>>(i).map(Val::Blob),
                        };
                        v.unwrap_or(Val::Null)
                    })
                    .collect()
            })
            .collect())
    }

    fn write(&mut self, tables: &[(&Table, &Rows)]) -> Result<(), StoreError> {
        let mut tx = self.0.transaction().map_err(pg)?;
        tx.batch_execute("DELETE FROM meta").map_err(pg)?;
        for (t, rows) in tables {
            // One array parameter per column: the chunk's rows in one statement.
            let casts: Vec<String> = t
                .cols
                .iter()
                .enumerate()
                .map(|(i, (_, ty))| {
                    let ty = match ty {
                        Int => "BIGINT",
                        Text => "TEXT",
                        Blob => "BYTEA",
                    };
                    format!("${}::{ty}[]", i + 1)
                })
                .collect();
            let sql = format!(
                "INSERT INTO {}({}) SELECT * FROM unnest({})",
                t.name,
                t.columns(),
                casts.join(", ")
            );
            for chunk in rows.chunks(PG_CHUNK) {
                let params: Vec<Box<dyn ToSql + Sync>> = t
                    .cols
                    .iter()
                    .enumerate()
                    .map(|(i, (_, ty))| -> Box<dyn ToSql + Sync> {
                        let col = chunk.iter().map(|row| &row[i]);
                        match ty {
                            Int => Box::new(
                                col.map(|v| match v {
                                    Val::Int(x) => Some(*x),
                                    _ => None,
                                })
                                .collect::<Vec<_>>(),
                            ),
                            Text => Box::new(
                                col.map(|v| match v {
                                    Val::Text(x) => Some(x.clone()),
                                    _ => None,
                                })
                                .collect::<Vec<_>>(),
                            ),
                            Blob => Box::new(
                                col.map(|v| match v {
                                    Val::Blob(x) => Some(x.clone()),
                                    _ => None,
                                })
                                .collect::<Vec<_>>(),
                            ),
                        }
                    })
                    .collect();
                let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
                tx.execute(&sql, &refs).map_err(pg)?;
            }
        }
        tx.commit().map_err(pg)
    }
}
