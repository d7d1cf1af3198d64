//! Figures the engine publishes after each commit, for `eddy_catalog` and the metrics
//! endpoint (both read the same figures).

use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone, Default)]
pub struct TableStats {
    pub name: String,
    pub rows_in: u64,
    pub rows_late: u64,
    /// Current watermark in microseconds, when the table has one.
    pub watermark: Option<i64>,
}

#[derive(Debug, Clone, Default)]
pub struct ViewStats {
    pub name: String,
    pub source: String,
    pub sql: String,
    pub emit_on_window_close: bool,
    /// Rows that arrived at the view's inputs (late ones included), and of those the late ones
    /// (judged at the view's own readers of sources, or at the stored tables it reads).
    pub rows_in: u64,
    pub rows_late: u64,
    pub state_rows: u64,
    pub open_windows: u64,
    /// Whether some operator's state grows with the number of keys, with no watermark to evict it.
    pub unbounded_state: bool,
    /// Rows its expressions failed on since the server started (kept in `view_errors`).
    pub rows_failed: u64,
    /// Each join's state, per side.
    pub joins: Vec<JoinSideStats>,
    /// Memory its operators' state holds, estimated.
    pub state_bytes: u64,
    /// Its operators' state tables: rows in the store, cache, reads and writes.
    pub state_tables: Vec<crate::state_table::StateTableStats>,
    /// Set once the view failed: it is no longer maintained.
    pub failed: Option<eddy_storage::ViewFailure>,
    /// How many instances its keyed operators run as (`--workers` when it was created).
    pub workers: u32,
}

/// One side of one join, for `eddy_catalog.join_state`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JoinSideStats {
    /// Which join of the view (0 for the first, in the order the executor builds them).
    pub join: usize,
    /// "left" or "right".
    pub side: &'static str,
    /// The tables, sources or views read under this side.
    pub input: String,
    pub rows: u64,
    pub distinct_keys: u64,
    /// Bytes of the rows as encoded in the store.
    pub bytes: u64,
    /// The most rows one join key holds on this side.
    pub max_rows_per_key: u64,
    /// The most output rows one input row has produced by matching this side.
    pub max_fan_out: u64,
    pub rows_evicted: u64,
    /// The bound (micros) below which this side's rows were last evicted, when a watermark
    /// bounds the side.
    pub retention: Option<i64>,
}

#[derive(Debug, Clone, Default)]
pub struct EngineStats {
    pub epoch: u64,
    pub tables: Vec<TableStats>,
    pub views: Vec<ViewStats>,
    pub sources: Vec<SourceStats>,
    pub progress: Vec<SourceProgressStats>,
    pub sinks: Vec<crate::sink::SinkStats>,
    /// The store's sizes and health.
    pub store: eddy_storage::StoreStats,
    /// The node's state cache: its limit, what it holds, and its lookups.
    pub state_cache: crate::state_table::StateCacheStats,
    /// Sources held back while the store's write buffer was over its bound.
    pub write_buffer_hold: crate::engine::WriteBufferHoldStats,
}

#[derive(Debug, Clone, Default)]
pub struct SourceStats {
    pub name: String,
    pub connector: String,
    pub sql: String,
}

/// One split of one running connector, for `eddy_catalog.source_progress`.
#[derive(Debug, Clone, Default)]
pub struct SourceProgressStats {
    /// The source's name.
    pub source: String,
    /// The table or view the connector feeds.
    pub target: String,
    pub split: String,
    /// Where the split resumes (the next offset to read).
    pub position: i64,
    pub high_watermark: Option<i64>,
    pub lag_messages: Option<i64>,
    /// Messages per second.
    pub rate: f64,
    pub lag_seconds: Option<f64>,
    /// Change of the lag in seconds per second (negative: catching up).
    pub lag_trend: Option<f64>,
    /// The target's watermark, in microseconds.
    pub watermark: Option<i64>,
    pub idle: bool,
    pub finished: bool,
    pub last_error: Option<String>,
    /// Messages of this split that could not be decoded, since the server started.
    pub dead_letters: u64,
}

/// One epoch commit, as the engine reports it to a [`CommitObserver`].
#[derive(Debug, Clone, Copy)]
pub struct CommitReport {
    pub epoch: u64,
    /// From the barrier's start to the durable write's end.
    pub duration: Duration,
    /// The write and its fsync alone (on the committer thread, while the engine goes on).
    pub write: Duration,
    /// Keys and values the epoch wrote.
    pub bytes: u64,
    pub writes: u64,
    /// Whether the epoch committed only the tables and views its statements reached.
    pub scoped: bool,
}

/// Told of every committed epoch (the metrics endpoint's histogram of commit times).
pub type CommitObserver = Arc<dyn Fn(&CommitReport) + Send + Sync>;
