//! Correlated `EXISTS` / `IN` subqueries whose outer reference sits in an outer join's `ON`
//! (`EXISTS (SELECT 1 FROM t2 LEFT JOIN t3 ON t2.z = t3.z AND t1.y = t2.y WHERE t1.x = t2.x)`):
//! DataFusion cannot decorrelate them. The correlated conjuncts `p` leave the `ON`, and above
//! the join each column of the padded side becomes `CASE WHEN p THEN column END`: a row of the
//! preserved side then comes out once per match of the rest of the `ON` (instead of once, with
//! NULLs, when `p` fails), with the same values. `EXISTS` and `IN` look only at which rows
//! exist, not how many times, and DataFusion decorrelates `p` where it now is (in a filter;
//! EXISTS's select list is left as it was, since no value of it is read). An `IN` whose selected
//! value reads the padded side keeps `p` in that value, which DataFusion does not decorrelate.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, JoinType, Result};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{when, Distinct, Expr, Join, LogicalPlan, Subquery};

/// Rewrites the subqueries of `plan` (and theirs) as the module says.
pub fn drop_padded_side_correlations(plan: LogicalPlan) -> Result<LogicalPlan> {
    plan.transform_up_with_subqueries(|node| {
        node.map_expressions(|expr| {
            expr.transform_up(|e| match e {
                Expr::Exists(mut exists) => Ok(rewrite_subquery(&mut exists.subquery, true)?
                    .update_data(|_| Expr::Exists(exists))),
                Expr::InSubquery(mut in_subquery) => {
                    Ok(rewrite_subquery(&mut in_subquery.subquery, false)?
                        .update_data(|_| Expr::InSubquery(in_subquery)))
                }
                other => Ok(Transformed::no(other)),
            })
        })
    })
    .map(|t| t.data)
}

/// `exists`: the subquery's values are not read, only whether it has rows.
fn rewrite_subquery(subquery: &mut Subquery, exists: bool) -> Result<Transformed<()>> {
    match rewritten(subquery.subquery.as_ref(), exists)? {
        Some((plan, _)) => {
            // The outer references left: those the dropped conjuncts alone had are gone.
            let mut left = Vec::new();
            plan.apply_with_subqueries(|node| {
                for expr in node.expressions() {
                    expr.apply(|e| {
                        if matches!(e, Expr::OuterReferenceColumn(..)) && !left.contains(e) {
                            left.push(e.clone());
                        }
                        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
                    })?;
                }
                Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
            })?;
            subquery.outer_ref_columns.retain(|e| left.contains(e));
            subquery.subquery = Arc::new(plan);
            Ok(Transformed::yes(()))
        }
        None => Ok(Transformed::no(())),
    }
}

/// Padded-side column → its value with the dropped conjuncts applied (`CASE WHEN p THEN c END`).
type Substitution = HashMap<Column, Expr>;

/// The plan with the correlations dropped, walking down through nodes that keep which rows
/// exist (projections, filters, DISTINCT); with the substitution still to apply above.
fn rewritten(
    plan: &LogicalPlan,
    exists: bool,
) -> Result<Option<(LogicalPlan, Option<Substitution>)>> {
    let input = match plan {
        LogicalPlan::Projection(p) => &p.input,
        LogicalPlan::Filter(f) => &f.input,
        LogicalPlan::Distinct(Distinct::All(input)) => input,
        LogicalPlan::Join(join) => return Ok(without_correlations(join)),
        _ => return Ok(None),
    };
    let Some((new_input, substitution)) = rewritten(input, false)? else {
        return Ok(None);
    };
    // EXISTS reads no value of its projection (and an outer reference there stays correlated).
    let values_unread = exists && matches!(plan, LogicalPlan::Projection(_));
    let Some(substitution) = substitution.filter(|_| !values_unread) else {
        let plan = plan.with_new_exprs(plan.expressions(), vec![new_input])?;
        return Ok(Some((plan, None)));
    };
    // Padded columns read here see the value they had under the full `ON`, names unchanged.
    let names = NamePreserver::new(plan);
    let exprs = plan
        .expressions()
        .into_iter()
        .map(|expr| {
            let saved = names.save(&expr);
            let new = expr
                .transform_up(|e| match &e {
                    Expr::Column(c) => match substitution.get(c) {
                        Some(value) => Ok(Transformed::yes(value.clone())),
                        None => Ok(Transformed::no(e)),
                    },
                    _ => Ok(Transformed::no(e)),
                })?
                .data;
            Ok(saved.restore(new))
        })
        .collect::<Result<Vec<_>>>()?;
    let plan = plan.with_new_exprs(exprs, vec![new_input])?;
    // Above a projection the padded columns are its outputs, which already hold the values.
    let above = (!matches!(plan, LogicalPlan::Projection(_))).then_some(substitution);
    Ok(Some((plan, above)))
}

/// An outer join without its `ON` conjuncts that reference the outer query, and the values its
/// padded side's columns must take above it.
fn without_correlations(join: &Join) -> Option<(LogicalPlan, Option<Substitution>)> {
    let padded = match join.join_type {
        JoinType::Left => &join.right,
        JoinType::Right => &join.left,
        _ => return None,
    };
    let filter = join.filter.as_ref()?;
    let (correlated, kept): (Vec<&Expr>, Vec<&Expr>) = split_conjunction(filter)
        .into_iter()
        .partition(|e| references_outer(e));
    let condition = conjunction(correlated.into_iter().cloned())?;
    let substitution = padded
        .schema()
        .columns()
        .into_iter()
        .map(|c| {
            let value = when(condition.clone(), Expr::Column(c.clone()))
                .end()
                .ok()?;
            Some((c, value))
        })
        .collect::<Option<Substitution>>()?;
    let mut join = join.clone();
    join.filter = conjunction(kept.into_iter().cloned());
    Some((LogicalPlan::Join(join), Some(substitution)))
}

fn references_outer(expr: &Expr) -> bool {
    expr.exists(|e| Ok(matches!(e, Expr::OuterReferenceColumn(..))))
        .unwrap_or(true)
}
