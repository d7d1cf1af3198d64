//! Functions in FROM as Postgres reads them (Grafana's "tables on the search path" query:
//! `FROM generate_series(...) AS i, string_to_array(...) s`, then `s[i]`):
//!
//! - A table function of one column, `generate_series` or `range`, names its column after the
//!   alias (`AS i` gives `i`); DataFusion calls it `value`, which it stays without an alias
//!   (Postgres would name it `generate_series`; Eddy's queries have long read `value`).
//! - A scalar function in FROM is a one-row table whose column is named after the alias
//!   (`string_to_array(...) s` gives `s`); DataFusion takes only table functions there, so it
//!   becomes `(SELECT f(...) AS s) AS s`.
//!
//! - A set-returning function with an array form (`regexp_split_to_table`, JSON's
//!   `jsonb_array_elements`...: see [`crate::pg::ast::set_returning_selects`]) is a table of a row per
//!   element, `(SELECT unnest(array form) AS column) AS alias`.
//!
//! Also `user` and `current_role` (keywords in Postgres, never columns unless quoted) are
//! `current_user`.

use std::ops::ControlFlow;

use datafusion::execution::session_state::SessionState;
use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArguments, Ident, Query, SelectItem, SetExpr, Statement, TableAliasColumnDef,
    TableFactor, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// Table functions whose one column Postgres names after the alias.
const ONE_COLUMN_TABLE_FUNCTIONS: &[&str] = &["generate_series", "range"];

/// Rewrites the functions in FROM of `statement` (see the module's comment).
pub fn apply(statement: &mut Statement, state: &SessionState) {
    let _ = statement.visit(&mut FromFunctions { state });
}

struct FromFunctions<'a> {
    state: &'a SessionState,
}

impl VisitorMut for FromFunctions<'_> {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table {
            name,
            alias,
            args: Some(args),
            ..
        } = factor
        else {
            return ControlFlow::Continue(());
        };
        let [function] = name.0.as_slice() else {
            return ControlFlow::Continue(());
        };
        let function = function.to_string().to_ascii_lowercase();
        let column = alias
            .as_ref()
            .map_or_else(|| function.clone(), |a| a.name.value.clone());
        if ONE_COLUMN_TABLE_FUNCTIONS.contains(&function.as_str()) {
            if let Some(alias) = alias.as_mut().filter(|a| a.columns.is_empty()) {
                alias.columns = vec![TableAliasColumnDef::from_name(column)];
            }
            return ControlFlow::Continue(());
        }
        // A set-returning function with an array form: a row per element.
        if let Some((_, as_array)) = crate::pg::ast::set_returning_selects::array_form(&function)
            .filter(|_| !ONE_COLUMN_TABLE_FUNCTIONS.contains(&function.as_str()))
        {
            let table = alias.as_ref().map_or(function.as_str(), |a| &a.name.value);
            // JSON's elements come in a column named `value` (their OUT parameter's name);
            // another function's column is named after the alias, as a scalar's is.
            let named = alias.as_ref().and_then(|a| a.columns.first());
            let column = match named {
                Some(c) => c.name.value.as_str(),
                None if function.contains("array_elements") => "value",
                None => column.as_str(),
            };
            let args: Vec<String> = args.args.iter().map(|a| a.to_string()).collect();
            let mut elements = format!("unnest({as_array}({}))", args.join(", "));
            if let Some(element_type) = crate::pg::functions::json_sets::element_type(&function) {
                elements = format!("CAST({elements} AS {element_type})");
            }
            let sql = format!(
                "SELECT * FROM (SELECT {elements} AS {}) AS {}",
                quoted(column),
                quoted(table)
            );
            if let Some(derived) = first_relation(&sql) {
                *factor = derived;
            }
            return ControlFlow::Continue(());
        }
        let is_table_function = self.state.table_functions().contains_key(&function);
        if is_table_function || !self.state.scalar_functions().contains_key(&function) {
            return ControlFlow::Continue(());
        }
        let args: Vec<String> = args.args.iter().map(|a| a.to_string()).collect();
        let sql = format!(
            "SELECT * FROM (SELECT {function}({}) AS {col}) AS {col}",
            args.join(", "),
            col = quoted(&column)
        );
        if let Some(derived) = first_relation(&sql) {
            *factor = derived;
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        // `SELECT user` is a column named `user`, as in Postgres (and `current_role` likewise).
        if let SetExpr::Select(select) = query.body.as_mut() {
            for item in select.projection.iter_mut() {
                if let SelectItem::UnnamedExpr(expr) = item {
                    let name = if is_user(expr) {
                        "user"
                    } else if is_current_role(expr) {
                        "current_role"
                    } else {
                        continue;
                    };
                    *item = SelectItem::ExprWithAlias {
                        expr: expr.clone(),
                        alias: Ident::with_quote('"', name),
                    };
                }
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if is_user(expr) || is_current_role(expr) {
            // What `current_user` is by now (Eddy has one role: the session's).
            if let Some(current_user) = crate::pg::ast::catalog_rewrites::parse("session_user()") {
                *expr = current_user;
            }
        }
        ControlFlow::Continue(())
    }
}

/// `user`, which sqlparser reads as a call without parentheses.
fn is_user(expr: &Expr) -> bool {
    matches!(expr, Expr::Function(f)
        if f.args == FunctionArguments::None && f.name.to_string().eq_ignore_ascii_case("user"))
}

/// `current_role`, which sqlparser reads as a column name (a keyword in Postgres).
fn is_current_role(expr: &Expr) -> bool {
    matches!(expr, Expr::Identifier(ident)
        if ident.quote_style.is_none() && ident.value.eq_ignore_ascii_case("current_role"))
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The first relation in the FROM of a `SELECT` written out.
fn first_relation(sql: &str) -> Option<TableFactor> {
    let statement = Parser::parse_sql(&PostgreSqlDialect {}, sql).ok()?.pop()?;
    let Statement::Query(query) = statement else {
        return None;
    };
    let SetExpr::Select(select) = *query.body else {
        return None;
    };
    select.from.into_iter().next().map(|from| from.relation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::execution::context::SessionContext;

    fn rewritten(sql: &str) -> String {
        let state = SessionContext::new().state();
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .unwrap()
            .remove(0);
        apply(&mut statement, &state);
        statement.to_string()
    }

    #[test]
    fn functions_in_from_are_named_as_in_postgres() {
        assert_eq!(
            rewritten("SELECT s[i] FROM generate_series(1, 2) AS i, string_to_array('a,b', ',') s"),
            "SELECT s[i] FROM generate_series(1, 2) AS i (i), (SELECT string_to_array('a,b', ',') AS \"s\") AS \"s\""
        );
        let unnamed = "SELECT value FROM generate_series(1, 2)";
        assert_eq!(rewritten(unnamed), unnamed);
        // Column aliases given, a table, `"user"` quoted: as they are.
        let kept = "SELECT \"user\" FROM generate_series(1, 2) AS g (n), t";
        assert_eq!(rewritten(kept), kept);
        assert_eq!(rewritten("SELECT user"), "SELECT session_user AS \"user\"");
    }
}
