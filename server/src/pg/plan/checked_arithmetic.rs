//! Integer `+`, `-` and `*` fail on overflow, as in Postgres ("integer out of range", 22003),
//! where DataFusion's operators wrap: `2147483647 + 1` was `-2147483648`, a wrong answer with
//! no error. After type coercion (both sides then have one type), each such operator on
//! `smallint`, `integer` or `bigint` becomes a call that computes it with arrow's checked
//! kernel; the plan keeps the operator's name (`a + b`). A float divided by zero is 22012
//! "division by zero", as in Postgres (Arrow's kernel answers `Infinity` or `NaN`).

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, Datum};
use datafusion::arrow::compute::cast;
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::arrow::error::ArrowError;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNodeRewriter};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::SessionContext;

use crate::error::ServerError;

pub fn install(ctx: &SessionContext) {
    ctx.add_analyzer_rule(Arc::new(CheckedIntegerArithmetic));
}

#[derive(Debug)]
struct CheckedIntegerArithmetic;

impl AnalyzerRule for CheckedIntegerArithmetic {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        crate::pg::plan::expr_rewrites::rewrite_keeping_names(plan, |expr, schema| {
            ArithmeticRewriter { schema }.f_up(expr)
        })
    }

    fn name(&self) -> &str {
        "eddy_checked_integer_arithmetic"
    }
}

struct ArithmeticRewriter<'a> {
    schema: &'a DFSchema,
}

impl ArithmeticRewriter<'_> {
    /// The type of `expr`. A checked operator has its first operand's type: that operand is
    /// read instead, since DataFusion types a function call by naming each level of it, which
    /// over a chain of n operators (`1 + 1 + ...`) costs n² per call and n³ per rewrite.
    fn type_of(&self, mut expr: &Expr) -> Result<DataType> {
        while let Expr::ScalarFunction(call) = expr {
            if !CHECKED_NAMES.contains(&call.func.name()) {
                break;
            }
            expr = &call.args[0];
        }
        expr.get_type(self.schema)
    }
}

const CHECKED_NAMES: [&str; 4] = [
    "eddy_checked_add",
    "eddy_checked_subtract",
    "eddy_checked_multiply",
    "eddy_checked_divide",
];

impl TreeNodeRewriter for ArithmeticRewriter<'_> {
    type Node = Expr;

    fn f_up(&mut self, expr: Expr) -> Result<Transformed<Expr>> {
        let Expr::BinaryExpr(BinaryExpr { left, op, right }) = &expr else {
            return Ok(Transformed::no(expr));
        };
        if !matches!(
            op,
            Operator::Plus | Operator::Minus | Operator::Multiply | Operator::Divide
        ) {
            return Ok(Transformed::no(expr));
        }
        // A column the merged schema cannot resolve (an outer reference) is left alone.
        let (Ok(left_type), Ok(right_type)) = (self.type_of(left), self.type_of(right)) else {
            return Ok(Transformed::no(expr));
        };
        let checked = match op {
            Operator::Divide => left_type.is_floating(),
            _ => range_name(&left_type).is_some(),
        };
        if left_type != right_type || !checked {
            return Ok(Transformed::no(expr));
        }
        let function = ScalarUDF::new_from_impl(CheckedOperator::new(*op, left_type));
        Ok(Transformed::yes(Expr::ScalarFunction(
            ScalarFunction::new_udf(
                Arc::new(function),
                vec![left.as_ref().clone(), right.as_ref().clone()],
            ),
        )))
    }
}

/// What Postgres calls the range an integer type overflows.
fn range_name(data_type: &DataType) -> Option<&'static str> {
    match data_type {
        DataType::Int16 => Some("smallint out of range"),
        DataType::Int32 => Some("integer out of range"),
        DataType::Int64 => Some("bigint out of range"),
        _ => None,
    }
}

/// `a op b` over one integer type, failing on overflow.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedOperator {
    op: Operator,
    data_type: DataType,
    signature: Signature,
}

impl CheckedOperator {
    fn new(op: Operator, data_type: DataType) -> Self {
        let signature = Signature::exact(
            vec![data_type.clone(), data_type.clone()],
            Volatility::Immutable,
        );
        Self {
            op,
            data_type,
            signature,
        }
    }
}

