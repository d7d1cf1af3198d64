//! Fuzzers for eddy, each seeded and reproducible from its seed:
//!
//! - [`frames`]: protocol messages, valid and mutated (truncated, wrong lengths, flipped
//!   bytes, unknown types), before and after authentication, against a running server;
//! - [`sql`]: the statements of the `.slt` suites with extreme literals, swapped and dropped
//!   tokens and deep nesting, against a running server;
//! - [`payloads`]: malformed JSON and CSV messages through the source decoder, in process;
//! - [`source_lines`]: some of those as lines of files a live server's views read;
//! - [`grammar_mutations`]: window and interval arguments made extreme, deep broken nesting;
//! - [`freeze`]: another connection's `SELECT 1`, timed while the SQL fuzzer runs.
//!
//! A [`report::Report`] counts the cases and the SQLSTATEs seen, and lists what must not
//! happen: a server that died, a panic, an internal error (XX000), a freeze over a second.

pub mod frames;
pub mod freeze;
pub mod grammar_mutations;
pub mod payloads;
pub mod report;
pub mod source_lines;
pub mod sql;

pub use report::Report;

use std::path::PathBuf;

use eddy_sqllogictest::EddyProcess;

/// The `.slt` suites the SQL fuzzer mutates.
pub fn slt_dir() -> PathBuf {
    manifest_dir().join("../sqllogictest/slt")
}

/// Of the payloads, one in this many also goes through a live server as a source's line.
pub const SOURCE_LINES_SHARE: u64 = 10;

/// How large each fuzzer's run is.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub frames: u64,
    pub sql: u64,
    pub payloads: u64,
}

/// Runs the three fuzzers from `seed` against fresh servers (one trusting every client, one
/// with a password) and returns their reports.
pub async fn run_all(seed: u64, budget: Budget) -> anyhow::Result<Vec<Report>> {
    let mut reports = Vec::new();
    if budget.frames > 0 {
        // Most frames after logging in; a fifth against a password nobody knows.
        let trusted = budget.frames - budget.frames / 5;
        let mut eddy = EddyProcess::start_fresh().await?;
        {
            let (client, _driver) = eddy.connect().await?;
            client
                .batch_execute(&format!("CREATE TABLE {} (x INT)", frames::CANARY))
                .await?;
        }
        let started = std::time::Instant::now();
        let mut report = frames::run(&mut eddy, None, seed, trusted).await;
        report.elapsed = started.elapsed();
        check_log(&eddy, &mut report);
        reports.push(report);

        let password = "fuzz-secret";
        let mut eddy = EddyProcess::start_fresh_with(|config| {
            config.extra_args = vec!["--password".into(), password.into()];
        })
        .await?;
        let owner = |eddy: &EddyProcess| {
            let mut config = eddy.pg_config();
            config.password(password);
            config
        };
        {
            let (client, connection) = owner(&eddy).connect(tokio_postgres::NoTls).await?;
            tokio::spawn(connection);
            client
                .batch_execute(&format!("CREATE TABLE {} (x INT)", frames::CANARY))
                .await?;
        }
        let started = std::time::Instant::now();
        let mut report = frames::run(&mut eddy, Some(password), seed ^ 1, budget.frames / 5).await;
        report.elapsed = started.elapsed();
        let (client, connection) = owner(&eddy).connect(tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        let row = client
            .query_one(&format!("SELECT count(*) FROM {}", frames::CANARY), &[])
            .await?;
        let written: i64 = row.get(0);
        if written != 0 {
            report.fail(format!(
                "{written} rows reached the canary table from sessions that never logged in"
            ));
        }
        check_log(&eddy, &mut report);
        reports.push(report);
    }
    if budget.sql > 0 {
        let corpus = sql::corpus(&slt_dir())?;
        let mut eddy = EddyProcess::start_fresh().await?;
        let started = std::time::Instant::now();
        let mut report = sql::run(&mut eddy, &corpus, seed, budget.sql).await;
        report.elapsed = started.elapsed();
        check_log(&eddy, &mut report);
        reports.push(report);
    }
    if budget.payloads > 0 {
        let started = std::time::Instant::now();
        let mut report = payloads::run(seed, budget.payloads);
        report.elapsed = started.elapsed();
        reports.push(report);
        // A part of them again, as lines of files a live server's views read.
        let started = std::time::Instant::now();
        let mut report = source_lines::run(seed, budget.payloads / SOURCE_LINES_SHARE).await;
        report.elapsed = started.elapsed();
        reports.push(report);
    }
    Ok(reports)
}

/// A panic in the server's log is a failure, even one a task survived.
fn check_log(eddy: &EddyProcess, report: &mut Report) {
    let log = std::fs::read_to_string(eddy.log_file()).unwrap_or_default();
    for line in log.lines().filter(|l| l.contains("panicked")) {
        report.fail(format!("a panic in the server's log: {line}"));
    }
}

/// This crate's folder: cargo's value when it runs the test (the binary may have been built in
/// another checkout sharing the target directory), else the one compiled in.
fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}
