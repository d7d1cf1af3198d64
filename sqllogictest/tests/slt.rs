//! Runs every `slt/**/*.slt` file against a fresh `eddy` process with its own
//! temporary data directory, over pgwire, twice: with the standard `postgres`
//! engine (simple protocol: the text Eddy prints) and with `postgres-extended`
//! (binary values, formatted by the engine), so a file passes here exactly when
//! it passes under `sqllogictest --engine postgres` and `--engine
//! postgres-extended`, with the same expected results.
//!
//! One difference, by design: a `RECOVER` statement is not sent to the
//! server; the runner kills eddy with SIGKILL, starts it again on the same
//! data directory and reconnects (the server's own `RECOVER` reloads the last
//! committed epoch in-process; both mean "crash and recover").
//!
//! Usage: `cargo test -p eddy-sqllogictest --test slt [-- FILTER]`, where
//! FILTER keeps the files whose path contains it. Prints one line per file
//! and `N passed, N failed` last; exits non-zero if any failed.

use std::error::Error as _;
use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use eddy_sqllogictest::{find_eddy_binary, EddyProcess, DATABASE};
use sqllogictest::{
    default_column_validator, default_normalizer, default_validator, AsyncDB, DBOutput,
    DefaultColumnType, Runner,
};
use sqllogictest_engines::postgres::{PostgresExtended, PostgresSimple};
use tokio::sync::Mutex;

/// Seconds one file may take before it counts as failed (`EDDY_SLT_TIMEOUT`).
const DEFAULT_FILE_TIMEOUT_SECS: u64 = 300;
/// Lines of eddy's log shown under a failure.
const LOG_TAIL_LINES: usize = 30;

fn main() -> ExitCode {
    // A panic in a file's task is reported as that file's failure: one line
    // here instead of a backtrace.
    std::panic::set_hook(Box::new(|info| eprintln!("{info}")));
    // Flags are for libtest-style runners; the first other argument filters.
    let filter = std::env::args().skip(1).find(|arg| !arg.starts_with('-'));
    let root = manifest_dir().join("slt");
    let files = match slt_files(&root, filter.as_deref()) {
        Ok(files) => files,
        Err(err) => {
            println!("cannot list {}: {err}", root.display());
            return ExitCode::FAILURE;
        }
    };
    if files.is_empty() {
        println!("no .slt files under {} match {filter:?}", root.display());
        println!("0 passed, 0 failed");
        return ExitCode::SUCCESS;
    }
    if let Err(err) = find_eddy_binary() {
        println!("{err:#}");
        println!("0 passed, {} failed", files.len());
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            println!("cannot start the tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let timeout = Duration::from_secs(
        std::env::var("EDDY_SLT_TIMEOUT")
            .ok()
            .and_then(|secs| secs.parse().ok())
            .unwrap_or(DEFAULT_FILE_TIMEOUT_SECS),
    );

    let (mut passed, mut failed) = (0, 0);
    for file in &files {
        let name = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        for engine in [EngineKind::Simple, EngineKind::Extended] {
            let started = Instant::now();
            let outcome = runtime.block_on(run_file_with_timeout(file.clone(), engine, timeout));
            let secs = started.elapsed().as_secs_f64();
            let engine = engine.name();
            match outcome {
                Ok(()) => {
                    passed += 1;
                    println!("PASS {name} [{engine}] ({secs:.2}s)");
                }
                Err(message) => {
                    failed += 1;
                    let first = message.lines().next().unwrap_or_default();
                    println!("FAIL {name} [{engine}] ({secs:.2}s): {first}");
                    for line in message.lines().skip(1) {
                        println!("    {line}");
                    }
                }
            }
            let _ = std::io::stdout().flush();
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `*.slt` files under `root`, recursively, sorted; `.slt.part` files are
/// only included by others.
fn slt_files(root: &Path, filter: Option<&str>) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "slt") {
                files.push(path);
            }
        }
    }
    files.retain(|path| {
        let relative = path.strip_prefix(root).unwrap_or(path);
        filter.is_none_or(|filter| relative.to_string_lossy().contains(filter))
    });
    files.sort();
    Ok(files)
}

