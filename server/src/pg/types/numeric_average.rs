//! `avg` of a numeric as Postgres computes it: the exact sum divided by the count with
//! Postgres's quotient digits ([`crate::pg::types::numeric_division`]), so the average of 1.00, 2.00 and
//! 2.00 is `1.6666666666666667`. DataFusion's decimal average keeps 4 more digits than its
//! input (`1.666666`) and truncates; its average of integers is a float. The accumulator can
//! retract, for views over changing rows.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Decimal128Array, UInt64Array,
};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Field, FieldRef, UInt64Type};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::expr_rewriter::FunctionRewrite;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, Expr, ExprSchemable, GroupsAccumulator,
    Signature, Volatility,
};

use crate::error::ServerError;
use crate::pg::types::numeric_division::{
    as_decimal, divide, quotient_field, quotient_scale, Numeric,
};

/// Replaces `avg` of a numeric with [`NumericMean`] (under the same name).
#[derive(Debug)]
pub(crate) struct NumericAverage;

impl FunctionRewrite for NumericAverage {
    fn name(&self) -> &str {
        "eddy_numeric_average"
    }

    fn rewrite(
        &self,
        expr: Expr,
        schema: &DFSchema,
        _config: &ConfigOptions,
    ) -> Result<Transformed<Expr>> {
        let Expr::AggregateFunction(aggregate) = &expr else {
            return Ok(Transformed::no(expr));
        };
        // DISTINCT is left to DataFusion's own average (its accumulator removes the repeats).
        if !aggregate.func.name().eq_ignore_ascii_case("avg")
            || aggregate.params.args.len() != 1
            || aggregate.params.distinct
        {
            return Ok(Transformed::no(expr));
        }
        let argument = &aggregate.params.args[0];
        let Some(decimal) = argument.get_type(schema).ok().as_ref().and_then(as_decimal) else {
            return Ok(Transformed::no(expr));
        };
        let mean = AggregateUDF::new_from_impl(NumericMean {
            signature: Signature::any(1, Volatility::Immutable),
        });
        let mut params = aggregate.params.clone();
        // An integer's average is a numeric too, as in Postgres.
        params.args = vec![argument.clone().cast_to(&decimal, schema)?];
        Ok(Transformed::yes(Expr::AggregateFunction(
            AggregateFunction {
                func: Arc::new(mean),
                params,
            },
        )))
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct NumericMean {
    signature: Signature,
}

fn decimal_type(data_type: &DataType) -> Result<(u8, i8)> {
    match data_type {
        DataType::Decimal128(p, s) => Ok((*p, *s)),
        other => Err(ServerError::internal(format!("numeric avg of {other}")).into()),
    }
}

impl AggregateUDFImpl for NumericMean {
    fn name(&self) -> &str {
        "avg"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        let (precision, scale) = decimal_type(&arg_types[0])?;
        Ok(DataType::Decimal128(38, quotient_scale(precision, scale)))
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        let input = arg_fields[0].data_type();
        let data_type = self.return_type(std::slice::from_ref(input))?;
        Ok(quotient_field(
            self.name(),
            data_type,
            std::slice::from_ref(input),
        ))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let (_, scale) = decimal_type(args.input_fields[0].data_type())?;
        Ok(vec![
            Arc::new(Field::new(
                format!("{}[count]", args.name),
                DataType::UInt64,
                true,
            )),
            Arc::new(Field::new(
                format!("{}[sum]", args.name),
                DataType::Decimal128(38, scale),
                true,
            )),
        ])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let input = decimal_type(args.expr_fields[0].data_type())?;
        Ok(Box::new(Mean {
            input,
            result_scale: quotient_scale(input.0, input.1),
            sum: 0,
            count: 0,
        }))
    }

    /// A vectorized form, so that a windowed aggregate keeps its groups' means in columns and a
    /// GROUP BY on workers runs in two phases. Its state is [`Mean`]'s, so either merges the
    /// other's.
    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        !args.is_distinct
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        let input = decimal_type(args.expr_fields[0].data_type())?;
        Ok(Box::new(GroupMeans {
            input,
            result_scale: quotient_scale(input.0, input.1),
            sums: Vec::new(),
            counts: Vec::new(),
        }))
    }
}

/// Every group's exact sum and count, by group index.
#[derive(Debug)]
struct GroupMeans {
    input: (u8, i8),
    result_scale: i8,
    sums: Vec<i128>,
    counts: Vec<u64>,
}

impl GroupMeans {
    /// Adds `values` (and `counts`, or one per value) to the groups at `groups`, the rows
    /// `filter` keeps.
    fn add(
        &mut self,
        values: &ArrayRef,
        counts: Option<&UInt64Array>,
        groups: &[usize],
        filter: Option<&BooleanArray>,
        total_groups: usize,
    ) -> Result<()> {
        self.sums.resize(total_groups, 0);
        self.counts.resize(total_groups, 0);
        let values = values.as_primitive::<Decimal128Type>();
        for (row, &group) in groups.iter().enumerate() {
            if filter.is_some_and(|f| !f.is_valid(row) || !f.value(row)) || values.is_null(row) {
                continue;
            }
            self.sums[group] = self.sums[group]
                .checked_add(values.value(row))
                .filter(|sum| sum.abs() < LIMIT)
                .ok_or_else(overflow)?;
            self.counts[group] += counts.map_or(1, |c| c.value(row));
        }
        Ok(())
    }
}

fn overflow() -> datafusion::error::DataFusionError {
    ServerError::new("22003", "value overflows numeric format").into()
}

impl GroupsAccumulator for GroupMeans {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.add(
            &values[0],
            None,
            group_indices,
            opt_filter,
            total_num_groups,
        )
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        let counts = values[0].as_primitive::<UInt64Type>();
        self.add(
            &values[1],
            Some(counts),
            group_indices,
            None,
            total_num_groups,
        )
    }

