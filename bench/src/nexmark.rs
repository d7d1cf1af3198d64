//! `nexmark`: one Nexmark query end to end through a real eddy, over a
//! bounded input (the built-in generator, a JSON-lines file, or a Kafka topic
//! preloaded with that file). Times CREATE MATERIALIZED VIEW + FLUSH (FLUSH
//! returns once the view's reader has taken in everything the source held
//! and the epoch is committed) and prints events/s, events per CPU-second of
//! eddy, eddy's peak RSS and the view's row count.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use clap::{Args, ValueEnum};
use eddy_sqllogictest::kafka::{unique_topic, KafkaBroker};
use eddy_sqllogictest::DEFAULT_STOP_TIMEOUT;

use crate::ack_probe::AckProbe;
use crate::kafka_load;
use crate::process::{
    cpu_time, dir_size, flush_until_done, int, mib, per_second, vm_hwm_kib, vm_rss_kib, BenchEddy,
    EddyArgs,
};
use crate::queries::{Query, Table, VIEW};

/// How long a run may take to drain its input.
const FLUSH_LIMIT: std::time::Duration = std::time::Duration::from_secs(3600);

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Input {
    /// The built-in generator (connector = 'nexmark').
    Nexmark,
    /// A JSON-lines file of bids (connector = 'file').
    File,
    /// A Kafka topic holding the file's lines (connector = 'kafka').
    Kafka,
}

#[derive(Args)]
pub struct NexmarkArgs {
    /// The query.
    #[arg(long, value_enum, default_value = "q7")]
    query: Query,
    /// Where the bids come from.
    #[arg(long, value_enum, default_value = "nexmark")]
    input: Input,
    /// The JSON-lines file of bids (for --input file, and to preload --input kafka).
    #[arg(long)]
    path: Option<PathBuf>,
    /// --input file: a directory of `person.jsonl`, `auction.jsonl` and `bid.jsonl` (from
    /// `eddy-bench nexmark-files`), for queries that read several tables.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// --input nexmark: Nexmark events to generate (all kinds; 46 in 50 are bids).
    #[arg(long, default_value_t = 10_000_000)]
    events: u64,
    /// --input nexmark: the generator's seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// --input kafka: read this existing topic instead of creating one from --path.
    #[arg(long)]
    topic: Option<String>,
    /// --input kafka: the source's watermark.idle.timeout. Long by default: a
    /// partition the broker serves slowly must not count as idle, or the
    /// other partition's watermark makes its rows late.
    #[arg(long, default_value = "60s")]
    idle_timeout: String,
    /// --input kafka: partitions of the topic created from --path.
    #[arg(long, default_value_t = 2)]
    partitions: i32,
    /// Record a profile of eddy with `perf record` into this file, from
    /// CREATE MATERIALIZED VIEW until FLUSH returns.
    #[arg(long)]
    perf: Option<PathBuf>,
    /// Further `perf record` arguments (e.g. --perf-arg=--call-graph=dwarf).
    #[arg(long, allow_hyphen_values = true)]
    perf_arg: Vec<String>,
    /// While the view drains, time single-row INSERTs into a table of their own (with a small
    /// view): how long another statement waits for the heavy view.
    #[arg(long)]
    probe_acks: bool,
    /// Declare `id` the PRIMARY KEY of person and auction (each is unique there), as a user
    /// who knows it would.
    #[arg(long)]
    primary_keys: bool,
    #[command(flatten)]
    eddy: EddyArgs,
}

