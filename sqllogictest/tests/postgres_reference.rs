//! The differential test against a real PostgreSQL 15: every statement of
//! `reference/*.sql` runs on a throwaway Postgres server and on a fresh eddy, over the simple
//! protocol (text values, command tags, SQLSTATEs) and, for queries, over the extended
//! protocol too (type OIDs and the binary bytes of every value). Any difference fails the test,
//! listing every statement that differed.
//!
//! Needs Debian's postgresql-15 (`scripts/install-clients.sh` installs it); skips without it
//! unless `EDDY_REQUIRE_CLIENTS=1` (as under `scripts/test.sh`).

mod common;

use std::error::Error;
use std::path::Path;

use eddy_sqllogictest::postgres::{bin_dir, PostgresServer};
use eddy_sqllogictest::EddyProcess;
use tokio_postgres::types::{FromSql, Type};
use tokio_postgres::{Client, SimpleQueryMessage};

/// What one statement gave over the simple protocol.
#[derive(Debug, PartialEq)]
enum Answer {
    Rows {
        columns: Vec<String>,
        rows: Vec<Vec<Option<String>>>,
    },
    Command(u64),
    Error(String),
}

async fn simple(client: &Client, sql: &str) -> Vec<Answer> {
    match client.simple_query(sql).await {
        Err(e) => vec![Answer::Error(sqlstate(&e))],
        Ok(messages) => {
            let mut answers = Vec::new();
            let mut rows = Vec::new();
            let mut columns = Vec::new();
            for message in messages {
                match message {
                    SimpleQueryMessage::RowDescription(description) => {
                        columns = description.iter().map(|c| c.name().to_string()).collect();
                    }
                    SimpleQueryMessage::Row(row) => rows.push(
                        (0..row.len())
                            .map(|i| row.get(i).map(str::to_string))
                            .collect(),
                    ),
                    SimpleQueryMessage::CommandComplete(n) => {
                        if columns.is_empty() && rows.is_empty() {
                            answers.push(Answer::Command(n));
                        } else {
                            answers.push(Answer::Rows {
                                columns: std::mem::take(&mut columns),
                                rows: std::mem::take(&mut rows),
                            });
                        }
                    }
                    _ => {}
                }
            }
            answers
        }
    }
}

fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.code()
        .map(|c| c.code().to_string())
        .unwrap_or_else(|| format!("no SQLSTATE: {e}"))
}

/// A value's bytes as the server sent them (binary format).
struct Raw(Option<Vec<u8>>);

impl<'a> FromSql<'a> for Raw {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn Error + Sync + Send>> {
        Ok(Raw(Some(raw.to_vec())))
    }

    fn from_sql_null(_: &Type) -> Result<Self, Box<dyn Error + Sync + Send>> {
        Ok(Raw(None))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// Type names and binary values of a query over the extended protocol.
async fn extended(
    client: &Client,
    sql: &str,
) -> Result<(Vec<String>, Vec<Vec<Option<Vec<u8>>>>), String> {
    let statement = client.prepare(sql).await.map_err(|e| sqlstate(&e))?;
    let types = statement
        .columns()
        .iter()
        .map(|c| c.type_().name().to_string())
        .collect();
    let rows = client
        .query(&statement, &[])
        .await
        .map_err(|e| sqlstate(&e))?;
    let values = rows
        .iter()
        .map(|row| (0..row.len()).map(|i| row.get::<_, Raw>(i).0).collect())
        .collect();
    Ok((types, values))
}

/// The statements of a reference file: one per line, `--` comments and blank lines skipped.
fn statements(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("--"))
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn same_answers_as_postgres_15() {
    let Some(bin_dir) = common::require("PostgreSQL 15 (postgresql-15)", bin_dir()) else {
        return;
    };
    let postgres = PostgresServer::start(&bin_dir).expect("start the reference PostgreSQL");
    let reference = postgres.connect().await.expect("connect to PostgreSQL");
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (client, _connection) = eddy.connect().await.expect("connect to eddy");

    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("reference");
    let mut files: Vec<_> = std::fs::read_dir(&folder)
        .expect("list reference/")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "sql"))
        .collect();
    files.sort();
    let mut differences = Vec::new();
    let mut compared = 0;
    for file in &files {
        for sql in statements(file) {
            compared += 1;
            let expected = simple(&reference, &sql).await;
            let actual = simple(&client, &sql).await;
            if expected != actual {
                differences.push(format!(
                    "{sql}\n    postgres: {expected:?}\n    eddy:     {actual:?}"
                ));
                continue;
            }
            let is_query = sql.to_ascii_uppercase().starts_with("SELECT");
            if is_query && !matches!(expected.first(), Some(Answer::Error(_))) {
                let expected = extended(&reference, &sql).await;
                let actual = extended(&client, &sql).await;
                if expected != actual {
                    differences.push(format!(
                        "{sql} (extended protocol, binary)\n    postgres: {expected:?}\n    eddy:     {actual:?}"
                    ));
                }
            }
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {compared} statements differ from PostgreSQL 15:\n{}\n{}",
        differences.len(),
        differences.join("\n"),
        eddy.log_tail(20)
    );
    println!("{compared} statements: same answers as PostgreSQL 15");
}
