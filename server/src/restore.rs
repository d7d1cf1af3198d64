//! How long this server's start took to bring its data back: opening the store (which
//! replays its journal, and migrates a directory of an older format) and restoring the catalog (re-planning every object and
//! reloading operator state). Shown in `eddy_catalog.restore`, the log and the metrics.

use std::sync::OnceLock;
use std::time::Duration;

/// One start's restore.
#[derive(Debug, Clone, PartialEq)]
pub struct RestoreReport {
    /// When the server started, in microseconds since the Unix epoch.
    pub started_at_micros: i64,
    /// Opening the store: the format check (and a migration), the journal's replay.
    pub open_store: Duration,
    /// Restoring the catalog: every table, source and view re-planned, state reloaded.
    pub restore_catalog: Duration,
    /// Tables, sources and views restored.
    pub objects: u64,
    /// The store's size on disk when it was opened.
    pub store_bytes: u64,
    /// The last committed epoch the server resumed from.
    pub epoch: u64,
}

impl RestoreReport {
    /// From the start until the server could accept connections.
    pub fn total(&self) -> Duration {
        self.open_store + self.restore_catalog
    }
}

static LAST: OnceLock<RestoreReport> = OnceLock::new();

/// Records this start's restore (once per process).
pub fn record(report: RestoreReport) {
    tracing::info!(
        open_store_ms = report.open_store.as_millis() as u64,
        restore_catalog_ms = report.restore_catalog.as_millis() as u64,
        objects = report.objects,
        store_bytes = report.store_bytes,
        epoch = report.epoch,
        "restored the data directory"
    );
    let _ = LAST.set(report);
}

/// This start's restore, once recorded.
pub fn last() -> Option<&'static RestoreReport> {
    LAST.get()
}
