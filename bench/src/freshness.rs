//! `freshness`: bids produced at a fixed rate into a Kafka topic that a view
//! reads; how long after a bid is handed to the producer a SELECT on the view
//! counts it (p50/p99/max).
//!
//! The view is polled every `--poll-ms` for the number of bids it accounts
//! for (`count(*)` or `sum(bids)`); when that number first reaches `c`, bids
//! `0..c` are taken as visible. With several partitions read in parallel
//! this is an estimate within a poll interval and the partitions' skew.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, ensure, Context, Result};
use clap::Args;
use eddy_sqllogictest::kafka::unique_topic;
use eddy_sqllogictest::DEFAULT_STOP_TIMEOUT;

use crate::kafka_load;
use crate::process::{cpu_time, int, mib, per_second, vm_hwm_kib, BenchEddy, EddyArgs};
use crate::queries::{Query, BID_COLUMNS, SOURCE};

#[derive(Args)]
pub struct FreshnessArgs {
    /// The query (one whose view counts every bid: q0, q1, q7 or q11).
    #[arg(long, value_enum, default_value = "q7")]
    query: Query,
    /// Bids per second produced.
    #[arg(long, default_value_t = 20_000)]
    rate: u64,
    /// Seconds of producing.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Bids produced in the first seconds are left out of the figures.
    #[arg(long, default_value_t = 5)]
    warmup_seconds: u64,
    /// Milliseconds between SELECTs on the view.
    #[arg(long, default_value_t = 50)]
    poll_ms: u64,
    /// Partitions of the topic.
    #[arg(long, default_value_t = 2)]
    partitions: i32,
    #[command(flatten)]
    eddy: EddyArgs,
}

/// Producer ticks per second: the rate is kept per 10 ms.
const TICKS_PER_SECOND: u64 = 100;

pub async fn run(args: FreshnessArgs) -> Result<()> {
    ensure!(
        args.rate > 0 && args.seconds > 0,
        "--rate and --seconds must be positive"
    );
    let Some((count_sql, 1)) = args.query.counted_bids() else {
        bail!("--query must be one whose view counts every bid once (q0, q1, q7, q11)");
    };
    let broker = kafka_load::broker().await?;
    let topic = unique_topic("freshness-bids");
    broker.create_topic(&topic, args.partitions).await?;

    let mut eddy = BenchEddy::start(&args.eddy).await?;
    let pid = eddy.pid;
    let (client, _driver) = eddy.process.connect().await?;
    let source_sql = format!(
        "CREATE SOURCE {SOURCE} ({BID_COLUMNS}) WITH (connector = 'kafka', topic = '{topic}', \
         properties.bootstrap.server = '{}', scan.startup.mode = 'earliest') \
         FORMAT PLAIN ENCODE JSON",
        broker.bootstrap()
    );
    client
        .batch_execute(&source_sql)
        .await
        .context(source_sql)?;
    client
        .batch_execute(&args.query.create_view())
        .await
        .context(args.query.create_view())?;

    let total = args.rate * args.seconds;
    let producer = Arc::new(kafka_load::bulk_producer(&broker, 5)?);
    let cpu_before = cpu_time(pid)?;
    let started = Instant::now();
    let producing = {
        let producer = producer.clone();
        let (topic, rate, partitions) = (topic.clone(), args.rate, args.partitions);
        tokio::task::spawn_blocking(move || {
            produce_at_rate(&producer, &topic, partitions, rate, total, started)
        })
    };

    // (when, bids the view accounts for), polled until every bid is counted.
    let mut polls: Vec<(Instant, u64)> = Vec::new();
    let poll = Duration::from_millis(args.poll_ms);
    let deadline_after_producing = Duration::from_secs(120);
    let mut produced_at = None;
    loop {
        let counted = int(&client.query_one(&count_sql, &[]).await?, 0)?.max(0) as u64;
        polls.push((Instant::now(), counted));
        if counted >= total {
            break;
        }
        if producing.is_finished() {
            let done = *produced_at.get_or_insert_with(Instant::now);
            if done.elapsed() > deadline_after_producing {
                bail!(
                    "the view counts {counted} of {total} bids 120 s after the last was produced"
                );
            }
        }
        tokio::time::sleep(poll).await;
    }
    let sent_at = producing.await??;
    kafka_load::finish(&producer, total)?;
    let elapsed = started.elapsed();
    let cpu = cpu_time(pid)? - cpu_before;
    let peak_rss = vm_hwm_kib(pid)?;
    drop(client);
    eddy.process.terminate(DEFAULT_STOP_TIMEOUT).await?;

    let warmup = Duration::from_secs(args.warmup_seconds);
    let mut latencies = visible_latencies(&sent_at, &polls, started + warmup);
    ensure!(
        !latencies.is_empty(),
        "no bids after the warm-up to measure"
    );
    latencies.sort_unstable();
    let pick = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    let producing_for = sent_at
        .last()
        .map_or(Duration::ZERO, |last| *last - started);
    println!(
        "produced {total} bids at {} bids/s target, {:.0} bids/s achieved, into {} partitions",
        args.rate,
        per_second(total, producing_for),
        args.partitions
    );
    println!(
        "eddy CPU: {:.1}s over {:.1}s ({:.0}% of one core); peak RSS {:.1} MiB",
        cpu.as_secs_f64(),
        elapsed.as_secs_f64(),
        100.0 * cpu.as_secs_f64() / elapsed.as_secs_f64(),
        mib(peak_rss)
    );
    println!(
        "append-to-visible latency over {} bids (after {} s warm-up, polled every {} ms): \
         p50 {} ms, p99 {} ms, max {} ms",
        latencies.len(),
        args.warmup_seconds,
        args.poll_ms,
        pick(0.50).as_millis(),
        pick(0.99).as_millis(),
        latencies[latencies.len() - 1].as_millis()
    );
    Ok(())
}

