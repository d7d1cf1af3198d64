//! DISTINCT aggregates over an input that retracts (`sum(DISTINCT x)` next to `count(*)`):
//! a count of live rows per distinct value, and the function's own retractable accumulator
//! fed each value once, when its count leaves zero, and retracted when it returns to zero.
//! The state is the multiset; a restore feeds its values to the inner accumulator again.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BinaryArray, UInt32Array};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::Accumulator;
use eddy_storage::RowCodec;
use hashbrown::HashMap;

pub(super) struct RetractableDistinct {
    codec: RowCodec,
    value_type: DataType,
    /// Encoded value → how many live rows have it (NULLs are not counted: DISTINCT skips them).
    counts: HashMap<Vec<u8>, u64>,
    /// The aggregate without DISTINCT, over the distinct values.
    inner: Box<dyn Accumulator>,
}

impl std::fmt::Debug for RetractableDistinct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RetractableDistinct({}, {:?})",
            self.value_type, self.inner
        )
    }
}

fn external(e: eddy_storage::StorageError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

fn corrupt<E>(_: E) -> DataFusionError {
    DataFusionError::Internal("corrupt DISTINCT aggregate state".into())
}

impl RetractableDistinct {
    pub(super) fn new(value_type: DataType, inner: Box<dyn Accumulator>) -> crate::Result<Self> {
        let schema = Arc::new(Schema::new(vec![Field::new("v", value_type.clone(), true)]));
        Ok(Self {
            codec: RowCodec::new(schema)?,
            value_type,
            counts: HashMap::new(),
            inner,
        })
    }

    /// Counts `values` in (or out) and passes on the rows whose value appeared (or vanished).
    fn apply(&mut self, values: &ArrayRef, add: bool) -> Result<()> {
        let rows = self
            .codec
            .encode(std::slice::from_ref(values), values.len())
            .map_err(external)?;
        let mut crossed = Vec::new();
        // One map update per row: the multiset is per value.
        for (i, row) in rows.iter().enumerate() {
            if values.is_null(i) {
                continue;
            }
            let key = row.as_ref();
            if add {
                let count = self.counts.entry_ref(key).or_insert(0);
                *count += 1;
                if *count == 1 {
                    crossed.push(i as u32);
                }
            } else if let Some(count) = self.counts.get_mut(key) {
                *count -= 1;
                if *count == 0 {
                    self.counts.remove(key);
                    crossed.push(i as u32);
                }
            }
        }
        if crossed.is_empty() {
            return Ok(());
        }
        let changed = take(values.as_ref(), &UInt32Array::from(crossed), None)?;
        if add {
            self.inner.update_batch(&[changed])
        } else {
            self.inner.retract_batch(&[changed])
        }
    }
}

impl Accumulator for RetractableDistinct {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.apply(&values[0], true)
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.apply(&values[0], false)
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.inner.evaluate()
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self.inner.size()
            + self.counts.keys().map(|k| k.len() + 32).sum::<usize>()
    }

    /// The whole multiset as one binary value: repeated (len u32, bytes, count u64).
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let mut out = Vec::new();
        for (key, count) in &self.counts {
            out.extend_from_slice(&(key.len() as u32).to_le_bytes());
            out.extend_from_slice(key);
            out.extend_from_slice(&count.to_le_bytes());
        }
        Ok(vec![ScalarValue::Binary(Some(out))])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let states: &BinaryArray = states[0].as_binary();
        let mut appeared: Vec<Vec<u8>> = Vec::new();
        for state in states.iter().flatten() {
            let mut rest = state;
            while rest.len() >= 4 {
                let len = u32::from_le_bytes(rest[..4].try_into().map_err(corrupt)?) as usize;
                if rest.len() < 4 + len + 8 {
                    return Err(corrupt(()));
                }
                let key = &rest[4..4 + len];
                let count =
                    u64::from_le_bytes(rest[4 + len..12 + len].try_into().map_err(corrupt)?);
                let live = self.counts.entry_ref(key).or_insert(0);
                if *live == 0 && count > 0 {
                    appeared.push(key.to_vec());
                }
                *live += count;
                rest = &rest[12 + len..];
            }
        }
        if appeared.is_empty() {
            return Ok(());
        }
        let batch = self
            .codec
            .decode(appeared.iter().map(Vec::as_slice))
            .map_err(external)?;
        self.inner.update_batch(&[batch.column(0).clone()])
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::Int64Array;
    use datafusion::functions_aggregate::sum::sum_udaf;
    use datafusion::physical_expr::aggregate::AggregateExprBuilder;
    use datafusion::physical_expr::expressions::Column;

    use super::*;

    fn distinct_sum() -> RetractableDistinct {
        let schema = Schema::new(vec![Field::new("v", DataType::Int64, true)]);
        let expr = AggregateExprBuilder::new(sum_udaf(), vec![Arc::new(Column::new("v", 0))])
            .schema(Arc::new(schema))
            .alias("s")
            .build()
            .unwrap();
        RetractableDistinct::new(DataType::Int64, expr.create_sliding_accumulator().unwrap())
            .unwrap()
    }

    fn ints(values: &[Option<i64>]) -> ArrayRef {
        Arc::new(Int64Array::from(values.to_vec()))
    }

    #[test]
    fn a_value_counts_once_until_its_last_row_leaves() {
        let mut sum = distinct_sum();
        sum.update_batch(&[ints(&[Some(3), Some(3), Some(5), None])])
            .unwrap();
        assert_eq!(sum.evaluate().unwrap(), ScalarValue::Int64(Some(8)));
        sum.retract_batch(&[ints(&[Some(3)])]).unwrap();
        assert_eq!(sum.evaluate().unwrap(), ScalarValue::Int64(Some(8)));
        sum.retract_batch(&[ints(&[Some(3), None])]).unwrap();
        assert_eq!(sum.evaluate().unwrap(), ScalarValue::Int64(Some(5)));
        let state = sum.state().unwrap()[0].to_array().unwrap();
        let mut restored = distinct_sum();
        restored.merge_batch(&[state]).unwrap();
        assert_eq!(restored.evaluate().unwrap(), ScalarValue::Int64(Some(5)));
        restored.update_batch(&[ints(&[Some(5), Some(1)])]).unwrap();
        assert_eq!(restored.evaluate().unwrap(), ScalarValue::Int64(Some(6)));
    }
}
