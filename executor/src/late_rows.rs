//! Rows that arrived below their watermark, as `eddy_catalog.late_rows` keeps them.

use datafusion::arrow::array::RecordBatch;
use serde::{Deserialize, Serialize};

use crate::Result;

/// One row that arrived below the watermark.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LateRow {
    /// The table, or the view whose reader found the row late.
    pub object: String,
    /// The table or source the row came from.
    #[serde(default)]
    pub source: String,
    /// Event time and watermark at arrival, in microseconds.
    pub event_time: i64,
    pub watermark: i64,
    /// The row as a JSON object.
    pub row: String,
}

/// How many late rows `eddy_catalog.late_rows` keeps (older ones are dropped; the counters
/// keep counting).
pub const LATE_ROWS_RETENTION: u64 = 100_000;

/// Each row of `batch` as a JSON object.
pub(crate) fn rows_as_json(batch: &RecordBatch) -> Result<Vec<String>> {
    let mut buffer = Vec::new();
    {
        let mut writer = datafusion::arrow::json::LineDelimitedWriter::new(&mut buffer);
        writer.write(batch)?;
        writer.finish()?;
    }
    let text = String::from_utf8_lossy(&buffer);
    Ok(text.lines().map(|l| l.to_string()).collect())
}
