//! Scalar subqueries inside VALUES (`INSERT INTO t VALUES ((SELECT max(x) FROM u))`):
//! DataFusion 55 plans them but never runs the subquery, an internal error at run time
//! ("ScalarSubqueryExpr evaluated before the subquery was executed"). Such a VALUES list is
//! rewritten as its rows selected one by one (`SELECT ... UNION ALL SELECT ...`, named like
//! VALUES' columns), which DataFusion plans whole.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions, Expr, Query, SetExpr, Statement, Values, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// Rewrites every VALUES list of `statement` that holds a scalar subquery.
pub fn rewrite(statement: &mut Statement) {
    let _ = statement.visit(&mut ValuesWithSubqueries);
}

struct ValuesWithSubqueries;

impl VisitorMut for ValuesWithSubqueries {
    type Break = ();

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        rewrite_body(&mut query.body);
        ControlFlow::Continue(())
    }
}

fn rewrite_body(body: &mut SetExpr) {
    match body {
        SetExpr::Values(values) if has_subquery(values) => {
            if let Some(selects) = as_selects(values) {
                *body = selects;
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            rewrite_body(left);
            rewrite_body(right);
        }
        _ => {}
    }
}

fn has_subquery(values: &Values) -> bool {
    values.rows.iter().flat_map(|row| row.iter()).any(|expr| {
        visit_expressions(expr, |e| match e {
            Expr::Subquery(_) => ControlFlow::Break(()),
            _ => ControlFlow::Continue(()),
        })
        .is_break()
    })
}

/// `SELECT a AS column1, b AS column2 UNION ALL SELECT ...` for the rows of `values`.
fn as_selects(values: &Values) -> Option<SetExpr> {
    let selects: Vec<String> = values
        .rows
        .iter()
        .map(|row| {
            let columns: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(i, expr)| format!("{expr} AS column{}", i + 1))
                .collect();
            format!("SELECT {}", columns.join(", "))
        })
        .collect();
    let sql = selects.join(" UNION ALL ");
    let mut parsed = Parser::parse_sql(&PostgreSqlDialect {}, &sql).ok()?;
    match parsed.pop()? {
        Statement::Query(query) => Some(*query.body),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> String {
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .unwrap()
            .remove(0);
        rewrite(&mut statement);
        statement.to_string()
    }

    #[test]
    fn values_with_a_subquery_become_selects() {
        assert_eq!(
            rewritten("INSERT INTO t VALUES ((SELECT max(x) FROM u), 1), (2, 3)"),
            "INSERT INTO t SELECT (SELECT max(x) FROM u) AS column1, 1 AS column2 \
             UNION ALL SELECT 2 AS column1, 3 AS column2"
        );
        // Without a subquery nothing changes.
        assert_eq!(
            rewritten("INSERT INTO t VALUES (1, 2)"),
            "INSERT INTO t VALUES (1, 2)"
        );
    }
}
