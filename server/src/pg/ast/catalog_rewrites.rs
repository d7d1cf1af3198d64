//! Forms of drivers' catalog queries DataFusion cannot take as Postgres does:
//!
//! - `typinput = 'pg_catalog.array_in'::regproc` (JDBC's type lookups): `pg_type`'s `regproc`
//!   columns hold function names, so the name is compared as text.
//! - `ARRAY(SELECT ...)` over what is always empty in Eddy (role memberships, storage and
//!   connector options: psql's `\du`, `\d+`, `\d` of a foreign table) is an empty `text[]`;
//!   `array_to_string(x.nspacl, ...)` of an ACL (always the default) or of a column's options
//!   (`attoptions`, none) is NULL.
//! - Several select-list items with one name (`NULL, NULL, NULL` in JDBC's `getProcedures`):
//!   Postgres allows it, DataFusion needs unique names; each repeat gets a name of its own
//!   with a marker that the row description drops ([`client_name`]).
//! - `pg_index`'s `int2vector`/`oidvector` columns (`indkey`, `indclass`, `indcollation`,
//!   `indoption`) are arrays here, so that `unnest` and `ANY` take them; read whole in the
//!   outermost select list (SQLAlchemy's index reflection splits the text), they are sent in
//!   Postgres' text form, numbers separated by spaces.
//! - `EXISTS (SELECT ... WHERE ...)` in a select list (psql's `\d` of an index): DataFusion
//!   takes subqueries there only as scalars, so it becomes `(SELECT count(*) ... WHERE ...) > 0`.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, AccessExpr, BinaryOperator, Expr, FunctionArg, FunctionArgExpr,
    FunctionArguments, GroupByExpr, Ident, Query, SelectItem, SetExpr, Statement, Subscript,
    TableFactor, Value,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// Where a name given here to keep select-list names unique begins its suffix.
pub(crate) const NAME_MARK: char = '\u{1}';

/// Catalog columns of type `regproc`, which the crate holds as the function's name.
const REGPROC_COLUMNS: &[&str] = &[
    "typinput",
    "typoutput",
    "typreceive",
    "typsend",
    "typmodin",
    "typmodout",
    "typanalyze",
    "typsubscript",
    "oprcode",
    "oprrest",
    "oprjoin",
    "amhandler",
    "prsstart",
    "prstoken",
    "prsend",
    "prsheadline",
    "prslextype",
    "tmplinit",
    "tmpllexize",
    "conproc",
    "rngcanonical",
    "rngsubdiff",
    "aggfnoid",
    "aggtransfn",
    "aggfinalfn",
    "aggcombinefn",
    "aggserialfn",
    "aggdeserialfn",
    "aggmtransfn",
    "aggminvtransfn",
    "aggmfinalfn",
];

pub(crate) fn apply(statement: &mut Statement) {
    regproc_comparisons(statement);
    regproc_casts(statement);
    name_subscripts(statement);
    empty_arrays(statement);
    exists_in_select_list(statement);
    vectors_as_text(statement);
    crate::pg::ast::regtype::apply(statement);
    crate::pg::ast::domain_base::apply(statement);
    crate::pg::ast::in_subqueries::apply(statement);
    crate::pg::ast::system_columns::apply(statement);
}

/// Runs `rewrite`, then names each select-list item it changed as Postgres named the item
/// before (`x.tableoid` stays `tableoid`, `prsstart::oid` stays `prsstart`): clients find
/// columns by name (pg_dump's `PQfnumber`).
pub(crate) fn keeping_output_names(
    statement: &mut Statement,
    rewrite: impl FnOnce(&mut Statement),
) {
    let before: Vec<Option<(Expr, String)>> = match statement {
        Statement::Query(query) => match query.body.as_ref() {
            SetExpr::Select(select) => select
                .projection
                .iter()
                .map(|item| match item {
                    SelectItem::UnnamedExpr(expr) => Some((expr.clone(), postgres_name(expr))),
                    _ => None,
                })
                .collect(),
            _ => vec![],
        },
        _ => vec![],
    };
    rewrite(statement);
    restore_names(statement, before);
    // Last: the names given above may repeat.
    unique_output_names(statement);
}

