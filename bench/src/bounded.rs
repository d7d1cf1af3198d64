//! `bounded`: bounded state, measured. Streams a span of event time (default one hour) of
//! Nexmark bids and auctions from the built-in generator through a 1-second TUMBLE view, a
//! 10-second SESSION view per bidder, an interval join of bids with their auctions (bids in the
//! first 10 seconds of an auction) and a window join (bids and auctions of the same 10-second
//! window), and prints, every second, how far event time has got, each view's state rows and
//! open windows, its output rows, the data directory's size and eddy's RSS. State and RSS must
//! stay flat while event time advances; the data directory grows only by the rows the views
//! output. The two joins keep one source's rows until the other's watermark passes them, so
//! their state follows how far apart the two sources are read; `--max-drift` bounds that gap
//! (`watermark.alignment.max.drift` on both).

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use clap::Args;
use eddy_sqllogictest::DEFAULT_STOP_TIMEOUT;

use crate::process::{
    dir_size, flush_until_done, int, mib, vm_hwm_kib, vm_rss_kib, BenchEddy, EddyArgs,
};

#[derive(Args)]
pub struct BoundedArgs {
    /// Event time to stream, in minutes.
    #[arg(long, default_value_t = 60)]
    minutes: u64,
    /// Event time between generated events, in microseconds (sets events per second of
    /// event time: 1000 gives 1,000).
    #[arg(long, default_value_t = 1000)]
    inter_event_micros: u64,
    /// Seconds between samples.
    #[arg(long, default_value_t = 1.0)]
    every: f64,
    /// `watermark.alignment.max.drift` of both sources, in seconds (none: not aligned).
    #[arg(long)]
    max_drift: Option<f64>,
    #[command(flatten)]
    eddy: EddyArgs,
}

const VIEWS: [(&str, &str); 4] = [
    (
        "per_second",
        "CREATE MATERIALIZED VIEW per_second AS
         SELECT window_start, count(*) AS bids, max(price) AS top, count(DISTINCT bidder) AS bidders
         FROM TUMBLE(bid, date_time, INTERVAL '1' SECOND)
         GROUP BY window_start EMIT ON WINDOW CLOSE",
    ),
    (
        "bidder_sessions",
        "CREATE MATERIALIZED VIEW bidder_sessions AS
         SELECT bidder, window_start, window_end, count(*) AS bids, max(price) AS top
         FROM SESSION(bid, date_time, INTERVAL '10' SECOND)
         GROUP BY bidder, window_start, window_end",
    ),
    (
        "early_bids",
        "CREATE MATERIALIZED VIEW early_bids AS
         SELECT a.category, count(*) AS bids
         FROM bid b JOIN auction a ON b.auction = a.id
          AND b.date_time BETWEEN a.date_time AND a.date_time + INTERVAL '10' SECOND
         GROUP BY a.category",
    ),
    (
        "window_bids",
        "CREATE MATERIALIZED VIEW window_bids AS
         SELECT a.window_start, count(*) AS bids
         FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND) b
         JOIN TUMBLE(auction, date_time, INTERVAL '10' SECOND) a
           ON b.auction = a.id AND b.window_start = a.window_start AND b.window_end = a.window_end
         GROUP BY a.window_start EMIT ON WINDOW CLOSE",
    ),
];

