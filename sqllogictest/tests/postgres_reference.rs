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

    let folder = common::manifest_dir().join("reference");
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

/// `COPY ... TO STDOUT` as bytes, or the SQLSTATE it failed with.
async fn copy_out(client: &Client, sql: &str) -> Result<Vec<u8>, String> {
    use futures::{pin_mut, TryStreamExt};
    let stream = client.copy_out(sql).await.map_err(|e| sqlstate(&e))?;
    pin_mut!(stream);
    let mut out = Vec::new();
    while let Some(chunk) = stream.try_next().await.map_err(|e| sqlstate(&e))? {
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// COPY's text and CSV forms are the same values a query prints: Postgres' text of
/// timestamps, floats, numerics, intervals and bytea, with COPY's own quoting and escapes.
#[tokio::test]
async fn copy_to_stdout_writes_what_postgres_15_writes() {
    let Some(bin_dir) = common::require("PostgreSQL 15 (postgresql-15)", bin_dir()) else {
        return;
    };
    let postgres = PostgresServer::start(&bin_dir).expect("start the reference PostgreSQL");
    let reference = postgres.connect().await.expect("connect to PostgreSQL");
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (client, _connection) = eddy.connect().await.expect("connect to eddy");
    // 1e15 from text: a decimal literal reaches a float column through Arrow's decimal-to-float
    // cast, which makes it 999999999999999.9 (a gap of its own, listed in the README).
    let setup = "CREATE TABLE copy_t (id INT, at TIMESTAMP, score DOUBLE PRECISION, body TEXT); \
                 INSERT INTO copy_t VALUES (1, '2026-01-01 00:00:00', 21, 'plain'); \
                 INSERT INTO copy_t VALUES (2, '2026-01-01 12:00:00.5', CAST('1e15' AS DOUBLE PRECISION), 'a \"quoted\", comma'); \
                 INSERT INTO copy_t VALUES (3, NULL, 0.1, 'tab\there'); \
                 INSERT INTO copy_t VALUES (4, '2026-03-01 00:00:01', NULL, NULL)";
    reference
        .batch_execute(setup)
        .await
        .expect("setup on postgres");
    client.batch_execute(setup).await.expect("setup on eddy");
    let values = "SELECT 1 AS id, TIMESTAMP '2026-01-01 00:00:00' AS ts, \
                  CAST(21.0 AS DOUBLE PRECISION) AS f, CAST(2.5 AS REAL) AS r, 1.50 AS n, \
                  INTERVAL '1 day 02:03:04' AS iv, '\\xdeadbeef'::bytea AS b, \
                  TIME '12:00:00.5' AS t, DATE '2026-01-02' AS d, true AS yes";
    let json = "SELECT '{\"b\": 1, \"a\": [1, 2]}'::jsonb AS j, '{\"b\":1}'::json AS raw, \
                'x'::varchar(3) AS v";
    let statements = [
        "COPY copy_t TO STDOUT".to_string(),
        "COPY (SELECT * FROM copy_t ORDER BY id) TO STDOUT".to_string(),
        "COPY (SELECT * FROM copy_t ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER)".to_string(),
        "COPY (SELECT id, score FROM copy_t ORDER BY id) TO STDOUT WITH (FORMAT csv, DELIMITER ';', NULL 'none')".to_string(),
        "COPY (SELECT at, body FROM copy_t ORDER BY id) TO STDOUT WITH (DELIMITER '|')".to_string(),
        format!("COPY ({values}) TO STDOUT"),
        format!("COPY ({values}) TO STDOUT WITH CSV"),
        // jsonb as jsonb prints it (and in binary with its version byte), varchar as text.
        format!("COPY ({json}) TO STDOUT"),
        format!("COPY ({json}) TO STDOUT WITH CSV"),
        format!("COPY ({json}) TO STDOUT WITH (FORMAT binary)"),
    ];
    let mut differences = Vec::new();
    for sql in &statements {
        let mut expected = copy_out(&reference, sql).await;
        let mut actual = copy_out(&client, sql).await;
        // A table's rows come in no particular order: compare them sorted.
        if !sql.contains("ORDER BY") && !sql.contains("SELECT 1") {
            for out in [&mut expected, &mut actual].into_iter().flatten() {
                let mut lines: Vec<&[u8]> = out.split(|b| *b == b'\n').collect();
                lines.sort();
                *out = lines.join(&b'\n');
            }
        }
        if expected != actual {
            let show = |r: &Result<Vec<u8>, String>| match r {
                Ok(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                Err(code) => format!("error {code}"),
            };
            differences.push(format!(
                "{sql}\n    postgres: {:?}\n    eddy:     {:?}",
                show(&expected),
                show(&actual)
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "COPY output differs from PostgreSQL 15:\n{}",
        differences.join("\n")
    );
}
