//! A set-returning function in a select list (`generate_series`, `regexp_split_to_table`,
//! JSON's `jsonb_array_elements`...) gives
//! a row per element, as in Postgres:
//! `SELECT generate_series(1, 3)` is three rows (test setups write `INSERT INTO t SELECT
//! generate_series(1, 1000)`), where DataFusion gave one row holding an array; it expands only
//! `unnest` there. Such a select item becomes `unnest(generate_series(...)) AS
//! generate_series` (its own alias kept), which DataFusion expands; a series of integer
//! literals that fit an `integer` is one, as in Postgres (DataFusion's is `bigint`).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    CastKind, DataType, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentList,
    FunctionArguments, Ident, ObjectName, ObjectNamePart, Query, SelectItem, SetExpr, Statement,
    UnaryOperator, Value, VisitMut, VisitorMut,
};

/// The set-returning functions, each with the function that gives its elements as an array
/// (and JSON's: [`crate::pg::functions::json_sets::JSON_SETS`]).
const EXPANDED: &[(&str, &str)] = &[
    ("generate_series", "generate_series"),
    ("regexp_split_to_table", "regexp_split_to_array"),
];

/// The array form of a set-returning function, by its name.
pub(crate) fn array_form(name: &str) -> Option<(&'static str, &'static str)> {
    let name = name.strip_prefix("pg_catalog.").unwrap_or(name);
    EXPANDED
        .iter()
        .chain(crate::pg::functions::json_sets::JSON_SETS)
        .find(|(f, _)| *f == name)
        .copied()
}

/// Rewrites every select list of `statement`.
pub fn rewrite(statement: &mut Statement) {
    let _ = statement.visit(&mut SetReturningItems);
}

struct SetReturningItems;

impl VisitorMut for SetReturningItems {
    type Break = ();

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        rewrite_body(&mut query.body);
        ControlFlow::Continue(())
    }
}

fn rewrite_body(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => {
            for item in &mut select.projection {
                expand(item);
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            rewrite_body(left);
            rewrite_body(right);
        }
        _ => {}
    }
}

fn expand(item: &mut SelectItem) {
    let (expr, alias) = match item {
        SelectItem::UnnamedExpr(expr) => (expr, None),
        SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.clone())),
        _ => return,
    };
    let Expr::Function(function) = expr else {
        return;
    };
    let name = function.name.to_string().to_lowercase();
    let Some((short, as_array)) = array_form(&name) else {
        return;
    };
    let alias = alias.unwrap_or_else(|| Ident::new(short));
    let small_integers = integer_literals(function)
        .is_some_and(|values| values.iter().all(|v| i32::try_from(*v).is_ok()));
    let mut call = function.clone();
    call.name = ObjectName(vec![ObjectNamePart::Identifier(Ident::new(as_array))]);
    let mut expr = unnest(Expr::Function(call));
    // DataFusion's series is `bigint`; Postgres' of `integer` arguments is `integer`.
    if small_integers {
        expr = Expr::Cast {
            kind: CastKind::DoubleColon,
            array: false,
            expr: Box::new(expr),
            data_type: DataType::Int(None),
            format: None,
        };
    }
    if crate::pg::functions::json_sets::element_type(short).is_some() {
        expr = Expr::Cast {
            kind: CastKind::DoubleColon,
            array: false,
            expr: Box::new(expr),
            data_type: DataType::JSONB,
            format: None,
        };
    }
    *item = SelectItem::ExprWithAlias { expr, alias };
}

/// The arguments of `function` when each is an integer literal (`-3` included).
fn integer_literals(function: &Function) -> Option<Vec<i64>> {
    let FunctionArguments::List(list) = &function.args else {
        return None;
    };
    list.args
        .iter()
        .map(|arg| {
            let FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) = arg else {
                return None;
            };
            let (negative, expr) = match expr {
                Expr::UnaryOp {
                    op: UnaryOperator::Minus,
                    expr,
                } => (true, expr.as_ref()),
                other => (false, other),
            };
            let Expr::Value(value) = expr else {
                return None;
            };
            let Value::Number(digits, _) = &value.value else {
                return None;
            };
            let n: i64 = digits.parse().ok()?;
            Some(if negative { -n } else { n })
        })
        .collect()
}

fn unnest(argument: Expr) -> Expr {
    Expr::Function(Function {
        name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new("unnest"))]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(argument))],
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    use super::*;

    fn rewritten(sql: &str) -> String {
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .unwrap()
            .remove(0);
        rewrite(&mut statement);
        statement.to_string()
    }

    #[test]
    fn a_series_in_the_select_list_is_unnested_under_its_name() {
        assert_eq!(
            rewritten("SELECT generate_series(1, 3)"),
            "SELECT unnest(generate_series(1, 3))::INT AS generate_series"
        );
        assert_eq!(
            rewritten("INSERT INTO t SELECT generate_series(1, 3000000000) AS n, 'x'"),
            "INSERT INTO t SELECT unnest(generate_series(1, 3000000000)) AS n, 'x'"
        );
        assert_eq!(
            rewritten("SELECT regexp_split_to_table('a b', ' ')"),
            "SELECT unnest(regexp_split_to_array('a b', ' ')) AS regexp_split_to_table"
        );
        // In FROM it is a table function already.
        assert_eq!(
            rewritten("SELECT * FROM generate_series(1, 3)"),
            "SELECT * FROM generate_series(1, 3)"
        );
    }
}