/// Runs one file against a fresh eddy, in its own task so that a panic (the
/// engine panics on a column type it cannot format) or a hang fails this
/// file only. On failure, the message ends with eddy's log.
async fn run_file_with_timeout(
    file: PathBuf,
    engine: EngineKind,
    timeout: Duration,
) -> Result<(), String> {
    let process = EddyProcess::start_fresh()
        .await
        .map_err(|err| format!("{err:#}"))?;
    let server = Arc::new(Mutex::new(Server {
        process,
        generation: 0,
        last_sql: None,
    }));
    let mut task = tokio::spawn(run_file(file, engine, Arc::clone(&server)));
    let message = match tokio::time::timeout(timeout, &mut task).await {
        Ok(Ok(Ok(()))) => return Ok(()),
        Ok(Ok(Err(test_error))) => test_error,
        Ok(Err(join_error)) => match join_error.try_into_panic() {
            Ok(panic) => format!(
                "panicked: {}\n[SQL] {}",
                panic_message(&*panic),
                server.lock().await.last_sql.as_deref().unwrap_or("")
            ),
            Err(join_error) => format!("task failed: {join_error}"),
        },
        Err(_elapsed) => {
            task.abort();
            // Cancelled: this drops the runner and its connections.
            let _ = task.await;
            format!(
                "timed out after {timeout:?} (EDDY_SLT_TIMEOUT changes it)\n[last SQL] {}",
                server.lock().await.last_sql.as_deref().unwrap_or("")
            )
        }
    };
    let mut server = server.lock().await;
    let mut message = format!("{message}\n{}", server.process.log_tail(LOG_TAIL_LINES));
    if std::env::var_os("EDDY_KEEP_DATA").is_some() {
        if let Some(dir) = server.process.keep_files() {
            message.push_str(&format!("\nkept data and log in {}", dir.display()));
        }
    }
    Err(message)
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "(non-string panic payload)".to_string()
    }
}

/// Runs the records of `file` like the standard CLI does.
async fn run_file(
    file: PathBuf,
    engine: EngineKind,
    server: Arc<Mutex<Server>>,
) -> Result<(), String> {
    let mut runner = Runner::new(move || EddyDb::connect(Arc::clone(&server), engine));
    // The same settings as the standard CLI, named here to keep them so.
    runner.with_validator(default_validator);
    runner.with_normalizer(default_normalizer);
    runner.with_column_validator(default_column_validator);
    runner.set_var("__DATABASE__".to_string(), DATABASE.to_string());

    let result = runner.run_file_async(&file).await;
    // A server that ignores the cancel request must not hang the suite.
    let _ = tokio::time::timeout(Duration::from_secs(5), runner.shutdown_async()).await;
    result.map_err(|err| err.display(false).to_string())
}

/// The one eddy process of a file, shared by all its connections.
struct Server {
    process: EddyProcess,
    /// Bumped at each restart; connections from an older one reconnect.
    generation: u64,
    /// The statement sent last, to name it when the file times out.
    last_sql: Option<String>,
}

/// Which of the standard engines runs a file.
#[derive(Debug, Clone, Copy)]
enum EngineKind {
    Simple,
    Extended,
}

impl EngineKind {
    /// The name `skipif`/`onlyif` see, as under the CLI.
    fn name(self) -> &'static str {
        match self {
            EngineKind::Simple => "postgres",
            EngineKind::Extended => "postgres-extended",
        }
    }

    async fn connect(self, config: tokio_postgres::Config) -> Result<Engine, EddyDbError> {
        Ok(match self {
            EngineKind::Simple => Engine::Simple(PostgresSimple::connect(config).await?),
            EngineKind::Extended => Engine::Extended(PostgresExtended::connect(config).await?),
        })
    }
}

/// One connection of a standard engine.
enum Engine {
    Simple(PostgresSimple),
    Extended(PostgresExtended),
}

impl Engine {
    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, EddyDbError> {
        Ok(match self {
            Engine::Simple(conn) => conn.run(sql).await?,
            Engine::Extended(conn) => conn.run(sql).await?,
        })
    }

    async fn shutdown(&mut self) {
        match self {
            Engine::Simple(conn) => AsyncDB::shutdown(conn).await,
            Engine::Extended(conn) => AsyncDB::shutdown(conn).await,
        }
    }
}

/// A standard engine, plus `RECOVER` as a real crash and restart of the
/// server process.
struct EddyDb {
    server: Arc<Mutex<Server>>,
    kind: EngineKind,
    conn: Option<Engine>,
    generation: u64,
}

