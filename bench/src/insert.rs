//! `insert`: multi-row INSERTs into an append-only table feeding a TUMBLE view.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use clap::Args;
use eddy_sqllogictest::{sql_timestamp, DEFAULT_STOP_TIMEOUT};

use crate::process::{dir_size, int, mib, per_second, vm_hwm_kib, BenchEddy, EddyArgs};

#[derive(Args)]
pub struct InsertArgs {
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
    #[command(flatten)]
    eddy: EddyArgs,
}

const TABLE_SQL: &str = "CREATE TABLE bench_events (k INT, v BIGINT, ts TIMESTAMP, \
     WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) APPEND ONLY";
const VIEW_SQL: &str = "CREATE MATERIALIZED VIEW bench_per_second AS \
     SELECT k, window_start, window_end, count(*) AS n, sum(v) AS s, max(v) AS m \
     FROM TUMBLE(bench_events, ts, INTERVAL '1' SECOND) \
     GROUP BY k, window_start, window_end";
/// 2024-01-01 00:00:00 UTC, in milliseconds since the Unix epoch.
const FIRST_TS_MS: i64 = 1_704_067_200_000;

pub async fn run(args: InsertArgs) -> Result<()> {
    ensure!(
        args.batch > 0 && args.keys > 0 && args.rows_per_second > 0,
        "--batch, --keys and --rows-per-second must be positive"
    );
    let mut eddy = BenchEddy::start(&args.eddy).await?;
    let pid = eddy.pid;
    let (client, _driver) = eddy.process.connect().await?;
    client.batch_execute(TABLE_SQL).await.context(TABLE_SQL)?;
    client.batch_execute(VIEW_SQL).await.context(VIEW_SQL)?;

    let workload = Workload {
        keys: args.keys,
        rows_per_second: args.rows_per_second,
    };
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
    let status = eddy.process.terminate(DEFAULT_STOP_TIMEOUT).await?;
    let data_bytes = dir_size(eddy.process.data_dir())?;

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
    println!("eddy peak RSS (VmHWM): {:.1} MiB", mib(peak_rss_kib));
    println!("data dir size: {:.1} MiB", data_bytes as f64 / 1_048_576.0);
    println!("eddy exit on SIGTERM: {status}");
    if view_rows != windows.len() as i64 || counted != args.rows as i64 {
        bail!("the view does not hold the inserted rows: the figures above are not valid");
    }
    Ok(())
}

/// The generated rows: row `i` has key `i * 7919 % keys` (spread over the
/// keys), value `i * 31 % 1000` and a non-decreasing event time, so no row
/// is late.
struct Workload {
    keys: u64,
    rows_per_second: u64,
}

impl Workload {
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
