//! The concurrent part of `serve`: one writer ingesting into the base table
//! with multi-row INSERTs as fast as eddy takes them, first alone and then
//! while `--clients` clients run a mix of the measured queries.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use tokio_postgres::{Client, Config, NoTls};

use crate::process::{flush_until_done, int, per_second};
use crate::serve::{figure, Figure, Kind, Latencies, Layout, Prepared, Rng};

#[derive(Args, Clone)]
pub struct MixArgs {
    /// Clients querying at once while ingestion runs.
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Seconds of ingestion alone, then as long with the clients.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Rows per INSERT of the ingesting writer.
    #[arg(long, default_value_t = 5_000)]
    ingest_batch: u64,
}

/// The mix, in percent: mostly lookups, some ranges, few full scans.
const MIX: [(Kind, u64); 4] = [
    (Kind::Point, 70),
    (Kind::Range, 20),
    (Kind::Window, 9),
    (Kind::Scan, 1),
];

/// How long a FLUSH after the runs may wait.
const FLUSH_LIMIT: Duration = Duration::from_secs(600);

/// Distinct error messages and how often each came.
type Errors = BTreeMap<String, u64>;

pub async fn run(
    args: &MixArgs,
    config: &Config,
    client: &Client,
    layout: Layout,
    indexed: bool,
    with_window: bool,
    seed: u64,
) -> Result<Vec<Figure>> {
    let mut figures = Vec::new();
    let seconds = Duration::from_secs(args.seconds);
    let writer = connect(config).await?;

    let mut next_row = layout.rows;
    let started = Instant::now();
    let (alone, mut ingest_errors) = ingest(
        &writer,
        layout,
        next_row,
        args.ingest_batch,
        started + seconds,
    )
    .await;
    let alone_took = started.elapsed();
    next_row += alone;
    let alone_rate = per_second(alone, alone_took);
    println!(
        "ingest alone: {alone} rows in {:.1}s: {alone_rate:.0} rows/s",
        alone_took.as_secs_f64()
    );

    let mut readers = Vec::with_capacity(args.clients);
    for _ in 0..args.clients {
        let reader = connect(config).await?;
        let prepared = Prepared::new(&reader, layout).await?;
        readers.push((reader, prepared));
    }
    let started = Instant::now();
    let deadline = started + seconds;
    let writing = tokio::spawn({
        let batch = args.ingest_batch;
        async move {
            let done = ingest(&writer, layout, next_row, batch, deadline).await;
            (done, Instant::now())
        }
    });
    let mut tasks = Vec::with_capacity(readers.len());
    for (index, (reader, prepared)) in readers.into_iter().enumerate() {
        let mut rng = Rng::new(seed ^ (index as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D));
        tasks.push(tokio::spawn(async move {
            let mut latencies: BTreeMap<&'static str, Latencies> = BTreeMap::new();
            let mut errors = Errors::new();
            while Instant::now() < deadline {
                let kind = pick(&mut rng, with_window);
                let begun = Instant::now();
                match prepared.run(&reader, kind, &mut rng).await {
                    Ok(rows) => latencies
                        .entry(kind.label(indexed))
                        .or_default()
                        .add(begun.elapsed(), rows),
                    Err(error) => {
                        *errors
                            .entry(format!("{}: {error:#}", kind.label(indexed)))
                            .or_default() += 1;
                    }
                }
            }
            (latencies, errors)
        }));
    }
    let mut by_kind: BTreeMap<&'static str, Latencies> = BTreeMap::new();
    let mut all = Latencies::default();
    let mut errors = Errors::new();
    for task in tasks {
        let (latencies, task_errors) = task.await.context("a querying client panicked")?;
        for (label, latencies) in latencies {
            let merged = by_kind.entry(label).or_default();
            merged.times.extend(&latencies.times);
            merged.rows += latencies.rows;
            all.times.extend(&latencies.times);
            all.rows += latencies.rows;
        }
        for (message, count) in task_errors {
            *errors.entry(message).or_default() += count;
        }
    }
    let queried = started.elapsed();
    let ((with_readers, writer_errors), written_at) =
        writing.await.context("the ingesting writer panicked")?;
    for (message, count) in writer_errors {
        *ingest_errors.entry(message).or_default() += count;
    }
    let with_rate = per_second(with_readers, written_at - started);
    let total_queries = all.times.len() as u64;
    let error_count: u64 = errors.values().sum();

    let qps = per_second(total_queries, queried);
    let overall = match all.percentiles() {
        Some((p50, p99, max)) => {
            format!("p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms")
        }
        None => "no query finished".to_string(),
    };
    println!(
        "{} clients for {:.1}s: {total_queries} queries, {qps:.1} queries/s, {overall}, {error_count} errors",
        args.clients,
        queried.as_secs_f64()
    );
    figures.push(figure(
        format!("{} clients, mixed, during ingestion", args.clients),
        format!("{qps:.1} queries/s, {overall}, {error_count} query errors"),
    ));
    for (label, latencies) in &mut by_kind {
        let line = latencies.describe();
        println!("  {label}: {line}");
        figures.push(figure(format!("  mixed: {label}"), line));
    }
    for (message, count) in &errors {
        println!("query error ({count}x): {message}");
    }
    let slowdown = 100.0 * (1.0 - with_rate / alone_rate.max(f64::EPSILON));
    println!(
        "ingest with the clients: {with_readers} rows in {:.1}s: {with_rate:.0} rows/s \
         ({slowdown:.0}% below ingesting alone)",
        (written_at - started).as_secs_f64()
    );
    figures.push(figure(
        format!("ingest rate, alone / with {} clients", args.clients),
        format!(
            "{alone_rate:.0} / {with_rate:.0} rows/s ({slowdown:.0}% slower), {} rows per INSERT",
            args.ingest_batch
        ),
    ));
    for (message, count) in &ingest_errors {
        println!("ingest error ({count}x): {message}");
    }

    // Every ingested row must be counted once in per_key.
    flush_until_done(client, FLUSH_LIMIT).await?;
    let expected = layout.rows + alone + with_readers;
    let counted = int(
        &client.query_one("SELECT sum(n) FROM per_key", &[]).await?,
        0,
    )?;
    println!("per_key sum(n) after FLUSH: {counted} (expected {expected})");
    figures.push(figure(
        "per_key sum(n) after ingestion",
        format!("{counted} (expected {expected})"),
    ));
    Ok(figures)
}

