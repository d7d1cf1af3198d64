//! Rows a view's expressions failed on, as `eddy_catalog.view_errors` keeps them: the view,
//! the row, the error. Written in the epoch that set them aside; the newest
//! [`VIEW_ERRORS_RETENTION`] are kept.

use eddy_storage::keys::VIEW_ERRORS_TABLE;
use eddy_storage::EpochBatch;
use serde::{Deserialize, Serialize};

use crate::operators::FailedRow;
use crate::Result;

/// How many failed rows `eddy_catalog.view_errors` keeps.
pub const VIEW_ERRORS_RETENTION: u64 = 100_000;

/// A failed row as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredViewError {
    pub view: String,
    pub error: String,
    /// The row as a JSON object.
    pub row: String,
    /// When it failed, in microseconds since the epoch (wall clock).
    pub failed_at: i64,
}

/// Writes one failed row of `view` under sequence number `seq` (then advanced), dropping the
/// oldest beyond the retention.
pub fn write(epoch: &mut EpochBatch, seq: &mut u64, view: &str, failed: FailedRow) -> Result<()> {
    let stored = StoredViewError {
        view: view.to_string(),
        error: failed.error,
        row: failed.row,
        failed_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64),
    };
    let bytes = serde_json::to_vec(&stored).map_err(eddy_storage::StorageError::from)?;
    epoch.put(VIEW_ERRORS_TABLE, &seq.to_be_bytes(), bytes);
    if *seq >= VIEW_ERRORS_RETENTION {
        epoch.delete(
            VIEW_ERRORS_TABLE,
            &(*seq - VIEW_ERRORS_RETENTION).to_be_bytes(),
        );
    }
    *seq += 1;
    Ok(())
}
