//! Intervals compared and sorted as Postgres compares them: by their length, a month counting
//! 30 days and a day 24 hours (`interval_cmp_value`), so `INTERVAL '1 day' = INTERVAL '24
//! hours'`, `INTERVAL '1 month' = INTERVAL '30 days'` and `INTERVAL '1 month 1 day'` is not
//! longer than `INTERVAL '31 days'`. Arrow compares an interval's months, days and nanoseconds
//! one after another. Each comparison of two intervals, and each `ORDER BY` of one, reads
//! `interval_span(x)`: that length in nanoseconds, a `numeric` too wide to overflow.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, Decimal128Array};
use datafusion::arrow::datatypes::{DataType, IntervalMonthDayNanoType, IntervalUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr::{ScalarFunction, Sort};
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::SessionContext;

const NANOS_PER_DAY: i128 = 86_400_000_000_000;

pub fn install(ctx: &SessionContext) {
    ctx.register_udf(span_function());
    ctx.add_analyzer_rule(Arc::new(IntervalOrder));
}

fn span_function() -> ScalarUDF {
    ScalarUDF::new_from_impl(IntervalSpan {
        signature: Signature::exact(
            vec![DataType::Interval(IntervalUnit::MonthDayNano)],
            Volatility::Immutable,
        ),
    })
}

/// An interval's length as Postgres orders intervals, in nanoseconds.
pub fn span(months: i32, days: i32, nanoseconds: i64) -> i128 {
    (i128::from(months) * 30 + i128::from(days)) * NANOS_PER_DAY + i128::from(nanoseconds)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalSpan {
    signature: Signature,
}

impl ScalarUDFImpl for IntervalSpan {
    fn name(&self) -> &str {
        "interval_span"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Decimal128(38, 0))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let array = args.args[0].to_array(args.number_rows)?;
        let intervals = array.as_primitive::<IntervalMonthDayNanoType>();
        let spans: Decimal128Array = (0..intervals.len())
            .map(|i| {
                intervals.is_valid(i).then(|| {
                    let v = intervals.value(i);
                    span(v.months, v.days, v.nanoseconds)
                })
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(
            spans.with_precision_and_scale(38, 0)?,
        )))
    }
}

#[derive(Debug)]
struct IntervalOrder;

impl AnalyzerRule for IntervalOrder {
    fn name(&self) -> &str {
        "interval_order"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let function = Arc::new(span_function());
        let spanned = |expr: Expr| {
            Expr::ScalarFunction(ScalarFunction::new_udf(function.clone(), vec![expr]))
        };
        let plan = crate::pg::plan::expr_rewrites::rewrite_keeping_names(plan, |expr, schema| {
            let Expr::BinaryExpr(binary) = &expr else {
                return Ok(Transformed::no(expr));
            };
            let compares = matches!(
                binary.op,
                Operator::Eq
                    | Operator::NotEq
                    | Operator::Lt
                    | Operator::LtEq
                    | Operator::Gt
                    | Operator::GtEq
                    | Operator::IsDistinctFrom
                    | Operator::IsNotDistinctFrom
            );
            if !compares
                || !is_interval(&binary.left, schema)
                || !is_interval(&binary.right, schema)
            {
                return Ok(Transformed::no(expr));
            }
            Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                Box::new(spanned(binary.left.as_ref().clone())),
                binary.op,
                Box::new(spanned(binary.right.as_ref().clone())),
            ))))
        })?;
        plan.transform_up_with_subqueries(|node| {
            let LogicalPlan::Sort(mut sort) = node else {
                return Ok(Transformed::no(node));
            };
            let schema = sort.input.schema().clone();
            let mut changed = false;
            sort.expr = sort
                .expr
                .into_iter()
                .map(|order| {
                    if !is_interval(&order.expr, &schema) {
                        return order;
                    }
                    changed = true;
                    Sort {
                        expr: spanned(order.expr),
                        ..order
                    }
                })
                .collect();
            Ok(Transformed::new_transformed(
                LogicalPlan::Sort(sort),
                changed,
            ))
        })
        .map(|t| t.data)
    }
}

fn is_interval(expr: &Expr, schema: &DFSchema) -> bool {
    matches!(
        expr.get_type(schema),
        Ok(DataType::Interval(IntervalUnit::MonthDayNano))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_month_is_thirty_days_and_a_day_twenty_four_hours() {
        let hour = 3_600_000_000_000;
        assert_eq!(span(1, 0, 0), span(0, 30, 0));
        assert_eq!(span(0, 1, 0), span(0, 0, 24 * hour));
        assert_eq!(span(1, 1, 0), span(0, 31, 0));
        assert!(span(1, 0, 0) < span(0, 31, 0));
        assert!(span(0, -1, 25 * hour) > span(0, 0, 0));
        // Far past what an i64 of nanoseconds holds: no overflow.
        assert!(span(i32::MAX, i32::MAX, i64::MAX) > span(i32::MAX, 0, 0));
    }
}
