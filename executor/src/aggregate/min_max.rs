//! MIN / MAX that can retract: keeps a count per distinct value (ordered by the value's
//! memcomparable encoding), so deleting the current extreme reveals the next one.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BinaryArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::Accumulator;
use eddy_storage::RowCodec;

#[derive(Debug)]
pub(super) struct RetractableMinMax {
    is_max: bool,
    codec: RowCodecHandle,
    /// Encoded value → how many live rows have it.
    counts: BTreeMap<Vec<u8>, u64>,
}

/// `RowCodec` is not `Debug`-printable in a useful way; wrap it for the accumulator.
struct RowCodecHandle(RowCodec, DataType);

impl std::fmt::Debug for RowCodecHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RowCodec({})", self.1)
    }
}

fn to_df(e: eddy_storage::StorageError) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::External(Box::new(e))
}

impl RetractableMinMax {
    pub(super) fn new(is_max: bool, data_type: DataType) -> crate::Result<Self> {
        let schema = Arc::new(Schema::new(vec![Field::new("v", data_type.clone(), true)]));
        Ok(Self {
            is_max,
            codec: RowCodecHandle(RowCodec::new(schema)?, data_type),
            counts: BTreeMap::new(),
        })
    }

    fn apply(&mut self, values: &ArrayRef, add: bool) -> Result<()> {
        let rows = self
            .codec
            .0
            .encode(std::slice::from_ref(values), values.len())
            .map_err(to_df)?;
        for (i, row) in rows.iter().enumerate() {
            if values.is_null(i) {
                continue;
            }
            let key = row.as_ref().to_vec();
            if add {
                *self.counts.entry(key).or_default() += 1;
            } else if let Some(count) = self.counts.get_mut(&key) {
                *count -= 1;
                if *count == 0 {
                    self.counts.remove(&key);
                }
            }
        }
        Ok(())
    }
}

impl Accumulator for RetractableMinMax {
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
        let extreme = if self.is_max {
            self.counts.keys().next_back()
        } else {
            self.counts.keys().next()
        };
        match extreme {
            None => ScalarValue::try_from(&self.codec.1),
            Some(bytes) => {
                let batch = self.codec.0.decode([bytes.as_slice()]).map_err(to_df)?;
                ScalarValue::try_from_array(batch.column(0), 0)
            }
        }
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.counts.keys().map(|k| k.len() + 32).sum::<usize>()
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
        for state in states.iter().flatten() {
            let mut rest = state;
            while rest.len() >= 4 {
                let len = u32::from_le_bytes(rest[..4].try_into().map_err(corrupt)?) as usize;
                if rest.len() < 4 + len + 8 {
                    return Err(corrupt(()));
                }
                let key = rest[4..4 + len].to_vec();
                let count =
                    u64::from_le_bytes(rest[4 + len..12 + len].try_into().map_err(corrupt)?);
                *self.counts.entry(key).or_default() += count;
                rest = &rest[12 + len..];
            }
        }
        Ok(())
    }
}

fn corrupt<E>(_: E) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::Internal("corrupt min/max state".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;

    #[test]
    fn retracting_the_max_reveals_the_next() {
        let mut max = RetractableMinMax::new(true, DataType::Int64).unwrap();
        let values: ArrayRef = Arc::new(Int64Array::from(vec![3, 9, 5, 9]));
        max.update_batch(&[values]).unwrap();
        assert_eq!(max.evaluate().unwrap(), ScalarValue::Int64(Some(9)));
        max.retract_batch(&[Arc::new(Int64Array::from(vec![9])) as ArrayRef])
            .unwrap();
        assert_eq!(max.evaluate().unwrap(), ScalarValue::Int64(Some(9)));
        max.retract_batch(&[Arc::new(Int64Array::from(vec![9])) as ArrayRef])
            .unwrap();
        assert_eq!(max.evaluate().unwrap(), ScalarValue::Int64(Some(5)));
        let state = max.state().unwrap()[0].to_array().unwrap();
        let mut restored = RetractableMinMax::new(true, DataType::Int64).unwrap();
        restored.merge_batch(&[state]).unwrap();
        assert_eq!(restored.evaluate().unwrap(), ScalarValue::Int64(Some(5)));
        let mut min = RetractableMinMax::new(false, DataType::Int64).unwrap();
        min.merge_batch(&[max.state().unwrap()[0].to_array().unwrap()])
            .unwrap();
        assert_eq!(min.evaluate().unwrap(), ScalarValue::Int64(Some(3)));
    }
}
