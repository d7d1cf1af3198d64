//! `serve`: Eddy read like a database behind a dashboard. Builds an append-only
//! table of `--rows` rows and two views over it (one row per key in
//! `per_key`, one per auction and 1 s window in `per_window`), then measures
//! point lookups on `per_key`'s stream key, 1,000-row range queries on
//! `per_window` (on its key prefix `auction`, and on `window_start`, with
//! `--index` through an index), a full-scan aggregate (rows/s and eddy's RSS
//! growth), and `--clients` clients mixing those queries while one writer
//! ingests at full speed (see `serve_mix`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, ensure, Context, Result};
use clap::Args;
use eddy_sqllogictest::{sql_timestamp, DEFAULT_STOP_TIMEOUT};
use tokio_postgres::{Client, Statement};

use crate::process::{
    dir_size, flush_until_done, int, mib, per_second, vm_rss_kib, BenchEddy, EddyArgs,
};
use crate::serve_mix::{self, MixArgs};

#[derive(Args)]
pub struct ServeArgs {
    /// Rows in the base table; `per_key` and `per_window` get one row per table row.
    #[arg(long, default_value_t = 10_000_000)]
    rows: u64,
    /// Rows per `INSERT ... SELECT FROM generate_series` while building.
    #[arg(long, default_value_t = 500_000)]
    build_batch: u64,
    /// Queries per latency measurement (each also stops after --phase-seconds).
    #[arg(long, default_value_t = 2_000)]
    queries: u64,
    /// The longest one latency measurement runs.
    #[arg(long, default_value_t = 60)]
    phase_seconds: u64,
    /// Full-scan aggregates to time.
    #[arg(long, default_value_t = 3)]
    scans: u64,
    /// CREATE INDEX on per_window (window_start) before timing `window_start BETWEEN`.
    #[arg(long)]
    index: bool,
    /// The seed of the random keys.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    #[command(flatten)]
    mix: MixArgs,
    #[command(flatten)]
    eddy: EddyArgs,
}

/// Rows a range query returns.
pub const RANGE_ROWS: u64 = 1_000;
/// Rows of event time per second (so per 1 s window), at most: a `window_start`
/// range of `RANGE_ROWS / ROWS_PER_SECOND` seconds returns `RANGE_ROWS` rows.
const ROWS_PER_SECOND: u64 = 100;
/// 2024-01-01 00:00:00 UTC, in seconds since the Unix epoch.
const FIRST_TS_S: u64 = 1_704_067_200;
/// How long the views may take to catch up with the table.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(3600);

const TABLE_SQL: &str = "CREATE TABLE events (k BIGINT, auction BIGINT, v BIGINT, \
     ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) APPEND ONLY";
const PER_KEY_SQL: &str = "CREATE MATERIALIZED VIEW per_key AS \
     SELECT k, count(*) AS n, sum(v) AS total FROM events GROUP BY k";
const PER_WINDOW_SQL: &str = "CREATE MATERIALIZED VIEW per_window AS \
     SELECT auction, window_start, count(*) AS n, sum(v) AS total \
     FROM TUMBLE(events, ts, INTERVAL '1' SECOND) GROUP BY auction, window_start";
const INDEX_SQL: &str = "CREATE INDEX per_window_by_start ON per_window (window_start)";

pub const POINT_SQL: &str = "SELECT k, n, total FROM per_key WHERE k = $1";
pub const RANGE_SQL: &str = "SELECT auction, window_start, n FROM per_window WHERE auction = $1";
pub const WINDOW_SQL: &str =
    "SELECT auction, window_start, n FROM per_window WHERE window_start BETWEEN $1 AND $2";
pub const SCAN_SQL: &str = "SELECT count(*), sum(n) FROM per_key";

/// The generated rows. Row `i` has key `k = i % rows` (so `per_key` holds
/// `rows` keys, and rows ingested later update them), `auction = i % auctions`,
/// `v = i % 1000`, and event time `i / per_second` seconds after `FIRST_TS_S`.
/// With `auctions = rows / 1000` every auction has `RANGE_ROWS` windows of one
/// row each, and every second holds `per_second` auctions (no two rows share
/// an auction and a window, as `per_second <= auctions`).
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub rows: u64,
    pub auctions: u64,
    pub per_second: u64,
}

impl Layout {
    fn new(rows: u64) -> Self {
        let auctions = (rows / RANGE_ROWS).max(1);
        Self {
            rows,
            auctions,
            per_second: ROWS_PER_SECOND.min(auctions),
        }
    }