pub async fn run(args: BoundedArgs) -> Result<()> {
    let events = args.minutes * 60 * 1_000_000 / args.inter_event_micros.max(1);
    let mut eddy = BenchEddy::start(&args.eddy).await?;
    let (client, _conn) = eddy.process.connect().await?;
    client
        .batch_execute(&format!(
            "CREATE SOURCE bid (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP,
               WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
             WITH (connector = 'nexmark', nexmark.table.type = 'bid', nexmark.seed = '1',
                   nexmark.max.events = '{events}', nexmark.inter.event.micros = '{micros}'{drift});
             CREATE SOURCE auction (id BIGINT, seller BIGINT, category BIGINT, date_time TIMESTAMP,
               expires TIMESTAMP, WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
             WITH (connector = 'nexmark', nexmark.table.type = 'auction', nexmark.seed = '1',
                   nexmark.max.events = '{events}', nexmark.inter.event.micros = '{micros}'{drift})",
            micros = args.inter_event_micros,
            drift = args
                .max_drift
                .map(|s| format!(", watermark.alignment.max.drift = '{s}s'"))
                .unwrap_or_default()
        ))
        .await?;
    for (_, sql) in VIEWS {
        client.batch_execute(sql).await?;
    }
    println!(
        "{} min of event time, {events} events; one line per {:.1} s of wall time",
        args.minutes, args.every
    );
    print!("{:>6} {:>10}", "wall s", "event min");
    for name in ["tumble st", "sess st", "intvl st", "window st"] {
        print!(" | {name:>9} {:>6} {:>8}", "open", "rows");
    }
    println!(" | {:>8} {:>8}", "data MiB", "RSS MiB");
    let started = Instant::now();
    let data_dir = eddy.process.data_dir().to_path_buf();
    let mut samples: Vec<Sample> = Vec::new();
    loop {
        tokio::time::sleep(Duration::from_secs_f64(args.every)).await;
        let sample = sample(&client, &data_dir, eddy.pid, started).await?;
        println!("{sample}");
        let done = sample.finished;
        samples.push(sample);
        if done {
            break;
        }
    }
    flush_until_done(&client, Duration::from_secs(600)).await?;
    let last = sample(&client, &data_dir, eddy.pid, started).await?;
    println!("{last}  (after FLUSH)");
    summarize(&samples, vm_hwm_kib(eddy.pid)?);
    let total: i64 = int(
        &client
            .query_one("SELECT sum(bids) FROM per_second", &[])
            .await?,
        0,
    )?;
    let late: i64 = int(
        &client
            .query_one(
                "SELECT coalesce(sum(rows_late), 0) FROM eddy_catalog.tables",
                &[],
            )
            .await?,
        0,
    )?;
    println!("bids counted by per_second (closed windows): {total}; late: {late}");
    for row in client
        .query(
            "SELECT view, side, rows, rows_evicted FROM eddy_catalog.join_state ORDER BY view, side",
            &[],
        )
        .await?
    {
        println!(
            "join state {} {}: {} rows now, {} evicted",
            row.get::<_, String>(0),
            row.get::<_, String>(1),
            int(&row, 2)?,
            int(&row, 3)?
        );
    }
    ensure!(total > 0, "the tumbling view counted nothing");
    drop(client);
    eddy.process.terminate(DEFAULT_STOP_TIMEOUT).await?;
    Ok(())
}

struct Sample {
    wall: f64,
    event_minutes: f64,
    /// state rows, open windows, output rows per view
    views: Vec<(i64, i64, i64)>,
    data_mib: f64,
    rss_mib: f64,
    finished: bool,
}

impl std::fmt::Display for Sample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:>6.1} {:>10.1}", self.wall, self.event_minutes)?;
        for (state, open, rows) in &self.views {
            write!(f, " | {state:>9} {open:>6} {rows:>8}")?;
        }
        write!(f, " | {:>8.1} {:>8.1}", self.data_mib, self.rss_mib)
    }
}

async fn sample(
    client: &tokio_postgres::Client,
    data_dir: &std::path::Path,
    pid: u32,
    started: Instant,
) -> Result<Sample> {
    let mut views = Vec::new();
    for (name, _) in VIEWS {
        let row = client
            .query_one(
                "SELECT state_rows, open_windows FROM eddy_catalog.materialized_views WHERE name = $1",
                &[&name],
            )
            .await?;
        let rows = client
            .query_one(&format!("SELECT count(*) FROM {name}"), &[])
            .await?;
        views.push((int(&row, 0)?, int(&row, 1)?, int(&rows, 0)?));
    }
    // Event time reached: the last closed 1-second window, in minutes after the first.
    let progress = client
        .query_one(
            "SELECT date_part('epoch', max(window_start)) - date_part('epoch', min(window_start))
             FROM per_second",
            &[],
        )
        .await?;
    let finished = client
        .query_one(
            "SELECT bool_and(finished) FROM eddy_catalog.source_progress",
            &[],
        )
        .await?;
    let event_minutes = progress.try_get::<_, Option<f64>>(0)?.unwrap_or(0.0) / 60.0;
    Ok(Sample {
        wall: started.elapsed().as_secs_f64(),
        event_minutes,
        views,
        data_mib: dir_size(data_dir)? as f64 / (1024.0 * 1024.0),
        rss_mib: mib(vm_rss_kib(pid)?),
        finished: finished.try_get::<_, Option<bool>>(0)?.unwrap_or(false),
    })
}

/// State and RSS over the second half of the run against the first: flat means no trend.
fn summarize(samples: &[Sample], peak_kib: u64) {
    if samples.len() < 4 {
        return;
    }
    let half = samples.len() / 2;
    let (early, late) = samples.split_at(half);
    let max = |s: &[Sample], f: &dyn Fn(&Sample) -> f64| s.iter().map(f).fold(0.0, f64::max);
    for (i, (name, _)) in VIEWS.iter().enumerate() {
        println!(
            "{name}: state rows max {} in the first half, {} in the second",
            max(early, &|s| s.views[i].0 as f64),
            max(late, &|s| s.views[i].0 as f64)
        );
    }
    println!(
        "RSS max {:.1} MiB in the first half, {:.1} MiB in the second; peak (VmHWM) {:.1} MiB",
        max(early, &|s| s.rss_mib),
        max(late, &|s| s.rss_mib),
        mib(peak_kib)
    );
}
