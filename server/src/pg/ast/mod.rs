//! Client SQL that DataFusion cannot plan as written, rewritten into equivalent SQL it can:
//! `datafusion-pg-catalog`'s rules (`'t'::regclass`, `= ANY(array)`, `OPERATOR(pg_catalog.~)`,
//! `COLLATE`, whole catalog queries of psql and other tools), then Eddy's own.

pub mod catalog_rewrites;
pub mod catalog_search_path;
pub mod decimal_literals;
pub mod domain_base;
pub mod empty_catalog_selects;
pub mod fetch_first;
pub mod from_functions;
pub mod in_subqueries;
pub mod int_literals;
pub mod output_names;
pub mod regtype;
pub mod set_returning_selects;
pub mod subquery_names;
pub mod system_columns;
pub mod values_subqueries;

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;
use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, AccessExpr, BinaryOperator, CaseWhen, Expr, FunctionArguments, Query,
    Select, SelectItem, SetExpr, Statement, TableFactor, Value, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion_pg_catalog::sql::PostgresCompatibilityParser;
use eddy_planner::statement::ParsedStatement;
use eddy_planner::EddyStatement;

/// Aggregates that already make a subquery return one row.
const AGGREGATES: &[&str] = &[
    "count",
    "max",
    "min",
    "sum",
    "avg",
    "array_agg",
    "string_agg",
    "bool_and",
    "bool_or",
    "json_agg",
    "jsonb_agg",
    "first_value",
    "last_value",
];

/// Rewrites one query for DataFusion; other statements pass unchanged.
pub fn rewrite_for_datafusion(parsed: ParsedStatement) -> ParsedStatement {
    let mut parsed = rewrite_client_forms(parsed);
    if let EddyStatement::Sql(statement) = &mut parsed.statement {
        crate::pg::ast::values_subqueries::rewrite(statement);
        crate::pg::ast::set_returning_selects::rewrite(statement);
        crate::pg::ast::fetch_first::rewrite(statement);
        crate::pg::ast::subquery_names::apply(statement);
        crate::pg::ast::output_names::unique_insert_names(statement);
    }
    parsed
}

fn rewrite_client_forms(parsed: ParsedStatement) -> ParsedStatement {
    thread_local! {
        static PARSER: PostgresCompatibilityParser = PostgresCompatibilityParser::new();
    }
    // Only queries: catalog reads are SELECTs, and a large INSERT should not be parsed twice.
    let statement = match parsed.statement {
        EddyStatement::Sql(statement) if matches!(statement.as_ref(), Statement::Query(_)) => {
            statement
        }
        other => {
            return ParsedStatement {
                sql: parsed.sql,
                statement: other,
            }
        }
    };
    let original_names = match statement.as_ref() {
        Statement::Query(query) => crate::pg::ast::output_names::postgres_output_names(query),
        _ => None,
    };
    let mut statement = PARSER.with(|parser| {
        if !takes_whole_query_replacements(&parsed.sql) {
            return parser.rewrite(*statement);
        }
        match parser.parse(&parsed.sql) {
            // Reparsing applies the whole-query replacements too; keep Eddy's own parse if
            // the rewriter reads the text differently.
            Ok(mut statements) if statements.len() == 1 => statements.remove(0),
            _ => parser.rewrite(*statement),
        }
    });
    crate::pg::ast::catalog_search_path::apply(&mut statement);
    crate::pg::ast::catalog_rewrites::keeping_output_names(&mut statement, |statement| {
        // Before the scalar subqueries are wrapped: it reads the crate's regproc lookups.
        crate::pg::ast::catalog_rewrites::apply(statement);
        crate::pg::ast::empty_catalog_selects::apply(statement);
    });
    // The reparse above reads the original text: Postgres' literal forms again.
    eddy_planner::pg_literals::normalize_literals(&mut statement);
    aggregate_scalar_subqueries(&mut statement);
    replace_generate_subscripts(&mut statement);
    backslash_like_escapes(&mut statement);
    computed_regclass_casts(&mut statement);
    if parsed.sql.to_ascii_lowercase().contains("_pg_expandarray") {
        let _ = statement.visit(&mut ExpandArray);
    }
    if let Some(names) = original_names {
        crate::pg::ast::output_names::keep_names(&mut statement, &names);
    }
    ParsedStatement {
        sql: parsed.sql,
        statement: EddyStatement::Sql(Box::new(statement)),
    }
}

