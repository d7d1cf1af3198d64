//! Mutated SQL: the statements of the `.slt` suites, run file by file in their order (so the
//! tables and views they need exist), some of them mutated: numbers and strings replaced by
//! extreme values, tokens swapped, dropped or repeated, expressions nested deeply, window and
//! interval arguments made extreme, broken statements nested deeply
//! ([`crate::grammar_mutations`]). Errors are expected; an internal error (XX000), a panic, a
//! dead server or a statement that holds up another connection's `SELECT 1` for more than a
//! second ([`crate::freeze`]) is not.

use std::path::Path;
use std::time::Duration;

use eddy_sqllogictest::EddyProcess;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

use crate::freeze::FreezeWatch;
use crate::Report;

/// The statements of every `.slt` file under `dir`, one list per file, in order.
pub fn corpus(dir: &Path) -> anyhow::Result<Vec<(String, Vec<String>)>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "slt") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut corpus = Vec::new();
    for file in files {
        let records = sqllogictest::parse_file::<sqllogictest::DefaultColumnType>(&file)?;
        let statements: Vec<String> = records
            .into_iter()
            .filter_map(|record| match record {
                sqllogictest::Record::Statement { sql, .. }
                | sqllogictest::Record::Query { sql, .. } => Some(sql),
                _ => None,
            })
            .collect();
        let name = file
            .strip_prefix(dir)
            .unwrap_or(&file)
            .display()
            .to_string();
        corpus.push((name, statements));
    }
    Ok(corpus)
}

/// Runs files of the corpus until `statements` statements ran.
pub async fn run(
    eddy: &mut EddyProcess,
    corpus: &[(String, Vec<String>)],
    seed: u64,
    statements: u64,
) -> Report {
    let mut report = Report::new("sql", seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut files_run = 0u64;
    let watch = FreezeWatch::start(eddy.pg_config());
    while report.cases < statements && !corpus.is_empty() {
        let (file, sqls) = &corpus[rng.random_range(0..corpus.len())];
        let file_seed: u64 = rng.random();
        if let Err(error) = run_file(eddy, file, sqls, file_seed, &mut report, &watch).await {
            report.fail(format!("sql file {file} seed {file_seed}: {error}"));
        }
        files_run += 1;
        if !eddy.is_running() {
            report.deaths += 1;
            report.fail(format!(
                "the server died during sql file {file} seed {file_seed}\n{}",
                eddy.log_tail(20)
            ));
            watch.pause(true);
            let restarted = eddy.restart().await;
            watch.pause(false);
            if restarted.is_err() {
                break;
            }
        }
        // A data directory of objects left over by mutated DROPs grows: start afresh now
        // and then.
        if files_run.is_multiple_of(200) {
            watch.pause(true);
            let _ = eddy.restart().await;
            watch.pause(false);
            if let Ok((client, _driver)) = eddy.connect().await {
                drop_everything(&client).await;
            }
        }
    }
    let (freezes, probes) = watch.finish().await;
    report.probes += probes;
    report.freezes += freezes.len() as u64;
    for freeze in freezes {
        report.fail(freeze);
    }
    report
}

async fn run_file(
    eddy: &EddyProcess,
    file: &str,
    sqls: &[String],
    seed: u64,
    report: &mut Report,
    watch: &FreezeWatch,
) -> anyhow::Result<()> {
    let (client, _driver) = eddy.connect().await?;
    client.batch_execute("SET statement_timeout = '1s'").await?;
    for (index, sql) in mutated_file(sqls, seed).into_iter().enumerate() {
        report.cases += 1;
        watch.running(|| {
            format!(
                "sql file {file} seed {seed} statement {index}: {}",
                shorten(&sql)
            )
        });
        let outcome =
            tokio::time::timeout(Duration::from_secs(30), client.simple_query(&sql)).await;
        match outcome {
            Err(_) => report.fail(format!(
                "sql file {file} seed {seed} statement {index}: no answer in 30 s: {}",
                shorten(&sql)
            )),
            Ok(Ok(_)) => report.code("00000", "", String::new),
            Ok(Err(error)) => match error.as_db_error() {
                Some(db) => report.code(db.code().code(), db.message(), || {
                    format!(
                        "sql file {file} seed {seed} statement {index}: {}",
                        shorten(&sql)
                    )
                }),
                None if client.is_closed() => {
                    report.fail(format!(
                        "sql file {file} seed {seed} statement {index}: connection lost ({error}): {}",
                        shorten(&sql)
                    ));
                    return Ok(());
                }
                None => report.code("client", &error.to_string(), String::new),
            },
        }
    }
    drop_everything(&client).await;
    Ok(())
}

/// The statements of a file as the run with `seed` sends them (about a third mutated).
pub fn mutated_file(sqls: &[String], seed: u64) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    sqls.iter()
        .map(|sql| {
            if rng.random_bool(0.35) {
                mutate(&mut rng, sql)
            } else {
                sql.clone()
            }
        })
        .collect()
}

