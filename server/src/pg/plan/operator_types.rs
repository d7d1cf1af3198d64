//! Operators DataFusion accepts at planning but cannot evaluate on some types, refused at
//! planning as Postgres does: unary minus of a timestamp, date, string or boolean is "operator
//! does not exist" (42883). DataFusion plans it and fails at run time with an internal error
//! ("Invalid arithmetic operation: !Timestamp") — inside a view, on every row.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{plan_err, DFSchema, Result};
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::SessionContext;

pub fn install(ctx: &SessionContext) {
    ctx.add_analyzer_rule(Arc::new(CheckOperatorTypes));
}

#[derive(Debug)]
struct CheckOperatorTypes;

impl AnalyzerRule for CheckOperatorTypes {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.apply_with_subqueries(|node| {
            let schema: DFSchema = merge_schema(&node.inputs());
            node.apply_expressions(|expr| {
                expr.apply(|e| {
                    if let Expr::Negative(inner) = e {
                        // A column the merged schema cannot resolve (an outer reference) is
                        // left to DataFusion.
                        if let Ok(data_type) = inner.get_type(&schema) {
                            if !negatable(&data_type) {
                                return plan_err!(
                                    "operator does not exist: - {}",
                                    crate::pg::types::names::pg_type_name(&data_type)
                                );
                            }
                        }
                    }
                    Ok(TreeNodeRecursion::Continue)
                })
            })
        })?;
        Ok(plan)
    }

    fn name(&self) -> &str {
        "eddy_check_operator_types"
    }
}

fn negatable(data_type: &DataType) -> bool {
    match data_type {
        DataType::Dictionary(_, value) => negatable(value),
        other => other.is_numeric() || matches!(other, DataType::Interval(_) | DataType::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn minus_a_timestamp_is_refused_at_planning() {
        let ctx = SessionContext::new();
        install(&ctx);
        let error = ctx
            .sql("SELECT - TIMESTAMP '2026-01-01 00:00:00'")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("operator does not exist: - timestamp"),
            "{error}"
        );
        for fine in [
            "SELECT - 1",
            "SELECT - 1.5",
            "SELECT - INTERVAL '1' SECOND",
            "SELECT - NULL",
        ] {
            ctx.sql(fine).await.unwrap().collect().await.unwrap();
        }
    }
}