impl EddyDb {
    async fn connect(server: Arc<Mutex<Server>>, kind: EngineKind) -> Result<Self, EddyDbError> {
        let (conn, generation) = {
            let guard = server.lock().await;
            let conn = kind.connect(guard.process.pg_config()).await?;
            (conn, guard.generation)
        };
        Ok(Self {
            server,
            kind,
            conn: Some(conn),
            generation,
        })
    }

    /// kill -9, start again on the same data directory, reconnect.
    async fn crash_and_restart(&mut self) -> Result<(), EddyDbError> {
        // Its server is about to vanish; nothing to close gracefully.
        self.conn = None;
        let mut guard = self.server.lock().await;
        guard
            .process
            .restart()
            .await
            .map_err(EddyDbError::Harness)?;
        guard.generation += 1;
        self.generation = guard.generation;
        self.conn = Some(self.kind.connect(guard.process.pg_config()).await?);
        Ok(())
    }

    /// Notes `sql` as the statement running and reopens this connection if
    /// the server restarted since it was made.
    async fn prepare_to_run(&mut self, sql: &str) -> Result<&mut Engine, EddyDbError> {
        let mut guard = self.server.lock().await;
        guard.last_sql = Some(sql.to_string());
        if self.conn.is_none() || guard.generation != self.generation {
            self.conn = None;
            self.conn = Some(self.kind.connect(guard.process.pg_config()).await?);
            self.generation = guard.generation;
        }
        drop(guard);
        self.conn
            .as_mut()
            .ok_or_else(|| EddyDbError::Harness(anyhow::anyhow!("no connection")))
    }
}

/// Whether `sql` is the `RECOVER` statement (any case, optional `;`).
fn is_recover(sql: &str) -> bool {
    let sql = sql.trim();
    let sql = sql.strip_suffix(';').unwrap_or(sql).trim_end();
    sql.eq_ignore_ascii_case("RECOVER")
}

#[async_trait]
impl AsyncDB for EddyDb {
    type Error = EddyDbError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<Self::ColumnType>, Self::Error> {
        if is_recover(sql) {
            self.crash_and_restart().await?;
            return Ok(DBOutput::StatementComplete(0));
        }
        Ok(self.prepare_to_run(sql).await?.run(sql).await?)
    }

    async fn shutdown(&mut self) {
        if let Some(conn) = self.conn.as_mut() {
            conn.shutdown().await;
        }
    }

    /// The engine's name, so `skipif`/`onlyif` act as under the CLI.
    fn engine_name(&self) -> &str {
        self.kind.name()
    }

    async fn sleep(dur: Duration) {
        tokio::time::sleep(dur).await;
    }

    async fn run_command(command: std::process::Command) -> std::io::Result<std::process::Output> {
        tokio::process::Command::from(command).output().await
    }

    fn error_sql_state(err: &Self::Error) -> Option<String> {
        match err {
            EddyDbError::Postgres(err) => err.code().map(|state| state.code().to_string()),
            EddyDbError::Harness(_) => None,
        }
    }
}

#[derive(Debug)]
enum EddyDbError {
    Postgres(tokio_postgres::Error),
    /// Starting or restarting eddy failed.
    Harness(anyhow::Error),
}

impl From<tokio_postgres::Error> for EddyDbError {
    fn from(err: tokio_postgres::Error) -> Self {
        Self::Postgres(err)
    }
}

impl fmt::Display for EddyDbError {
    /// `db error: ERROR: <message>` for server errors: the text the
    /// sqllogictest-bin 0.29.1 CLI matches `statement error <regex>` against
    /// when installed with `--locked` (its tokio-postgres 0.7.12 appends the
    /// cause; 0.7.15+ prints only `db error`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Postgres(err) => {
                write!(f, "{err}")?;
                match err.source() {
                    Some(cause) => write!(f, ": {cause}"),
                    None => Ok(()),
                }
            }
            Self::Harness(err) => write!(f, "harness: {err:#}"),
        }
    }
}

impl std::error::Error for EddyDbError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Postgres(err) => err.source(),
            Self::Harness(err) => err.source(),
        }
    }
}

/// This crate's folder: cargo's value when it runs the test (the binary may have been built in
/// another checkout sharing the target directory), else the one compiled in.
fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}
