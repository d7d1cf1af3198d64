//! `drain`: backpressure. Preloads a Kafka topic with N JSON messages, then
//! lets a view that is slower than the broker drain it while eddy's RSS
//! (VmRSS) is sampled every second. Each reader hands the pipeline batches
//! through a small bounded channel, so reading waits for the view: memory
//! should stay flat however much the topic holds. Ends with an exactness
//! check (the view counts every message once).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use clap::{Args, ValueEnum};
use eddy_sqllogictest::kafka::unique_topic;
use eddy_sqllogictest::DEFAULT_STOP_TIMEOUT;

use crate::kafka_load;
use crate::process::{
    cpu_time, flush_until_done, int, mib, per_second, vm_hwm_kib, vm_rss_kib, BenchEddy, EddyArgs,
};

/// How long a run may take to drain its input.
const FLUSH_LIMIT: std::time::Duration = std::time::Duration::from_secs(3600);

#[derive(Args)]
pub struct DrainArgs {
    /// Messages in the topic.
    #[arg(long, default_value_t = 10_000_000)]
    messages: u64,
    /// Distinct grouping keys of the view (few enough that its state stops
    /// growing early, so that growth in RSS would be buffering).
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    /// Partitions of the topic.
    #[arg(long, default_value_t = 2)]
    partitions: i32,
    /// Drain this existing topic (made by an earlier run with the same
    /// --messages and --keys) instead of preloading a new one.
    #[arg(long)]
    topic: Option<String>,
    /// The view: `expensive` (string hashing and regexes per message) or
    /// `cheap` (a count per key), to compare drain rates.
    #[arg(long, value_enum, default_value = "expensive")]
    view: ViewKind,
    /// How many copies of each message's string the expensive view works on.
    #[arg(long, default_value_t = 200)]
    work: u32,
    /// Give up when nothing is committed for this many seconds.
    #[arg(long, default_value_t = 300)]
    stall_seconds: u64,
    #[command(flatten)]
    eddy: EddyArgs,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ViewKind {
    Expensive,
    Cheap,
}

const SOURCE: &str = "drain_src";
const VIEW: &str = "drain_view";

impl ViewKind {
    /// The view's SELECT. The expensive one does string work on a copy of
    /// each message's string repeated `work` times, and keeps only fixed-size
    /// aggregates, so that its state stops growing once every key is seen.
    fn select(self, work: u32) -> String {
        match self {
            ViewKind::Expensive => format!(
                "SELECT k, count(*) AS n, sum(v) AS total, \
                 sum(length(regexp_replace(repeat(s, {work}), '[0-9a-f]+', '', 'g'))) AS letters, \
                 sum(ascii(md5(repeat(upper(s), {work})))) AS hashed \
                 FROM {SOURCE} GROUP BY k"
            ),
            ViewKind::Cheap => format!("SELECT k, count(*) AS n FROM {SOURCE} GROUP BY k"),
        }
    }
}

pub async fn run(args: DrainArgs) -> Result<()> {
    ensure!(
        args.messages > 0 && args.keys > 0,
        "--messages and --keys must be positive"
    );
    let broker = kafka_load::broker().await?;
    let topic = match &args.topic {
        Some(topic) => {
            let held = kafka_load::topic_messages(&broker, topic, args.partitions)?;
            ensure!(
                held == args.messages,
                "{topic} holds {held} messages, not --messages {}",
                args.messages
            );
            topic.clone()
        }
        None => {
            let topic = unique_topic("drain");
            broker.create_topic(&topic, args.partitions).await?;
            preload(&broker, &topic, &args)?;
            topic
        }
    };

    let mut eddy = BenchEddy::start(&args.eddy).await?;
    let pid = eddy.pid;
    let (client, _driver) = eddy.process.connect().await?;
    let source_sql = format!(
        "CREATE SOURCE {SOURCE} (k BIGINT, v BIGINT, s VARCHAR, ts TIMESTAMP) \
         WITH (connector = 'kafka', topic = '{topic}', properties.bootstrap.server = '{}', \
         scan.startup.mode = 'earliest') FORMAT PLAIN ENCODE JSON",
        broker.bootstrap()
    );
    client
        .batch_execute(&source_sql)
        .await
        .context(source_sql)?;
    let view_sql = format!(
        "CREATE MATERIALIZED VIEW {VIEW} AS {}",
        args.view.select(args.work)
    );
    println!("view: {view_sql}");
    let rss_before = vm_rss_kib(pid)?;
    let cpu_before = cpu_time(pid)?;
    let started = Instant::now();
    client.batch_execute(&view_sql).await.context(view_sql)?;

    let progress_sql = format!(
        "SELECT CAST(sum(committed_offset) AS BIGINT) FROM eddy_catalog.source_progress \
         WHERE target = '{VIEW}'"
    );
    let mut rss_samples = Vec::new();
    let mut line = String::new();
    let mut last = (0u64, started);
    let mut moved = started;
    println!("  t(s)  RSS(MiB)  committed  msg/s");
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let rss = vm_rss_kib(pid)?;
        let committed = int(&client.query_one(&progress_sql, &[]).await?, 0)?.max(0) as u64;
        let now = Instant::now();
        rss_samples.push(rss);
        line.clear();
        let _ = write!(
            line,
            "{:6.0}  {:8.1}  {committed:9}  {:5.0}",
            (now - started).as_secs_f64(),
            mib(rss),
            per_second(committed.saturating_sub(last.0), now - last.1)
        );
        println!("{line}");
        if committed > last.0 {
            moved = now;
        } else if now - moved > Duration::from_secs(args.stall_seconds) {
            bail!(
                "nothing committed for {} s ({committed} of {} messages); eddy's log ends:\n{}",
                args.stall_seconds,
                args.messages,
                eddy.process.log_tail(10)
            );
        }
        last = (committed, now);
        if committed >= args.messages {
            break;
        }
        if !eddy.process.is_running() {
            bail!("eddy exited:\n{}", eddy.process.log_tail(30));
        }
    }
    flush_until_done(&client, FLUSH_LIMIT).await?;
    let elapsed = started.elapsed();
    let cpu = cpu_time(pid)? - cpu_before;
    let row = client
        .query_one(
            &format!("SELECT count(*), CAST(sum(n) AS BIGINT) FROM {VIEW}"),
            &[],
        )
        .await?;
    let (groups, counted) = (int(&row, 0)?, int(&row, 1)?);
    let peak = vm_hwm_kib(pid)?;
    drop(client);
    eddy.process.terminate(DEFAULT_STOP_TIMEOUT).await?;

