//! `recovery`: how long a crashed eddy takes to come back, by the size of what it keeps.
//!
//! For each target size: a bounded Nexmark bid source feeds a view that keeps every bid (view
//! rows) and a per-auction aggregate (operator state) until the data directory holds about
//! that much; then eddy is killed (`kill -9`) and restarted. Reported: exec to accepting
//! connections, then until every view is caught up (FLUSH returned and each view answers with
//! every event counted once), the resident memory at both points, the bytes the restarted
//! process read (`/proc/<pid>/io`), and the restore phases eddy itself reports in
//! `eddy_catalog.restore`.
//!
//! The store's bytes per event fall as the directory grows (the journal's share shrinks and
//! compaction drops more overwritten versions), so the events for each size are estimated from
//! the largest run so far, and a run ending below 80% of its target is run again, scaled up.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use clap::Args;

use crate::process::{dir_size, flush_until_done, int, vm_rss_kib, BenchEddy, EddyArgs};

/// A run whose directory ends below this share of its target is run again with more events.
const LEAST_SHARE_OF_TARGET: f64 = 0.8;

#[derive(Args)]
pub struct RecoveryArgs {
    #[command(flatten)]
    eddy: EddyArgs,
    /// Data directory sizes to measure, in MiB (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "250,500,1000")]
    sizes_mib: Vec<u64>,
    /// Events of the calibration run that measures bytes per event.
    #[arg(long, default_value_t = 200_000)]
    calibration_events: u64,
}

const VIEWS: &str = "
    CREATE MATERIALIZED VIEW bids_kept AS
      SELECT auction, bidder, price, channel, url, date_time, extra FROM bid;
    CREATE MATERIALIZED VIEW per_auction AS
      SELECT auction, count(*) AS bids, sum(price) AS total, max(price) AS top
      FROM bid GROUP BY auction;";

fn source(events: u64) -> String {
    format!(
        "CREATE SOURCE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR,
           url VARCHAR, date_time TIMESTAMP, extra VARCHAR)
         WITH (connector = 'nexmark', nexmark.table.type = 'bid',
               nexmark.max.events = '{events}');"
    )
}

/// One crash and restart.
struct Recovery {
    events: u64,
    data_bytes: u64,
    /// Bytes of the views' keys and values (rows and state), as stored: the logical data.
    logical_bytes: u64,
    ingest: Duration,
    accept: Duration,
    caught_up: Duration,
    rss_accepting_kib: u64,
    rss_caught_up_kib: u64,
    read_chars: u64,
    read_from_disk: u64,
    open_store_seconds: f64,
    restore_catalog_seconds: f64,
}

pub async fn run(args: RecoveryArgs) -> Result<()> {
    let calibration = crash_and_restart(&args.eddy, args.calibration_events).await?;
    // The generator's maximum counts every Nexmark event, 46 in 50 of them bids.
    let mut bytes_per_event = calibration.data_bytes as f64 / calibration.events as f64;
    println!(
        "calibration: {} events, {:.1} MiB on disk, {:.0} bytes per event",
        calibration.events,
        mib(calibration.data_bytes),
        bytes_per_event
    );
    let mut results = Vec::new();
    for size in &args.sizes_mib {
        let target = (size << 20) as f64;
        let mut result = crash_and_restart(&args.eddy, (target / bytes_per_event) as u64).await?;
        print(&result);
        bytes_per_event = result.data_bytes as f64 / result.events as f64;
        if (result.data_bytes as f64) < LEAST_SHARE_OF_TARGET * target {
            println!("below {size} MiB: run again with {bytes_per_event:.0} bytes per event");
            result = crash_and_restart(&args.eddy, (target / bytes_per_event) as u64).await?;
            print(&result);
            bytes_per_event = result.data_bytes as f64 / result.events as f64;
        }
        results.push(result);
    }
    println!();
    println!(
        "| data directory | logical data | events | exec → accepting | RSS accepting | → caught up | RSS caught up | bytes read (syscalls / disk) | open store | restore catalog |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in &results {
        println!(
            "| {:.0} MiB | {:.0} MiB ({:.2}×) | {} | {:.2} s | {:.0} MiB | {:.2} s | {:.0} MiB | {:.0} MiB / {:.0} MiB | {:.2} s | {:.2} s |",
            mib(r.data_bytes),
            mib(r.logical_bytes),
            r.data_bytes as f64 / r.logical_bytes.max(1) as f64,
            r.events,
            r.accept.as_secs_f64(),
            r.rss_accepting_kib as f64 / 1024.0,
            r.caught_up.as_secs_f64(),
            r.rss_caught_up_kib as f64 / 1024.0,
            mib(r.read_chars),
            mib(r.read_from_disk),
            r.open_store_seconds,
            r.restore_catalog_seconds
        );
    }
    Ok(())
}

