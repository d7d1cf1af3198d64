//! Everyday Postgres functions that DataFusion lacks, names differently or computes
//! otherwise: `every`, `variance`, `sign`, `ceiling`, `mod`, `div`, `num_nulls`, `num_nonnulls`, `scale`,
//! `quote_literal`, `quote_nullable`, `quote_ident`, `regexp_split_to_array`, `width_bucket`
//! (dates and intervals: [`crate::pg::functions::date`]); `round` of a float rounds half to even,
//! `array_remove` removes every match (DataFusion's removes the first), and `encode`/`decode`
//! in `base64` pad as Postgres does.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int32Array, ListBuilder, StringArray, StringBuilder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::{DataType, Field, DECIMAL128_MAX_PRECISION};
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

use crate::error::ServerError;
use crate::pg::functions::{function, text_arg};
use crate::pg::types::text::UNCONSTRAINED_NUMERIC;

pub(crate) fn register(ctx: &SessionContext) -> Result<()> {
    for (name, alias) in [("bool_and", "every"), ("var_samp", "variance")] {
        let udaf = ctx.udaf(name)?.as_ref().clone().with_aliases([alias]);
        ctx.register_udaf(udaf);
    }
    let sign = ctx.udf("signum")?.as_ref().clone().with_aliases(["sign"]);
    ctx.register_udf(sign);
    let ceiling = ctx.udf("ceil")?.as_ref().clone().with_aliases(["ceiling"]);
    ctx.register_udf(ceiling);
    ctx.register_udf(ScalarUDF::new_from_impl(Modulo {
        signature: Signature::user_defined(Volatility::Immutable),
    }));
    ctx.register_udf(ScalarUDF::new_from_impl(Div {
        signature: Signature::user_defined(Volatility::Immutable),
    }));
    ctx.state_ref()
        .write()
        .register_function_rewrite(Arc::new(PostgresVariants))?;
    crate::pg::functions::date::register(ctx);
    crate::pg::functions::to_timestamp::register(ctx)?;
    crate::pg::functions::ordered_set_aggregates::register(ctx);
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
                text_arg(&args[0], i).map(|t| crate::pg::functions::text::quote_identifier(&t))
            }))
        },
    ));
    let text_list = DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)));
    ctx.register_udf(function(
        "regexp_split_to_array",
        &[vec![DataType::Utf8; 2], vec![DataType::Utf8; 3]],
        text_list,
        regexp_split_to_array,
    ));
    ctx.register_udf(function(
        "width_bucket",
        &any_args(4),
        DataType::Int32,
        width_bucket,
    ));
    Ok(())
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

/// `regexp_split_to_array(text, pattern[, flags])`: the pieces between the pattern's matches.
/// As in Postgres, an empty match at the start or end of the text, or right after another
/// match, does not split (`''` splits into characters); the flag `i` ignores case.
fn regexp_split_to_array(args: &[ArrayRef], rows: usize) -> Result<ArrayRef> {
    let mut builder = ListBuilder::new(StringBuilder::new());
    let mut compiled: Option<(String, regex::Regex)> = None;
    for i in 0..rows {
        let (Some(text), Some(pattern)) = (text_arg(&args[0], i), text_arg(&args[1], i)) else {
            builder.append(false);
            continue;
        };
        let flags = args.get(2).and_then(|f| text_arg(f, i)).unwrap_or_default();
        if let Some(bad) = flags.chars().find(|c| *c != 'i') {
            return Err(ServerError::new(
                "22023",
                format!("invalid regular expression option: \"{bad}\""),
            )
            .into());
        }
        let source = if flags.contains('i') {
            format!("(?i){pattern}")
        } else {
            pattern
        };
        if compiled.as_ref().is_none_or(|(s, _)| *s != source) {
            let regex = regex::Regex::new(&source).map_err(|e| {
                ServerError::new("2201B", format!("invalid regular expression: {e}"))
            })?;
            compiled = Some((source, regex));
        }
        let regex = &compiled.as_ref().expect("compiled above").1;
        let (mut start, mut last_end) = (0, None);
        for found in regex.find_iter(&text) {
            let empty = found.start() == found.end();
            if empty
                && (found.start() == 0
                    || found.end() == text.len()
                    || Some(found.start()) == last_end)
            {
                continue;
            }
            builder.values().append_value(&text[start..found.start()]);
            start = found.end();
            last_end = Some(found.end());
        }
        builder.values().append_value(&text[start..]);
        builder.append(true);
    }
    Ok(Arc::new(builder.finish()))
}