    /// Each row as a group of its own: a count of 1 and its value (0 and 0 for a NULL or a
    /// row the filter drops).
    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let values = values[0].as_primitive::<Decimal128Type>();
        let kept = |row: usize| {
            values.is_valid(row) && opt_filter.is_none_or(|f| f.is_valid(row) && f.value(row))
        };
        let counts: UInt64Array = (0..values.len()).map(|row| kept(row) as u64).collect();
        let sums = (0..values.len())
            .map(|row| if kept(row) { values.value(row) } else { 0 })
            .collect::<Decimal128Array>()
            .with_precision_and_scale(38, self.input.1)?;
        Ok(vec![Arc::new(counts), Arc::new(sums)])
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let sums = emit_to.take_needed(&mut self.sums);
        let counts = emit_to.take_needed(&mut self.counts);
        let means = sums
            .into_iter()
            .zip(counts)
            .map(|(sum, count)| match count {
                0 => Ok(None),
                count => {
                    let sum = Numeric::new(sum, self.input);
                    let count = Numeric::new(i128::from(count), (20, 0));
                    divide(sum, count, self.result_scale).map(Some)
                }
            })
            .collect::<Result<Decimal128Array>>()?;
        Ok(Arc::new(
            means.with_precision_and_scale(38, self.result_scale)?,
        ))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let sums = Decimal128Array::from(emit_to.take_needed(&mut self.sums))
            .with_precision_and_scale(38, self.input.1)?;
        let counts = UInt64Array::from(emit_to.take_needed(&mut self.counts));
        Ok(vec![Arc::new(counts), Arc::new(sums)])
    }

    fn size(&self) -> usize {
        self.sums.capacity() * std::mem::size_of::<i128>()
            + self.counts.capacity() * std::mem::size_of::<u64>()
    }
}

/// A group's exact sum and count.
#[derive(Debug)]
struct Mean {
    input: (u8, i8),
    result_scale: i8,
    sum: i128,
    count: u64,
}

/// Decimal128(38, _) holds values below 10^38.
const LIMIT: i128 = 10i128.pow(38);

impl Mean {
    /// Adds (or with `sign` -1 takes away) the values to the sum; returns how many there were.
    fn add(&mut self, values: &ArrayRef, sign: i128) -> Result<u64> {
        let values = values.as_primitive::<Decimal128Type>();
        for value in values.iter().flatten() {
            self.sum = self
                .sum
                .checked_add(sign * value)
                .filter(|sum| sum.abs() < LIMIT)
                .ok_or_else(overflow)?;
        }
        Ok((values.len() - values.null_count()) as u64)
    }
}

