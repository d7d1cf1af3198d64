//! Everyday Postgres functions that DataFusion lacks, names differently or computes
//! otherwise: `every`, `variance`, `sign`, `mod`, `num_nulls`, `num_nonnulls`, `scale`,
//! `quote_literal`, `quote_nullable`, `quote_ident`, `isfinite`, `age` and the `justify_*`
//! family, `gen_random_uuid`; `round` of a float rounds half to even; `array_remove` removes every match (DataFusion's removes the first), and
//! `encode`/`decode` in `base64` pad as Postgres does.

use std::sync::Arc;

use chrono::{Datelike, NaiveDateTime, Timelike};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int32Array, IntervalMonthDayNanoArray, StringArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::{
    DataType, IntervalMonthDayNano, IntervalMonthDayNanoType, TimeUnit, TimestampMicrosecondType,
};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::FunctionRewrite;
use datafusion::logical_expr::type_coercion::binary::comparison_coercion;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::prelude::SessionContext;

use crate::pg_functions::{function, text_arg};
use crate::pg_text::UNCONSTRAINED_NUMERIC;

const NANOS_PER_DAY: i64 = 86_400_000_000_000;
const DAYS_PER_MONTH: i32 = 30;

pub(crate) fn register(ctx: &SessionContext) -> Result<()> {
    for (name, alias) in [("bool_and", "every"), ("var_samp", "variance")] {
        let udaf = ctx.udaf(name)?.as_ref().clone().with_aliases([alias]);
        ctx.register_udaf(udaf);
    }
    for (name, alias) in [("signum", "sign"), ("uuid", "gen_random_uuid")] {
        let udf = ctx.udf(name)?.as_ref().clone().with_aliases([alias]);
        ctx.register_udf(udf);
    }
    ctx.register_udf(ScalarUDF::new_from_impl(Modulo {
        signature: Signature::user_defined(Volatility::Immutable),
    }));
    ctx.state_ref()
        .write()
        .register_function_rewrite(Arc::new(PostgresVariants))?;
    let any_args = |n: usize| vec![vec![DataType::Null; n]];
    for (name, counts_nulls) in [("num_nulls", true), ("num_nonnulls", false)] {
        ctx.register_udf(variadic_count(name, counts_nulls));
    }
    ctx.register_udf(function(
        "scale",
        &any_args(1),
        DataType::Int32,
        |args, _| scale(&args[0]),
    ));
    ctx.register_udf(function(
        "quote_literal",
        &any_args(1),
        DataType::Utf8,
        |args, rows| {
            Ok(texts(rows, |i| {
                text_arg(&args[0], i).map(|t| quote_literal(&t))
            }))
        },
    ));
    ctx.register_udf(function(
        "quote_nullable",
        &any_args(1),
        DataType::Utf8,
        |args, rows| {
            Ok(texts(rows, |i| {
                Some(text_arg(&args[0], i).map_or_else(|| "NULL".into(), |t| quote_literal(&t)))
            }))
        },
    ));
    ctx.register_udf(function(
        "quote_ident",
        &any_args(1),
        DataType::Utf8,
        |args, rows| {
            Ok(texts(rows, |i| {
                text_arg(&args[0], i).map(|t| crate::pg_text_functions::quote_identifier(&t))
            }))
        },
    ));
    // Eddy's dates and timestamps have no infinities: every value is finite.
    ctx.register_udf(function(
        "isfinite",
        &any_args(1),
        DataType::Boolean,
        |args, _| {
            let column = &args[0];
            Ok(Arc::new(
                (0..column.len())
                    .map(|i| column.is_valid(i).then_some(true))
                    .collect::<BooleanArray>(),
            ))
        },
    ));
    for (name, justify) in [
        (
            "justify_hours",
            justify_hours as fn(IntervalMonthDayNano) -> _,
        ),
        ("justify_days", justify_days),
        ("justify_interval", justify_interval),
    ] {
        ctx.register_udf(function(
            name,
            &any_args(1),
            interval_type(),
            move |args, _| {
                let intervals = cast(&args[0], &interval_type())?;
                let intervals = intervals.as_primitive::<IntervalMonthDayNanoType>();
                Ok(Arc::new(
                    intervals.unary::<_, IntervalMonthDayNanoType>(justify),
                ))
            },
        ));
    }
    ctx.register_udf(function(
        "age",
        &[vec![DataType::Null], vec![DataType::Null; 2]],
        interval_type(),
        age,
    ));
    Ok(())
}