pub async fn run(args: NexmarkArgs) -> Result<()> {
    // Kept alive for the run: a private broker stops when dropped.
    let mut _broker = None;
    let mut sources = Vec::new();
    let mut events = 0;
    for &table in args.query.tables() {
        let (with, rows) = match args.input {
            Input::Nexmark => (
                format!(
                    "WITH (connector = 'nexmark', nexmark.table.type = '{}', \
                     nexmark.max.events = '{}', nexmark.seed = '{}')",
                    table.name(),
                    args.events,
                    args.seed
                ),
                table.rows_in(args.events),
            ),
            Input::File => {
                let path = table_path(&args, table)?;
                let lines = count_lines(&path)?;
                (
                    format!(
                        "WITH (connector = 'file', path = '{}') FORMAT PLAIN ENCODE JSON",
                        sql_string(&path)
                    ),
                    lines,
                )
            }
            Input::Kafka => {
                ensure!(
                    table == Table::Bid,
                    "--input kafka reads bids only: {:?} needs {:?}",
                    args.query,
                    table
                );
                let (with, messages, broker) = kafka_source(&args).await?;
                _broker = Some(broker);
                (with, messages)
            }
        };
        println!("input: {:?} {}: {rows} rows", args.input, table.name());
        events += rows;
        sources.push(format!(
            "CREATE SOURCE {} ({}) {with}",
            table.name(),
            table.columns_keyed(args.primary_keys)
        ));
    }
    let bids = events;
    println!("query: {:?}: {}", args.query, args.query.select());
    println!("input: {:?}, {bids} bids", args.input);

    let mut eddy = BenchEddy::start(&args.eddy).await?;
    let pid = eddy.pid;
    let (client, _driver) = eddy.process.connect().await?;
    for sql in sources.iter().map(String::as_str).chain(args.query.setup()) {
        client
            .batch_execute(sql)
            .await
            .with_context(|| sql.to_string())?;
    }

    let profiler = match &args.perf {
        Some(file) => Some(Profiler::start(pid, file, &args.perf_arg)?),
        None => None,
    };
    let probe = match args.probe_acks {
        true => Some(AckProbe::start(&eddy.process).await?),
        false => None,
    };
    let rss_before = vm_rss_kib(pid)?;
    let cpu_before = cpu_time(pid)?;
    let started = Instant::now();
    if let Err(error) = client.batch_execute(&args.query.create_view()).await {
        if args.query == Query::Q11 {
            let reason = error.as_db_error().map_or(error.to_string(), |db| {
                format!("{} ({})", db.message(), db.code().code())
            });
            bail!("q11 is not supported by this eddy (SESSION windows): {reason}");
        }
        return Err(error).context(args.query.create_view());
    }
    flush_until_done(&client, FLUSH_LIMIT).await?;
    let elapsed = started.elapsed();
    if let Some(probe) = probe {
        probe.finish().await?;
    }
    let cpu = cpu_time(pid)? - cpu_before;
    let peak_rss = vm_hwm_kib(pid)?;
    if let Some(profiler) = profiler {
        profiler.stop()?;
    }

    let view_rows = int(
        &client
            .query_one(&format!("SELECT count(*) FROM {VIEW}"), &[])
            .await?,
        0,
    )?;
    let counted = match args.query.counted_bids() {
        Some((sql, per_bid)) => Some((int(&client.query_one(&sql, &[]).await?, 0)?, per_bid)),
        None => None,
    };
    let mut join_state = Vec::new();
    for row in client
        .query(
            "SELECT side, input, rows, distinct_keys FROM eddy_catalog.join_state ORDER BY join, side",
            &[],
        )
        .await?
    {
        join_state.push((
            row.get::<_, String>(0),
            row.get::<_, String>(1),
            int(&row, 2)?,
            int(&row, 3)?,
        ));
    }
    let errors = int(
        &client
            .query_one("SELECT count(*) FROM eddy_catalog.source_errors", &[])
            .await?,
        0,
    )?;
    let late = int(
        &client
            .query_one("SELECT count(*) FROM eddy_catalog.late_rows", &[])
            .await?,
        0,
    )?;
    drop(client);
    eddy.process.terminate(DEFAULT_STOP_TIMEOUT).await?;
    let data_bytes = dir_size(eddy.process.data_dir())?;

    println!(
        "time: {:.2}s wall, {:.2}s eddy CPU (user+system)",
        elapsed.as_secs_f64(),
        cpu.as_secs_f64()
    );
    println!("events (rows of every input): {bids}");
    println!("events/s: {:.0}", per_second(bids, elapsed));
    println!("events per CPU-second: {:.0}", per_second(bids, cpu));
    println!(
        "eddy peak RSS (VmHWM): {:.1} MiB (RSS before the view: {:.1} MiB)",
        mib(peak_rss),
        mib(rss_before)
    );
    println!("view rows: {view_rows}");
    for (side, input, rows, keys) in &join_state {
        println!("join state: {side} ({input}): {rows} rows, {keys} keys");
    }
    println!("undecodable: {errors}, late: {late}");
    println!("data dir size: {:.1} MiB", data_bytes as f64 / 1_048_576.0);
    if let Some((counted, per_bid)) = counted {
        println!(
            "bids in the view: {} (expected {bids})",
            counted / per_bid.max(1)
        );
        if counted != bids as i64 * per_bid {
            bail!("the view does not account for every bid: the figures above are not valid");
        }
    }
    Ok(())
}

