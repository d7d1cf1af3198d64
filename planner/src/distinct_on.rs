//! `SELECT DISTINCT ON (k) ... ORDER BY k, x` as the deduplication it is: the first row of
//! each `k` by the ORDER BY, `ROW_NUMBER() OVER (PARTITION BY k ORDER BY k, x) = 1`.
//!
//! DataFusion's optimizer would turn DISTINCT ON into `first_value` aggregates, which cannot
//! follow deletes; as a rank filter it is a top-N of one row per partition, which keeps the
//! rows below the first to pull one up when the first is deleted.

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::functions_window::expr_fn::row_number;
use datafusion::logical_expr::{
    col, lit, Distinct, DistinctOn, Expr, ExprFunctionExt, LogicalPlan, LogicalPlanBuilder,
};

use crate::Result;

/// The rank column the rewrite adds and drops again.
const RANK: &str = "__distinct_on_rank";

/// Rewrites every `DISTINCT ON` of `plan` as a rank filter.
pub fn distinct_on_as_rank(plan: LogicalPlan) -> Result<LogicalPlan> {
    Ok(plan
        .transform_up(|node| match node {
            LogicalPlan::Distinct(Distinct::On(on)) => Ok(Transformed::yes(rank_filter(on)?)),
            other => Ok(Transformed::no(other)),
        })?
        .data)
}

fn rank_filter(on: DistinctOn) -> datafusion::error::Result<LogicalPlan> {
    let rank = row_number()
        .partition_by(on.on_expr)
        .order_by(on.sort_expr.unwrap_or_default())
        .build()?
        .alias(RANK);
    // The select list keeps the names (and qualifiers) DISTINCT ON gave its columns.
    let select: Vec<Expr> = on
        .select_expr
        .into_iter()
        .zip(on.schema.iter())
        .map(|(expr, (qualifier, field))| expr.alias_qualified(qualifier.cloned(), field.name()))
        .collect();
    LogicalPlanBuilder::from(on.input)
        .window(vec![rank])?
        .filter(col(RANK).eq(lit(1u64)))?
        .project(select)?
        .build()
}
