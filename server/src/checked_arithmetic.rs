//! Integer `+`, `-` and `*` fail on overflow, as in Postgres ("integer out of range", 22003),
//! where DataFusion's operators wrap: `2147483647 + 1` was `-2147483648`, a wrong answer with
//! no error. After type coercion (both sides then have one type), each such operator on
//! `smallint`, `integer` or `bigint` becomes a call that computes it with arrow's checked
//! kernel; the plan keeps the operator's name (`a + b`).

use std::sync::Arc;

use datafusion::arrow::array::Datum;
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::error::ArrowError;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRewriter};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
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
        plan.transform_up_with_subqueries(|plan| {
            // Expressions refer to the node's inputs (both sides of a join).
            let schema: DFSchema = merge_schema(&plan.inputs());
            let names = NamePreserver::new(&plan);
            plan.map_expressions(|expr| {
                let name = names.save(&expr);
                let rewritten = expr.rewrite(&mut ArithmeticRewriter { schema: &schema })?;
                Ok(rewritten.update_data(|e| name.restore(e)))
            })
        })
        .map(|t| t.data)
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

const CHECKED_NAMES: [&str; 3] = [
    "eddy_checked_add",
    "eddy_checked_subtract",
    "eddy_checked_multiply",
];

impl TreeNodeRewriter for ArithmeticRewriter<'_> {
    type Node = Expr;

    fn f_up(&mut self, expr: Expr) -> Result<Transformed<Expr>> {
        let Expr::BinaryExpr(BinaryExpr { left, op, right }) = &expr else {
            return Ok(Transformed::no(expr));
        };
        if !matches!(op, Operator::Plus | Operator::Minus | Operator::Multiply) {
            return Ok(Transformed::no(expr));
        }
        // A column the merged schema cannot resolve (an outer reference) is left alone.
        let (Ok(left_type), Ok(right_type)) = (self.type_of(left), self.type_of(right)) else {
            return Ok(Transformed::no(expr));
        };
        if left_type != right_type || range_name(&left_type).is_none() {
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
            _ => CHECKED_NAMES[2],
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
            _ => numeric::mul(left.as_ref(), right.as_ref()),
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
    async fn in_range_arithmetic_keeps_its_values_and_names() {
        let text = run("SELECT a - 1, b - b, a * 0 + 5 FROM t").await.unwrap();
        assert!(text.contains("2147483646"), "{text}");
        assert!(text.contains("| 0 "), "{text}");
        assert!(text.contains("t.a - Int64(1)"), "{text}");
    }
}