/// The file a table is read from: `--dir`'s `<table>.jsonl`, or `--path` for bids.
fn table_path(args: &NexmarkArgs, table: Table) -> Result<PathBuf> {
    match (&args.dir, table) {
        (Some(dir), _) => {
            let path = dir.join(format!("{}.jsonl", table.name()));
            std::fs::canonicalize(&path).with_context(|| {
                format!(
                    "{} not found (write it with `eddy-bench nexmark-files --out {}`)",
                    path.display(),
                    dir.display()
                )
            })
        }
        (None, Table::Bid) => required_path(args),
        (None, _) => bail!(
            "--dir DIR is needed: {:?} reads {}",
            args.query,
            table.name()
        ),
    }
}

/// The bid source over Kafka: a topic preloaded from `--path` (or `--topic`).
async fn kafka_source(args: &NexmarkArgs) -> Result<(String, u64, KafkaBroker)> {
    let broker = kafka_load::broker().await?;
    let (topic, messages) = match &args.topic {
        Some(topic) => (
            topic.clone(),
            kafka_load::topic_messages(&broker, topic, args.partitions)?,
        ),
        None => {
            let path = required_path(args)?;
            let topic = unique_topic("nexmark-bids");
            broker.create_topic(&topic, args.partitions).await?;
            let lines = kafka_load::preload_file(&broker, &topic, args.partitions, &path).await?;
            (topic, lines)
        }
    };
    let with = format!(
        "WITH (connector = 'kafka', topic = '{topic}', \
         properties.bootstrap.server = '{}', scan.startup.mode = 'earliest', \
         watermark.idle.timeout = '{}') FORMAT PLAIN ENCODE JSON",
        broker.bootstrap(),
        args.idle_timeout
    );
    Ok((with, messages, broker))
}

fn required_path(args: &NexmarkArgs) -> Result<PathBuf> {
    let path = args
        .path
        .clone()
        .context("--path FILE is needed: a JSON-lines file of bids")?;
    std::fs::canonicalize(&path).with_context(|| format!("{} not found", path.display()))
}

/// Lines in a file (newline bytes, plus a last line without one).
pub fn count_lines(path: &Path) -> Result<u64> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    let (mut lines, mut last) = (0u64, b'\n');
    loop {
        let read = file.read(&mut buf)?;
        if read == 0 {
            break;
        }
        lines += buf[..read].iter().filter(|&&b| b == b'\n').count() as u64;
        last = buf[read - 1];
    }
    Ok(lines + u64::from(last != b'\n'))
}

/// A path as the inside of a SQL string literal.
fn sql_string(path: &Path) -> String {
    path.display().to_string().replace('\'', "''")
}

/// `perf record` attached to eddy.
struct Profiler {
    child: std::process::Child,
    file: PathBuf,
}

impl Profiler {
    fn start(pid: u32, file: &Path, extra: &[String]) -> Result<Self> {
        let child = std::process::Command::new("perf")
            .arg("record")
            .arg("-o")
            .arg(file)
            .arg("-p")
            .arg(pid.to_string())
            .args(extra)
            .stdout(std::process::Stdio::null())
            .spawn()
            .context("starting `perf record` (is linux perf installed?)")?;
        // perf needs a moment to attach before the work starts.
        std::thread::sleep(std::time::Duration::from_millis(500));
        Ok(Self {
            child,
            file: file.to_path_buf(),
        })
    }

    /// Stops recording (SIGINT, as Ctrl-C would) and waits for perf to write the file.
    fn stop(mut self) -> Result<()> {
        let status = std::process::Command::new("kill")
            .arg("-INT")
            .arg(self.child.id().to_string())
            .status()
            .context("signalling perf")?;
        ensure!(status.success(), "could not signal perf ({status})");
        self.child.wait().context("waiting for perf")?;
        println!("profile: {} (`perf report -i {0}`)", self.file.display());
        Ok(())
    }
}
