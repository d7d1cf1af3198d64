//! Benchmark commands for Eddy. Not tests: each starts its own `eddy`
//! (the release build when there is one), drives a workload over pgwire and
//! prints figures.
//!
//! `cargo run --release -p eddy-bench -- insert --rows 1000000 --batch 10000`

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use clap::{Args, Parser, Subcommand};
use eddy_sqllogictest::{
    locate_eddy_binary, sql_timestamp, target_dir_of_current_exe, EddyConfig, EddyProcess,
    DEFAULT_STOP_TIMEOUT, EDDY_BIN_ENV,
};
use tokio_postgres::types::Type;

#[derive(Parser)]
#[command(about = "Benchmarks for Eddy (they print figures; they are not tests)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Multi-row INSERTs into an append-only table feeding a TUMBLE view.
    Insert(InsertArgs),
}

#[derive(Args)]
struct InsertArgs {
    /// Rows to insert.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Rows per INSERT statement.
    #[arg(long, default_value_t = 10_000)]
    batch: u64,
    /// Distinct grouping keys.
    #[arg(long, default_value_t = 100)]
    keys: u64,
    /// Event-time density: rows per second of event time (so rows per 1 s window).
    #[arg(long, default_value_t = 10_000)]
    rows_per_second: u64,
    /// The eddy executable (default: $EDDY_BIN, else target/release/eddy, else target/debug/eddy).
    #[arg(long)]
    eddy: Option<PathBuf>,
    /// Keep eddy's data directory and log here (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Passed to eddy as --checkpoint-interval (e.g. 1s).
    #[arg(long)]
    checkpoint_interval: Option<String>,
}

#[tokio::main]
async fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Insert(args) => insert(args).await,
    }
}

const TABLE_SQL: &str = "CREATE TABLE bench_events (k INT, v BIGINT, ts TIMESTAMP, \
     WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) APPEND ONLY";
const VIEW_SQL: &str = "CREATE MATERIALIZED VIEW bench_per_second AS \
     SELECT k, window_start, window_end, count(*) AS n, sum(v) AS s, max(v) AS m \
     FROM TUMBLE(bench_events, ts, INTERVAL '1' SECOND) \
     GROUP BY k, window_start, window_end";
/// 2024-01-01 00:00:00 UTC, in milliseconds since the Unix epoch.
const FIRST_TS_MS: i64 = 1_704_067_200_000;

async fn insert(args: InsertArgs) -> Result<()> {
    ensure!(
        args.batch > 0 && args.keys > 0 && args.rows_per_second > 0,
        "--batch, --keys and --rows-per-second must be positive"
    );
    let binary = locate_bench_binary(args.eddy.clone())?;
    let temp_dir;
    let dir = match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            dir.clone()
        }
        None => {
            temp_dir = tempfile::Builder::new().prefix("eddy-bench-").tempdir()?;
            temp_dir.path().to_path_buf()
        }
    };
    let mut config = EddyConfig::in_dir(binary.clone(), &dir);
    config.checkpoint_interval = args.checkpoint_interval.clone();
    let mut eddy = EddyProcess::start(config).await?;
    let pid = eddy.pid().context("eddy is not running")?;
    println!("eddy: {} (pid {pid})", binary.display());
    println!("data: {}", eddy.data_dir().display());

    let (client, _driver) = eddy.connect().await?;
    client.batch_execute(TABLE_SQL).await.context(TABLE_SQL)?;
    client.batch_execute(VIEW_SQL).await.context(VIEW_SQL)?;

    let workload = Workload::new(&args);
    let mut windows = HashSet::new();
    let mut sql = String::new();
    let started = Instant::now();
    let mut sent = 0;
    while sent < args.rows {
        let len = args.batch.min(args.rows - sent);
        workload.write_insert(sent..sent + len, &mut sql, &mut windows);
        client
            .batch_execute(&sql)
            .await
            .with_context(|| format!("INSERT of rows {sent}..{}", sent + len))?;
        sent += len;
    }
    let inserted = started.elapsed();
    client.batch_execute("FLUSH").await.context("FLUSH")?;
    let total = started.elapsed();

    let row = client
        .query_one("SELECT count(*), sum(n) FROM bench_per_second", &[])
        .await
        .context("reading the view")?;
    let view_rows = int(&row, 0)?;
    let counted = int(&row, 1)?;
    let peak_rss_kib = vm_hwm_kib(pid)?;
    drop(client);
    let status = eddy.terminate(DEFAULT_STOP_TIMEOUT).await?;
    let data_bytes = dir_size(eddy.data_dir())?;

    println!(
        "rows: {} in {} INSERTs of up to {} ({} keys, {} rows per event-time second)",
        args.rows,
        args.rows.div_ceil(args.batch),
        args.batch,
        args.keys,
        args.rows_per_second
    );
    println!(
        "time: insert {:.3}s + flush {:.3}s = {:.3}s total",
        inserted.as_secs_f64(),
        (total - inserted).as_secs_f64(),
        total.as_secs_f64()
    );
    println!("throughput: {:.0} rows/s", per_second(args.rows, total));
    println!(
        "view rows: {view_rows} (expected {}), sum(n) = {counted} (expected {})",
        windows.len(),
        args.rows
    );
    println!(
        "eddy peak RSS (VmHWM): {:.1} MiB",
        peak_rss_kib as f64 / 1024.0
    );
    println!("data dir size: {:.1} MiB", data_bytes as f64 / 1_048_576.0);
    println!("eddy exit on SIGTERM: {status}");
    if view_rows != windows.len() as i64 || counted != args.rows as i64 {
        bail!("the view does not hold the inserted rows: the figures above are not valid");
    }
    Ok(())
}

