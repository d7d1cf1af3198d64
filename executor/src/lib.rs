//! Eddy's streaming executor.
//!
//! Modules in data-flow order:
//!
//! - [`chunk`]: `StreamChunk` (a changelog batch), `Message`, `Barrier`, `Watermark`.
//! - [`connector`]: where sources' rows come from (Nexmark generator, files, Kafka).
//! - [`feed`]: a running connector: its thread, positions and progress.
//! - [`table`]: a table as a source: DML → changelog chunks, watermarks and late rows.
//! - [`watermark`]: per-split event-time watermarks and lateness.
//! - [`late_rows`]: the late rows kept for `eddy_catalog.late_rows`.
//! - [`operator`]: the small `Operator` trait every incremental operator implements.
//! - [`operators`]: input, filter, project, window assignment, materialize — one per file.
//! - [`aggregate`]: keyed incremental aggregation over DataFusion accumulators.
//! - [`view_errors`]: rows a view's expressions failed on, kept for `eddy_catalog.view_errors`.
//! - [`join`]: equi-joins over changelogs (inner, outer, semi, anti, mark), state by join key.
//! - [`temporal_filter`]: rows in a view while the wall clock is within bounds on their time.
//! - [`thread_priority`]: source threads yield the cores to the engine and the server.
//! - [`exchange`]: a keyed operator run as one instance per worker, rows routed by key hash.
//! - [`graph`]: one view's operators as a tree, driven message by message, barriers aligned.
//! - [`workers`]: the worker threads those instances run on (`--workers`).
//! - [`engine`]: the epoch loop: applies DML, runs barriers, commits each epoch atomically.
//! - [`sink`]: each epoch's changes of a table or view into a sink log, shipped out by a
//!   sender thread (Kafka) exactly once.
//! - [`subscribe`]: each epoch's committed changes of a table or view, handed to a client
//!   (`SUBSCRIBE`) through a bounded queue.
//! - [`formats`]: JSON values and Debezium's envelope, as sinks write them.

pub mod aggregate;
pub mod chunk;
pub mod clocks;
pub mod connector;
pub mod engine;
pub mod error;
pub mod exchange;
pub mod feed;
pub mod formats;
pub mod graph;
pub mod join;
pub mod late_rows;
pub mod operator;
pub mod operators;
pub mod over_window;
pub mod partition;
pub mod sink;
pub mod state_layout;
pub mod state_size;
pub mod state_table;
pub mod stats;
pub mod subscribe;
pub mod table;
pub mod temporal_filter;
#[cfg(test)]
pub(crate) mod test_random;
pub mod thread_priority;
pub mod top_n;
pub mod view_errors;
pub mod watermark;
pub mod workers;

pub use chunk::{Barrier, Message, Op, StreamChunk, Watermark};
pub use engine::{EngineHandle, TableDef, TableKey};
pub use error::{ExecError, Result};
pub use operator::Operator;
pub use stats::{CommitObserver, CommitReport, EngineStats, JoinSideStats, TableStats, ViewStats};