fn interval_type() -> DataType {
    DataType::Interval(datafusion::arrow::datatypes::IntervalUnit::MonthDayNano)
}

fn texts(rows: usize, value: impl Fn(usize) -> Option<String>) -> ArrayRef {
    Arc::new((0..rows).map(value).collect::<StringArray>())
}

/// Postgres' `quote_literal`: doubled quotes, and `E'...'` with doubled backslashes when the
/// text has one.
pub(crate) fn quote_literal(text: &str) -> String {
    let quoted = text.replace('\'', "''");
    if text.contains('\\') {
        format!("E'{}'", quoted.replace('\\', "\\\\"))
    } else {
        format!("'{quoted}'")
    }
}

/// `num_nulls(...)` / `num_nonnulls(...)`: how many arguments are (not) NULL, per row.
fn variadic_count(name: &'static str, counts_nulls: bool) -> ScalarUDF {
    ScalarUDF::new_from_impl(VariadicCount {
        name,
        counts_nulls,
        signature: Signature::variadic_any(Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct VariadicCount {
    name: &'static str,
    counts_nulls: bool,
    signature: Signature,
}

impl ScalarUDFImpl for VariadicCount {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int32)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let counts = (0..args.number_rows).map(|row| {
            // An untyped NULL's array has no validity bits: its logical nulls say it.
            let nulls = arrays
                .iter()
                .filter(|a| a.logical_nulls().is_some_and(|n| n.is_null(row)))
                .count();
            let counted = if self.counts_nulls {
                nulls
            } else {
                arrays.len() - nulls
            };
            i32::try_from(counted).unwrap_or(i32::MAX)
        });
        Ok(ColumnarValue::Array(Arc::new(
            counts.collect::<Int32Array>(),
        )))
    }
}

/// `scale(numeric)`: the digits after the point, as the value prints.
fn scale(values: &ArrayRef) -> Result<ArrayRef> {
    let DataType::Decimal128(_, declared) = values.data_type() else {
        let (precision, scale_digits) = UNCONSTRAINED_NUMERIC;
        let decimals = cast(values, &DataType::Decimal128(precision, scale_digits))?;
        return scale(&decimals);
    };
    let declared = i32::from(*declared).max(0);
    // An unconstrained column prints without trailing zeros; a declared scale prints whole.
    let (precision, scale_digits) = UNCONSTRAINED_NUMERIC;
    let trims = values.data_type() == &DataType::Decimal128(precision, scale_digits);
    let decimals = values.as_primitive::<datafusion::arrow::datatypes::Decimal128Type>();
    Ok(Arc::new(
        decimals
            .iter()
            .map(|value| {
                value.map(|mut v| {
                    let mut digits = declared;
                    while trims && digits > 0 && v % 10 == 0 {
                        v /= 10;
                        digits -= 1;
                    }
                    digits
                })
            })
            .collect::<Int32Array>(),
    ))
}

/// `justify_hours`: whole days of the time part become days.
fn justify_hours(span: IntervalMonthDayNano) -> IntervalMonthDayNano {
    let mut days = span
        .days
        .saturating_add((span.nanoseconds / NANOS_PER_DAY) as i32);
    let mut time = span.nanoseconds % NANOS_PER_DAY;
    if days > 0 && time < 0 {
        time += NANOS_PER_DAY;
        days -= 1;
    } else if days < 0 && time > 0 {
        time -= NANOS_PER_DAY;
        days += 1;
    }
    IntervalMonthDayNano::new(span.months, days, time)
}

/// `justify_days`: each 30 days become a month.
fn justify_days(span: IntervalMonthDayNano) -> IntervalMonthDayNano {
    let mut months = span.months.saturating_add(span.days / DAYS_PER_MONTH);
    let mut days = span.days % DAYS_PER_MONTH;
    if months > 0 && days < 0 {
        days += DAYS_PER_MONTH;
        months -= 1;
    } else if months < 0 && days > 0 {
        days -= DAYS_PER_MONTH;
        months += 1;
    }
    IntervalMonthDayNano::new(months, days, span.nanoseconds)
}

/// `justify_interval`: both, with one sign throughout (Postgres' order of steps).
fn justify_interval(span: IntervalMonthDayNano) -> IntervalMonthDayNano {
    let (mut months, mut days, mut time) = (span.months, span.days, span.nanoseconds);
    days = days.saturating_add((time / NANOS_PER_DAY) as i32);
    time %= NANOS_PER_DAY;
    months = months.saturating_add(days / DAYS_PER_MONTH);
    days %= DAYS_PER_MONTH;
    if months > 0 && (days < 0 || (days == 0 && time < 0)) {
        days += DAYS_PER_MONTH;
        months -= 1;
    } else if months < 0 && (days > 0 || (days == 0 && time > 0)) {
        days -= DAYS_PER_MONTH;
        months += 1;
    }
    if days > 0 && time < 0 {
        time += NANOS_PER_DAY;
        days -= 1;
    } else if days < 0 && time > 0 {
        time -= NANOS_PER_DAY;
        days += 1;
    }
    IntervalMonthDayNano::new(months, days, time)
}

/// `age(a, b)`: the symbolic difference in years, months and days (not 30-day months), as
/// Postgres' `timestamp_age`; `age(a)` is from today's midnight.
fn age(args: &[ArrayRef], rows: usize) -> Result<ArrayRef> {
    let micros = DataType::Timestamp(TimeUnit::Microsecond, None);
    let later = match args {
        [_, _] => cast(&args[0], &micros)?,
        _ => {
            let midnight = chrono::Utc::now().date_naive().and_hms_opt(0, 0, 0);
            let value = midnight.map(|m| m.and_utc().timestamp_micros());
            ScalarValue::TimestampMicrosecond(value, None).to_array_of_size(rows)?
        }
    };
    let earlier = cast(args.last().expect("age has an argument"), &micros)?;
    let (later, earlier) = (
        later.as_primitive::<TimestampMicrosecondType>(),
        earlier.as_primitive::<TimestampMicrosecondType>(),
    );
    let spans = later.iter().zip(earlier.iter()).map(|pair| match pair {
        (Some(a), Some(b)) => symbolic_difference(a, b),
        _ => Ok(None),
    });
    Ok(Arc::new(
        spans.collect::<Result<IntervalMonthDayNanoArray>>()?,
    ))
}

fn symbolic_difference(a: i64, b: i64) -> Result<Option<IntervalMonthDayNano>> {
    let moment = |micros: i64| {
        chrono::DateTime::from_timestamp_micros(micros)
            .map(|t| t.naive_utc())
            .ok_or_else(|| DataFusionError::Execution("timestamp out of range".into()))
    };
    let (t1, t2) = (moment(a)?, moment(b)?);
    let fields = |t: &NaiveDateTime| {
        [
            i64::from(t.year()),
            i64::from(t.month0()),
            i64::from(t.day()),
            i64::from(t.hour()),
            i64::from(t.minute()),
            i64::from(t.second()),
            i64::from(t.nanosecond() / 1000),
        ]
    };
    let (f1, f2) = (fields(&t1), fields(&t2));
    let sign = if a < b { -1 } else { 1 };
    let mut d: Vec<i64> = f1.iter().zip(&f2).map(|(x, y)| (x - y) * sign).collect();
    // Borrow from the next field up; a month borrows the length of the earlier one's month.
    let limits = [0, 12, 0, 24, 60, 60, 1_000_000];
    for field in (1..7).rev() {
        while d[field] < 0 {
            d[field] += if field == 2 {
                let base = if a < b { &t1 } else { &t2 };
                i64::from(days_in_month(base.year(), base.month()))
            } else {
                limits[field]
            };
            d[field - 1] -= 1;
        }
    }
    let months = (d[0] * 12 + d[1]) * sign;
    let days = d[2] * sign;
    let micros = ((d[3] * 60 + d[4]) * 60 + d[5]) * 1_000_000 + d[6];
    Ok(Some(IntervalMonthDayNano::new(
        i32::try_from(months)
            .map_err(|_| DataFusionError::Execution("interval out of range".into()))?,
        days as i32,
        micros * sign * 1000,
    )))
}

fn days_in_month(year: i32, month: u32) -> u32 {
    let next = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    chrono::NaiveDate::from_ymd_opt(next.0, next.1, 1)
        .and_then(|d| d.pred_opt())
        .map_or(31, |d| d.day())
}

/// `mod(a, b)`: `a % b` over the two arguments' common type.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Modulo {
    signature: Signature,
}

impl ScalarUDFImpl for Modulo {
    fn name(&self) -> &str {
        "mod"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let [_, _] = arg_types else {
            return Err(DataFusionError::Plan("mod takes two arguments".into()));
        };
        let common = comparison_coercion(&arg_types[0], &arg_types[1])
            .filter(DataType::is_numeric)
            .ok_or_else(|| {
                DataFusionError::Plan(format!(
                    "function mod({}, {}) does not exist",
                    arg_types[0], arg_types[1]
                ))
            })?;
        Ok(vec![common.clone(), common])
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let remainder = numeric::rem(&arrays[0], &arrays[1])?;
        Ok(ColumnarValue::Array(remainder))
    }
}

/// Calls whose Postgres meaning is another DataFusion function's or argument's.
#[derive(Debug)]
struct PostgresVariants;

impl FunctionRewrite for PostgresVariants {
    fn name(&self) -> &str {
        "eddy_postgres_variants"
    }

    fn rewrite(
        &self,
        expr: Expr,
        schema: &DFSchema,
        _config: &ConfigOptions,
    ) -> Result<Transformed<Expr>> {
        let Expr::ScalarFunction(call) = &expr else {
            return Ok(Transformed::no(expr));
        };
        match call.func.name() {
            // A float rounds half to even (`rint`), a numeric half away from zero.
            "round" if call.args.len() == 1 => {
                let is_float = call.args[0].get_type(schema).is_ok_and(|t| t.is_floating());
                if !is_float {
                    return Ok(Transformed::no(expr));
                }
                let half_even = function(
                    "round",
                    &[vec![DataType::Float64]],
                    DataType::Float64,
                    |args, _| {
                        let floats = cast(&args[0], &DataType::Float64)?;
                        let floats =
                            floats.as_primitive::<datafusion::arrow::datatypes::Float64Type>();
                        Ok(Arc::new(
                            floats.unary::<_, datafusion::arrow::datatypes::Float64Type>(
                                f64::round_ties_even,
                            ),
                        ) as ArrayRef)
                    },
                );
                Ok(Transformed::yes(Expr::ScalarFunction(
                    ScalarFunction::new_udf(Arc::new(half_even), call.args.clone()),
                )))
            }
            "array_remove" => {
                let remove_all = datafusion::functions_nested::remove::array_remove_all_udf();
                Ok(Transformed::yes(Expr::ScalarFunction(
                    ScalarFunction::new_udf(remove_all, call.args.clone()),
                )))
            }
            "encode" | "decode" => {
                let mut args = call.args.clone();
                let is_base64 = |e: &Expr| {
                    matches!(e, Expr::Literal(ScalarValue::Utf8(Some(f)), _)
                        if f.eq_ignore_ascii_case("base64"))
                };
                if args.len() != 2 || !is_base64(&args[1]) {
                    return Ok(Transformed::no(expr));
                }
                args[1] = datafusion::logical_expr::lit("base64pad");
                Ok(Transformed::yes(Expr::ScalarFunction(
                    ScalarFunction::new_udf(call.func.clone(), args),
                )))
            }
            _ => Ok(Transformed::no(expr)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(months: i32, days: i32, hours: i64) -> IntervalMonthDayNano {
        IntervalMonthDayNano::new(months, days, hours * 3_600_000_000_000)
    }

    #[test]
    fn justify_as_postgres() {
        assert_eq!(justify_hours(span(0, 0, 27)), span(0, 1, 3));
        assert_eq!(justify_hours(span(0, 1, -3)), span(0, 0, 21));
        assert_eq!(justify_days(span(0, 35, 0)), span(1, 5, 0));
        assert_eq!(justify_days(span(1, -5, 0)), span(0, 25, 0));
        assert_eq!(justify_interval(span(1, -1, -1)), span(0, 28, 23));
    }

    #[test]
    fn age_borrows_the_earlier_month() {
        let at = |s: &str| {
            NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S")
                .unwrap()
                .and_utc()
                .timestamp_micros()
        };
        let d = symbolic_difference(at("2026-03-01 00:00:00"), at("2025-01-15 00:00:00"))
            .unwrap()
            .unwrap();
        assert_eq!(d, span(13, 17, 0));
        let back = symbolic_difference(at("2025-01-15 00:00:00"), at("2026-03-01 00:00:00"))
            .unwrap()
            .unwrap();
        assert_eq!(back, span(-13, -17, 0));
    }

    #[test]
    fn quote_literal_escapes() {
        assert_eq!(quote_literal("it's"), "'it''s'");
        assert_eq!(quote_literal("a\\b"), "E'a\\\\b'");
    }
}