/// `x::regproc`, `x::oid`...: DataFusion names it after the cast, Postgres after `x`.
fn is_oid_alias_cast(expr: &Expr) -> bool {
    let Expr::Cast { data_type, .. } = expr else {
        return false;
    };
    let target = data_type.to_string().to_ascii_lowercase();
    matches!(
        target.trim_start_matches("pg_catalog."),
        "oid" | "regproc" | "regclass" | "regtype" | "regnamespace" | "regrole" | "regprocedure"
    ) && column_name(named_part(expr)).is_some()
}

fn restore_names(statement: &mut Statement, before: Vec<Option<(Expr, String)>>) {
    let Statement::Query(query) = statement else {
        return;
    };
    let SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    if select.projection.len() != before.len() {
        return;
    }
    for (item, before) in select.projection.iter_mut().zip(before) {
        let (SelectItem::UnnamedExpr(expr), Some((unchanged, name))) = (&*item, before) else {
            continue;
        };
        if (*expr != unchanged || is_oid_alias_cast(expr)) && name != "?column?" {
            *item = SelectItem::ExprWithAlias {
                expr: expr.clone(),
                alias: Ident::with_quote('"', name),
            };
        }
    }
}

/// `pg_index`'s columns of Postgres' vector types.
const VECTOR_COLUMNS: &[&str] = &["indkey", "indclass", "indcollation", "indoption"];

fn vectors_as_text(statement: &mut Statement) {
    let Statement::Query(query) = statement else {
        return;
    };
    let SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    let reads_pg_index = select.from.iter().any(|table| {
        std::iter::once(&table.relation)
            .chain(table.joins.iter().map(|j| &j.relation))
            .any(|factor| {
                matches!(factor, TableFactor::Table { name, .. }
                    if name.0.last().is_some_and(|n| n.to_string().eq_ignore_ascii_case("pg_index")))
            })
    });
    if !reads_pg_index {
        return;
    }
    for item in select.projection.iter_mut() {
        let (expr, alias) = match item {
            SelectItem::UnnamedExpr(expr) => match column_name(expr) {
                Some(name) => (expr.clone(), Ident::new(name)),
                None => continue,
            },
            SelectItem::ExprWithAlias { expr, alias } => (expr.clone(), alias.clone()),
            _ => continue,
        };
        if !column_name(&expr).is_some_and(|name| VECTOR_COLUMNS.contains(&name.as_str())) {
            continue;
        }
        if let Some(text) = parse(&format!("array_to_string({expr}, ' ')")) {
            *item = SelectItem::ExprWithAlias { expr: text, alias };
        }
    }
}

/// The name a client sees for a result column named here.
pub(crate) fn client_name(name: &str) -> Option<&str> {
    name.find(NAME_MARK).map(|at| &name[..at])
}

fn column_name(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Identifier(ident) => Some(ident.value.to_ascii_lowercase()),
        Expr::CompoundIdentifier(parts) => parts.last().map(|p| p.value.to_ascii_lowercase()),
        _ => None,
    }
}

/// The function name of `'name'::regproc`, or of the lookup the crate's rules rewrite it into,
/// `(SELECT oid FROM pg_catalog.pg_proc WHERE proname = 'name')`.
fn regproc_lookup(expr: &Expr) -> Option<String> {
    let name = match expr {
        Expr::Cast {
            expr: operand,
            data_type,
            ..
        } => {
            let type_name = data_type.to_string().to_ascii_lowercase();
            if type_name.trim_start_matches("pg_catalog.") != "regproc" {
                return None;
            }
            match operand.as_ref() {
                Expr::Value(value) => match &value.value {
                    Value::SingleQuotedString(name) => name.clone(),
                    _ => return None,
                },
                _ => return None,
            }
        }
        Expr::Subquery(query) => {
            let text = query.to_string();
            let name = text
                .strip_prefix("SELECT oid FROM pg_catalog.pg_proc WHERE proname = '")?
                .strip_suffix('\'')?;
            if name.contains('\'') {
                return None;
            }
            name.to_string()
        }
        _ => return None,
    };
    Some(
        name.strip_prefix("pg_catalog.")
            .unwrap_or(&name)
            .to_string(),
    )
}

