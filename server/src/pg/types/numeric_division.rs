//! `numeric / numeric` as Postgres divides: to at least 16 significant digits, rounded half
//! away from zero at the scale Postgres chooses for each quotient (`select_div_scale`), so
//! `1 / 3::numeric` is `0.33333333333333333333` and `1000000 / 3::numeric` is
//! `333333.333333333333`. DataFusion's decimal division keeps 4 more digits than the dividend
//! (`0.3333`), and truncates.
//!
//! Arrow keeps one scale per column, Postgres one per value: the quotient is computed and
//! rounded at the value's own Postgres scale, then held at the column's scale (up to 20
//! digits). The column is marked ([`QUOTIENT_KEY`]) so that each value prints with the digits
//! Postgres gives a quotient of its size ([`quotient_display_scale`]): `10.00 / 4` is
//! `2.5000000000000000`, `15000.000000000000` has 12.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, Decimal128Array};
use datafusion::arrow::datatypes::{i256, DataType, Decimal128Type, Field, FieldRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{plan_err, DFSchema, Result, ScalarValue};
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::FunctionRewrite;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, Operator, ReturnFieldArgs, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::prelude::SessionContext;

use crate::error::ServerError;
use crate::pg::types::text::{unconstrained, UNCONSTRAINED_NUMERIC};

/// Postgres's NUMERIC_MIN_SIG_DIGITS: a quotient has at least this many significant digits.
const MIN_SIGNIFICANT_DIGITS: i32 = 16;
/// The most fraction digits a quotient column keeps.
const MAX_SCALE: i16 = 20;

/// The field metadata marking a quotient column (`/` or `avg` of numerics): the least scale
/// of its values (the larger declared scale of the operands) and the column's scale, as
/// `least/scale`.
pub const QUOTIENT_KEY: &str = "eddy.numeric_quotient";

/// A quotient column's field of `data_type`, marked with its operands' largest declared scale.
pub(crate) fn quotient_field(name: &str, data_type: DataType, operands: &[DataType]) -> FieldRef {
    let least_scale = operands
        .iter()
        .filter_map(|t| match t {
            DataType::Decimal128(p, s) if !unconstrained(*p, *s) => Some(*s),
            _ => None,
        })
        .max()
        .unwrap_or(0)
        .max(0);
    let mut field = Field::new(name, data_type, true);
    if let DataType::Decimal128(_, scale) = field.data_type() {
        let marking = format!("{least_scale}/{scale}");
        field.set_metadata(HashMap::from([(QUOTIENT_KEY.to_string(), marking)]));
    }
    Arc::new(field)
}

/// The least scale of a quotient column's values, if `field` is one. A marking carried over
/// to a column of another scale (a cast to `numeric(p, s)`, a UNION with other numerics) no
/// longer describes its values.
pub fn quotient_least_scale(field: &Field) -> Option<i32> {
    let (least, scale) = field.metadata().get(QUOTIENT_KEY)?.split_once('/')?;
    let DataType::Decimal128(_, column_scale) = field.data_type() else {
        return None;
    };
    (scale.parse::<i8>().ok()? == *column_scale).then_some(least.parse().ok()?)
}

/// The scale Postgres prints a quotient of this size with, `value` being held at `scale`: 16
/// significant digits, at least `least_scale` and as many as it has, at most `scale`.
///
/// Postgres picks the scale from the operands' leading digits, which can give 4 more (`5.0 /
/// 5.0` is `1.00000000000000000000`); only the quotient is known here.
pub fn quotient_display_scale(value: i128, scale: i8, least_scale: i32) -> i32 {
    let quotient = Numeric {
        value,
        scale,
        display_scale: significant_scale(value, scale),
    };
    // A zero quotient has a zero dividend, which Postgres counts below any divisor.
    let weight = if value == 0 {
        -1
    } else {
        quotient.leading_digit().0
    };
    (MIN_SIGNIFICANT_DIGITS - weight * 4)
        .max(least_scale)
        .max(quotient.display_scale)
        .clamp(0, i32::from(scale.max(0)))
}

pub fn install(ctx: &SessionContext) -> Result<()> {
    let state = ctx.state_ref();
    let mut state = state.write();
    state.register_function_rewrite(Arc::new(NumericDivision))?;
    state.register_function_rewrite(Arc::new(crate::pg::types::numeric_average::NumericAverage))
}

/// Replaces `a / b` of two numerics (or a numeric and an integer) before type coercion, which
/// then types the plan with the quotient's scale.
#[derive(Debug)]
struct NumericDivision;

impl FunctionRewrite for NumericDivision {
    fn name(&self) -> &str {
        "eddy_numeric_division"
    }

    fn rewrite(
        &self,
        expr: Expr,
        schema: &DFSchema,
        _config: &ConfigOptions,
    ) -> Result<Transformed<Expr>> {
        let Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Divide,
            right,
        }) = &expr
        else {
            return Ok(Transformed::no(expr));
        };
        let (Ok(left_type), Ok(right_type)) = (left.get_type(schema), right.get_type(schema))
        else {
            return Ok(Transformed::no(expr));
        };
        let decimal = |t: &DataType| matches!(t, DataType::Decimal128(_, s) if *s >= 0);
        let operand = |t: &DataType| decimal(t) || as_decimal(t).is_some();
        if !(decimal(&left_type) || decimal(&right_type))
            || !operand(&left_type)
            || !operand(&right_type)
        {
            return Ok(Transformed::no(expr));
        }
        let divide = ScalarUDF::new_from_impl(NumericDivide {
            signature: Signature::user_defined(Volatility::Immutable),
        });
        Ok(Transformed::yes(Expr::ScalarFunction(
            ScalarFunction::new_udf(
                Arc::new(divide),
                vec![left.as_ref().clone(), right.as_ref().clone()],
            ),
        )))
    }
}

