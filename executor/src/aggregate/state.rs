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

    /// Encodes groups' states, one row each, in one pass of the row encoder; `fresh` makes new
    /// accumulators for those that must be rebuilt from what was saved.
    pub(super) fn encode_all<'a>(
        &self,
        groups: impl Iterator<Item = &'a mut Group>,
        fresh: impl Fn() -> Result<Vec<Box<dyn Accumulator>>>,
    ) -> Result<Vec<Vec<u8>>> {
        let schema = self.codec.schema().clone();
        let fields = schema.fields();
        let mut columns: Vec<Vec<ScalarValue>> = vec![Vec::new(); fields.len()];
        let mut count = 0;
        for group in groups {
            count += 1;
            columns[0].push(ScalarValue::Int64(Some(group.row_count)));
            columns[1].push(ScalarValue::Boolean(Some(group.last_output.is_some())));
            columns[2].push(ScalarValue::Int64(group.window_end));
            let mut column = HEADER;
            let mut rebuilt: Option<Vec<Box<dyn Accumulator>>> = None;
            for (i, accumulator) in group.accumulators.iter_mut().enumerate() {
                let state = accumulator.state()?;
                if self.rebuild[i] {
                    let fresh = match &mut rebuilt {
                        Some(fresh) => fresh,
                        None => rebuilt.insert(fresh()?),
                    };
                    let arrays = state
                        .iter()
                        .map(|v| v.to_array_of_size(1))
                        .collect::<Result<Vec<_>, _>>()?;
                    fresh[i].merge_batch(&arrays)?;
                    std::mem::swap(accumulator, &mut fresh[i]);
                }
                for value in state {
                    let field = fields[column].data_type();
                    columns[column].push(if &value.data_type() == field {
                        value
                    } else {
                        value.cast_to(field)?
                    });
                    column += 1;
                }
            }
        }
        if count == 0 {
            return Ok(Vec::new());
        }
        let arrays = columns
            .into_iter()
            .map(ScalarValue::iter_to_array)
            .collect::<Result<Vec<ArrayRef>, _>>()?;
        let rows = self.codec.encode(&arrays, count)?;
        Ok((0..count).map(|i| rows.row(i).as_ref().to_vec()).collect())
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
