//! `avg` of a numeric as Postgres computes it: the exact sum divided by the count with
//! Postgres's quotient digits ([`crate::pg::types::numeric_division`]), so the average of 1.00, 2.00 and
//! 2.00 is `1.6666666666666667`. DataFusion's decimal average keeps 4 more digits than its
//! input (`1.666666`) and truncates; its average of integers is a float. The accumulator can
//! retract, for views over changing rows.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Field, FieldRef, UInt64Type};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::expr_rewriter::FunctionRewrite;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Expr, ExprSchemable, Signature, Volatility,
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
        let overflow = || ServerError::new("22003", "value overflows numeric format");
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
}
