//! The merged column of an outer join `USING (x)`, as Postgres gives it: DataFusion reads `x`
//! (and `*`) from the left side, so `a RIGHT JOIN b USING (x)` showed NULL for every row only
//! `b` had, and a FULL join too. Postgres' `x` is the right side's value in a RIGHT join and
//! `COALESCE(a.x, b.x)` in a FULL one. A projection right above such a join reads it so.
//!
//! The projection cannot tell `x` from an explicit `a.x` (the planner resolved both to the
//! left column): `a.x` of a RIGHT or FULL `USING` join is read as `x` too.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, Result};
use datafusion::functions::core::expr_fn::coalesce;
use datafusion::logical_expr::{Expr, JoinConstraint, JoinType, LogicalPlan, Projection};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::SessionContext;

pub fn install(ctx: &SessionContext) {
    ctx.add_analyzer_rule(Arc::new(UsingJoinColumns));
}

#[derive(Debug)]
struct UsingJoinColumns;

impl AnalyzerRule for UsingJoinColumns {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|plan| {
            let LogicalPlan::Projection(projection) = &plan else {
                return Ok(Transformed::no(plan));
            };
            let LogicalPlan::Join(join) = projection.input.as_ref() else {
                return Ok(Transformed::no(plan));
            };
            if join.join_constraint != JoinConstraint::Using
                || !matches!(join.join_type, JoinType::Right | JoinType::Full)
            {
                return Ok(Transformed::no(plan));
            }
            let merged: Vec<(Column, Expr)> = join
                .on
                .iter()
                .filter_map(|(left, right)| {
                    let (Expr::Column(l), Expr::Column(_)) = (left, right) else {
                        return None;
                    };
                    let value = match join.join_type {
                        JoinType::Right => right.clone(),
                        _ => coalesce(vec![left.clone(), right.clone()]),
                    };
                    Some((l.clone(), value))
                })
                .collect();
            let mut changed = false;
            let exprs = projection
                .expr
                .iter()
                .map(|expr| {
                    let (inner, alias) = match expr {
                        Expr::Alias(a) => {
                            (a.expr.as_ref(), Some((a.relation.clone(), a.name.clone())))
                        }
                        other => (other, None),
                    };
                    let Expr::Column(column) = inner else {
                        return expr.clone();
                    };
                    let Some((_, value)) = merged.iter().find(|(l, _)| l == column) else {
                        return expr.clone();
                    };
                    changed = true;
                    // Named as before, qualifier included: the nodes above read it so.
                    let (relation, name) =
                        alias.unwrap_or_else(|| (column.relation.clone(), column.name.clone()));
                    value.clone().alias_qualified(relation, name)
                })
                .collect();
            if !changed {
                return Ok(Transformed::no(plan));
            }
            let projection = Projection::try_new(exprs, projection.input.clone())?;
            Ok(Transformed::yes(LogicalPlan::Projection(projection)))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "eddy_using_join_columns"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn rows(sql: &str) -> String {
        let ctx = SessionContext::new();
        install(&ctx);
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        datafusion::arrow::util::pretty::pretty_format_batches(&batches)
            .unwrap()
            .to_string()
    }

    #[tokio::test]
    async fn outer_using_joins_merge_the_column() {
        let from =
            "FROM (VALUES (1), (2)) a(x) {} JOIN (VALUES (2), (3)) b(x) USING (x) ORDER BY 1";
        let full = rows(&format!("SELECT * {}", from.replace("{}", "FULL"))).await;
        assert!(full.contains("| 3 |") && full.contains("| 1 |"), "{full}");
        let right = rows(&format!("SELECT x {}", from.replace("{}", "RIGHT"))).await;
        assert!(
            right.contains("| 3 |") && !right.contains("| 1 |"),
            "{right}"
        );
        let left = rows(&format!("SELECT * {}", from.replace("{}", "LEFT"))).await;
        assert!(left.contains("| 1 |") && !left.contains("| 3 |"), "{left}");
    }
}
