//! The join's residual predicate (the `ON` conditions that are not equalities of the key),
//! evaluated on a slice's candidate pairs at once.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt32Array};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::physical_expr::PhysicalExpr;

use super::{JoinOperator, Slice, Step};
use crate::{Result, StreamChunk};

impl JoinOperator {
    pub(super) fn evaluate_filter(
        &self,
        filter: &Arc<dyn PhysicalExpr>,
        s: usize,
        chunk: &StreamChunk,
        slice: &Slice,
        candidates: &RecordBatch,
    ) -> Result<Vec<bool>> {
        // One row per candidate: the probe row's columns next to the candidate's.
        let mut probe_rows = vec![0u32; slice.rows.len()];
        for step in &slice.steps {
            if let Step::Pair(i, _, candidate) = step {
                probe_rows[*candidate] = *i as u32;
            }
        }
        let indices = UInt32Array::from(probe_rows);
        let this: Vec<ArrayRef> = chunk
            .visible_columns()
            .iter()
            .map(|c| take(c.as_ref(), &indices, None))
            .collect::<Result<_, _>>()?;
        let other_width = self.side_plan(1 - s).schema.fields().len();
        let other: Vec<ArrayRef> = candidates.columns()[..other_width].to_vec();
        let (left, right) = if s == 0 { (this, other) } else { (other, this) };
        let columns: Vec<ArrayRef> = left.into_iter().chain(right).collect();
        let fields: Vec<Field> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| Field::new(format!("c{i}"), c.data_type().clone(), true))
            .collect();
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
        let mask = filter.evaluate(&batch)?.into_array(batch.num_rows())?;
        let mask = mask.as_boolean();
        Ok((0..mask.len())
            .map(|i| mask.is_valid(i) && mask.value(i))
            .collect())
    }
}
