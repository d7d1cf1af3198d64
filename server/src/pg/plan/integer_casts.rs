//! Casts to `smallint`, `integer` and `bigint` as Postgres makes them, where Arrow's differ:
//! a float or a decimal is rounded, not truncated (`2.5::int` is 3, `1.5::float8::int` is 2:
//! a `numeric` rounds half away from zero, a float to the nearest even), and a value out of
//! the target's range is 22003 "integer out of range" (Arrow's error had no SQLSTATE). After
//! type coercion, each such cast becomes a call that converts with these rules; the plan keeps
//! the cast's name.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Float64Type, Int64Type};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    Cast, ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::SessionContext;

use crate::error::ServerError;

pub fn install(ctx: &SessionContext) {
    ctx.add_analyzer_rule(Arc::new(IntegerCasts));
}

#[derive(Debug)]
struct IntegerCasts;

impl AnalyzerRule for IntegerCasts {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        crate::pg::plan::expr_rewrites::rewrite_keeping_names(plan, integer_cast)
    }

    fn name(&self) -> &str {
        "eddy_integer_casts"
    }
}

fn integer_cast(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let Expr::Cast(Cast { expr: input, field }) = &expr else {
        return Ok(Transformed::no(expr));
    };
    let data_type = field.data_type();
    let Some(bounds) = Bounds::of(data_type) else {
        return Ok(Transformed::no(expr));
    };
    // A column the merged schema cannot resolve (an outer reference) is left alone.
    let Ok(from) = input.get_type(schema) else {
        return Ok(Transformed::no(expr));
    };
    let needs_rules = match &from {
        DataType::Float16 | DataType::Float32 | DataType::Float64 | DataType::Decimal128(..) => {
            true
        }
        DataType::Int16 | DataType::Int32 | DataType::Int64 => {
            Bounds::of(&from).is_some_and(|own| own.min < bounds.min)
        }
        _ => false,
    };
    if !needs_rules {
        return Ok(Transformed::no(expr));
    }
    let function = ScalarUDF::new_from_impl(IntegerCast::new(from, data_type.clone()));
    Ok(Transformed::yes(Expr::ScalarFunction(
        ScalarFunction::new_udf(Arc::new(function), vec![input.as_ref().clone()]),
    )))
}

/// An integer type's range, and what Postgres calls leaving it.
#[derive(Clone, Copy)]
struct Bounds {
    min: i64,
    max: i64,
    error: &'static str,
}

impl Bounds {
    fn of(data_type: &DataType) -> Option<Self> {
        let (min, max, error) = match data_type {
            DataType::Int16 => (i16::MIN.into(), i16::MAX.into(), "smallint out of range"),
            DataType::Int32 => (i32::MIN.into(), i32::MAX.into(), "integer out of range"),
            DataType::Int64 => (i64::MIN, i64::MAX, "bigint out of range"),
            _ => return None,
        };
        Some(Self { min, max, error })
    }

    fn out_of_range(&self) -> datafusion::error::DataFusionError {
        ServerError::new("22003", self.error).into()
    }

    fn check(&self, value: i64) -> Result<i64> {
        if value < self.min || value > self.max {
            return Err(self.out_of_range());
        }
        Ok(value)
    }

    /// A float rounded to the nearest integer, ties to even (Postgres' `rint`).
    fn round_float(&self, value: f64) -> Result<i64> {
        let rounded = value.round_ties_even();
        // `max + 1` is a power of two, exact as a float; `max` itself may not be.
        if rounded.is_nan() || rounded < self.min as f64 || rounded >= -(self.min as f64) {
            return Err(self.out_of_range());
        }
        self.check(rounded as i64)
    }

    /// A decimal of `scale` digits rounded half away from zero, as `numeric` rounds.
    fn round_decimal(&self, value: i128, scale: i8) -> Result<i64> {
        let whole = if scale <= 0 {
            value.checked_mul(10_i128.pow(u32::from(scale.unsigned_abs())))
        } else {
            let unit = 10_i128.pow(u32::from(scale.unsigned_abs()));
            let (quotient, remainder) = (value / unit, value % unit);
            Some(if remainder.abs() * 2 >= unit {
                quotient + remainder.signum()
            } else {
                quotient
            })
        };
        let whole = whole.ok_or_else(|| self.out_of_range())?;
        self.check(i64::try_from(whole).map_err(|_| self.out_of_range())?)
    }
}

/// `CAST(x AS <integer type>)` of a float, a decimal or a wider integer.
#[derive(Debug, PartialEq, Eq, Hash)]
struct IntegerCast {
    to: DataType,
    signature: Signature,
}