/// Sends `total` bids, `rate` per second in 10 ms steps; returns when each was
/// handed to the producer.
fn produce_at_rate(
    producer: &rdkafka::producer::ThreadedProducer<kafka_load::Deliveries>,
    topic: &str,
    partitions: i32,
    rate: u64,
    total: u64,
    started: Instant,
) -> Result<Vec<Instant>> {
    let mut sent_at = Vec::with_capacity(total as usize);
    let mut payload = String::new();
    let mut tick = 0u64;
    while (sent_at.len() as u64) < total {
        tick += 1;
        let due = (rate * tick / TICKS_PER_SECOND).min(total);
        let next = started + Duration::from_micros(tick * 1_000_000 / TICKS_PER_SECOND);
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        while (sent_at.len() as u64) < due {
            let i = sent_at.len() as u64;
            payload.clear();
            bid_json(i, now_ms, &mut payload);
            kafka_load::send(
                producer,
                topic,
                (i % partitions as u64) as i32,
                payload.as_bytes(),
            )?;
            sent_at.push(Instant::now());
        }
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    Ok(sent_at)
}

/// A bid shaped like the generated files' (event time = now, epoch millis).
fn bid_json(i: u64, now_ms: i64, out: &mut String) {
    use std::fmt::Write as _;
    let _ = write!(
        out,
        r#"{{"auction":{},"bidder":{},"price":{},"channel":"channel-{}","url":"https://example.com/{}","date_time":{now_ms},"extra":""}}"#,
        1000 + i * 7919 % 1000,
        1000 + i * 104_729 % 5000,
        100 + i * 31 % 100_000,
        i % 100,
        i % 1000
    );
}

/// For every bid sent after `from`: the first poll that counts it minus when it was sent.
fn visible_latencies(
    sent_at: &[Instant],
    polls: &[(Instant, u64)],
    from: Instant,
) -> Vec<Duration> {
    let mut latencies = Vec::new();
    let mut next = 0usize;
    for &(at, counted) in polls {
        let counted = (counted as usize).min(sent_at.len());
        while next < counted {
            if sent_at[next] >= from {
                latencies.push(at.saturating_duration_since(sent_at[next]));
            }
            next += 1;
        }
    }
    latencies
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bid_is_visible_at_the_first_poll_that_counts_it() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let sent = [ms(0), ms(10), ms(20), ms(30)];
        let polls = [(ms(50), 1), (ms(100), 3), (ms(150), 3), (ms(200), 4)];
        let got = visible_latencies(&sent, &polls, ms(5));
        let want: Vec<Duration> = [90, 80, 170].map(Duration::from_millis).to_vec();
        assert_eq!(got, want);
    }
}