    let mut sorted = rss_samples.clone();
    sorted.sort_unstable();
    println!(
        "drained {} messages in {:.1}s: {:.0} msg/s; eddy CPU {:.1}s ({:.0} msg per CPU-second)",
        args.messages,
        elapsed.as_secs_f64(),
        per_second(args.messages, elapsed),
        cpu.as_secs_f64(),
        per_second(args.messages, cpu)
    );
    println!(
        "eddy RSS while draining ({} samples, 1 s apart): min {:.1} MiB, median {:.1} MiB, \
         max {:.1} MiB; before the view {:.1} MiB; peak (VmHWM) {:.1} MiB",
        sorted.len(),
        mib(sorted[0]),
        mib(sorted[sorted.len() / 2]),
        mib(sorted[sorted.len() - 1]),
        mib(rss_before),
        mib(peak)
    );
    let expected_groups = args.keys.min(args.messages);
    println!(
        "view: {groups} groups (expected {expected_groups}), sum(n) = {counted} (expected {})",
        args.messages
    );
    if counted != args.messages as i64 || groups != expected_groups as i64 {
        bail!("the view does not count every message exactly once");
    }
    Ok(())
}

/// Message `i`: key `i * 7919 % keys`, value `i`, a 40-character string and a time.
fn preload(
    broker: &eddy_sqllogictest::kafka::KafkaBroker,
    topic: &str,
    args: &DrainArgs,
) -> Result<()> {
    let producer = kafka_load::bulk_producer(broker, 20)?;
    let started = Instant::now();
    let mut payload = String::new();
    let partitions = args.partitions as u64;
    for i in 0..args.messages {
        payload.clear();
        let _ = write!(
            payload,
            r#"{{"k":{},"v":{i},"s":"msg-{:016x}-{:018}","ts":{}}}"#,
            i * 7919 % args.keys,
            i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            i,
            1_704_067_200_000 + i as i64
        );
        kafka_load::send(
            &producer,
            topic,
            (i % partitions) as i32,
            payload.as_bytes(),
        )?;
    }
    kafka_load::finish(&producer, args.messages)?;
    let elapsed = started.elapsed();
    println!(
        "preloaded {} messages into {topic} ({} partitions) in {:.1}s ({:.0} msg/s)",
        args.messages,
        args.partitions,
        elapsed.as_secs_f64(),
        per_second(args.messages, elapsed)
    );
    Ok(())
}