impl ScalarUDFImpl for CheckedOperator {
    fn name(&self) -> &str {
        match self.op {
            Operator::Plus => CHECKED_NAMES[0],
            Operator::Minus => CHECKED_NAMES[1],
            Operator::Multiply => CHECKED_NAMES[2],
            _ => CHECKED_NAMES[3],
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.data_type.clone())
    }

    fn display_name(&self, args: &[Expr]) -> Result<String> {
        Ok(format!("{} {} {}", args[0], self.op, args[1]))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let datum = |value: &ColumnarValue| -> Result<Box<dyn Datum>> {
            Ok(match value {
                ColumnarValue::Array(array) => Box::new(array.clone()),
                ColumnarValue::Scalar(scalar) => Box::new(scalar.to_scalar()?),
            })
        };
        let (left, right) = (datum(&args.args[0])?, datum(&args.args[1])?);
        let computed = match self.op {
            Operator::Plus => numeric::add(left.as_ref(), right.as_ref()),
            Operator::Minus => numeric::sub(left.as_ref(), right.as_ref()),
            Operator::Multiply => numeric::mul(left.as_ref(), right.as_ref()),
            _ => {
                let quotient = numeric::div(left.as_ref(), right.as_ref())?;
                if divides_by_zero(&args.args[0], &args.args[1], quotient.len())? {
                    return Err(ServerError::new("22012", "division by zero").into());
                }
                Ok(quotient)
            }
        };
        let result = computed.map_err(|e| match e {
            ArrowError::ArithmeticOverflow(_) => ServerError::new(
                "22003",
                range_name(&self.data_type).unwrap_or("out of range"),
            )
            .into(),
            other => datafusion::error::DataFusionError::from(other),
        })?;
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        Ok(if all_scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?)
        } else {
            ColumnarValue::Array(result)
        })
    }
}

/// Whether some row divides a value (not NULL) by zero.
fn divides_by_zero(dividend: &ColumnarValue, divisor: &ColumnarValue, rows: usize) -> Result<bool> {
    let (dividend, divisor) = (dividend.to_array(rows)?, divisor.to_array(rows)?);
    let divisor = cast(&divisor, &DataType::Float64)?;
    let divisor = divisor.as_primitive::<Float64Type>();
    Ok((0..rows)
        .any(|row| dividend.is_valid(row) && divisor.is_valid(row) && divisor.value(row) == 0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(sql: &str) -> Result<String> {
        let ctx = SessionContext::new();
        install(&ctx);
        ctx.sql("CREATE TABLE t (a INT, b BIGINT, c SMALLINT) AS VALUES (2147483647, 9223372036854775807, 32767)")
            .await?
            .collect()
            .await?;
        let batches = ctx.sql(sql).await?.collect().await?;
        Ok(datafusion::arrow::util::pretty::pretty_format_batches(&batches)?.to_string())
    }

    fn message(result: Result<String>) -> String {
        ServerError::from(result.unwrap_err()).to_string()
    }

    #[tokio::test]
    async fn integer_overflow_is_an_error_named_after_the_type() {
        assert!(message(run("SELECT a + a FROM t").await).contains("integer out of range"));
        assert!(message(run("SELECT b * 2 FROM t").await).contains("bigint out of range"));
        assert!(message(run("SELECT c + c FROM t").await).contains("smallint out of range"));
        assert!(message(run("SELECT -a - a - 3 FROM t").await).contains("integer out of range"));
    }

    #[tokio::test]
    async fn a_float_divided_by_zero_is_an_error_unless_null() {
        let error = message(run("SELECT CAST(a AS DOUBLE) / 0 FROM t").await);
        assert!(error.contains("division by zero"), "{error}");
        let text = run("SELECT CAST(NULL AS DOUBLE) / 0.0 AS n, CAST(a AS REAL) / 2 AS h FROM t")
            .await
            .unwrap();
        assert!(text.contains("1073741800"), "{text}");
    }

    #[tokio::test]
    async fn in_range_arithmetic_keeps_its_values_and_names() {
        let text = run("SELECT a - 1, b - b, a * 0 + 5 FROM t").await.unwrap();
        assert!(text.contains("2147483646"), "{text}");
        assert!(text.contains("| 0 "), "{text}");
        assert!(text.contains("t.a - Int64(1)"), "{text}");
    }
}