/// The decimal an integer operand is divided as.
pub(crate) fn as_decimal(data_type: &DataType) -> Option<DataType> {
    let precision = match data_type {
        DataType::Int8 | DataType::UInt8 => 3,
        DataType::Int16 | DataType::UInt16 => 5,
        DataType::Int32 | DataType::UInt32 => 10,
        DataType::Int64 => 19,
        DataType::UInt64 => 20,
        DataType::Decimal128(p, s) if *s >= 0 => return Some(DataType::Decimal128(*p, *s)),
        _ => return None,
    };
    Some(DataType::Decimal128(precision, 0))
}

fn precision_and_scale(data_type: &DataType) -> Result<(u8, i8)> {
    match as_decimal(data_type) {
        Some(DataType::Decimal128(p, s)) => Ok((p, s)),
        _ => plan_err!("numeric division of {data_type}"),
    }
}

/// The scale of the quotient column: 20 digits where the dividend's integer digits leave room
/// (a `numeric` without a declared precision always), never fewer than DataFusion's 4 more than the dividend.
pub(crate) fn quotient_scale(precision: u8, scale: i8) -> i8 {
    let integer_digits = i16::from(precision) - i16::from(scale);
    // Precision 38 is the `numeric` of a cast or a column without a declared precision.
    let room = if precision == UNCONSTRAINED_NUMERIC.0 {
        MAX_SCALE
    } else {
        (38 - integer_digits).min(MAX_SCALE)
    };
    (i16::from(scale) + 4).max(room).min(38) as i8
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct NumericDivide {
    signature: Signature,
}

impl ScalarUDFImpl for NumericDivide {
    fn name(&self) -> &str {
        "eddy_numeric_divide"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        arg_types
            .iter()
            .map(|t| as_decimal(t).map_or_else(|| plan_err!("numeric division of {t}"), Ok))
            .collect()
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        let (precision, scale) = precision_and_scale(&args[0])?;
        Ok(DataType::Decimal128(38, quotient_scale(precision, scale)))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let data_type = self.return_type(&types)?;
        Ok(quotient_field(self.name(), data_type, &types))
    }

    fn display_name(&self, args: &[Expr]) -> Result<String> {
        Ok(format!("{} / {}", args[0], args[1]))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let dividend_type = precision_and_scale(&args.args[0].data_type())?;
        let divisor_type = precision_and_scale(&args.args[1].data_type())?;
        let scale = quotient_scale(dividend_type.0, dividend_type.1);
        let left = args.args[0].to_array(rows)?;
        let right = args.args[1].to_array(rows)?;
        let quotients = decimal_pairs(&left, &right, |dividend, divisor| {
            let dividend = Numeric::new(dividend, dividend_type);
            let divisor = Numeric::new(divisor, divisor_type);
            divide(dividend, divisor, scale)
        })?
        .with_precision_and_scale(38, scale)?;
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        Ok(if all_scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&quotients, 0)?)
        } else {
            ColumnarValue::Array(Arc::new(quotients))
        })
    }
}

