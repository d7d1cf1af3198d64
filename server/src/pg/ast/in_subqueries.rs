//! `x [NOT] IN (subquery)` in a select list (Grafana's "tables on the search path": `CASE WHEN
//! quote_ident(table_schema) IN (SELECT ...) THEN ...`). DataFusion runs `IN (subquery)` only in
//! a filter; in a select list it fails to plan. There it becomes scalar subqueries over the
//! subquery's rows, with Postgres' three-valued answer: false over no rows, NULL for a NULL `x`,
//! true when a row equals `x`, NULL when none does but one is NULL, else false.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, Query, SelectItem, SetExpr, Statement, VisitMut, VisitorMut,
};

use crate::pg::ast::catalog_rewrites::parse;

/// The column name the subquery's one column is given.
const COLUMN: &str = "eddy_in_value";

/// At most this many are rewritten in one statement: each copies its subquery three times, so
/// nested ones would grow the statement as 3^depth (past it, DataFusion's error stands).
const MOST_REWRITES: usize = 16;

/// Rewrites the `IN (subquery)` of every select list of `statement`.
pub(crate) fn apply(statement: &mut Statement) {
    let _ = statement.visit(&mut SelectLists { rewrites: 0 });
}

struct SelectLists {
    rewrites: usize,
}

impl VisitorMut for SelectLists {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let SetExpr::Select(select) = query.body.as_mut() {
            for item in select.projection.iter_mut() {
                if let SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } = item
                {
                    rewrite(expr, &mut self.rewrites);
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// Rewrites `expr` and the expressions it is made of (not those of its subqueries: they are
/// queries of their own, visited as such).
fn rewrite(expr: &mut Expr, rewrites: &mut usize) {
    match expr {
        Expr::InSubquery {
            expr: value,
            subquery,
            negated,
        } => {
            rewrite(value, rewrites);
            if *rewrites >= MOST_REWRITES {
                return;
            }
            *rewrites += 1;
            let rows = format!("({subquery}) AS eddy_in ({COLUMN})");
            let answer = format!(
                "CASE WHEN (SELECT count(*) FROM {rows}) = 0 THEN false \
                 WHEN ({value}) IS NULL THEN NULL \
                 WHEN array_has((SELECT array_agg({COLUMN}) FROM {rows}), ({value})) THEN true \
                 WHEN (SELECT count(*) FROM {rows} WHERE {COLUMN} IS NULL) > 0 THEN NULL \
                 ELSE false END"
            );
            let answer = if *negated {
                format!("NOT ({answer})")
            } else {
                answer
            };
            if let Some(parsed) = parse(&answer) {
                *expr = Expr::Nested(Box::new(parsed));
            }
        }
        Expr::BinaryOp { left, right, .. } => {
            rewrite(left, rewrites);
            rewrite(right, rewrites);
        }
        Expr::UnaryOp { expr, .. }
        | Expr::Nested(expr)
        | Expr::IsNull(expr)
        | Expr::IsNotNull(expr)
        | Expr::IsTrue(expr)
        | Expr::IsFalse(expr) => rewrite(expr, rewrites),
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            if let Some(operand) = operand {
                rewrite(operand, rewrites);
            }
            for when in conditions.iter_mut() {
                rewrite(&mut when.condition, rewrites);
                rewrite(&mut when.result, rewrites);
            }
            if let Some(else_result) = else_result {
                rewrite(else_result, rewrites);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> String {
        crate::pg::ast::catalog_rewrites::rewritten_by(sql, apply)
    }

    #[test]
    fn in_subqueries_of_select_lists_become_counts() {
        let sql = rewritten("SELECT CASE WHEN a IN (SELECT b FROM t) THEN 1 END FROM u");
        assert!(sql.contains("array_has((SELECT array_agg(eddy_in_value) FROM (SELECT b FROM t) AS eddy_in (eddy_in_value)), (a))"), "{sql}");
        assert!(!sql.contains(" IN (SELECT"), "{sql}");
        // Nested ones stop growing the statement past a bound.
        let mut nested = "SELECT 1".to_string();
        for _ in 0..12 {
            nested = format!("SELECT 1 IN ({nested})");
        }
        let sql = rewritten(&nested);
        assert!(sql.len() < 1_000_000, "{}", sql.len());
        // In a filter, DataFusion takes it as it is.
        let filter = "SELECT a FROM u WHERE a IN (SELECT b FROM t)";
        assert_eq!(rewritten(filter), filter);
    }
}