fn regproc_comparisons(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        if let Expr::BinaryOp { left, op, right } = expr {
            if matches!(op, BinaryOperator::Eq | BinaryOperator::NotEq) {
                let is_regproc = |e: &Expr| {
                    column_name(e).is_some_and(|name| REGPROC_COLUMNS.contains(&name.as_str()))
                };
                if is_regproc(left) {
                    if let Some(name) = regproc_lookup(right) {
                        **right = Expr::value(Value::SingleQuotedString(name));
                    }
                } else if is_regproc(right) {
                    if let Some(name) = regproc_lookup(left) {
                        **left = Expr::value(Value::SingleQuotedString(name));
                    }
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// `regproc_column::regproc` is the name the column already holds; `regproc_column::oid`
/// (pg_dump's dependency lookups) has no function OID to give: NULL, which pg_dump reads as 0.
fn regproc_casts(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        if let Expr::Cast {
            expr: operand,
            data_type,
            ..
        } = expr
        {
            let is_regproc =
                column_name(operand).is_some_and(|name| REGPROC_COLUMNS.contains(&name.as_str()));
            let target = data_type.to_string().to_ascii_lowercase();
            match target.trim_start_matches("pg_catalog.") {
                "regproc" if is_regproc => *expr = operand.as_ref().clone(),
                "oid" if is_regproc => {
                    if let Some(null) = parse("CAST(NULL AS INT)") {
                        *expr = null;
                    }
                }
                _ => {}
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// Catalog columns of type `name`, which Postgres subscripts as an array of characters.
const NAME_COLUMNS: &[&str] = &[
    "typname", "relname", "proname", "attname", "nspname", "conname", "rolname",
];

/// `typname[0] = '_'` (pg_dump tells array types so): a `name`'s subscript counts characters
/// from 0; here the column is text, so it becomes `substr(typname, 1, 1)`.
fn name_subscripts(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        if let Expr::CompoundFieldAccess { root, access_chain } = expr {
            let is_name =
                column_name(root).is_some_and(|name| NAME_COLUMNS.contains(&name.as_str()));
            if let ([AccessExpr::Subscript(Subscript::Index { index })], true) =
                (access_chain.as_slice(), is_name)
            {
                if let Some(char) = parse(&format!("substr({root}, ({index}) + 1, 1)")) {
                    *expr = char;
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// Tables and table functions whose rows are always empty in Eddy.
const EMPTY_SOURCES: &[&str] = &["pg_auth_members", "pg_options_to_table", "unnest"];

/// Whether a query reads only [`EMPTY_SOURCES`] (`unnest` of an option array, always NULL).
fn reads_nothing(query: &Query) -> bool {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return false;
    };
    let mut factors = Vec::new();
    for table in &select.from {
        factors.push(&table.relation);
        factors.extend(table.joins.iter().map(|j| &j.relation));
    }
    let first = factors.first().and_then(|factor| match factor {
        TableFactor::Table { name, .. } => {
            name.0.last().map(|n| n.to_string().to_ascii_lowercase())
        }
        TableFactor::Function { name, .. } => {
            name.0.last().map(|n| n.to_string().to_ascii_lowercase())
        }
        _ => None,
    });
    first.is_some_and(|name| EMPTY_SOURCES.contains(&name.as_str()))
}

fn empty_arrays(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        let Expr::Function(function) = expr else {
            return ControlFlow::<()>::Continue(());
        };
        let name = function.name.to_string().to_ascii_lowercase();
        let replacement = match (name.trim_start_matches("pg_catalog."), &function.args) {
            ("array", FunctionArguments::Subquery(query)) if reads_nothing(query) => {
                Some("CAST(make_array() AS TEXT[])")
            }
            ("array_to_string", FunctionArguments::List(list)) => {
                // ACLs (always the default) and column options (none): NULL in Eddy.
                let acl = list.args.first().is_some_and(|arg| {
                    matches!(arg, FunctionArg::Unnamed(FunctionArgExpr::Expr(e))
                        if column_name(e).is_some_and(|c| c.ends_with("acl") || c == "attoptions"))
                });
                acl.then_some("CAST(NULL AS TEXT)")
            }
            _ => None,
        };
        if let Some(sql) = replacement {
            if let Ok(parsed) = Parser::new(&PostgreSqlDialect {})
                .try_with_sql(sql)
                .and_then(|mut p| p.parse_expr())
            {
                *expr = parsed;
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// The item under casts and parentheses, which name a column after what they hold (in
/// Postgres and in DataFusion alike: `CAST(value AS TEXT)` is `value`).
fn named_part(expr: &Expr) -> &Expr {
    match expr {
        Expr::Cast { expr, .. } | Expr::Nested(expr) => named_part(expr),
        other => other,
    }
}

/// The name DataFusion gives an unnamed select-list item, for finding repeated ones.
fn datafusion_name(expr: &Expr) -> String {
    let expr = named_part(expr);
    column_name(expr).unwrap_or_else(|| expr.to_string())
}

/// Postgres' name for an unnamed select-list item.
fn postgres_name(expr: &Expr) -> String {
    crate::pg::ast::output_names::figure_name(expr).unwrap_or_else(|| "?column?".into())
}

fn unique_output_names(statement: &mut Statement) {
    let Statement::Query(query) = statement else {
        return;
    };
    let SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    let mut seen: Vec<String> = Vec::new();
    for (position, item) in select.projection.iter_mut().enumerate() {
        let key = match item {
            SelectItem::UnnamedExpr(expr) => datafusion_name(expr),
            SelectItem::ExprWithAlias { alias, .. } => alias.value.to_ascii_lowercase(),
            _ => continue,
        };
        if !seen.contains(&key) {
            seen.push(key);
            continue;
        }
        if let SelectItem::UnnamedExpr(expr) = item {
            let alias = format!("{}{NAME_MARK}{position}", postgres_name(expr));
            *item = SelectItem::ExprWithAlias {
                expr: expr.clone(),
                alias: Ident::with_quote('"', alias),
            };
        }
    }
}

fn exists_in_select_list(statement: &mut Statement) {
    let Statement::Query(query) = statement else {
        return;
    };
    let SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    for item in select.projection.iter_mut() {
        match item {
            SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => {
                exists_as_count(expr)
            }
            _ => {}
        }
    }
}

/// `sql` parsed, given to `rewrite`, and written out again: the rewrites' tests.
#[cfg(test)]
pub(crate) fn rewritten_by(sql: &str, rewrite: impl FnOnce(&mut Statement)) -> String {
    let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql)
        .unwrap()
        .remove(0);
    rewrite(&mut statement);
    statement.to_string()
}

/// One SQL expression, parsed as Postgres writes it.
pub(crate) fn parse(sql: &str) -> Option<Expr> {
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_expr())
        .ok()
}

/// `EXISTS (q)` as `(q counted) > 0` in a select-list expression (not within its subqueries,
/// where DataFusion takes `EXISTS`).
fn exists_as_count(expr: &mut Expr) {
    match expr {
        Expr::BinaryOp { left, right, .. } => {
            exists_as_count(left);
            exists_as_count(right);
        }
        Expr::UnaryOp { expr, .. } | Expr::Nested(expr) => exists_as_count(expr),
        Expr::Exists { subquery, negated } => {
            let countable = subquery.order_by.is_none()
                && subquery.limit_clause.is_none()
                && subquery.fetch.is_none()
                && matches!(subquery.body.as_ref(), SetExpr::Select(select)
                    if select.distinct.is_none() && select.having.is_none()
                        && matches!(&select.group_by, GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty()));
            if !countable {
                return;
            }
            let mut counted = subquery.as_ref().clone();
            if let (SetExpr::Select(select), Some(count)) =
                (counted.body.as_mut(), parse("count(*)"))
            {
                select.projection = vec![SelectItem::UnnamedExpr(count)];
            }
            let sql = format!("({counted}) {} 0", if *negated { "=" } else { ">" });
            if let Some(parsed) = parse(&sql) {
                *expr = Expr::Nested(Box::new(parsed));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> String {
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .unwrap()
            .remove(0);
        keeping_output_names(&mut statement, apply);
        statement.to_string()
    }

    #[test]
    fn regproc_lookups_compared_with_regproc_columns_become_names() {
        assert_eq!(
            rewritten("SELECT typinput = (SELECT oid FROM pg_catalog.pg_proc WHERE proname = 'pg_catalog.array_in') AS is_array FROM pg_type"),
            "SELECT typinput = 'array_in' AS is_array FROM pg_type"
        );
        assert_eq!(
            rewritten(
                "SELECT typname FROM pg_type WHERE typinput = 'pg_catalog.array_in'::regproc"
            ),
            "SELECT typname FROM pg_type WHERE typinput = 'array_in'"
        );
        // Another column keeps its OID lookup.
        let other =
            "SELECT oid = (SELECT oid FROM pg_catalog.pg_proc WHERE proname = 'f') FROM pg_proc";
        assert_eq!(rewritten(other), other);
    }

    #[test]
    fn arrays_of_what_is_always_empty() {
        assert_eq!(
            rewritten("SELECT ARRAY(SELECT b.rolname FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles b ON (m.roleid = b.oid) WHERE m.member = r.oid) AS memberof FROM pg_roles r"),
            "SELECT CAST(make_array() AS TEXT[]) AS memberof FROM pg_roles r"
        );
        assert_eq!(
            rewritten("SELECT pg_catalog.array_to_string(n.nspacl, E'\\n') FROM pg_namespace n"),
            // Named as Postgres names the call.
            "SELECT CAST(NULL AS TEXT) AS \"array_to_string\" FROM pg_namespace n"
        );
        let kept = "SELECT ARRAY(SELECT a FROM t) FROM u";
        assert_eq!(rewritten(kept), kept);
    }

    #[test]
    fn vectors_read_whole_are_their_text() {
        assert_eq!(
            rewritten("SELECT pg_catalog.pg_index.indoption, i.indkey AS k, indclass[1] FROM pg_index i"),
            "SELECT array_to_string(pg_catalog.pg_index.indoption, ' ') AS indoption, array_to_string(i.indkey, ' ') AS k, indclass[1] FROM pg_index i"
        );
        let inner = "SELECT t.o[1] FROM (SELECT i.indoption AS o FROM pg_index i) AS t";
        assert_eq!(rewritten(inner), inner);
        // A column of that name elsewhere is left alone.
        let other = "SELECT indkey FROM mine";
        assert_eq!(rewritten(other), other);
    }

    #[test]
    fn exists_in_a_select_list_is_a_count() {
        assert_eq!(
            rewritten("SELECT (NOT i.indimmediate) AND EXISTS (SELECT 1 FROM c WHERE c.x = i.x AND c.d) AS d, NOT EXISTS (SELECT 1 FROM c) FROM i"),
            "SELECT (NOT i.indimmediate) AND ((SELECT count(*) FROM c WHERE c.x = i.x AND c.d) > 0) AS d, ((SELECT count(*) FROM c) = 0) FROM i"
        );
        assert_eq!(
            rewritten("SELECT NOT EXISTS (SELECT 1 FROM c) AS n FROM i"),
            "SELECT ((SELECT count(*) FROM c) = 0) AS n FROM i"
        );
        // In a WHERE clause, and with a LIMIT, it stays.
        let kept = "SELECT a FROM i WHERE EXISTS (SELECT 1 FROM c WHERE c.x = i.x)";
        assert_eq!(rewritten(kept), kept);
        let limited = "SELECT EXISTS (SELECT 1 FROM c LIMIT 1) FROM i";
        assert_eq!(rewritten(limited), limited);
    }

    #[test]
    fn repeated_names_are_made_unique_and_shown_as_postgres_names() {
        let sql = rewritten("SELECT NULL AS a, NULL, NULL, n.x, m.x, NULL FROM t");
        assert_eq!(
            sql,
            "SELECT NULL AS a, NULL, NULL AS \"?column?\u{1}2\", n.x, m.x AS \"x\u{1}4\", NULL AS \"?column?\u{1}5\" FROM t"
        );
        // A cast is named after what it casts, in DataFusion as in Postgres.
        assert_eq!(
            rewritten("SELECT value, CAST(value AS VARCHAR), (value)::TEXT FROM s"),
            "SELECT value, CAST(value AS VARCHAR) AS \"value\u{1}1\", (value)::TEXT AS \"value\u{1}2\" FROM s"
        );
        assert_eq!(client_name("?column?\u{1}2"), Some("?column?"));
        assert_eq!(client_name("plain"), None);
    }
}
