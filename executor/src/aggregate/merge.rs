//! The second phase of a GROUP BY on workers: the instance owning a group merges the partial
//! states each chunk's first phase made ([`super::PartialAggregateOperator`]) into the group's
//! accumulators, so a hot key crosses the exchange once per chunk, not once per row.
//!
//! Only for an append-only input: a partial state cannot carry retractions (DataFusion's
//! accumulators merge states but cannot take one back out). A group's row count then counts
//! the partial rows merged into it, which is positive exactly when the group has input rows,
//! all the operator asks of it.

use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use eddy_planner::AggregatePlan;

use super::{internal, AggregateOperator, ROW};
use crate::{Result, StreamChunk};

/// Functions whose vectorized (first-phase) state is the state their row accumulator merges.
/// Not every function's is: `approx_distinct`'s vectorized sketch starts sparse, and its row
/// accumulator reads only the dense form.
const MERGEABLE: &[&str] = &[
    "count", "sum", "min", "max", "avg", "mean", "bool_and", "bool_or", "bit_and", "bit_or",
];

impl AggregateOperator {
    /// Whether the aggregate can run in two phases: an append-only input, one grouping set
    /// with GROUP BY columns, and aggregates whose partial states merge (no DISTINCT, no
    /// ORDER BY, a vectorized form for the first phase whose state the row accumulator here
    /// reads: [`MERGEABLE`]).
    pub fn supports_two_phases(plan: &AggregatePlan) -> bool {
        plan.input_append_only
            && plan.session.is_none()
            && plan.grouping_sets.is_none()
            && !plan.group_exprs.is_empty()
            && plan.aggregates.iter().all(|agg| {
                !agg.is_distinct()
                    && agg.order_bys().is_empty()
                    && agg.groups_accumulator_supported()
                    && MERGEABLE.contains(&agg.fun().name().to_lowercase().as_str())
            })
    }

    /// The operator taking partial aggregates instead of rows.
    pub fn merging_partials(self) -> Self {
        Self {
            merges_partials: true,
            ..self
        }
    }

    /// The layout of a partial aggregate's rows: the group columns, then each aggregate's
    /// state columns.
    pub fn partial_schema(plan: &AggregatePlan) -> Result<SchemaRef> {
        let mut fields: Vec<Field> = plan.schema.fields()[..plan.group_len()]
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        for (i, agg) in plan.aggregates.iter().enumerate() {
            for (j, field) in agg.state_fields()?.iter().enumerate() {
                fields.push(Field::new(
                    format!("a{i}_{j}"),
                    field.data_type().clone(),
                    true,
                ));
            }
        }
        Ok(Arc::new(Schema::new(fields)))
    }

    /// Merges a chunk of partial rows (one per group) into the groups.
    pub(super) fn merge_partials(&mut self, chunk: StreamChunk) -> Result<()> {
        let columns = chunk.visible_columns();
        let states = partial_states(&self.plan, columns)?;
        let group_columns = &columns[..self.plan.group_len()];
        let window_ends = self.window_ends(group_columns)?;
        let keys = self.key_codec.encode(group_columns, chunk.len())?;
        let keys: Vec<&[u8]> = (0..chunk.len()).map(|i| keys.row(i).data()).collect();
        self.table.begin_chunk();
        self.load(keys.iter().copied())?;
        let mut row_state: Vec<ArrayRef> = Vec::new();
        for (row, key) in keys.into_iter().enumerate() {
            let window_end = window_ends.as_ref().and_then(|ends| ends[row]);
            self.ensure_group(key, window_end)?;
            let merged = self.table.modify(key, ROW, |group| -> Result<()> {
                for (accumulator, state) in group.accumulators.iter_mut().zip(&states) {
                    row_state.clear();
                    row_state.extend(state.iter().map(|c| c.slice(row, 1)));
                    accumulator.merge_batch(&row_state)?;
                }
                group.row_count += 1;
                Ok(())
            })?;
            merged.ok_or_else(|| internal("group vanished"))??;
            self.dirty.insert(key.to_vec());
        }
        Ok(())
    }
}

/// Each aggregate's state columns in a chunk of partial rows (laid out as
/// [`AggregateOperator::partial_schema`] says).
pub(super) fn partial_states<'a>(
    plan: &AggregatePlan,
    columns: &'a [ArrayRef],
) -> Result<Vec<&'a [ArrayRef]>> {
    let mut states = Vec::with_capacity(plan.aggregates.len());
    let mut at = plan.group_len();
    for agg in &plan.aggregates {
        let width = agg.state_fields()?.len();
        states.push(&columns[at..at + width]);
        at += width;
    }
    Ok(states)
}