/// `f` of each row's two decimals, NULL where either is: the digits of a decimal column whose
/// precision and scale the caller sets.
pub(crate) fn decimal_pairs(
    left: &ArrayRef,
    right: &ArrayRef,
    f: impl Fn(i128, i128) -> Result<i128>,
) -> Result<Decimal128Array> {
    let (left, right) = (
        left.as_primitive::<Decimal128Type>(),
        right.as_primitive::<Decimal128Type>(),
    );
    left.iter()
        .zip(right.iter())
        .map(|pair| match pair {
            (Some(a), Some(b)) => f(a, b).map(Some),
            _ => Ok(None),
        })
        .collect()
}

/// The fraction digits `value` (held at `scale`) has without its trailing zeros.
fn significant_scale(value: i128, scale: i8) -> i32 {
    let mut digits = i32::from(scale);
    let mut rest = value;
    while digits > 0 && rest % 10 == 0 {
        rest /= 10;
        digits -= 1;
    }
    digits
}

/// A decimal value with its type's scale and the display scale Postgres gives it: the declared
/// scale, or for an unconstrained `numeric` the digits it has after trailing zeros.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Numeric {
    value: i128,
    scale: i8,
    display_scale: i32,
}

impl Numeric {
    pub(crate) fn new(value: i128, (precision, scale): (u8, i8)) -> Self {
        let display_scale = if unconstrained(precision, scale) {
            significant_scale(value, scale)
        } else {
            i32::from(scale)
        };
        Self {
            value,
            scale,
            display_scale,
        }
    }

    /// Postgres's weight (the position of the first nonzero base-10000 digit) and that digit.
    fn leading_digit(&self) -> (i32, i64) {
        if self.value == 0 {
            return (0, 0);
        }
        let magnitude = self.value.unsigned_abs();
        let length = magnitude.ilog10() as i32 + 1;
        let exponent = length - 1 - i32::from(self.scale);
        let weight = exponent.div_euclid(4);
        // The base-10000 digit's decimal width (1 to 4), read from the top of the digits.
        let width = exponent - 4 * weight + 1;
        let first = if length >= width {
            magnitude / 10u128.pow((length - width) as u32)
        } else {
            magnitude * 10u128.pow((width - length) as u32)
        };
        (weight, first as i64)
    }
}

/// The scale Postgres gives `dividend / divisor` (numeric.c, `select_div_scale`).
fn division_scale(dividend: Numeric, divisor: Numeric) -> i32 {
    let (weight1, first1) = dividend.leading_digit();
    let (weight2, first2) = divisor.leading_digit();
    let mut quotient_weight = weight1 - weight2;
    if first1 <= first2 {
        quotient_weight -= 1;
    }
    (MIN_SIGNIFICANT_DIGITS - quotient_weight * 4)
        .max(dividend.display_scale)
        .max(divisor.display_scale)
        .clamp(0, 1000)
}

