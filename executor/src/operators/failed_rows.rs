//! Rows whose expressions fail at run time (a division by zero, a cast of bad text) are taken
//! out of their batch and kept with their error for `eddy_catalog.view_errors`; the rest of the
//! batch goes on, and so does the view. Without this, one bad row failed the whole epoch, and
//! every other table, source and view with it, again after each reload.
//!
//! The batch is evaluated whole first; only when that fails is it halved until the failing
//! rows stand alone, so a batch without errors costs nothing more.

use datafusion::arrow::array::{BooleanArray, RecordBatch};

use crate::Result;

/// One row that a view's expressions failed on.
#[derive(Debug, Clone)]
pub struct FailedRow {
    /// The row as the operator got it, as a JSON object.
    pub row: String,
    pub error: String,
}

/// How many failing rows an operator keeps per epoch; beyond that they are only counted.
pub const KEPT_PER_EPOCH: usize = 100;

/// The rows an operator failed on since its last barrier, and how many since it started.
#[derive(Debug, Default)]
pub struct FailedRows {
    kept: Vec<FailedRow>,
    total: u64,
}

impl FailedRows {
    /// Takes the rows kept since the last call (once per epoch).
    pub fn take(&mut self) -> Vec<FailedRow> {
        std::mem::take(&mut self.kept)
    }

    /// Rows failed since the operator started.
    pub fn total(&self) -> u64 {
        self.total
    }

    fn record(&mut self, batch: &RecordBatch, visible: usize, failures: &[(usize, String)]) {
        self.total += failures.len() as u64;
        for (row, error) in failures {
            if self.kept.len() >= KEPT_PER_EPOCH {
                break;
            }
            let columns: Vec<usize> = (0..visible).collect();
            let row_json = batch
                .project(&columns)
                .map_err(crate::ExecError::from)
                .and_then(|b| crate::late_rows::rows_as_json(&b.slice(*row, 1)))
                .ok()
                .and_then(|rows| rows.into_iter().next())
                .unwrap_or_default();
            self.kept.push(FailedRow {
                row: row_json,
                error: error.clone(),
            });
        }
    }
}

/// Evaluates `eval` over `batch` (whose first `visible` columns are the row as shown). When
/// it fails, the rows it fails on are set aside in `failed` and it is evaluated over the
/// others. Returns the result and which rows it covers (`None`: all of them); `Ok(None)` when
/// every row failed.
pub fn evaluate_isolating<T>(
    batch: &RecordBatch,
    visible: usize,
    eval: impl Fn(&RecordBatch) -> Result<T>,
    failed: &mut FailedRows,
) -> Result<Option<(T, Option<BooleanArray>)>> {
    let first_error = match eval(batch) {
        Ok(value) => return Ok(Some((value, None))),
        Err(error) => error,
    };
    let mut failures = Vec::new();
    find_failures(batch, 0, &eval, &mut failures);
    if failures.is_empty() {
        // Fails as a whole but on no row alone: not a row's fault.
        return Err(first_error);
    }
    failed.record(batch, visible, &failures);
    let mut keep = vec![true; batch.num_rows()];
    for (row, _) in &failures {
        keep[*row] = false;
    }
    if !keep.contains(&true) {
        return Ok(None);
    }
    let mask = BooleanArray::from(keep);
    let rest = datafusion::arrow::compute::filter_record_batch(batch, &mask)?;
    Ok(Some((eval(&rest)?, Some(mask))))
}

/// Rows (by index, from `offset`) that `eval` fails on alone, halving the batch to find them.
fn find_failures<T>(
    batch: &RecordBatch,
    offset: usize,
    eval: &impl Fn(&RecordBatch) -> Result<T>,
    out: &mut Vec<(usize, String)>,
) {
    let rows = batch.num_rows();
    if rows == 0 {
        return;
    }
    match eval(batch) {
        Ok(_) => {}
        Err(error) if rows == 1 => out.push((offset, error.to_string())),
        Err(_) => {
            let half = rows / 2;
            find_failures(&batch.slice(0, half), offset, eval, out);
            find_failures(&batch.slice(half, rows - half), offset + half, eval, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use datafusion::arrow::array::{Array, AsArray, Int64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema};

    fn batch(values: &[i64]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(values.to_vec()))]).unwrap()
    }

    /// 100 / x, failing where x = 0.
    fn divide(batch: &RecordBatch) -> Result<Vec<i64>> {
        let x = batch.column(0).as_primitive::<Int64Type>();
        x.iter()
            .map(|v| match v {
                Some(0) => Err(crate::ExecError::NotSupported("division by zero".into())),
                Some(v) => Ok(100 / v),
                None => Ok(0),
            })
            .collect()
    }

    #[test]
    fn failing_rows_are_set_aside_and_the_rest_go_on() {
        let mut failed = FailedRows::default();
        let input = batch(&[1, 0, 4, 0, 5]);
        let (values, mask) = evaluate_isolating(&input, 1, divide, &mut failed)
            .unwrap()
            .unwrap();
        assert_eq!(values, vec![100, 25, 20]);
        let mask = mask.unwrap();
        assert_eq!(
            mask.iter().map(|v| v.unwrap()).collect::<Vec<_>>(),
            [true, false, true, false, true]
        );
        let rows = failed.take();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].row, r#"{"x":0}"#);
        assert!(rows[0].error.contains("division by zero"));
        assert_eq!(failed.total(), 2);
        assert!(failed.take().is_empty());
    }

    #[test]
    fn a_batch_without_errors_is_evaluated_once_and_whole() {
        let mut failed = FailedRows::default();
        let input = batch(&[1, 2]);
        let (values, mask) = evaluate_isolating(&input, 1, divide, &mut failed)
            .unwrap()
            .unwrap();
        assert_eq!(values, vec![100, 50]);
        assert!(mask.is_none());
        let all_bad = batch(&[0, 0]);
        assert!(evaluate_isolating(&all_bad, 1, divide, &mut failed)
            .unwrap()
            .is_none());
        assert_eq!(failed.total(), 2);
        assert_eq!(all_bad.column(0).len(), 2);
    }
}
