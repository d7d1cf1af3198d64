//! The columns of a subquery in FROM or a CTE named as Postgres names them: `SELECT count FROM
//! (SELECT count(*) FROM t) s` reads the column `count`, where DataFusion named it
//! `count(*)`. Each unnamed select item of such a query (a plain column reference keeps its
//! name anyway) gets Postgres' name as an alias ([`crate::pg::ast::output_names`]), unless an earlier
//! column already has it: Postgres allows the repeat, DataFusion refuses it, and reading such
//! a column by name would be ambiguous in Postgres too. The statement's own result columns
//! are named where the result is described.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, Ident, Query, SelectItem, SetExpr, Statement, TableFactor, VisitMut, VisitorMut,
};

/// Names the columns of every subquery in FROM and every CTE of `statement`.
pub fn apply(statement: &mut Statement) {
    let _ = statement.visit(&mut SubqueryNames);
}

struct SubqueryNames;

impl VisitorMut for SubqueryNames {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Derived { subquery, .. } = factor {
            name_columns(subquery);
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let Some(with) = &mut query.with {
            for cte in &mut with.cte_tables {
                name_columns(&mut cte.query);
            }
        }
        ControlFlow::Continue(())
    }
}

/// The select list that names a query's columns: the first of a UNION's.
fn naming_select(body: &mut SetExpr) -> Option<&mut datafusion::sql::sqlparser::ast::Select> {
    match body {
        SetExpr::Select(select) => Some(select),
        SetExpr::Query(query) => naming_select(&mut query.body),
        SetExpr::SetOperation { left, .. } => naming_select(left),
        _ => None,
    }
}

fn name_columns(query: &mut Query) {
    let Some(select) = naming_select(&mut query.body) else {
        return;
    };
    let mut taken: HashSet<String> = select
        .projection
        .iter()
        .filter_map(|item| match item {
            SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.clone()),
            SelectItem::UnnamedExpr(Expr::Identifier(ident)) => Some(ident.value.clone()),
            SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => {
                parts.last().map(|p| p.value.clone())
            }
            _ => None,
        })
        .collect();
    for item in &mut select.projection {
        let SelectItem::UnnamedExpr(expr) = item else {
            continue;
        };
        if matches!(expr, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) {
            continue;
        }
        let name =
            crate::pg::ast::output_names::figure_name(expr).unwrap_or_else(|| "?column?".into());
        if !taken.insert(name.clone()) {
            continue;
        }
        *item = SelectItem::ExprWithAlias {
            expr: expr.clone(),
            alias: Ident::with_quote('"', name),
        };
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn named(sql: &str) -> String {
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .unwrap()
            .remove(0);
        super::apply(&mut statement);
        statement.to_string()
    }

    #[test]
    fn subquery_columns_take_postgres_names() {
        assert_eq!(
            named("SELECT count FROM (SELECT count(*), a, t.b, max(c) AS m, count(d) FROM t) s"),
            "SELECT count FROM (SELECT count(*) AS \"count\", a, t.b, max(c) AS m, count(d) FROM t) s"
        );
        assert_eq!(
            named("WITH w AS (SELECT upper(x), 1 FROM t UNION SELECT 'a', 2) SELECT * FROM w"),
            "WITH w AS (SELECT upper(x) AS \"upper\", 1 AS \"?column?\" FROM t UNION SELECT 'a', 2) SELECT * FROM w"
        );
        // The statement's own columns are left to the result's description.
        assert_eq!(named("SELECT count(*) FROM t"), "SELECT count(*) FROM t");
    }
}