    /// `INSERT ... SELECT` of rows `from..=to`.
    fn insert_select(self, from: u64, to: u64) -> String {
        format!(
            "INSERT INTO events SELECT value % {}, value % {}, value % 1000, \
             to_timestamp({FIRST_TS_S} + value / {}) FROM generate_series({from}, {to})",
            self.rows, self.auctions, self.per_second
        )
    }

    /// Writes a multi-row `INSERT ... VALUES` of `rows` into `sql`.
    pub fn write_values(self, rows: std::ops::Range<u64>, sql: &mut String) {
        use std::fmt::Write as _;
        sql.clear();
        sql.push_str("INSERT INTO events VALUES ");
        for i in rows.clone() {
            if i != rows.start {
                sql.push_str(", ");
            }
            let ts_ms = (FIRST_TS_S + i / self.per_second) as i64 * 1000;
            // Writing to a String cannot fail.
            let _ = write!(
                sql,
                "({}, {}, {}, TIMESTAMP '{}')",
                i % self.rows,
                i % self.auctions,
                i % 1000,
                sql_timestamp(ts_ms)
            );
        }
    }

    /// Seconds of event time whose windows the build fills completely.
    fn full_seconds(self) -> u64 {
        self.rows / self.per_second
    }

    /// Seconds a `window_start` range spans to return `RANGE_ROWS` rows.
    fn window_span(self) -> u64 {
        (RANGE_ROWS / self.per_second).max(1)
    }

    /// Rows of `auction` the build made (ingestion adds more later).
    fn built_rows_of(self, auction: u64) -> u64 {
        self.rows / self.auctions + u64::from(auction < self.rows % self.auctions)
    }
}

/// The queries that are measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `per_key WHERE k = $1`.
    Point,
    /// `per_window WHERE auction = $1`.
    Range,
    /// `per_window WHERE window_start BETWEEN $1 AND $2`.
    Window,
    /// `count(*), sum(n)` over all of `per_key`.
    Scan,
}

impl Kind {
    pub fn label(self, indexed: bool) -> &'static str {
        match (self, indexed) {
            (Kind::Point, _) => "point lookup, per_key k = $1",
            (Kind::Range, _) => "key prefix, per_window auction = $1",
            (Kind::Window, false) => "window_start BETWEEN (no index)",
            (Kind::Window, true) => "window_start BETWEEN (index)",
            (Kind::Scan, _) => "full scan, count(*), sum(n) FROM per_key",
        }
    }
}

/// splitmix64: random keys without a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// A number in `0..bound` (`bound > 0`).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % bound
    }
}

/// The measured queries, prepared on one connection.
pub struct Prepared {
    point: Statement,
    range: Statement,
    window: Statement,
    scan: Statement,
    layout: Layout,
}

impl Prepared {
    pub async fn new(client: &Client, layout: Layout) -> Result<Self> {
        let prepare = |sql: &'static str| async move {
            client
                .prepare(sql)
                .await
                .with_context(|| format!("preparing {sql}"))
        };
        Ok(Self {
            point: prepare(POINT_SQL).await?,
            range: prepare(RANGE_SQL).await?,
            window: prepare(WINDOW_SQL).await?,
            scan: prepare(SCAN_SQL).await?,
            layout,
        })
    }

    /// Runs one query of `kind` with random parameters and checks its answer;
    /// returns the rows it returned (for a scan: the rows it counted).
    pub async fn run(&self, client: &Client, kind: Kind, rng: &mut Rng) -> Result<u64> {
        let layout = self.layout;
        match kind {
            Kind::Point => {
                let k = rng.below(layout.rows) as i64;
                let rows = client.query(&self.point, &[&k]).await?;
                ensure!(rows.len() == 1, "k = {k}: {} rows, expected 1", rows.len());
                Ok(1)
            }
            Kind::Range => {
                let auction = rng.below(layout.auctions);
                let rows = client.query(&self.range, &[&(auction as i64)]).await?;
                let least = layout.built_rows_of(auction);
                ensure!(
                    rows.len() as u64 >= least,
                    "auction = {auction}: {} rows, expected at least {least}",
                    rows.len()
                );
                Ok(rows.len() as u64)
            }
            Kind::Window => {
                let span = layout.window_span();
                let first = rng.below(layout.full_seconds().saturating_sub(span).max(1));
                let at = |s: u64| UNIX_EPOCH + Duration::from_secs(FIRST_TS_S + s);
                let (from, to): (SystemTime, SystemTime) = (at(first), at(first + span - 1));
                let rows = client.query(&self.window, &[&from, &to]).await?;
                let expected = span * layout.per_second;
                ensure!(
                    rows.len() as u64 == expected,
                    "window_start from second {first} for {span} s: {} rows, expected {expected}",
                    rows.len()
                );
                Ok(expected)
            }
            Kind::Scan => {
                let row = client.query_one(&self.scan, &[]).await?;
                let keys = int(&row, 0)?;
                ensure!(
                    keys == layout.rows as i64,
                    "count(*) FROM per_key = {keys}, expected {}",
                    layout.rows
                );
                Ok(keys as u64)
            }
        }
    }
}

