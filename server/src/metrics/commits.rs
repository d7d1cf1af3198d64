//! Epoch commits: how long each took (a histogram) and how many bytes they wrote.

use std::sync::Arc;

use eddy_executor::{CommitObserver, CommitReport};
use prometheus::{Histogram, HistogramOpts, IntCounter, Registry};

#[derive(Clone)]
pub struct CommitMetrics {
    duration: Histogram,
    write: Histogram,
    bytes: IntCounter,
    writes: IntCounter,
    scoped: IntCounter,
}

impl CommitMetrics {
    pub fn new() -> prometheus::Result<Self> {
        Ok(Self {
            duration: Histogram::with_opts(
                HistogramOpts::new(
                    "eddy_epoch_commit_duration_seconds",
                    "Time from an epoch's barrier to its durable write",
                )
                // From a small epoch (a millisecond) to one of 100,000s of writes (seconds).
                .buckets(prometheus::exponential_buckets(0.001, 2.0, 15)?),
            )?,
            write: Histogram::with_opts(
                HistogramOpts::new(
                    "eddy_epoch_write_duration_seconds",
                    "Time an epoch's write and fsync took on the committer thread",
                )
                .buckets(prometheus::exponential_buckets(0.001, 2.0, 15)?),
            )?,
            bytes: IntCounter::new(
                "eddy_epoch_bytes_written_total",
                "Bytes of keys and values written by committed epochs",
            )?,
            writes: IntCounter::new(
                "eddy_epoch_writes_total",
                "Keys written or deleted by committed epochs",
            )?,
            scoped: IntCounter::new(
                "eddy_epochs_scoped_total",
                "Epochs that committed only the tables and views their statements reached, with no barrier through the others",
            )?,
        })
    }

    pub fn register(&self, registry: &Registry) -> prometheus::Result<()> {
        registry.register(Box::new(self.duration.clone()))?;
        registry.register(Box::new(self.write.clone()))?;
        registry.register(Box::new(self.bytes.clone()))?;
        registry.register(Box::new(self.writes.clone()))?;
        registry.register(Box::new(self.scoped.clone()))
    }

    pub fn observe(&self, report: &CommitReport) {
        self.duration.observe(report.duration.as_secs_f64());
        self.write.observe(report.write.as_secs_f64());
        self.bytes.inc_by(report.bytes);
        self.writes.inc_by(report.writes);
        if report.scoped {
            self.scoped.inc();
        }
    }

    /// The engine's hook: called on the engine thread after each commit.
    pub fn observer(&self) -> CommitObserver {
        let metrics = self.clone();
        Arc::new(move |report| metrics.observe(report))
    }
}