/// `width_bucket(operand, low, high, count)`: the bucket of `count` equal ones between `low`
/// and `high` that holds `operand`; 0 below, `count + 1` above (Postgres' float form).
fn width_bucket(args: &[ArrayRef], rows: usize) -> Result<ArrayRef> {
    let floats = args[..3]
        .iter()
        .map(|a| cast(a, &DataType::Float64))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let counts = cast(&args[3], &DataType::Int64)?;
    let (counts, floats) = (
        counts.as_primitive::<datafusion::arrow::datatypes::Int64Type>(),
        floats
            .iter()
            .map(|f| f.as_primitive::<datafusion::arrow::datatypes::Float64Type>())
            .collect::<Vec<_>>(),
    );
    let bad = |message: &str| -> DataFusionError { ServerError::new("2201G", message).into() };
    let buckets = (0..rows).map(|i| {
        if floats.iter().any(|f| f.is_null(i)) || counts.is_null(i) {
            return Ok(None);
        }
        let (operand, low, high) = (floats[0].value(i), floats[1].value(i), floats[2].value(i));
        let count = counts.value(i);
        if count <= 0 {
            return Err(bad("count must be greater than zero"));
        }
        if operand.is_nan() || low.is_nan() || high.is_nan() {
            return Err(bad("operand, lower bound, and upper bound cannot be NaN"));
        }
        if low == high {
            return Err(bad("lower bound cannot equal upper bound"));
        }
        let bucket = if low < high {
            if operand < low {
                0
            } else if operand >= high {
                count + 1
            } else {
                (count as f64 * ((operand - low) / (high - low))) as i64 + 1
            }
        } else if operand > low {
            0
        } else if operand <= high {
            count + 1
        } else {
            (count as f64 * ((low - operand) / (low - high))) as i64 + 1
        };
        i32::try_from(bucket)
            .map(Some)
            .map_err(|_| ServerError::new("22003", "integer out of range").into())
    });
    Ok(Arc::new(buckets.collect::<Result<Int32Array>>()?))
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

/// `div(a, b)`: the integral quotient, truncated toward zero, as a `numeric`. Both arguments
/// are brought to one scale, so the quotient of their digits is exact.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Div {
    signature: Signature,
}

impl ScalarUDFImpl for Div {
    fn name(&self) -> &str {
        "div"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let scale_of = |t: &DataType| match t {
            DataType::Decimal128(_, scale) => Some((*scale).max(0)),
            t if t.is_integer() || t == &DataType::Null => Some(0),
            _ => None,
        };
        let scales: Vec<Option<i8>> = arg_types.iter().map(scale_of).collect();
        let [Some(scale_a), Some(scale_b)] = scales[..] else {
            let types: Vec<String> = arg_types.iter().map(ToString::to_string).collect();
            return Err(DataFusionError::Plan(format!(
                "function div({}) does not exist",
                types.join(", ")
            )));
        };
        let common = DataType::Decimal128(DECIMAL128_MAX_PRECISION, scale_a.max(scale_b));
        Ok(vec![common.clone(), common])
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Decimal128(DECIMAL128_MAX_PRECISION, 0))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let quotients = crate::pg::types::numeric_division::decimal_pairs(
            &arrays[0],
            &arrays[1],
            |dividend, divisor| match divisor {
                0 => Err(ServerError::new("22012", "division by zero").into()),
                divisor => Ok(dividend / divisor),
            },
        )?;
        Ok(ColumnarValue::Array(Arc::new(
            quotients.with_precision_and_scale(DECIMAL128_MAX_PRECISION, 0)?,
        )))
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
            // Of a numeric, integral numerics (`trunc(1234.5678)` is `1234`): DataFusion
            // keeps the argument's scale (`1234.0000`).
            "ceil" | "floor" | "trunc" if call.args.len() == 1 => {
                let Ok(DataType::Decimal128(precision, scale)) = call.args[0].get_type(schema)
                else {
                    return Ok(Transformed::no(expr));
                };
                if scale <= 0 {
                    return Ok(Transformed::no(expr));
                }
                // `ceil(9.5)` is `10`: one more integral digit, which DataFusion's `ceil`
                // needs room for in its argument's type (it keeps that type).
                let digits = (i16::from(precision) - i16::from(scale) + 1).clamp(1, 38) as u8;
                let wider =
                    DataType::Decimal128((precision + 1).min(DECIMAL128_MAX_PRECISION), scale);
                let call = Expr::ScalarFunction(ScalarFunction::new_udf(
                    call.func.clone(),
                    vec![Expr::Cast(datafusion::logical_expr::Cast::new(
                        Box::new(call.args[0].clone()),
                        wider,
                    ))],
                ));
                Ok(Transformed::yes(Expr::Cast(
                    datafusion::logical_expr::Cast::new(
                        Box::new(call),
                        DataType::Decimal128(digits, 0),
                    ),
                )))
            }
            // `trunc(x, n)` of a numeric has scale `n`, as `round(x, n)` has: DataFusion
            // keeps the argument's (`trunc(1.55, 1)` would print `1.50`).
            "trunc" if call.args.len() == 2 => {
                let Ok(DataType::Decimal128(precision, scale)) = call.args[0].get_type(schema)
                else {
                    return Ok(Transformed::no(expr));
                };
                let places = match &call.args[1] {
                    Expr::Literal(places, _) => places.cast_to(&DataType::Int64).ok(),
                    _ => None,
                };
                let Some(ScalarValue::Int64(Some(places))) = places else {
                    return Ok(Transformed::no(expr));
                };
                let target_scale = places.clamp(0, i64::from(DECIMAL128_MAX_PRECISION)) as i8;
                if target_scale == scale {
                    return Ok(Transformed::no(expr));
                }
                let integer_digits = i16::from(precision) - i16::from(scale);
                let target_precision = (integer_digits + i16::from(target_scale))
                    .clamp(1, i16::from(DECIMAL128_MAX_PRECISION))
                    as u8;
                let target = DataType::Decimal128(target_precision, target_scale);
                Ok(Transformed::yes(Expr::Cast(
                    datafusion::logical_expr::Cast::new(Box::new(expr), target),
                )))
            }
            "array_remove" => {
                let remove_all = datafusion::functions_nested::remove::array_remove_all_udf();
                Ok(Transformed::yes(Expr::ScalarFunction(
                    ScalarFunction::new_udf(remove_all, call.args.clone()),
                )))
            }
            _ => Ok(Transformed::no(expr)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_literal_escapes() {
        assert_eq!(quote_literal("it's"), "'it''s'");
        assert_eq!(quote_literal("a\\b"), "E'a\\\\b'");
    }
}