/// Drops every view, source and table (views first, those read by others last), so that the
/// next file starts from an empty catalog.
async fn drop_everything(client: &tokio_postgres::Client) {
    for _ in 0..5 {
        let mut left = 0;
        for (show, drop) in [
            ("SHOW MATERIALIZED VIEWS", "DROP MATERIALIZED VIEW"),
            ("SHOW TABLES", "DROP TABLE"),
            ("SHOW SOURCES", "DROP SOURCE"),
        ] {
            let Ok(rows) = client.query(show, &[]).await else {
                continue;
            };
            for row in rows {
                let name: String = row.get(0);
                left += 1;
                let _ = client
                    .simple_query(&format!("{drop} \"{}\"", name.replace('"', "\"\"")))
                    .await;
            }
        }
        if left == 0 {
            return;
        }
    }
}

const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "2147483648",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    "1e308",
    "-1e308",
    "8e18",
    "1e-300",
    "99999999999999999999999999999999999999",
    "0.000000000000000000000000000000000001",
    "1000000000",
];

const STRINGS: &[&str] = &[
    "''",
    "'x'",
    "'NaN'",
    "'infinity'",
    "'2024-13-45 25:61:61'",
    "'9999-12-31 23:59:59.999999'",
    "'0001-01-01 00:00:00'",
    "'1 day 99999999 hours'",
    "'{\"a\": [1, 2, {\"b\": null}]}'",
    "E'\\\\x00'",
    "'%'",
    "'\u{1F600}'",
];

/// Expressions that used to take the server down, put where a number was.
const DANGEROUS: &[&str] = &[
    "CAST(8e18 AS NUMERIC)",
    "CAST(1e38 AS NUMERIC)",
    "cardinality(array_repeat(1, 1000000000))",
    "length(repeat('x', 1000000000))",
    "length(lpad('x', 2000000000))",
    "cardinality(range(0, 10000000000))",
    "(SELECT count(*) FROM generate_series(1, 1000000))",
    "length(repeat('ab', 100000) || repeat('cd', 100000))",
    "9223372036854775807 + 1",
    "-9223372036854775808 / -1",
    "1 / 0",
    "CAST('x' AS INT)",
    "to_timestamp(1e18)",
    "TIMESTAMP '294277-01-01 00:00:00'",
    "INTERVAL '99999999 years'",
];

const INSERTS: &[&str] = &[
    "(",
    ")",
    ",",
    "NULL",
    "-",
    "::BIGINT",
    "::NUMERIC",
    "::TIMESTAMP",
    "::TEXT",
    "* 2",
    "/ 0",
    "|| 'x'",
    "OR TRUE",
    "AND NULL",
    "DISTINCT",
    "GROUP BY 1",
    "ORDER BY 1",
    "LIMIT 0",
    "UNION ALL SELECT 1",
    "CROSS JOIN (SELECT 1)",
    "WHERE",
    "SELECT",
    "EMIT ON WINDOW CLOSE",
    "INTERVAL '1' SECOND",
];

