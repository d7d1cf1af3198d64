//! Text read as an `interval` at run time in Postgres' forms: a string inserted into an
//! `INTERVAL` column, compared with one, or cast from a text column. Arrow's cast reads only
//! unit words (`1 day 2 hours`), so the form Postgres (and Eddy) prints, `1 day 02:03:04.5`,
//! was refused with 22P02. Literals (`INTERVAL '...'`) are rewritten when parsed
//! (`eddy_planner::pg_literals`); this covers the casts type coercion and writes add: after
//! coercion, each cast of text to an interval reads the text through the same translation.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray};
use datafusion::arrow::datatypes::{DataType, IntervalUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    Cast, ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::SessionContext;

const INTERVAL: DataType = DataType::Interval(IntervalUnit::MonthDayNano);

pub fn install(ctx: &SessionContext) {
    ctx.add_analyzer_rule(Arc::new(PostgresIntervalCasts));
}

#[derive(Debug)]
struct PostgresIntervalCasts;

impl AnalyzerRule for PostgresIntervalCasts {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let function = Arc::new(ScalarUDF::new_from_impl(IntervalIn::default()));
        plan.transform_up_with_subqueries(|plan| {
            let schema: DFSchema = merge_schema(&plan.inputs());
            let names = NamePreserver::new(&plan);
            plan.map_expressions(|expr| {
                let name = names.save(&expr);
                let rewritten = expr.transform_up(|e| match e {
                    Expr::Cast(Cast { expr, field })
                        if field.data_type() == &INTERVAL
                            && is_text(expr.get_type(&schema).ok()) =>
                    {
                        Ok(Transformed::yes(Expr::ScalarFunction(
                            ScalarFunction::new_udf(function.clone(), vec![*expr]),
                        )))
                    }
                    e => Ok(Transformed::no(e)),
                })?;
                Ok(rewritten.update_data(|e| name.restore(e)))
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "eddy_postgres_interval_casts"
    }
}

/// A string literal compared with an interval (`i > '1 day 00:00:00'`) is an interval, as
/// Postgres reads an untyped literal; DataFusion's coercion has no common type for the two.
/// Runs before type coercion; the cast it adds reads the text as above.
pub fn type_text_compared_with_intervals(plan: LogicalPlan) -> Result<LogicalPlan> {
    plan.transform_up_with_subqueries(|plan| {
        let schema: DFSchema = merge_schema(&plan.inputs());
        plan.map_expressions(|expr| {
            expr.transform_up(|e| {
                let Expr::BinaryExpr(mut binary) = e else {
                    return Ok(Transformed::no(e));
                };
                use datafusion::logical_expr::Operator::*;
                if !matches!(
                    binary.op,
                    Eq | NotEq | Lt | LtEq | Gt | GtEq | IsDistinctFrom | IsNotDistinctFrom
                ) {
                    return Ok(Transformed::no(Expr::BinaryExpr(binary)));
                }
                let is_interval = |e: &Expr| e.get_type(&schema).ok() == Some(INTERVAL);
                let is_string =
                    |e: &Expr| matches!(e, Expr::Literal(ScalarValue::Utf8(Some(_)), _));
                let mut changed = false;
                if is_interval(&binary.left) && is_string(&binary.right) {
                    binary.right = Box::new(Expr::Cast(Cast::new(binary.right, INTERVAL)));
                    changed = true;
                } else if is_string(&binary.left) && is_interval(&binary.right) {
                    binary.left = Box::new(Expr::Cast(Cast::new(binary.left, INTERVAL)));
                    changed = true;
                }
                let expr = Expr::BinaryExpr(binary);
                Ok(if changed {
                    Transformed::yes(expr)
                } else {
                    Transformed::no(expr)
                })
            })
        })
    })
    .map(|t| t.data)
}

fn is_text(data_type: Option<DataType>) -> bool {
    matches!(
        data_type,
        Some(DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
    )
}

/// `text::interval` in Postgres' forms.
#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalIn {
    signature: Signature,
}

impl Default for IntervalIn {
    fn default() -> Self {
        Self {
            signature: Signature::string(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for IntervalIn {
    fn name(&self) -> &str {
        "eddy_interval_in"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(INTERVAL)
    }

    fn display_name(&self, args: &[Expr]) -> Result<String> {
        Ok(format!("CAST({} AS Interval(MonthDayNano))", args[0]))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let texts = args.args[0].to_array(if scalar { 1 } else { args.number_rows })?;
        let texts = datafusion::arrow::compute::cast(&texts, &DataType::Utf8)?;
        let words: StringArray = texts
            .as_string::<i32>()
            .iter()
            .map(|text| {
                text.map(|text| {
                    eddy_planner::pg_literals::interval_words(text)
                        .unwrap_or_else(|| text.to_string())
                })
            })
            .collect();
        let intervals: ArrayRef = datafusion::arrow::compute::cast(&words, &INTERVAL)?;
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&intervals, 0)?)
        } else {
            debug_assert_eq!(intervals.len(), args.number_rows);
            ColumnarValue::Array(intervals)
        })
    }
}
