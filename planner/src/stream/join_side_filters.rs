//! A filter on a join input whose rows are unique per join key and never change moves into the
//! join's residual predicate, so that the other side keeps fewer rows.
//!
//! The join drops a row when the other side is append-only with at most one row per join key
//! and already holds the row's key (`JoinOperator`'s fixed keys): no row of that key will ever
//! come again. A filter below that side hides the rows it rejects, so the other side's rows of
//! their keys wait for a match that never comes and stay forever: Nexmark q20 (bids joined with
//! the auctions of one category) kept the bids of the other four categories, 80% of them. With
//! the filter in the residual the side keeps every row, each key is known once its row has
//! come, and a row of the other side finding it is settled at once: paired where the predicate
//! holds, never kept.
//!
//! Same answers: for an inner join, `σp(X) ⋈ Y = X ⋈_p Y` when `p` reads only X; for an outer,
//! semi or anti join the same holds when X is the side that is not preserved (a predicate on it
//! in ON filters it). The predicate must give the same answer each time it is evaluated (no
//! volatile or stable functions): it is now evaluated once per pair, not once per row.
//!
//! The rewrite is logical: `Join(Y, [alias] Projection(e, Filter(p, X)))` becomes
//! `Projection(the join's columns, Join(Y, [alias] Projection(e + p's columns, X), ON ... AND p))`,
//! planned as any join. The cost: X's state holds its rejected rows too (with p's columns).
//! Views record it in their state layout: a view created before keeps its filter below.

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, JoinType};
use datafusion::logical_expr::{
    and, Expr, Filter, Join, LogicalPlan, Projection, SubqueryAlias, Volatility,
};

use super::Planner;
use crate::Result;

/// One join input taken apart: `[alias] Projection(exprs, Filter(predicate, below))`.
struct FilteredSide {
    alias: Option<datafusion::common::TableReference>,
    projection: Option<Vec<Expr>>,
    predicate: Expr,
    below: Arc<LogicalPlan>,
}

impl Planner<'_> {
    /// `join` with a filter of one side moved into it (see the module), when one qualifies.
    pub(super) fn join_with_side_filter_moved(
        &mut self,
        join: &Join,
    ) -> Result<Option<LogicalPlan>> {
        if !self.moves_join_side_filters || join.on.is_empty() || join.null_aware {
            return Ok(None);
        }
        for side in [0, 1] {
            let not_preserved = match join.join_type {
                JoinType::Inner => true,
                JoinType::Left | JoinType::LeftSemi | JoinType::LeftAnti => side == 1,
                JoinType::Right | JoinType::RightSemi | JoinType::RightAnti => side == 0,
                _ => false,
            };
            let child = if side == 0 { &join.left } else { &join.right };
            let Some(filtered) = take_apart(child).filter(|_| not_preserved) else {
                continue;
            };
            if !deterministic(&filtered.predicate)
                || !self.unique_on_join_key(join, side, &filtered)?
            {
                continue;
            }
            if let Some(rewritten) = rewrite(join, side, filtered) {
                return Ok(Some(rewritten));
            }
        }
        Ok(None)
    }

    /// Whether the rows under the filter are append-only with at most one per join key of
    /// `side`. Plans them to know (then forgets that planning: the join plans them again).
    fn unique_on_join_key(
        &mut self,
        join: &Join,
        side: usize,
        filtered: &FilteredSide,
    ) -> Result<bool> {
        if matches!(filtered.below.as_ref(), LogicalPlan::Window(_)) {
            return Ok(false);
        }
        let child = if side == 0 { &join.left } else { &join.right };
        // The columns of `below` the join key reads, through the projection.
        let mut key_columns = BTreeSet::new();
        for (left, right) in &join.on {
            let expr = if side == 0 { left } else { right };
            let Some(column) = column_of(expr) else {
                continue;
            };
            let Ok(index) = child.schema().index_of_column(column) else {
                continue;
            };
            let below_column = match &filtered.projection {
                None => Some(index),
                Some(exprs) => column_of(&exprs[index])
                    .and_then(|c| filtered.below.schema().index_of_column(c).ok()),
            };
            key_columns.extend(below_column);
        }
        let (inputs, clocks) = (self.inputs.len(), self.next_clock);
        let planned = self.plan_node(&filtered.below);
        self.inputs.truncate(inputs);
        self.next_clock = clocks;
        let node = planned?.node;
        Ok(node.append_only
            && node
                .key_columns
                .is_some_and(|key| key.iter().all(|k| key_columns.contains(k))))
    }
}

