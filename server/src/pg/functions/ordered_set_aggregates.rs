//! Postgres' ordered-set aggregates DataFusion lacks: `percentile_disc(f) WITHIN GROUP (ORDER
//! BY x)`, the first value whose place in the order reaches the fraction `f`, and `mode()
//! WITHIN GROUP (ORDER BY x)`, the most frequent value (the first in the order among equally
//! frequent ones). Both keep a group's values (NULLs are left out, as in Postgres) and sort
//! them when asked for the result.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::{concat, partition, sort, SortOptions};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::utils::SingleRowListArrayBuilder;
use datafusion::common::{Result, ScalarValue};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};
use datafusion::prelude::SessionContext;

use crate::error::ServerError;

pub(crate) fn register(ctx: &SessionContext) {
    for kind in [Kind::PercentileDisc, Kind::Mode] {
        ctx.register_udaf(AggregateUDF::new_from_impl(OrderedSet {
            kind,
            signature: Signature::any(kind.arguments(), Volatility::Immutable),
        }));
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    PercentileDisc,
    Mode,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::PercentileDisc => "percentile_disc",
            Kind::Mode => "mode",
        }
    }

    /// The ordered value, then the direct arguments (`percentile_disc`'s fraction).
    fn arguments(self) -> usize {
        match self {
            Kind::PercentileDisc => 2,
            Kind::Mode => 1,
        }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct OrderedSet {
    kind: Kind,
    signature: Signature,
}

impl AggregateUDFImpl for OrderedSet {
    fn name(&self) -> &str {
        self.kind.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let values = Field::new_list_field(args.input_fields[0].data_type().clone(), true);
        Ok(vec![Arc::new(Field::new(
            format!("{}[values]", args.name),
            DataType::List(Arc::new(values)),
            true,
        ))])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let fraction = match self.kind {
            Kind::PercentileDisc => Some(fraction(&args)?),
            Kind::Mode => None,
        };
        let descending = args
            .order_bys
            .first()
            .is_some_and(|order| order.options.descending);
        Ok(Box::new(Collected {
            kind: self.kind,
            data_type: args.expr_fields[0].data_type().clone(),
            fraction,
            descending,
            values: Vec::new(),
        }))
    }

    fn supports_within_group_clause(&self) -> bool {
        true
    }
}

/// `percentile_disc`'s fraction: a constant from 0 to 1.
fn fraction(args: &AccumulatorArgs) -> Result<f64> {
    let not_constant = || {
        DataFusionError::from(ServerError::not_supported(
            "percentile_disc of a fraction that is not a constant",
        ))
    };
    // A constant evaluates without a row to read.
    let empty = datafusion::arrow::array::RecordBatch::new_empty(Arc::new(
        datafusion::arrow::datatypes::Schema::empty(),
    ));
    let value = match args.exprs[1].evaluate(&empty).map_err(|_| not_constant())? {
        datafusion::logical_expr::ColumnarValue::Scalar(value) => value
            .cast_to(&DataType::Float64)
            .map_err(|_| not_constant())?,
        datafusion::logical_expr::ColumnarValue::Array(_) => return Err(not_constant()),
    };
    match value {
        ScalarValue::Float64(Some(f)) if (0.0..=1.0).contains(&f) => Ok(f),
        ScalarValue::Float64(Some(f)) => Err(ServerError::new(
            "22003",
            format!("percentile value {f} is not between 0 and 1"),
        )
        .into()),
        _ => Err(not_constant()),
    }
}

#[derive(Debug)]
struct Collected {
    kind: Kind,
    data_type: DataType,
    fraction: Option<f64>,
    descending: bool,
    values: Vec<ArrayRef>,
}

impl Collected {
    fn all(&self) -> Result<ArrayRef> {
        if self.values.is_empty() {
            return Ok(datafusion::arrow::array::new_empty_array(&self.data_type));
        }
        let arrays: Vec<&dyn Array> = self.values.iter().map(|a| a.as_ref()).collect();
        Ok(concat(&arrays)?)
    }
}

impl Accumulator for Collected {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let present = datafusion::arrow::compute::is_not_null(&values[0])?;
        let kept = datafusion::arrow::compute::filter(&values[0], &present)?;
        if !kept.is_empty() {
            self.values.push(kept);
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists = states[0].as_list::<i32>();
        for list in lists.iter().flatten() {
            self.update_batch(&[list])?;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let all = self.all()?;
        self.values = vec![all.clone()];
        Ok(vec![SingleRowListArrayBuilder::new(all).build_list_scalar()])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let options = SortOptions {
            descending: self.descending,
            nulls_first: false,
        };
        let sorted = sort(&self.all()?, Some(options))?;
        if sorted.is_empty() {
            return ScalarValue::try_from(&self.data_type);
        }
        let index = match self.kind {
            Kind::PercentileDisc => {
                let rows = sorted.len();
                let reached = (self.fraction.unwrap_or(0.0) * rows as f64).ceil() as usize;
                reached.saturating_sub(1).min(rows - 1)
            }
            Kind::Mode => {
                // Runs of equal values; the longest, the first of equally long ones.
                let runs = partition(std::slice::from_ref(&sorted))?.ranges();
                runs.iter()
                    .fold((0, 0), |(best, best_len), run| {
                        if run.len() > best_len {
                            (run.start, run.len())
                        } else {
                            (best, best_len)
                        }
                    })
                    .0
            }
        };
        ScalarValue::try_from_array(&sorted, index)
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self
                .values
                .iter()
                .map(|a| a.get_array_memory_size())
                .sum::<usize>()
    }
}
