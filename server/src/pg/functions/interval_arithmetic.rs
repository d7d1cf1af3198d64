//! `interval * number`, `number * interval` and `interval / number`, as Postgres computes them
//! (`interval_mul`, `interval_div`): DataFusion has no arithmetic between intervals and numbers
//! ("Cannot get result type for temporal operation"). An expression planner turns the operators
//! into `interval_scale(interval, factor, divide)`, so they work in queries and views alike.
//!
//! Postgres scales each field by a float8 factor and carries the fractions down: a fraction of
//! a month becomes days (30 a month), a fraction of a day becomes time, each rounded to the
//! microsecond. `INTERVAL '1 month' * 1.5` is `1 mon 15 days`.
//!
//! `date ± interval` is a `timestamp`, as in Postgres (see [`date_and_interval`]).

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, IntervalMonthDayNanoArray,
};
use datafusion::arrow::datatypes::{
    DataType, IntervalMonthDayNano, IntervalMonthDayNanoType, IntervalUnit,
};
use datafusion::common::{plan_err, DFSchema, Result};
use datafusion::execution::context::SessionContext;
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{
    cast, lit, ColumnarValue, Expr, ExprSchemable, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, Volatility,
};
use datafusion::sql::sqlparser::ast::BinaryOperator;

use crate::error::ServerError;
use crate::pg::types::names::pg_type_name;

const DAYS_PER_MONTH: f64 = 30.0;
const SECS_PER_DAY: f64 = 86_400.0;
const MICROS_PER_SEC: f64 = 1_000_000.0;

/// Registers the operators' planner.
pub fn register(ctx: &SessionContext) -> Result<()> {
    ctx.state_ref()
        .write()
        .register_expr_planner(Arc::new(IntervalOperators))
}

#[derive(Debug)]
struct IntervalOperators;

impl ExprPlanner for IntervalOperators {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        let divide = match expr.op {
            BinaryOperator::Multiply => false,
            BinaryOperator::Divide => true,
            BinaryOperator::Plus | BinaryOperator::Minus => return date_and_interval(expr, schema),
            _ => return Ok(PlannerResult::Original(expr)),
        };
        // A type that cannot be known here (a parameter, an outer column) is left to DataFusion.
        let (Ok(left), Ok(right)) = (expr.left.get_type(schema), expr.right.get_type(schema))
        else {
            return Ok(PlannerResult::Original(expr));
        };
        let (interval, factor) = match (is_interval(&left), is_number(&right)) {
            (true, true) => (expr.left, expr.right),
            // number * interval; number / interval does not exist in Postgres either.
            _ if !divide && is_number(&left) && is_interval(&right) => (expr.right, expr.left),
            // Any other operand next to an interval: Postgres has no such operator either.
            _ if is_interval(&left) || is_interval(&right) => {
                return plan_err!(
                    "operator does not exist: {} {} {}",
                    pg_type_name(&left),
                    expr.op,
                    pg_type_name(&right)
                );
            }
            _ => return Ok(PlannerResult::Original(expr)),
        };
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            ScalarFunction::new_udf(
                Arc::new(ScalarUDF::new_from_impl(IntervalScale::new())),
                vec![
                    cast(interval, DataType::Interval(IntervalUnit::MonthDayNano)),
                    cast(factor, DataType::Float64),
                    lit(divide),
                ],
            ),
        )))
    }
}

/// `date ± interval` (and `interval + date`) is a `timestamp` in Postgres, where DataFusion
/// answers a date; and a quoted literal next to an interval is read as an interval
/// (`INTERVAL '1 day' + '2 hours'`), as Postgres types an unknown literal by the other side.
fn date_and_interval(
    mut expr: RawBinaryExpr,
    schema: &DFSchema,
) -> Result<PlannerResult<RawBinaryExpr>> {
    let (Ok(left), Ok(right)) = (expr.left.get_type(schema), expr.right.get_type(schema)) else {
        return Ok(PlannerResult::Original(expr));
    };
    let interval = DataType::Interval(IntervalUnit::MonthDayNano);
    let timestamp = DataType::Timestamp(datafusion::arrow::datatypes::TimeUnit::Microsecond, None);
    let is_text_literal =
        |e: &Expr| matches!(e, Expr::Literal(value, _) if value.data_type() == DataType::Utf8);
    if is_interval(&left) && is_text_literal(&expr.right) {
        expr.right = cast(expr.right, interval);
    } else if is_interval(&right) && is_text_literal(&expr.left) {
        expr.left = cast(expr.left, interval);
    } else if left == DataType::Date32 && is_interval(&right) {
        expr.left = cast(expr.left, timestamp);
    } else if is_interval(&left) && right == DataType::Date32 && expr.op == BinaryOperator::Plus {
        expr.right = cast(expr.right, timestamp);
    }
    Ok(PlannerResult::Original(expr))
}

fn is_interval(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Interval(_))
}

fn is_number(data_type: &DataType) -> bool {
    data_type.is_numeric() || data_type == &DataType::Null
}

/// `interval_scale(interval, factor float8, divide bool)`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalScale {
    signature: Signature,
}

