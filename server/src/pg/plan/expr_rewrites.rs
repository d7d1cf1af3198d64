//! Rewriting every expression of a plan bottom-up, subqueries included, keeping each
//! expression's output name: the nodes above read their inputs' columns by name.

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{Expr, LogicalPlan};

/// Applies `rewrite` to each expression of `plan` (children first), with the schema the
/// expression reads (a join's both sides).
pub fn rewrite_keeping_names(
    plan: LogicalPlan,
    rewrite: impl FnMut(Expr, &DFSchema) -> Result<Transformed<Expr>>,
) -> Result<LogicalPlan> {
    rewrite_plan(plan, rewrite, false)
}

/// As [`rewrite_keeping_names`], for rewrites that change types: each node whose expressions
/// changed has its schema computed again.
pub fn rewrite_retyping(
    plan: LogicalPlan,
    rewrite: impl FnMut(Expr, &DFSchema) -> Result<Transformed<Expr>>,
) -> Result<LogicalPlan> {
    rewrite_plan(plan, rewrite, true)
}

fn rewrite_plan(
    plan: LogicalPlan,
    mut rewrite: impl FnMut(Expr, &DFSchema) -> Result<Transformed<Expr>>,
    retype: bool,
) -> Result<LogicalPlan> {
    plan.transform_up_with_subqueries(|plan| {
        let schema: DFSchema = merge_schema(&plan.inputs());
        let names = NamePreserver::new(&plan);
        let node = plan.map_expressions(|expr| {
            let name = names.save(&expr);
            let rewritten = expr.transform_up(|expr| rewrite(expr, &schema))?;
            Ok(rewritten.update_data(|e| name.restore(e)))
        })?;
        if retype && node.transformed {
            node.map_data(|plan| plan.recompute_schema())
        } else {
            Ok(node)
        }
    })
    .map(|t| t.data)
}