/// Whether the crate's whole-query replacements suit `sql`. One does not: it replaces
/// Grafana's search-path subquery (`string_to_array(current_setting('search_path'), ',')`)
/// with `''`, for servers without `current_setting`; Eddy answers it, so that Grafana lists
/// the tables on the search path unqualified, as against Postgres.
fn takes_whole_query_replacements(sql: &str) -> bool {
    let compact: String = sql
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    !compact.contains("string_to_array(current_setting('search_path'),',')")
}

/// DataFusion plans a correlated scalar subquery only when it is aggregated and its WHERE
/// has no condition on the outer row alone. Postgres requires such a subquery to return at
/// most one row anyway, so `(SELECT x FROM t WHERE outer.p AND t.k = outer.k)` gives the
/// same answer as `CASE WHEN outer.p THEN (SELECT max(x) FROM t WHERE t.k = outer.k) END`:
/// tools' catalog queries (SQLAlchemy's column reflection) use the first form.
fn aggregate_scalar_subqueries(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        if let Expr::Subquery(query) = expr {
            if reads_only_empty_catalogs(query) {
                *expr = Expr::Value(Value::Null.into());
                return ControlFlow::Continue(());
            }
            if aggregate_single_column(query) {
                if let Some(condition) = take_outer_conditions(query) {
                    let subquery = std::mem::replace(expr, Expr::Value(Value::Null.into()));
                    *expr = Expr::Case {
                        case_token: AttachedToken::empty(),
                        end_token: AttachedToken::empty(),
                        operand: None,
                        conditions: vec![CaseWhen {
                            condition,
                            result: subquery,
                        }],
                        else_result: None,
                    };
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// `current_setting('name')` with the connection's value of the setting, as a literal: the
/// SQL functions see only the server's defaults, the connection's `SET`s live here.
pub fn with_session_settings(
    parsed: &ParsedStatement,
    setting: impl Fn(&str) -> Option<String>,
) -> ParsedStatement {
    let mut parsed = parsed.clone();
    if let EddyStatement::Sql(statement) = &mut parsed.statement {
        let _ = visit_expressions_mut(statement.as_mut(), |expr| {
            if let Expr::Function(function) = expr {
                let is_it = function
                    .name
                    .0
                    .last()
                    .is_some_and(|n| n.to_string().eq_ignore_ascii_case("current_setting"));
                let name = match &function.args {
                    FunctionArguments::List(list) if is_it && !list.args.is_empty() => {
                        match parse_expr(&list.args[0].to_string()) {
                            Some(Expr::Value(v)) => match v.value {
                                Value::SingleQuotedString(name) => Some(name),
                                _ => None,
                            },
                            _ => None,
                        }
                    }
                    _ => None,
                };
                if let Some(value) = name.and_then(|name| setting(&name)) {
                    // current_setting(name, false, value): the column is still named
                    // `current_setting`, as in Postgres; the function returns `value`.
                    if let FunctionArguments::List(list) = &mut function.args {
                        list.args.truncate(1);
                        for extra in [
                            "false".to_string(),
                            format!("'{}'", value.replace('\'', "''")),
                        ] {
                            if let Some(arg) = parse_expr(&extra) {
                                list.args.push(
                                    datafusion::sql::sqlparser::ast::FunctionArg::Unnamed(
                                        datafusion::sql::sqlparser::ast::FunctionArgExpr::Expr(arg),
                                    ),
                                );
                            }
                        }
                    }
                }
            }
            ControlFlow::<()>::Continue(())
        });
    }
    parsed
}

/// `CAST(format('%I.%I', s, t) AS regclass)`: a name computed in the query (the crate
/// resolves literal names only) is looked up with `to_regclass`, NULL when unknown.
fn computed_regclass_casts(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        if let Expr::Cast {
            expr: operand,
            data_type,
            ..
        } = expr
        {
            let regclass = data_type.to_string().to_ascii_lowercase();
            let computed_text = match operand.as_ref() {
                Expr::Function(f) => f.name.0.last().is_some_and(|n| {
                    let n = n.to_string().to_ascii_lowercase();
                    ["format", "concat", "quote_ident", "lower", "upper"].contains(&n.as_str())
                }),
                Expr::BinaryOp {
                    op: BinaryOperator::StringConcat,
                    ..
                } => true,
                _ => false,
            };
            if computed_text && regclass.trim_start_matches("pg_catalog.") == "regclass" {
                if let Some(lookup) = parse_expr(&format!("to_regclass({operand})")) {
                    *expr = lookup;
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// `generate_subscripts(a, 1)`, a set-returning function DataFusion lacks, as
/// `unnest(generate_series(1, array_length(a)))`: next to `unnest(a)` in a select list both
/// yield one row per element, in step (SQLAlchemy's key reflection pairs them so).
fn replace_generate_subscripts(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        if let Expr::Function(function) = expr {
            let is_it = function
                .name
                .0
                .last()
                .is_some_and(|n| n.to_string().eq_ignore_ascii_case("generate_subscripts"));
            if let (true, FunctionArguments::List(list)) = (is_it, &function.args) {
                if let Some(array) = list.args.first() {
                    let text = format!("unnest(generate_series(1, array_length({array})))");
                    if let Ok(replacement) = Parser::new(&PostgreSqlDialect {})
                        .try_with_sql(&text)
                        .and_then(|mut parser| parser.parse_expr())
                    {
                        *expr = replacement;
                    }
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// `x LIKE p ESCAPE '/'`: DataFusion's LIKE escapes with a backslash only, so the pattern is
/// rewritten to use one (`/%` → `\%`, `/_` → `\_`, `//` → `/`). SQLAlchemy escapes `pg_`
/// so when it lists schemas.
fn backslash_like_escapes(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        if let Expr::Like {
            pattern,
            escape_char,
            ..
        }
        | Expr::ILike {
            pattern,
            escape_char,
            ..
        } = expr
        {
            let escape = match escape_char.as_ref().map(|v| &v.value) {
                Some(Value::SingleQuotedString(s)) if s.chars().count() == 1 && s != "\\" => {
                    s.clone()
                }
                _ => return ControlFlow::Continue(()),
            };
            let quoted = escape.replace('\'', "''");
            let text = format!(
                "replace(replace(replace(replace({pattern}, '\\', '\\\\'), '{quoted}%', '\\%'), \
                 '{quoted}_', '\\_'), '{quoted}{quoted}', '{quoted}')"
            );
            if let Ok(rewritten) = Parser::new(&PostgreSqlDialect {})
                .try_with_sql(&text)
                .and_then(|mut parser| parser.parse_expr())
            {
                **pattern = rewritten;
                *escape_char = None;
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// `information_schema._pg_expandarray(a)`, a set-returning function of `(x, n)` records
/// (JDBC's `getPrimaryKeys` reads key columns with it): `(f(a)).n` becomes
/// `unnest(generate_series(1, array_length(a)))`, `f(a)` and `(f(a)).x` become `unnest(a)`, and
/// `(alias.keys).x` becomes `alias.keys` (the unnested element). Side by side in a select list
/// the unnests advance together, like the records would.
struct ExpandArray;

fn expand_array_argument(expr: &Expr) -> Option<String> {
    let Expr::Function(function) = expr else {
        return None;
    };
    let named = function
        .name
        .0
        .last()
        .is_some_and(|n| n.to_string().eq_ignore_ascii_case("_pg_expandarray"));
    match (&function.args, named) {
        (FunctionArguments::List(list), true) if list.args.len() == 1 => {
            Some(list.args[0].to_string())
        }
        _ => None,
    }
}

fn parse_expr(text: &str) -> Option<Expr> {
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(text)
        .and_then(|mut parser| parser.parse_expr())
        .ok()
}

impl VisitorMut for ExpandArray {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let replacement = match &*expr {
            Expr::CompoundFieldAccess { root, access_chain } if access_chain.len() == 1 => {
                let field = match &access_chain[0] {
                    AccessExpr::Dot(Expr::Identifier(field)) => field.value.to_ascii_lowercase(),
                    _ => return ControlFlow::Continue(()),
                };
                let inner = match root.as_ref() {
                    Expr::Nested(inner) => inner.as_ref(),
                    other => other,
                };
                match (expand_array_argument(inner), field.as_str(), inner) {
                    (Some(array), "n", _) => parse_expr(&format!(
                        "unnest(generate_series(1, array_length({array})))"
                    )),
                    (Some(array), "x", _) => parse_expr(&format!("unnest({array})")),
                    (None, "x", Expr::CompoundIdentifier(_)) => Some(inner.clone()),
                    _ => None,
                }
            }
            other => expand_array_argument(other).and_then(|a| parse_expr(&format!("unnest({a})"))),
        };
        if let Some(replacement) = replacement {
            *expr = replacement;
        }
        ControlFlow::Continue(())
    }
}

/// A one-column, non-aggregate subquery over empty catalog tables only: its value is NULL
/// (and DataFusion may not plan it, e.g. with outer columns in its select list).
fn reads_only_empty_catalogs(query: &Query) -> bool {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return false;
    };
    let single_value = match select.projection.as_slice() {
        [SelectItem::UnnamedExpr(e)] | [SelectItem::ExprWithAlias { expr: e, .. }] => {
            !is_aggregate(e)
        }
        _ => false,
    };
    let mut tables = Vec::new();
    for table in &select.from {
        tables.push(&table.relation);
        tables.extend(table.joins.iter().map(|j| &j.relation));
    }
    single_value
        && !tables.is_empty()
        && tables
            .iter()
            .all(|factor| crate::pg::ast::empty_catalog_selects::is_empty_catalog(factor))
}

/// Names the subquery's own tables go by (aliases, or the last part of the name).
fn inner_tables(select: &Select) -> Vec<String> {
    let mut names = Vec::new();
    let mut add = |factor: &TableFactor| {
        if let TableFactor::Table { name, alias, .. } = factor {
            match alias {
                Some(alias) => names.push(alias.name.value.to_ascii_lowercase()),
                None => {
                    if let Some(last) = name.0.last() {
                        names.push(last.to_string().to_ascii_lowercase());
                    }
                }
            }
        }
    };
    for table in &select.from {
        add(&table.relation);
        for join in &table.joins {
            add(&join.relation);
        }
    }
    names
}

/// Whether a condition reads only the outer row: every column it names is qualified by a
/// table that is not the subquery's own.
fn is_outer_only(condition: &Expr, inner: &[String]) -> bool {
    let mut qualified = 0;
    let mut inner_or_unknown = false;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(condition, |e| {
        match e {
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                qualified += 1;
                let table = parts[parts.len() - 2].value.to_ascii_lowercase();
                if inner.contains(&table) {
                    inner_or_unknown = true;
                }
            }
            Expr::Identifier(_) | Expr::Subquery(_) | Expr::Exists { .. } => {
                inner_or_unknown = true
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    qualified > 0 && !inner_or_unknown
}

fn conjuncts(expr: Expr, out: &mut Vec<Expr>) {
    match expr {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            conjuncts(*left, out);
            conjuncts(*right, out);
        }
        Expr::Nested(inner)
            if matches!(
                inner.as_ref(),
                Expr::BinaryOp {
                    op: BinaryOperator::And,
                    ..
                }
            ) =>
        {
            conjuncts(*inner, out)
        }
        other => out.push(other),
    }
}

fn and_all(mut exprs: Vec<Expr>) -> Option<Expr> {
    let first = exprs.pop()?;
    Some(
        exprs
            .into_iter()
            .rev()
            .fold(first, |acc, e| Expr::BinaryOp {
                left: Box::new(e),
                op: BinaryOperator::And,
                right: Box::new(acc),
            }),
    )
}

/// Moves the WHERE conditions on the outer row alone out of the subquery, returning them.
fn take_outer_conditions(query: &mut Query) -> Option<Expr> {
    let SetExpr::Select(select) = query.body.as_mut() else {
        return None;
    };
    let inner = inner_tables(select);
    let mut parts = Vec::new();
    conjuncts(select.selection.take()?, &mut parts);
    let (outer, own): (Vec<Expr>, Vec<Expr>) =
        parts.into_iter().partition(|c| is_outer_only(c, &inner));
    select.selection = and_all(own);
    and_all(outer)
}

/// Wraps the single column of a one-column subquery in `max`; false when it is left as is.
fn aggregate_single_column(query: &mut Query) -> bool {
    if query.limit_clause.is_some() || query.fetch.is_some() {
        return false;
    }
    let SetExpr::Select(select) = query.body.as_mut() else {
        return false;
    };
    let grouped = !matches!(
        &select.group_by,
        datafusion::sql::sqlparser::ast::GroupByExpr::Expressions(e, _) if e.is_empty()
    );
    if grouped || select.projection.len() != 1 || select.from.is_empty() {
        return false;
    }
    let (inner, alias) = match &select.projection[0] {
        SelectItem::UnnamedExpr(e) => (e, None),
        SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.clone())),
        _ => return false,
    };
    if is_aggregate(inner) {
        return false;
    }
    let Ok(aggregated) = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&format!("max({inner})"))
        .and_then(|mut parser| parser.parse_expr())
    else {
        return false;
    };
    select.projection[0] = match alias {
        Some(alias) => SelectItem::ExprWithAlias {
            expr: aggregated,
            alias,
        },
        None => SelectItem::UnnamedExpr(aggregated),
    };
    true
}

fn is_aggregate(expr: &Expr) -> bool {
    match expr {
        Expr::Function(function) => {
            let name = function
                .name
                .0
                .last()
                .map(|part| part.to_string().to_ascii_lowercase())
                .unwrap_or_default();
            AGGREGATES.contains(&name.as_str())
                || matches!(function.args, FunctionArguments::Subquery(_))
        }
        Expr::Nested(inner) => is_aggregate(inner),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> String {
        let mut statement = Parser::new(&PostgreSqlDialect {})
            .try_with_sql(sql)
            .unwrap()
            .parse_statement()
            .unwrap();
        aggregate_scalar_subqueries(&mut statement);
        statement.to_string()
    }

    #[test]
    fn expandarray_records_become_unnests() {
        let mut statement = Parser::new(&PostgreSqlDialect {})
            .try_with_sql(
                "SELECT r.n FROM (SELECT (information_schema._pg_expandarray(i.indkey)).n AS n, \
                 information_schema._pg_expandarray(i.indkey) AS keys, a.attnum AS a \
                 FROM i, a) r WHERE r.a = (r.keys).x",
            )
            .unwrap()
            .parse_statement()
            .unwrap();
        let _ = statement.visit(&mut ExpandArray);
        assert_eq!(
            statement.to_string(),
            "SELECT r.n FROM (SELECT unnest(generate_series(1, array_length(i.indkey))) AS n, \
             unnest(i.indkey) AS keys, a.attnum AS a FROM i, a) r WHERE r.a = r.keys"
        );
    }

    #[test]
    fn like_escapes_become_backslashes() {
        let mut statement = Parser::new(&PostgreSqlDialect {})
            .try_with_sql("SELECT 1 FROM n WHERE n.name NOT LIKE 'pg/_' || '%' ESCAPE '/'")
            .unwrap()
            .parse_statement()
            .unwrap();
        backslash_like_escapes(&mut statement);
        computed_regclass_casts(&mut statement);
        let text = statement.to_string();
        assert!(!text.contains("ESCAPE"), "{text}");
        assert!(text.contains("'/_', '\\_'"), "{text}");
    }

    #[test]
    fn scalar_subqueries_in_expressions_are_aggregated() {
        assert_eq!(
            rewritten("SELECT CASE WHEN a THEN (SELECT x FROM t WHERE t.k = o.k) END FROM o"),
            "SELECT CASE WHEN a THEN (SELECT max(x) FROM t WHERE t.k = o.k) END FROM o"
        );
        assert_eq!(
            rewritten("SELECT (SELECT x FROM t WHERE o.p AND t.k = o.k) FROM o"),
            "SELECT CASE WHEN o.p THEN (SELECT max(x) FROM t WHERE t.k = o.k) END FROM o"
        );
        assert_eq!(
            rewritten("SELECT (SELECT json_build_object('a', o.x = 1) FROM pg_catalog.pg_sequence WHERE seqrelid = o.id) FROM o"),
            "SELECT NULL FROM o"
        );
        // Already one row: left alone.
        for sql in [
            "SELECT (SELECT count(*) FROM t) FROM o",
            "SELECT (SELECT x FROM t LIMIT 1) FROM o",
            "SELECT (SELECT x FROM t GROUP BY x) FROM o",
            "SELECT (SELECT 1) FROM o",
        ] {
            assert_eq!(rewritten(sql), sql);
        }
    }
}