/// A query kind drawn from `MIX` (the window query's share goes to the key
/// prefix query when it is not run).
fn pick(rng: &mut Rng, with_window: bool) -> Kind {
    let mut draw = rng.below(100);
    for (kind, weight) in MIX {
        let weight = match kind {
            Kind::Range if !with_window => weight + MIX[2].1,
            Kind::Window if !with_window => 0,
            _ => weight,
        };
        if draw < weight {
            return kind;
        }
        draw -= weight;
    }
    Kind::Point
}

async fn connect(config: &Config) -> Result<Client> {
    let (client, connection) = config.connect(NoTls).await.context("connecting to eddy")?;
    // The error surfaces to the client's next call.
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Multi-row INSERTs of rows `first..` until `deadline`; returns the rows
/// inserted and the errors met.
async fn ingest(
    client: &Client,
    layout: Layout,
    first: u64,
    batch: u64,
    deadline: Instant,
) -> (u64, Errors) {
    let mut sql = String::new();
    let mut next = first;
    let mut errors = Errors::new();
    while Instant::now() < deadline {
        layout.write_values(next..next + batch, &mut sql);
        match client.batch_execute(&sql).await {
            Ok(()) => next += batch,
            Err(error) => {
                *errors.entry(format!("{error:#}")).or_default() += 1;
                // A failed INSERT wrote nothing; do not spin on it.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    (next - first, errors)
}