/// `plan` as `[alias] [Projection] Filter+ below`, when it is.
fn take_apart(plan: &LogicalPlan) -> Option<FilteredSide> {
    let (alias, plan) = match plan {
        LogicalPlan::SubqueryAlias(alias) => (Some(alias.alias.clone()), alias.input.as_ref()),
        other => (None, other),
    };
    let (projection, mut plan) = match plan {
        LogicalPlan::Projection(projection) => {
            (Some(projection.expr.clone()), projection.input.as_ref())
        }
        other => (None, other),
    };
    let mut predicates = Vec::new();
    while let LogicalPlan::Filter(Filter {
        predicate, input, ..
    }) = plan
    {
        predicates.push(predicate.clone());
        plan = input.as_ref();
    }
    let predicate = predicates.into_iter().reduce(and)?;
    Some(FilteredSide {
        alias,
        projection,
        predicate,
        below: Arc::new(plan.clone()),
    })
}

/// The join with `filtered` (its side `side`) rebuilt without its filter, the predicate in
/// the join's, under a projection of the join's columns. None when names would clash.
fn rewrite(join: &Join, side: usize, filtered: FilteredSide) -> Option<LogicalPlan> {
    let mut child = filtered.below.clone();
    if let Some(mut exprs) = filtered.projection {
        // The predicate's columns, carried up to the join unless the projection has them.
        let shown: Vec<Column> = exprs
            .iter()
            .filter_map(|e| match e {
                Expr::Column(column) => Some(column.clone()),
                _ => None,
            })
            .collect();
        for column in filtered.predicate.column_refs() {
            if !shown.contains(column) {
                exprs.push(Expr::Column(column.clone()));
            }
        }
        child = Arc::new(LogicalPlan::Projection(
            Projection::try_new(exprs, child).ok()?,
        ));
    }
    let mut predicate = filtered.predicate;
    if let Some(alias) = filtered.alias {
        predicate = predicate
            .transform(|e| {
                Ok(match e {
                    Expr::Column(c) => {
                        Transformed::yes(Expr::Column(Column::new(Some(alias.clone()), c.name)))
                    }
                    other => Transformed::no(other),
                })
            })
            .ok()?
            .data;
        child = Arc::new(LogicalPlan::SubqueryAlias(
            SubqueryAlias::try_new(child, alias).ok()?,
        ));
    }
    let (left, right) = match side {
        0 => (child, join.right.clone()),
        _ => (join.left.clone(), child),
    };
    let filter = Some(match join.filter.clone() {
        Some(filter) => and(filter, predicate),
        None => predicate,
    });
    let moved = Join::try_new(
        left,
        right,
        join.on.clone(),
        filter,
        join.join_type,
        join.join_constraint,
        join.null_equality,
        join.null_aware,
    )
    .ok()?;
    let columns = join
        .schema
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect();
    let top = Projection::try_new(columns, Arc::new(LogicalPlan::Join(moved))).ok()?;
    Some(LogicalPlan::Projection(top))
}

/// The column an expression is, through casts and aliases.
fn column_of(expr: &Expr) -> Option<&Column> {
    match expr {
        Expr::Column(column) => Some(column),
        Expr::Cast(cast) => column_of(&cast.expr),
        Expr::TryCast(cast) => column_of(&cast.expr),
        Expr::Alias(alias) => column_of(&alias.expr),
        _ => None,
    }
}

/// Whether `expr` calls no function whose answer may change between evaluations, and holds no
/// subquery.
fn deterministic(expr: &Expr) -> bool {
    let mut fixed = true;
    let _ = expr.apply(|e| {
        let ok = match e {
            Expr::ScalarFunction(call) => call.func.signature().volatility == Volatility::Immutable,
            Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_) => false,
            _ => true,
        };
        if !ok {
            fixed = false;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    fixed
}