/// One statement, changed at a few places.
pub fn mutate(rng: &mut StdRng, sql: &str) -> String {
    let Ok(mut tokens) = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize() else {
        return sql.to_string();
    };
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i], Token::Whitespace(_)))
        .collect();
    if significant.is_empty() {
        return sql.to_string();
    }
    let mut extra: Vec<(usize, String)> = Vec::new();
    for _ in 0..rng.random_range(1..4) {
        let at = significant[rng.random_range(0..significant.len())];
        match rng.random_range(0..13) {
            10 | 11 => {
                if !crate::grammar_mutations::mutate_interval(rng, &mut tokens) {
                    extra.push((at, "INTERVAL '1' MICROSECOND".into()));
                }
            }
            12 => {
                let (opening, closing) = crate::grammar_mutations::broken_nesting(rng);
                extra.push((at, opening));
                let close = significant[rng.random_range(0..significant.len())].max(at);
                extra.push((close + 1, closing));
            }
            8 => {
                let numbers: Vec<usize> = significant
                    .iter()
                    .copied()
                    .filter(|&i| matches!(tokens[i], Token::Number(..)))
                    .collect();
                if let Some(&i) = numbers.get(rng.random_range(0..numbers.len().max(1))) {
                    extra.push((
                        i,
                        format!("({})", DANGEROUS[rng.random_range(0..DANGEROUS.len())]),
                    ));
                    tokens[i] = Token::Whitespace(sqlparser::tokenizer::Whitespace::Space);
                }
            }
            9 => {
                // A long chain of operators: within the depth limit, or far over it.
                let terms = [10, 900, 1_100, 50_000][rng.random_range(0..4)];
                extra.push((at, format!("1{}", " + 1".repeat(terms))));
            }
            0 | 1 => {
                let numbers: Vec<usize> = significant
                    .iter()
                    .copied()
                    .filter(|&i| matches!(tokens[i], Token::Number(..)))
                    .collect();
                if let Some(&i) = numbers.get(rng.random_range(0..numbers.len().max(1))) {
                    tokens[i] =
                        Token::Number(NUMBERS[rng.random_range(0..NUMBERS.len())].into(), false);
                }
            }
            2 => {
                let strings: Vec<usize> = significant
                    .iter()
                    .copied()
                    .filter(|&i| matches!(tokens[i], Token::SingleQuotedString(_)))
                    .collect();
                if let Some(&i) = strings.get(rng.random_range(0..strings.len().max(1))) {
                    let literal = if rng.random_bool(0.1) {
                        format!("'{}'", "x".repeat(rng.random_range(1000..100_000)))
                    } else {
                        STRINGS[rng.random_range(0..STRINGS.len())].to_string()
                    };
                    extra.push((i, literal));
                    tokens[i] = Token::Whitespace(sqlparser::tokenizer::Whitespace::Space);
                }
            }
            3 => {
                let other = significant[rng.random_range(0..significant.len())];
                tokens.swap(at, other);
            }
            4 => tokens[at] = Token::Whitespace(sqlparser::tokenizer::Whitespace::Space),
            5 => {
                let copy = tokens[at].clone();
                tokens.insert(
                    at,
                    Token::Whitespace(sqlparser::tokenizer::Whitespace::Space),
                );
                tokens.insert(at, copy);
            }
            6 => extra.push((at, INSERTS[rng.random_range(0..INSERTS.len())].to_string())),
            _ => {
                let depth = rng.random_range(10..1_200);
                extra.push((at, "(".repeat(depth)));
                let close = significant[rng.random_range(0..significant.len())].max(at);
                extra.push((close + 1, ")".repeat(depth)));
            }
        }
    }
    let mut out = String::with_capacity(sql.len() + 64);
    for (i, token) in tokens.iter().enumerate() {
        for (_, text) in extra.iter().filter(|(at, _)| *at == i) {
            out.push(' ');
            out.push_str(text);
            out.push(' ');
        }
        out.push_str(&token.to_string());
    }
    for (_, text) in extra.iter().filter(|(at, _)| *at >= tokens.len()) {
        out.push(' ');
        out.push_str(text);
    }
    out
}

fn shorten(sql: &str) -> String {
    if sql.len() <= 300 {
        return sql.to_string();
    }
    let mut end = 300;
    while !sql.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &sql[..end], sql.len())
}