impl IntegerCast {
    fn new(from: DataType, to: DataType) -> Self {
        Self {
            to,
            signature: Signature::exact(vec![from], Volatility::Immutable),
        }
    }

    fn convert(&self, input: &ArrayRef) -> Result<ArrayRef> {
        let bounds = Bounds::of(&self.to).expect("an integer target");
        let values: Int64Array = match input.data_type() {
            DataType::Decimal128(_, scale) => {
                let scale = *scale;
                let decimals = input.as_primitive::<Decimal128Type>();
                try_map(decimals.iter(), |v| bounds.round_decimal(v, scale))?
            }
            DataType::Int16 | DataType::Int32 | DataType::Int64 => {
                let wide = cast(input, &DataType::Int64)?;
                try_map(wide.as_primitive::<Int64Type>().iter(), |v| bounds.check(v))?
            }
            _ => {
                let floats = cast(input, &DataType::Float64)?;
                try_map(floats.as_primitive::<Float64Type>().iter(), |v| {
                    bounds.round_float(v)
                })?
            }
        };
        // Every value is in the target's range now: this cast cannot fail.
        Ok(cast(&values, &self.to)?)
    }
}

fn try_map<T>(
    values: impl Iterator<Item = Option<T>>,
    convert: impl Fn(T) -> Result<i64>,
) -> Result<Int64Array> {
    values.map(|v| v.map(&convert).transpose()).collect()
}

impl ScalarUDFImpl for IntegerCast {
    fn name(&self) -> &str {
        "eddy_integer_cast"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.to.clone())
    }

    fn display_name(&self, args: &[Expr]) -> Result<String> {
        Ok(format!("CAST({} AS {})", args[0], self.to))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        Ok(match &args.args[0] {
            ColumnarValue::Array(array) => ColumnarValue::Array(self.convert(array)?),
            ColumnarValue::Scalar(scalar) => {
                let converted = self.convert(&scalar.to_array()?)?;
                ColumnarValue::Scalar(ScalarValue::try_from_array(&converted, 0)?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(sql: &str) -> Result<String> {
        let ctx = SessionContext::new();
        install(&ctx);
        let batches = ctx.sql(sql).await?.collect().await?;
        Ok(datafusion::arrow::util::pretty::pretty_format_batches(&batches)?.to_string())
    }

    fn message(result: Result<String>) -> String {
        ServerError::from(result.unwrap_err()).to_string()
    }

    #[tokio::test]
    async fn decimals_round_half_away_from_zero_and_floats_to_even() {
        let text = run("SELECT CAST(CAST(2.5 AS DECIMAL(3, 1)) AS INT) a, \
             CAST(CAST(-2.5 AS DECIMAL(3, 1)) AS INT) b, CAST(CAST(2.49 AS DECIMAL(3, 2)) AS INT) c, \
             CAST(CAST(2.5 AS DOUBLE) AS INT) d, CAST(CAST(3.5 AS DOUBLE) AS BIGINT) e, \
             CAST(CAST(-1.5 AS REAL) AS SMALLINT) f")
        .await
        .unwrap();
        assert!(text.contains("| 3 | -3 | 2 | 2 | 4 | -2 |"), "{text}");
    }

    #[tokio::test]
    async fn out_of_range_is_22003_named_after_the_type() {
        let cases = [
            (
                "SELECT CAST(CAST(3000000000 AS BIGINT) AS INT)",
                "integer out of range",
            ),
            (
                "SELECT CAST(CAST(40000 AS INT) AS SMALLINT)",
                "smallint out of range",
            ),
            (
                "SELECT CAST(CAST(1e19 AS DOUBLE) AS BIGINT)",
                "bigint out of range",
            ),
            (
                "SELECT CAST(CAST('NaN' AS DOUBLE) AS INT)",
                "integer out of range",
            ),
            (
                "SELECT CAST(CAST(2147483647.5 AS DECIMAL(11, 1)) AS INT)",
                "integer out of range",
            ),
        ];
        for (sql, expected) in cases {
            let error = message(run(sql).await);
            assert!(error.contains(expected), "{sql}: {error}");
        }
        let edge = run("SELECT CAST(CAST(-2147483648.4 AS DOUBLE) AS INT) a")
            .await
            .unwrap();
        assert!(edge.contains("-2147483648"), "{edge}");
    }

    #[tokio::test]
    async fn a_cast_keeps_its_name_and_nulls() {
        let text =
            run("SELECT CAST(x AS INT) FROM (VALUES (CAST(1.5 AS DECIMAL(2, 1))), (NULL)) v(x)")
                .await
                .unwrap();
        // The column is named as DataFusion names the cast, not after the call.
        assert!(text.contains("| v.x |"), "{text}");
        assert!(text.contains("| 2 "), "{text}");
    }
}