impl IntervalScale {
    fn new() -> Self {
        Self {
            signature: Signature::exact(
                vec![
                    DataType::Interval(IntervalUnit::MonthDayNano),
                    DataType::Float64,
                    DataType::Boolean,
                ],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for IntervalScale {
    fn name(&self) -> &str {
        "interval_scale"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Interval(IntervalUnit::MonthDayNano))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let intervals = arrays[0].as_primitive::<IntervalMonthDayNanoType>();
        let factors: &Float64Array = arrays[1].as_primitive();
        let divide: &BooleanArray = arrays[2].as_boolean();
        let mut out = Vec::with_capacity(intervals.len());
        for i in 0..intervals.len() {
            if intervals.is_null(i) || factors.is_null(i) || divide.is_null(i) {
                out.push(None);
                continue;
            }
            out.push(Some(scale(
                intervals.value(i),
                factors.value(i),
                divide.value(i),
            )?));
        }
        let result: ArrayRef = Arc::new(IntervalMonthDayNanoArray::from(out));
        Ok(ColumnarValue::Array(result))
    }
}

/// Postgres' `interval_mul` (and `interval_div`, the same with `x / factor`).
fn scale(span: IntervalMonthDayNano, factor: f64, divide: bool) -> Result<IntervalMonthDayNano> {
    if divide && factor == 0.0 {
        return Err(ServerError::new("22012", "division by zero").into());
    }
    let apply = |x: f64| if divide { x / factor } else { x * factor };
    let out_of_range = || Err(ServerError::new("22008", "interval out of range").into());
    let months_scaled = apply(f64::from(span.months));
    if !fits_i32(months_scaled) {
        return out_of_range();
    }
    let months = months_scaled as i32;
    let days_scaled = apply(f64::from(span.days));
    if !fits_i32(days_scaled) {
        return out_of_range();
    }
    let mut days = days_scaled as i32;
    // Fractional months become days, fractional days time, each to the microsecond.
    let month_remainder_days = round_micro((months_scaled - f64::from(months)) * DAYS_PER_MONTH);
    let mut sec_remainder = round_micro(
        (days_scaled - f64::from(days) + month_remainder_days
            - f64::from(month_remainder_days as i32))
            * SECS_PER_DAY,
    );
    if sec_remainder.abs() >= SECS_PER_DAY {
        let whole_days = (sec_remainder / SECS_PER_DAY) as i32;
        days = match days.checked_add(whole_days) {
            Some(days) => days,
            None => return out_of_range(),
        };
        sec_remainder -= f64::from(whole_days) * SECS_PER_DAY;
    }
    days = match days.checked_add(month_remainder_days as i32) {
        Some(days) => days,
        None => return out_of_range(),
    };
    // Postgres keeps microseconds; Arrow's intervals carry nanoseconds.
    let micros = (apply(span.nanoseconds as f64 / 1_000.0) + sec_remainder * MICROS_PER_SEC)
        .round_ties_even();
    if !micros.is_finite() || micros.abs() >= (i64::MAX / 1_000) as f64 {
        return out_of_range();
    }
    Ok(IntervalMonthDayNano::new(
        months,
        days,
        micros as i64 * 1_000,
    ))
}

fn fits_i32(x: f64) -> bool {
    !x.is_nan() && x >= f64::from(i32::MIN) && x < -(f64::from(i32::MIN))
}

/// Postgres' `TSROUND`: to the microsecond.
fn round_micro(x: f64) -> f64 {
    (x * MICROS_PER_SEC).round_ties_even() / MICROS_PER_SEC
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(months: i32, days: i32, micros: i64) -> IntervalMonthDayNano {
        IntervalMonthDayNano::new(months, days, micros * 1_000)
    }

    #[test]
    fn fractions_carry_down_as_in_postgres() {
        // SELECT INTERVAL '1 month' * 1.5 → 1 mon 15 days
        assert_eq!(
            scale(interval(1, 0, 0), 1.5, false).unwrap(),
            interval(1, 15, 0)
        );
        // SELECT INTERVAL '1 day' * 0.5 → 12:00:00
        assert_eq!(
            scale(interval(0, 1, 0), 0.5, false).unwrap(),
            interval(0, 0, 43_200_000_000)
        );
        // SELECT INTERVAL '1 day 02:03:04' / 2 → 13:01:32
        assert_eq!(
            scale(interval(0, 1, 7_384_000_000), 2.0, true).unwrap(),
            interval(0, 0, 46_892_000_000)
        );
        // SELECT 3 * INTERVAL '20 seconds' → 00:01:00
        assert_eq!(
            scale(interval(0, 0, 20_000_000), 3.0, false).unwrap(),
            interval(0, 0, 60_000_000)
        );
        // SELECT INTERVAL '1 mon' * -0.5 → -15 days
        assert_eq!(
            scale(interval(1, 0, 0), -0.5, false).unwrap(),
            interval(0, -15, 0)
        );
    }

    #[test]
    fn errors_as_in_postgres() {
        assert!(scale(interval(0, 1, 0), 0.0, true)
            .unwrap_err()
            .to_string()
            .contains("division by zero"));
        assert!(scale(interval(1, 0, 0), 1e12, false)
            .unwrap_err()
            .to_string()
            .contains("interval out of range"));
        assert!(scale(interval(0, 0, 1), f64::NAN, false).is_err());
    }
}