async fn crash_and_restart(args: &EddyArgs, events: u64) -> Result<Recovery> {
    // Each run on a data directory of its own (under --eddy-dir when given, to keep its log).
    let mut args = args.clone();
    args.dir = args.dir.map(|dir| dir.join(format!("{events}-events")));
    let mut eddy = BenchEddy::start(&args).await?;
    let (client, _connection) = eddy.process.connect().await?;
    let ingesting = Instant::now();
    client.batch_execute(&source(events)).await?;
    client.batch_execute(VIEWS).await?;
    flush_until_done(&client, Duration::from_secs(3600)).await?;
    let ingest = ingesting.elapsed();
    let expected = count(&client, "bids_kept").await?;
    let logical_bytes: i64 = int(
        &client
            .query_one(
                "SELECT pg_total_relation_size('bids_kept') + pg_total_relation_size('per_auction')",
                &[],
            )
            .await?,
        0,
    )?;
    drop(client);
    let data_bytes = dir_size(eddy.process.data_dir())?;

    eddy.process.kill9()?;
    let restarting = Instant::now();
    eddy.process.restart().await?;
    let accept = restarting.elapsed();
    let pid = eddy.process.pid().context("eddy is not running")?;
    let rss_accepting_kib = vm_rss_kib(pid)?;
    let (client, _connection) = eddy.process.connect().await?;
    flush_until_done(&client, Duration::from_secs(3600)).await?;
    let kept = count(&client, "bids_kept").await?;
    let auctions: i64 = int(
        &client
            .query_one("SELECT sum(bids) FROM per_auction", &[])
            .await?,
        0,
    )?;
    let caught_up = restarting.elapsed();
    let rss_caught_up_kib = vm_rss_kib(pid)?;
    ensure!(
        kept == expected && auctions == expected,
        "after the restart bids_kept has {kept} rows and per_auction counts {auctions} bids; \
         before the crash {expected}"
    );
    let (read_chars, read_from_disk) = io_read(pid)?;
    let restore = client
        .query_one(
            "SELECT open_store_seconds, restore_catalog_seconds FROM eddy_catalog.restore",
            &[],
        )
        .await?;
    Ok(Recovery {
        events,
        data_bytes,
        logical_bytes: logical_bytes.max(0) as u64,
        ingest,
        accept,
        caught_up,
        rss_accepting_kib,
        rss_caught_up_kib,
        read_chars,
        read_from_disk,
        open_store_seconds: restore.try_get(0)?,
        restore_catalog_seconds: restore.try_get(1)?,
    })
}

async fn count(client: &tokio_postgres::Client, view: &str) -> Result<i64> {
    int(
        &client
            .query_one(&format!("SELECT count(*) FROM {view}"), &[])
            .await?,
        0,
    )
}

/// Bytes read through system calls (`rchar`, page cache hits included) and from the disk
/// (`read_bytes`) by a process so far.
fn io_read(pid: u32) -> Result<(u64, u64)> {
    let path = format!("/proc/{pid}/io");
    let io = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let field = |name: &str| -> Result<u64> {
        io.lines()
            .find_map(|line| line.strip_prefix(name))
            .with_context(|| format!("no {name} in {path}"))?
            .trim()
            .parse()
            .with_context(|| format!("bad {name} in {path}"))
    };
    Ok((field("rchar:")?, field("read_bytes:")?))
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn print(r: &Recovery) {
    println!(
        "{} events ({:.0} MiB on disk, {:.0} MiB logical, ingested in {:.1} s): kill -9, then \
         accepting after {:.2} s at {:.0} MiB RSS (store {:.2} s, catalog {:.2} s), caught up \
         after {:.2} s at {:.0} MiB, read {:.0} MiB ({:.0} MiB from disk)",
        r.events,
        mib(r.data_bytes),
        mib(r.logical_bytes),
        r.ingest.as_secs_f64(),
        r.accept.as_secs_f64(),
        r.rss_accepting_kib as f64 / 1024.0,
        r.open_store_seconds,
        r.restore_catalog_seconds,
        r.caught_up.as_secs_f64(),
        r.rss_caught_up_kib as f64 / 1024.0,
        mib(r.read_chars),
        mib(r.read_from_disk)
    );
}
