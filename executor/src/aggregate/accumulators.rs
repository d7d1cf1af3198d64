//! The accumulators of an aggregate (retractable when its input retracts) and what each reads
//! from a chunk.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, UInt32Array};
use datafusion::arrow::compute::take;
use datafusion::logical_expr::Accumulator;
use datafusion::physical_expr::aggregate::AggregateExprBuilder;
use eddy_planner::AggregatePlan;

use super::distinct::RetractableDistinct;
use super::min_max::RetractableMinMax;
use crate::{ExecError, Result};

/// Creates one accumulator per aggregate, retractable when the input can retract.
pub(super) fn new_accumulators(plan: &AggregatePlan) -> Result<Vec<Box<dyn Accumulator>>> {
    plan.aggregates
        .iter()
        .map(|agg| {
            if plan.input_append_only {
                return Ok(agg.create_accumulator()?);
            }
            if agg.is_distinct() {
                return distinct_accumulator(plan, agg);
            }
            retractable_accumulator(agg)
        })
        .collect()
}

/// An accumulator that follows deletes, for an aggregate without DISTINCT.
fn retractable_accumulator(
    agg: &datafusion::physical_expr::aggregate::AggregateFunctionExpr,
) -> Result<Box<dyn Accumulator>> {
    let name = agg.fun().name().to_lowercase();
    if name == "min" || name == "max" {
        let data_type = agg.field().data_type().clone();
        return Ok(Box::new(RetractableMinMax::new(name == "max", data_type)?));
    }
    // DataFusion refuses a sliding accumulator for some functions and gives one that
    // cannot retract for others: either way the function cannot follow deletes.
    agg.create_sliding_accumulator()
        .ok()
        .filter(|a| a.supports_retract_batch())
        .ok_or_else(|| {
            ExecError::NotSupported(format!(
                "{}() cannot retract rows, so it cannot aggregate an input with updates or deletes (a table with a primary key or without APPEND ONLY, an upsert source, or a view that updates its rows)",
                agg.fun().name()
            ))
        })
}

/// `f(DISTINCT x)` over an input that retracts: `f(x)`'s retractable accumulator over the
/// distinct values (DataFusion's DISTINCT accumulators cannot save a state that retracts).
fn distinct_accumulator(
    plan: &AggregatePlan,
    agg: &datafusion::physical_expr::aggregate::AggregateFunctionExpr,
) -> Result<Box<dyn Accumulator>> {
    let args = agg.expressions();
    let [arg] = args.as_slice() else {
        return Err(ExecError::NotSupported(format!(
            "{}(DISTINCT ...) of several arguments over an input with updates or deletes",
            agg.fun().name()
        )));
    };
    let value_type = arg.data_type(&plan.input_schema)?;
    let plain = AggregateExprBuilder::new(Arc::new(agg.fun().clone()), args.clone())
        .schema(plan.input_schema.clone())
        .alias(agg.name())
        .with_ignore_nulls(agg.ignore_nulls())
        .build()?;
    let inner = retractable_accumulator(&plain)?;
    Ok(Box::new(RetractableDistinct::new(value_type, inner)?))
}

/// What each aggregate reads from one chunk: its arguments (then its ORDER BY columns, which
/// order-sensitive accumulators sort by themselves) and its FILTER.
pub(super) struct AggregateInputs {
    pub(super) arguments: Vec<Vec<ArrayRef>>,
    pub(super) filters: Vec<Option<BooleanArray>>,
}

impl AggregateInputs {
    pub(super) fn evaluate(plan: &AggregatePlan, batch: &RecordBatch) -> Result<Self> {
        let rows = batch.num_rows();
        let arguments = plan
            .aggregates
            .iter()
            .map(|agg| {
                let order_by = agg.order_bys().iter().map(|sort| sort.expr.clone());
                agg.expressions()
                    .into_iter()
                    .chain(order_by)
                    .map(|e| e.evaluate(batch)?.into_array(rows))
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<_, _>>()?;
        let filters = plan
            .filters
            .iter()
            .map(|filter| -> Result<Option<BooleanArray>> {
                let Some(filter) = filter else {
                    return Ok(None);
                };
                let mask = filter.evaluate(batch)?.into_array(rows)?;
                Ok(Some(mask.as_boolean().clone()))
            })
            .collect::<Result<_>>()?;
        Ok(Self { arguments, filters })
    }

    /// Aggregate `index`'s inputs at `indices` (those its FILTER keeps); None when no row is.
    pub(super) fn take(&self, index: usize, indices: &[u32]) -> Result<Option<Vec<ArrayRef>>> {
        let kept: Vec<u32> = match &self.filters[index] {
            Some(mask) => indices
                .iter()
                .copied()
                .filter(|&i| mask.is_valid(i as usize) && mask.value(i as usize))
                .collect(),
            None => indices.to_vec(),
        };
        if kept.is_empty() {
            return Ok(None);
        }
        Ok(Some(take_all(&self.arguments[index], &kept)?))
    }
}

fn take_all(columns: &[ArrayRef], indices: &[u32]) -> Result<Vec<ArrayRef>> {
    let indices = UInt32Array::from(indices.to_vec());
    Ok(columns
        .iter()
        .map(|c| take(c.as_ref(), &indices, None))
        .collect::<Result<_, _>>()?)
}
