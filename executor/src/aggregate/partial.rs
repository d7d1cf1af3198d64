//! The first phase of a windowed aggregate on workers: each chunk aggregated on its own, before
//! the exchange, into one row per group (the group's columns, then each aggregate's partial
//! state), which the instance owning the group merges into its window
//! ([`super::WindowedAggregateOperator::merging_partials`]). A HOP window's five rows per input
//! row, or a hot key's thousands, cross the exchange as one row per group and chunk.

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::logical_expr::EmitTo;
use datafusion::physical_plan::aggregates::group_values::new_group_values;
use datafusion::physical_plan::aggregates::order::GroupOrdering;
use eddy_planner::AggregatePlan;

use super::grouping::grouped_rows;
use super::AggregateInputs;
use crate::{Message, Op, Operator, Result, StreamChunk};

pub struct PartialAggregateOperator {
    plan: AggregatePlan,
    /// The group columns.
    group_schema: SchemaRef,
    /// The group columns, then each aggregate's state columns (a persisted page's layout).
    partial_schema: SchemaRef,
}

impl PartialAggregateOperator {
    pub fn new(plan: AggregatePlan, partial_schema: SchemaRef) -> Self {
        let group_len = plan.group_len();
        let group_schema = std::sync::Arc::new(datafusion::arrow::datatypes::Schema::new(
            partial_schema.fields()[..group_len].to_vec(),
        ));
        Self {
            plan,
            group_schema,
            partial_schema,
        }
    }
}

impl Operator for PartialAggregateOperator {
    fn name(&self) -> &'static str {
        "PartialAggregate"
    }

    fn process_chunk(&mut self, chunk: StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        if chunk.is_empty() {
            return Ok(());
        }
        let (chunk, group_columns) = grouped_rows(&self.plan, chunk)?;
        let inputs = AggregateInputs::evaluate(&self.plan, &chunk.batch)?;
        let mut group_values = new_group_values(self.group_schema.clone(), &GroupOrdering::None)?;
        let mut indices = Vec::with_capacity(chunk.len());
        group_values.intern(&group_columns, &mut indices)?;
        let groups = group_values.len();
        let mut columns = group_values.emit(EmitTo::All)?;
        for ((agg, arguments), filter) in self
            .plan
            .aggregates
            .iter()
            .zip(&inputs.arguments)
            .zip(&inputs.filters)
        {
            let mut accumulator = agg.create_groups_accumulator()?;
            accumulator.update_batch(arguments, &indices, filter.as_ref(), groups)?;
            columns.extend(accumulator.state(EmitTo::All)?);
        }
        out.push(Message::Chunk(StreamChunk::new(
            vec![Op::Insert; groups],
            &self.partial_schema,
            columns,
            Vec::new(),
        )?));
        Ok(())
    }
}
