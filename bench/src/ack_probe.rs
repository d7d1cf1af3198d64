//! `--probe-acks`: while a heavy view drains its input, a second client inserts one row at a
//! time into a small table with a small view of its own (nothing the heavy view reads) and
//! times each acknowledgement: how much one view's work delays another's writes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use eddy_sqllogictest::EddyProcess;
use tokio::task::JoinHandle;

/// Between two probe INSERTs.
const PAUSE: Duration = Duration::from_millis(20);

pub struct AckProbe {
    stop: Arc<AtomicBool>,
    task: JoinHandle<Result<Vec<Duration>>>,
}

impl AckProbe {
    /// Creates the probe's table and view, then starts inserting.
    pub async fn start(eddy: &EddyProcess) -> Result<Self> {
        let (client, driver) = eddy.connect().await?;
        client
            .batch_execute(
                "CREATE TABLE probe_rows (id BIGINT PRIMARY KEY, v BIGINT);
                 CREATE MATERIALIZED VIEW probe_total AS SELECT count(*) AS n, sum(v) AS s FROM probe_rows;",
            )
            .await
            .context("creating the probe's table and view")?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let task = tokio::spawn(async move {
            let _driver = driver;
            let mut latencies = Vec::new();
            let mut id = 0i64;
            while !stopping.load(Ordering::Relaxed) {
                id += 1;
                let started = Instant::now();
                client
                    .batch_execute(&format!("INSERT INTO probe_rows VALUES ({id}, {id})"))
                    .await
                    .context("a probe INSERT")?;
                latencies.push(started.elapsed());
                tokio::time::sleep(PAUSE).await;
            }
            Ok(latencies)
        });
        Ok(Self { stop, task })
    }

    /// Stops inserting and prints the acknowledgement times.
    pub async fn finish(self) -> Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        let mut latencies = self.task.await??;
        latencies.sort();
        let at = |q: f64| {
            let i = ((latencies.len() as f64 - 1.0) * q).round() as usize;
            latencies.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
        };
        println!(
            "probe INSERT acknowledgements while the view drains: {} INSERTs, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            latencies.len(),
            at(0.5),
            at(0.99),
            at(1.0)
        );
        Ok(())
    }
}