/// Latencies of one kind of query, and the rows they returned.
#[derive(Default)]
pub struct Latencies {
    pub times: Vec<Duration>,
    pub rows: u64,
}

impl Latencies {
    pub fn add(&mut self, took: Duration, rows: u64) {
        self.times.push(took);
        self.rows += rows;
    }

    /// p50, p99 and max, in ms (None when nothing was measured).
    pub fn percentiles(&mut self) -> Option<(f64, f64, f64)> {
        if self.times.is_empty() {
            return None;
        }
        self.times.sort_unstable();
        let pick = |q: f64| {
            let index = ((self.times.len() - 1) as f64 * q).round() as usize;
            self.times[index].as_secs_f64() * 1000.0
        };
        Some((pick(0.50), pick(0.99), pick(1.0)))
    }

    /// `N queries (R rows each): p50 .. ms, p99 .. ms, max .. ms`.
    pub fn describe(&mut self) -> String {
        let count = self.times.len();
        match self.percentiles() {
            None => "no queries finished".to_string(),
            Some((p50, p99, max)) => format!(
                "{count} queries ({:.0} rows each): p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms",
                self.rows as f64 / count as f64
            ),
        }
    }
}

/// Peak VmRSS of a process, sampled every 5 ms on a thread of its own.
struct RssSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl RssSampler {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0;
            loop {
                peak = peak.max(vm_rss_kib(pid).unwrap_or(0));
                if stopping.load(Ordering::Relaxed) {
                    return peak;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Self { stop, thread }
    }

    /// The peak, in KiB.
    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or(0)
    }
}

/// One line of the closing table.
pub struct Figure {
    pub what: String,
    pub value: String,
}

pub fn figure(what: impl Into<String>, value: impl Into<String>) -> Figure {
    Figure {
        what: what.into(),
        value: value.into(),
    }
}

pub async fn run(args: ServeArgs) -> Result<()> {
    ensure!(
        args.rows >= RANGE_ROWS && args.build_batch > 0 && args.queries > 0,
        "--rows must be at least {RANGE_ROWS}, --build-batch and --queries positive"
    );
    let layout = Layout::new(args.rows);
    let mut eddy = BenchEddy::start(&args.eddy).await?;
    let pid = eddy.pid;
    let (client, _driver) = eddy.process.connect().await?;
    let mut figures = Vec::new();

    println!(
        "layout: {} rows; per_key: {} keys; per_window: {} auctions x {} windows, {} rows per 1 s window",
        layout.rows,
        layout.rows,
        layout.auctions,
        layout.rows / layout.auctions,
        layout.per_second
    );
    let build = build(&client, layout, args.build_batch).await?;
    figures.push(figure("build (insert + views caught up)", build));
    let rss_built = vm_rss_kib(pid)?;
    println!("eddy RSS after the build: {:.1} MiB", mib(rss_built));
    figures.push(figure(
        "eddy RSS after the build",
        format!("{:.1} MiB", mib(rss_built)),
    ));

    let mut indexed = false;
    if args.index {
        let started = Instant::now();
        match client.batch_execute(INDEX_SQL).await {
            Ok(()) => {
                flush_until_done(&client, CATCH_UP_LIMIT).await?;
                let took = format!("{:.2}s", started.elapsed().as_secs_f64());
                println!("{INDEX_SQL}: {took}");
                figures.push(figure("CREATE INDEX on per_window (window_start)", took));
                indexed = true;
            }
            Err(error) => {
                let reason = error
                    .as_db_error()
                    .map_or(error.to_string(), |db| db.message().to_string());
                println!("indexes: not supported by this build ({reason})");
                figures.push(figure("indexes", "not supported by this build"));
            }
        }
    }

    let prepared = Prepared::new(&client, layout).await?;
    let mut rng = Rng::new(args.seed);
    let limit = Duration::from_secs(args.phase_seconds);
    // With --index on a build without indexes, the window query is skipped.
    let with_window = !args.index || indexed;
    let mut kinds = vec![Kind::Point, Kind::Range];
    if with_window {
        kinds.push(Kind::Window);
    }
    for kind in kinds {
        let mut latencies = Latencies::default();
        let started = Instant::now();
        while (latencies.times.len() as u64) < args.queries && started.elapsed() < limit {
            let begun = Instant::now();
            let rows = prepared
                .run(&client, kind, &mut rng)
                .await
                .with_context(|| kind.label(indexed))?;
            latencies.add(begun.elapsed(), rows);
        }
        let line = latencies.describe();
        println!("{}: {line}", kind.label(indexed));
        figures.push(figure(kind.label(indexed), line));
    }

    for scan in 1..=args.scans {
        let rss_before = vm_rss_kib(pid)?;
        let sampler = RssSampler::start(pid);
        let started = Instant::now();
        let rows = prepared.run(&client, Kind::Scan, &mut rng).await?;
        let took = started.elapsed();
        let peak = sampler.stop();
        let line = format!(
            "{rows} rows in {:.3}s: {:.0} rows/s; eddy RSS {:.1} MiB before, +{:.1} MiB at its peak",
            took.as_secs_f64(),
            per_second(rows, took),
            mib(rss_before),
            mib(peak.saturating_sub(rss_before))
        );
        println!("full scan {scan}: {line}");
        figures.push(figure(format!("full scan {scan}"), line));
    }

    let mix = serve_mix::run(
        &args.mix,
        &eddy.process.pg_config(),
        &client,
        layout,
        indexed,
        with_window,
        args.seed,
    )
    .await?;
    figures.extend(mix);

    drop(prepared);
    drop(client);
    let status = eddy.process.terminate(DEFAULT_STOP_TIMEOUT).await?;
    let data_bytes = dir_size(eddy.process.data_dir())?;
    figures.push(figure(
        "data dir size at the end",
        format!("{:.1} MiB", data_bytes as f64 / 1_048_576.0),
    ));
    println!("eddy exit on SIGTERM: {status}");

    println!();
    println!("| eddy-bench serve --rows {} | |", layout.rows);
    println!("|---|---|");
    for Figure { what, value } in &figures {
        println!("| {what} | {value} |");
    }
    Ok(())
}

