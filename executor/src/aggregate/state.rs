//! Persisting a group: its row count, emitted flag, window end and each accumulator's
//! `state()`, encoded as one row; restored with `merge_batch`.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Accumulator;
use eddy_storage::RowCodec;

use super::Group;
use crate::Result;

pub(super) struct StateCodec {
    codec: RowCodec,
    /// How many state columns each accumulator has, in order.
    widths: Vec<usize>,
    /// Accumulators whose `state()` may hand over their contents (DataFusion's contract is
    /// "final state for a merge"; percentile_cont, median and string_agg move their values
    /// out): after saving, they are rebuilt from what was saved.
    rebuild: Vec<bool>,
}

/// Aggregates whose `state()` leaves the accumulator as it was.
const STATE_KEEPS_VALUES: [&str; 8] = [
    "count", "sum", "avg", "mean", "min", "max", "bool_and", "bool_or",
];

/// Whether `aggregate`'s accumulator must be rebuilt after its state is taken.
pub(super) fn rebuild_after_state(
    aggregate: &datafusion::physical_expr::aggregate::AggregateFunctionExpr,
) -> bool {
    let name = aggregate.fun().name().to_lowercase();
    aggregate.is_distinct() || !STATE_KEEPS_VALUES.contains(&name.as_str())
}

const HEADER: usize = 3;

impl StateCodec {
    /// Derives the state layout from freshly made accumulators.
    pub(super) fn new(mut probe: Vec<Box<dyn Accumulator>>, rebuild: Vec<bool>) -> Result<Self> {
        let mut fields = vec![
            Field::new("row_count", DataType::Int64, true),
            Field::new("emitted", DataType::Boolean, true),
            Field::new("window_end", DataType::Int64, true),
        ];
        let mut widths = Vec::with_capacity(probe.len());
        for (i, accumulator) in probe.iter_mut().enumerate() {
            let state = accumulator.state()?;
            widths.push(state.len());
            for (j, value) in state.iter().enumerate() {
                fields.push(Field::new(format!("a{i}_{j}"), value.data_type(), true));
            }
        }
        Ok(Self {
            codec: RowCodec::new(Arc::new(Schema::new(fields)))?,
            widths,
            rebuild,
        })
    }

    /// Encodes a group's state; `fresh` makes new accumulators for those that must be
    /// rebuilt from it.
    pub(super) fn encode(
        &self,
        group: &mut Group,
        fresh: impl FnOnce() -> Result<Vec<Box<dyn Accumulator>>>,
    ) -> Result<Vec<u8>> {
        let mut values = vec![
            ScalarValue::Int64(Some(group.row_count)),
            ScalarValue::Boolean(Some(group.last_output.is_some())),
            ScalarValue::Int64(group.window_end),
        ];
        let mut states = Vec::with_capacity(group.accumulators.len());
        for accumulator in group.accumulators.iter_mut() {
            let state = accumulator.state()?;
            values.extend(state.iter().cloned());
            states.push(state);
        }
        if self.rebuild.iter().any(|&r| r) {
            let mut fresh = fresh()?;
            for (i, state) in states.iter().enumerate() {
                if self.rebuild[i] {
                    let arrays = state
                        .iter()
                        .map(|v| v.to_array_of_size(1))
                        .collect::<Result<Vec<_>, _>>()?;
                    fresh[i].merge_batch(&arrays)?;
                    std::mem::swap(&mut group.accumulators[i], &mut fresh[i]);
                }
            }
        }
        let schema = self.codec.schema().clone();
        let columns = values
            .into_iter()
            .zip(schema.fields())
            .map(|(value, field)| {
                let value = if &value.data_type() == field.data_type() {
                    value
                } else {
                    value.cast_to(field.data_type())?
                };
                value.to_array_of_size(1)
            })
            .collect::<Result<Vec<ArrayRef>, _>>()?;
        let rows = self.codec.encode(&columns)?;
        Ok(rows.row(0).as_ref().to_vec())
    }

    pub(super) fn restore(&self, bytes: &[u8], group: &mut Group) -> Result<()> {
        let batch = self.codec.decode([bytes])?;
        let int = |i: usize| {
            let column = batch.column(i).as_primitive::<Int64Type>();
            (!column.is_null(0)).then(|| column.value(0))
        };
        group.row_count = int(0).unwrap_or(0);
        let emitted = batch.column(1).as_boolean().value(0);
        group.window_end = int(2);
        let mut start = HEADER;
        for (accumulator, width) in group.accumulators.iter_mut().zip(&self.widths) {
            accumulator.merge_batch(&batch.columns()[start..start + width])?;
            start += width;
        }
        // Every barrier emits what it persists, so the restored values are the emitted ones.
        if emitted {
            group.last_output = Some(
                group
                    .accumulators
                    .iter_mut()
                    .map(|a| a.evaluate())
                    .collect::<Result<_, _>>()?,
            );
        }
        Ok(())
    }
}

use datafusion::arrow::array::Array;