/// `dividend / divisor` rounded half away from zero at Postgres's scale (or at `scale`, if
/// that keeps fewer digits), as a decimal of `scale`.
pub(crate) fn divide(dividend: Numeric, divisor: Numeric, scale: i8) -> Result<i128> {
    if divisor.value == 0 {
        return Err(ServerError::new("22012", "division by zero").into());
    }
    let overflow = || ServerError::new("22003", "value overflows numeric format");
    let rounding = division_scale(dividend, divisor).min(i32::from(scale));
    // value = dividend.value / 10^s1 ÷ divisor.value / 10^s2, wanted times 10^rounding.
    let exponent = i32::from(divisor.scale) + rounding - i32::from(dividend.scale);
    let ten = i256::from_i128(10);
    let power = |n: i32| ten.checked_pow(n as u32).ok_or_else(overflow);
    let (mut numerator, mut denominator) = (
        i256::from_i128(dividend.value),
        i256::from_i128(divisor.value),
    );
    if exponent >= 0 {
        numerator = numerator
            .checked_mul(power(exponent)?)
            .ok_or_else(overflow)?;
    } else {
        denominator = denominator
            .checked_mul(power(-exponent)?)
            .ok_or_else(overflow)?;
    }
    let quotient = numerator.checked_div(denominator).ok_or_else(overflow)?;
    let remainder = numerator.checked_rem(denominator).ok_or_else(overflow)?;
    let doubled = remainder.wrapping_abs().checked_mul(i256::from_i128(2));
    let rounded = match doubled {
        Some(twice) if twice >= denominator.wrapping_abs() => {
            let negative = (numerator < i256::ZERO) != (denominator < i256::ZERO);
            quotient + if negative { i256::MINUS_ONE } else { i256::ONE }
        }
        _ => quotient,
    };
    let held = rounded
        .checked_mul(power(i32::from(scale) - rounding)?)
        .ok_or_else(overflow)?;
    held.to_i128()
        .filter(|v| v.unsigned_abs() < 10u128.pow(38))
        .ok_or_else(|| overflow().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NUMERIC: (u8, i8) = (38, 10);

    /// `a / b` for two unconstrained numerics given as text, printed without trailing zeros.
    fn quotient(a: &str, b: &str) -> String {
        let parse = |text: &str| {
            let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
            let digits = format!("{whole}{fraction:0<10}");
            Numeric::new(digits.parse().unwrap(), NUMERIC)
        };
        let scale = quotient_scale(NUMERIC.0, NUMERIC.1);
        let value = divide(parse(a), parse(b), scale).unwrap();
        crate::pg::types::text::numeric_text(
            value,
            38,
            scale,
            crate::pg::types::text::NumericForm::Trimmed,
        )
    }

    /// `a / b` as a quotient column prints it.
    fn printed(a: &str, b: &str) -> String {
        let trimmed = quotient(a, b);
        let (whole, fraction) = trimmed.split_once('.').unwrap_or((&trimmed, ""));
        let value: i128 = format!("{whole}{fraction:0<20}").parse().unwrap();
        let form = crate::pg::types::text::NumericForm::Quotient { least_scale: 0 };
        crate::pg::types::text::numeric_text(value, 38, 20, form)
    }

    #[test]
    fn quotients_print_with_the_digits_postgres_gives_their_size() {
        // PostgreSQL 15's text for each.
        assert_eq!(printed("10", "4"), "2.5000000000000000");
        assert_eq!(printed("30000", "2"), "15000.000000000000");
        assert_eq!(printed("1", "8"), "0.12500000000000000000");
        assert_eq!(printed("0", "3"), "0.00000000000000000000");
        assert_eq!(printed("1", "3"), "0.33333333333333333333");
        assert_eq!(printed("-7", "3"), "-2.3333333333333333");
        assert_eq!(printed("123456789012345678.5", "3"), "41152263004115226.2");
        // Postgres gives 4 more digits when the operands' first digits are equal
        // (`1.00000000000000000000`): the quotient alone does not tell.
        assert_eq!(printed("5", "5"), "1.0000000000000000");
    }

    #[test]
    fn a_quotient_marking_holds_for_its_own_scale_only() {
        let field = quotient_field(
            "q",
            DataType::Decimal128(38, 20),
            &[DataType::Decimal128(10, 2)],
        );
        assert_eq!(quotient_least_scale(&field), Some(2));
        let cast = field
            .as_ref()
            .clone()
            .with_data_type(DataType::Decimal128(10, 2));
        assert_eq!(quotient_least_scale(&cast), None);
        let unconstrained = DataType::Decimal128(38, 10);
        let field = quotient_field("q", DataType::Decimal128(38, 20), &[unconstrained]);
        assert_eq!(quotient_least_scale(&field), Some(0));
    }

    #[test]
    fn quotients_have_postgres_digits() {
        // Each answer is PostgreSQL 15's, trailing zeros aside.
        assert_eq!(quotient("1", "3"), "0.33333333333333333333");
        assert_eq!(quotient("2", "3"), "0.66666666666666666667");
        assert_eq!(quotient("1000000", "3"), "333333.333333333333");
        assert_eq!(quotient("0.001", "3"), "0.00033333333333333333");
        assert_eq!(quotient("-7", "3"), "-2.3333333333333333");
        assert_eq!(quotient("123456789012345678.5", "3"), "41152263004115226.2");
        assert_eq!(quotient("10", "4"), "2.5");
        assert_eq!(quotient("0", "7"), "0");
        assert_eq!(quotient("5", "-0.5"), "-10");
    }

    #[test]
    fn declared_scales_count_and_zero_divisors_fail() {
        let price = Numeric::new(314, (10, 2));
        let three = Numeric::new(3, (20, 0));
        // Equal first digits: the quotient is taken to be below 1, so 20 digits.
        assert_eq!(division_scale(price, three), 20);
        let scale = quotient_scale(10, 2);
        assert_eq!(scale, 20);
        assert_eq!(
            divide(price, three, scale).unwrap(),
            104_666_666_666_666_666_667
        );
        let zero = Numeric::new(0, (20, 0));
        let err = divide(price, zero, scale).unwrap_err().to_string();
        assert!(err.contains("division by zero"), "{err}");
    }
}
