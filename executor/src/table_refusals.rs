//! A source's rows that its primary key refuses (a NULL key; on an append-only source, a key it
//! already holds) are set aside as dead letters, with the row as JSON, and the rest of the batch
//! goes on. Failing the batch instead made the feed read it again, and fail again, for ever: one
//! bad message froze the source and every view reading it. A statement's rows are refused with
//! an error as before (the client sees it).

use std::sync::Arc;

use datafusion::arrow::array::{Array, BooleanArray, RecordBatch};
use datafusion::arrow::compute::{filter, filter_record_batch};
use datafusion::arrow::datatypes::Schema;

use super::TableRuntime;
use crate::late_rows::rows_as_json;
use crate::{Result, TableKey};

/// A row a source's key refused: why, and the row as a JSON object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedRow {
    pub error: String,
    pub row: String,
}

impl TableRuntime {
    /// `batch` (and its deletion flags) without the rows whose key has a NULL, which are set
    /// aside.
    pub(super) fn refuse_null_keys(
        &mut self,
        batch: RecordBatch,
        deletes: Option<Vec<bool>>,
    ) -> Result<(RecordBatch, Option<Vec<bool>>)> {
        let TableKey::PrimaryKey(columns) = &self.def.key else {
            return Ok((batch, deletes));
        };
        let mut null_in: Vec<Option<usize>> = vec![None; batch.num_rows()];
        for &column in columns.iter().rev() {
            let values = batch.column(column);
            if values.null_count() == 0 {
                continue;
            }
            for (row, first) in null_in.iter_mut().enumerate() {
                if values.is_null(row) {
                    *first = Some(column);
                }
            }
        }
        if null_in.iter().all(Option::is_none) {
            return Ok((batch, deletes));
        }
        let refused_mask: BooleanArray = null_in.iter().map(|c| Some(c.is_some())).collect();
        let refused = rows_where(&batch, &refused_mask)?;
        let columns = null_in.iter().flatten();
        for (row, &column) in rows_as_json(&refused)?.into_iter().zip(columns) {
            let error = format!(
                "null value in column \"{}\" of \"{}\" violates not-null constraint (its primary key)",
                self.def.schema.field(column).name(),
                self.def.name
            );
            self.refused.push(RefusedRow { error, row });
        }
        let keep: Vec<bool> = null_in.iter().map(Option::is_none).collect();
        let kept = filter_record_batch(&batch, &BooleanArray::from(keep.clone()))?;
        let deletes = deletes.map(|d| {
            d.into_iter()
                .zip(&keep)
                .filter(|(_, k)| **k)
                .map(|(d, _)| d)
                .collect()
        });
        Ok((kept, deletes))
    }

    /// Sets aside row `row` of `batch`, refused for `error`.
    pub(super) fn refuse_row(
        &mut self,
        batch: &RecordBatch,
        row: usize,
        error: String,
    ) -> Result<()> {
        let row = rows_as_json(&batch.slice(row, 1))?
            .pop()
            .unwrap_or_default();
        self.refused.push(RefusedRow { error, row });
        Ok(())
    }

    /// The rows set aside since the last call.
    pub fn take_refused(&mut self) -> Vec<RefusedRow> {
        std::mem::take(&mut self.refused)
    }
}

/// The rows of `batch` where `mask` holds, every column nullable: a key column declared NOT
/// NULL holds the NULLs being refused.
fn rows_where(batch: &RecordBatch, mask: &BooleanArray) -> Result<RecordBatch> {
    let fields: Vec<_> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    let columns = batch
        .columns()
        .iter()
        .map(|c| filter(c.as_ref(), mask))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}