/// `--eddy`, else `$EDDY_BIN`, else the release build, else the debug one.
fn locate_bench_binary(explicit: Option<PathBuf>) -> Result<PathBuf> {
    let explicit = explicit.or_else(|| std::env::var_os(EDDY_BIN_ENV).map(PathBuf::from));
    let target = target_dir_of_current_exe()?;
    let binary = locate_eddy_binary(explicit, &[target.join("release"), target.join("debug")])?;
    if binary.starts_with(target.join("debug")) {
        eprintln!(
            "warning: no release eddy; benchmarking the debug build (slow). \
             Build one with `cargo build --release -p eddy-server`."
        );
    }
    Ok(binary)
}

/// The generated rows: row `i` has key `i * 7919 % keys` (spread over the
/// keys), value `i * 31 % 1000` and a non-decreasing event time, so no row
/// is late.
struct Workload {
    keys: u64,
    rows_per_second: u64,
}

impl Workload {
    fn new(args: &InsertArgs) -> Self {
        Self {
            keys: args.keys,
            rows_per_second: args.rows_per_second,
        }
    }

    /// Writes one INSERT for `rows` into `sql` and records each row's
    /// (key, window start in seconds) in `windows`.
    fn write_insert(
        &self,
        rows: std::ops::Range<u64>,
        sql: &mut String,
        windows: &mut HashSet<(u64, u64)>,
    ) {
        sql.clear();
        sql.push_str("INSERT INTO bench_events VALUES ");
        for i in rows.clone() {
            let key = i * 7919 % self.keys;
            let offset_ms = i * 1000 / self.rows_per_second;
            windows.insert((key, offset_ms / 1000));
            if i != rows.start {
                sql.push_str(", ");
            }
            // Writing to a String cannot fail.
            let _ = write!(
                sql,
                "({key}, {}, TIMESTAMP '{}')",
                i * 31 % 1000,
                sql_timestamp(FIRST_TS_MS + offset_ms as i64)
            );
        }
    }
}

fn per_second(rows: u64, elapsed: Duration) -> f64 {
    rows as f64 / elapsed.as_secs_f64().max(f64::EPSILON)
}

/// An integer column of any width.
fn int(row: &tokio_postgres::Row, idx: usize) -> Result<i64> {
    let column = &row.columns()[idx];
    let value = match *column.type_() {
        Type::INT2 => row.try_get::<_, Option<i16>>(idx)?.map(i64::from),
        Type::INT4 => row.try_get::<_, Option<i32>>(idx)?.map(i64::from),
        Type::INT8 => row.try_get::<_, Option<i64>>(idx)?,
        ref other => bail!(
            "column {} has type {other}, expected an integer",
            column.name()
        ),
    };
    Ok(value.unwrap_or(0))
}

/// Peak resident set size of a process, in KiB (Linux `VmHWM`).
fn vm_hwm_kib(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .with_context(|| format!("no VmHWM in {path}"))?;
    let kib = line.trim().trim_end_matches("kB").trim();
    kib.parse()
        .with_context(|| format!("bad VmHWM {line:?} in {path}"))
}

/// Total size of the files under `dir`, in bytes.
fn dir_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))?
        {
            let entry = entry?;
            let metadata = entry.metadata()?;
            if metadata.is_dir() {
                dirs.push(entry.path());
            } else {
                total += metadata.len();
            }
        }
    }
    Ok(total)
}
