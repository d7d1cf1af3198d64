//! `sink`: a Kafka sink from a large materialized view. First the snapshot: a view of
//! `--rows` rows, `CREATE SINK ... snapshot = 'true'`, timed until the topic holds every
//! row (messages/s, and per CPU-second of eddy's). Then latency: single-row INSERTs into the
//! view's table, each timed from sending the INSERT until the topic's high-water offsets
//! count its message (readable by a consumer): p50/p99/max.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use clap::Args;
use eddy_sqllogictest::kafka::{unique_topic, KafkaBroker};

use crate::kafka_load::{self, topic_messages};
use crate::process::{cpu_time, int, mib, per_second, vm_hwm_kib, BenchEddy, EddyArgs};

#[derive(Args)]
pub struct SinkArgs {
    /// Rows of the view the sink starts from.
    #[arg(long, default_value_t = 10_000_000)]
    rows: u64,
    /// Rows per `INSERT ... SELECT FROM generate_series` while building.
    #[arg(long, default_value_t = 500_000)]
    chunk: u64,
    /// Partitions of the topic.
    #[arg(long, default_value_t = 2)]
    partitions: i32,
    /// Single-row INSERTs timed to the broker.
    #[arg(long, default_value_t = 100)]
    samples: usize,
    /// Milliseconds between the timed INSERTs.
    #[arg(long, default_value_t = 200)]
    gap_ms: u64,
    #[command(flatten)]
    eddy: EddyArgs,
}

pub async fn run(args: SinkArgs) -> Result<()> {
    ensure!(
        args.rows > 0 && args.chunk > 0,
        "--rows and --chunk must be positive"
    );
    let broker = kafka_load::broker().await?;
    let topic = unique_topic("sink-bench");
    broker.create_topic(&topic, args.partitions).await?;
    let eddy = BenchEddy::start(&args.eddy).await?;
    let (client, _conn) = eddy.process.connect().await?;
    client
        .batch_execute(
            "CREATE TABLE accounts (id BIGINT PRIMARY KEY, owner BIGINT, balance BIGINT);
             CREATE MATERIALIZED VIEW balances AS
               SELECT id, owner, balance, balance * 100 / (owner + 1) AS score FROM accounts;",
        )
        .await?;
    let built = Instant::now();
    let mut from = 0;
    while from < args.rows {
        let to = (from + args.chunk).min(args.rows) - 1;
        client
            .batch_execute(&format!(
                "INSERT INTO accounts SELECT value, value % 1000, value % 100000 \
                 FROM generate_series({from}, {to})"
            ))
            .await?;
        from = to + 1;
    }
    client.batch_execute("FLUSH").await?;
    println!(
        "view: {} rows in {:.1} s",
        args.rows,
        built.elapsed().as_secs_f64()
    );

    // The snapshot: every row of the view, to the broker.
    let cpu_before = cpu_time(eddy.pid)?;
    let started = Instant::now();
    client
        .batch_execute(&format!(
            "CREATE SINK balances_out FROM balances WITH (connector = 'kafka', topic = '{topic}', \
             properties.bootstrap.server = '{}', snapshot = 'true') FORMAT UPSERT ENCODE JSON",
            broker.bootstrap()
        ))
        .await?;
    let created = started.elapsed();
    wait_for_messages(&broker, &topic, args.partitions, args.rows, &client).await?;
    let elapsed = started.elapsed();
    let cpu = cpu_time(eddy.pid)?.saturating_sub(cpu_before);
    println!(
        "snapshot: {} messages in {:.1} s (CREATE SINK answered in {:.1} s): {:.0} messages/s, \
         {:.0} messages per eddy CPU-second ({:.1} CPU-s)",
        args.rows,
        elapsed.as_secs_f64(),
        created.as_secs_f64(),
        per_second(args.rows, elapsed),
        args.rows as f64 / cpu.as_secs_f64().max(1e-9),
        cpu.as_secs_f64()
    );

    // Latency: INSERT to readable, one row at a time.
    let mut latencies = Vec::with_capacity(args.samples);
    let mut expected = args.rows;
    for sample in 0..args.samples as u64 {
        let id = args.rows + sample;
        let sent = Instant::now();
        client
            .batch_execute(&format!("INSERT INTO accounts VALUES ({id}, 7, 42)"))
            .await?;
        expected += 1;
        loop {
            if topic_messages(&broker, &topic, args.partitions)? >= expected {
                break;
            }
            ensure!(
                sent.elapsed() < Duration::from_secs(60),
                "message {id} not readable after 60 s"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        latencies.push(sent.elapsed());
        tokio::time::sleep(Duration::from_millis(args.gap_ms)).await;
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    println!(
        "latency INSERT -> readable ({} samples, checkpoint {}): p50 {} ms, p99 {} ms, max {} ms",
        latencies.len(),
        args.eddy
            .checkpoint_interval
            .as_deref()
            .unwrap_or("1s (default)"),
        at(0.5).as_millis(),
        at(0.99).as_millis(),
        at(1.0).as_millis()
    );
    println!("eddy peak RSS: {:.0} MiB", mib(vm_hwm_kib(eddy.pid)?));
    Ok(())
}

/// Waits until the topic holds `rows` messages, printing progress every 10 s.
async fn wait_for_messages(
    broker: &KafkaBroker,
    topic: &str,
    partitions: i32,
    rows: u64,
    client: &tokio_postgres::Client,
) -> Result<()> {
    let started = Instant::now();
    let mut reported = Instant::now();
    loop {
        let held = topic_messages(broker, topic, partitions)?;
        if held >= rows {
            return Ok(());
        }
        if reported.elapsed() >= Duration::from_secs(10) {
            let row = client
                .query_one(
                    "SELECT messages_sent, bytes_behind FROM eddy_catalog.sinks",
                    &[],
                )
                .await
                .context("reading eddy_catalog.sinks")?;
            println!(
                "  {:.0} s: {held} messages in the topic, {} sent, {} bytes behind",
                started.elapsed().as_secs_f64(),
                int(&row, 0)?,
                int(&row, 1)?
            );
            reported = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