impl Accumulator for Mean {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.count += self.add(&values[0], 1)?;
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let retracted = self.add(&values[0], -1)?;
        self.count = self.count.saturating_sub(retracted);
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.add(&states[1], 1)?;
        let counts = states[0].as_primitive::<UInt64Type>();
        self.count += counts.iter().flatten().sum::<u64>();
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::UInt64(Some(self.count)),
            ScalarValue::Decimal128(Some(self.sum), 38, self.input.1),
        ])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let value = if self.count == 0 {
            None
        } else {
            let sum = Numeric::new(self.sum, self.input);
            let count = Numeric::new(i128::from(self.count), (20, 0));
            Some(divide(sum, count, self.result_scale)?)
        };
        Ok(ScalarValue::Decimal128(value, 38, self.result_scale))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Decimal128Array;

    fn decimals(values: &[Option<i128>], scale: i8) -> ArrayRef {
        Arc::new(
            Decimal128Array::from(values.to_vec())
                .with_precision_and_scale(10, scale)
                .unwrap(),
        )
    }

    #[test]
    fn means_have_postgres_digits_and_retract() {
        let mut mean = Mean {
            input: (10, 2),
            result_scale: quotient_scale(10, 2),
            sum: 0,
            count: 0,
        };
        mean.update_batch(&[decimals(&[Some(100), Some(200), None, Some(200)], 2)])
            .unwrap();
        // PostgreSQL 15: avg of 1.00, 2.00, 2.00 is 1.6666666666666667.
        assert_eq!(
            mean.evaluate().unwrap().to_string(),
            "1.66666666666666670000"
        );
        mean.retract_batch(&[decimals(&[Some(200)], 2)]).unwrap();
        assert_eq!(
            mean.evaluate().unwrap().to_string(),
            "1.50000000000000000000"
        );
        // A saved state merges back to the same mean.
        let state = mean.state().unwrap();
        let mut restored = Mean {
            input: (10, 2),
            result_scale: quotient_scale(10, 2),
            sum: 0,
            count: 0,
        };
        restored
            .merge_batch(&[state[0].to_array().unwrap(), state[1].to_array().unwrap()])
            .unwrap();
        assert_eq!(
            restored.evaluate().unwrap().to_string(),
            "1.50000000000000000000"
        );
        mean.retract_batch(&[decimals(&[Some(100), Some(200)], 2)])
            .unwrap();
        assert!(mean.evaluate().unwrap().is_null());
    }

    /// The vectorized form: per group the same digits as one accumulator per group, FILTERs
    /// and NULLs skipped, and states that either form merges.
    #[test]
    fn group_means_agree_with_one_mean_per_group_and_share_its_state() {
        let fresh = || GroupMeans {
            input: (10, 2),
            result_scale: quotient_scale(10, 2),
            sums: Vec::new(),
            counts: Vec::new(),
        };
        let mut groups = fresh();
        let values = decimals(
            &[Some(100), Some(200), None, Some(200), Some(700), Some(5)],
            2,
        );
        let filter = BooleanArray::from(vec![true, true, true, true, true, false]);
        groups
            .update_batch(
                std::slice::from_ref(&values),
                &[0, 0, 1, 0, 1, 1],
                Some(&filter),
                3,
            )
            .unwrap();
        let means = groups.evaluate(EmitTo::First(2)).unwrap();
        assert_eq!(
            ScalarValue::try_from_array(&means, 0).unwrap().to_string(),
            "1.66666666666666670000"
        );
        assert_eq!(
            ScalarValue::try_from_array(&means, 1).unwrap().to_string(),
            "7.00000000000000000000"
        );
        // The third group has no row: NULL, as is left after the first two were emitted.
        let rest = groups.evaluate(EmitTo::All).unwrap();
        assert_eq!(rest.len(), 1);
        assert!(rest.is_null(0));

        // A state of the vectorized form merges into the row form, and the other way.
        let mut groups = fresh();
        groups
            .update_batch(std::slice::from_ref(&values), &[0, 0, 0, 0, 0, 0], None, 1)
            .unwrap();
        let state = groups.state(EmitTo::All).unwrap();
        let mut mean = Mean {
            input: (10, 2),
            result_scale: quotient_scale(10, 2),
            sum: 0,
            count: 0,
        };
        mean.merge_batch(&state).unwrap();
        // (1 + 2 + 2 + 7 + 0.05) / 5
        assert_eq!(
            mean.evaluate().unwrap().to_string(),
            "2.41000000000000000000"
        );
        let row_state: Vec<ArrayRef> = mean
            .state()
            .unwrap()
            .iter()
            .map(|v| v.to_array().unwrap())
            .collect();
        let mut merged = fresh();
        merged.merge_batch(&row_state, &[1], 2).unwrap();
        let converted = merged.convert_to_state(&[values], Some(&filter)).unwrap();
        merged
            .merge_batch(&converted, &[0, 0, 0, 0, 0, 0], 2)
            .unwrap();
        let means = merged.evaluate(EmitTo::All).unwrap();
        // Group 0: the rows the filter keeps, (1 + 2 + 2 + 7) / 4; group 1: the merged state.
        assert_eq!(
            ScalarValue::try_from_array(&means, 0).unwrap().to_string(),
            "3.00000000000000000000"
        );
        assert_eq!(
            ScalarValue::try_from_array(&means, 1).unwrap().to_string(),
            "2.41000000000000000000"
        );
    }
}