/// Creates the table and views, fills the table with `INSERT ... SELECT`s of
/// `batch` rows and waits until both views hold every row; returns the timing.
async fn build(client: &Client, layout: Layout, batch: u64) -> Result<String> {
    for sql in [TABLE_SQL, PER_KEY_SQL, PER_WINDOW_SQL] {
        client.batch_execute(sql).await.context(sql)?;
    }
    let started = Instant::now();
    let mut sent = 0;
    while sent < layout.rows {
        let to = (sent + batch).min(layout.rows);
        let sql = layout.insert_select(sent, to - 1);
        client.batch_execute(&sql).await.context(sql)?;
        sent = to;
    }
    let inserted = started.elapsed();
    flush_until_done(client, CATCH_UP_LIMIT).await?;
    let flushed = started.elapsed();
    // FLUSH returns once the epoch holding the last INSERT is committed; wait
    // until both views count every row, in case a view commits later.
    let poll = Duration::from_millis(500);
    for (view, expected) in [("per_key", layout.rows), ("per_window", layout.rows)] {
        loop {
            let sql = format!("SELECT count(*) FROM {view}");
            let counted = int(&client.query_one(&sql, &[]).await.context(sql)?, 0)?;
            if counted as u64 == expected {
                break;
            }
            if started.elapsed() > CATCH_UP_LIMIT {
                bail!("{view} holds {counted} rows of {expected}");
            }
            tokio::time::sleep(poll).await;
        }
    }
    let total = started.elapsed();
    let line = format!(
        "{} rows in {:.1}s ({:.0} rows/s): INSERT {:.1}s, FLUSH {:.1}s, counted {:.1}s",
        layout.rows,
        total.as_secs_f64(),
        per_second(layout.rows, total),
        inserted.as_secs_f64(),
        (flushed - inserted).as_secs_f64(),
        (total - flushed).as_secs_f64()
    );
    println!("build: {line}");
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_auction_and_window_holds_one_row() {
        let layout = Layout::new(200_000);
        assert_eq!((layout.auctions, layout.per_second), (200, 100));
        let mut seen = std::collections::HashSet::new();
        for i in 0..layout.rows {
            assert!(seen.insert((i % layout.auctions, i / layout.per_second)));
        }
        assert_eq!(layout.built_rows_of(7), RANGE_ROWS);
        assert_eq!(layout.window_span() * layout.per_second, RANGE_ROWS);
    }
}
