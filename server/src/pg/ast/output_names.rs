//! A query's result columns named as Postgres names them (its `FigureColname`), from the
//! select list as written: an operator or a literal is `?column?` (DataFusion says
//! `t.a + Int64(1)`), a cast is what it casts or else its type (`1::int` is `int4`), `CASE`
//! is `case`, `ARRAY[...]` is `array`, `trim(x)` is `btrim`, a scalar
//! subquery is its own column's name. Clients find columns by these names (psycopg's
//! `RealDictCursor`, JDBC's `findColumn`), and psql prints them as headers.
//!
//! The names are given by a projection on top of the plan; a name that repeats gets a marked
//! suffix the row description drops ([`crate::pg::ast::catalog_rewrites::client_name`]).

use std::collections::HashSet;

use datafusion::common::{Column, Result};
use datafusion::logical_expr::{Expr as PlanExpr, LogicalPlan, LogicalPlanBuilder};
use datafusion::sql::sqlparser::ast::{
    AccessExpr, DataType, Expr, Ident, ObjectNamePart, Query, SelectItem, SetExpr, Statement,
    TimezoneInfo, TrimWhereField,
};

use crate::pg::ast::catalog_rewrites::NAME_MARK;

/// Postgres' name for each result column of `query` where its select list leaves the name to
/// the server (`None` for a column named by an alias); `None` when the columns cannot be
/// matched to the select list (a `*`).
pub fn postgres_output_names(query: &Query) -> Option<Vec<Option<String>>> {
    let select = leftmost_select(&query.body)?;
    select
        .projection
        .iter()
        .map(|item| match item {
            SelectItem::UnnamedExpr(expr) => {
                Some(Some(figure_name(expr).unwrap_or_else(|| "?column?".into())))
            }
            SelectItem::ExprWithAlias { .. } => Some(None),
            _ => None,
        })
        .collect()
}

/// Aliases the select-list items of `statement` whose name DataFusion would not give as
/// Postgres does, given `original`, the names [`postgres_output_names`] found before Eddy's
/// rewrites:
/// - an item a rewrite changed (`EXISTS (...)` written as a count keeps `exists`);
/// - a cast (`CAST(a AS BIGINT)`): DataFusion names it `a` without treating that as an
///   alias, so `ORDER BY a` adds a second `a`;
/// - a name already taken (`SELECT a + 1, a + 1`, `SELECT a AS b, b`): Postgres allows it,
///   DataFusion does not; the repeat gets a marked suffix the row description drops.
pub fn keep_names(statement: &mut Statement, original: &[Option<String>]) {
    if let Statement::Query(query) = statement {
        keep_query_names(query, original);
    }
}

/// `INSERT ... SELECT a, b, a`: the inserted columns go by position, but DataFusion refuses a
/// select list naming one column twice; the repeats get marked names, as in a query.
pub fn unique_insert_names(statement: &mut Statement) {
    let Statement::Insert(insert) = statement else {
        return;
    };
    let Some(source) = insert.source.as_mut() else {
        return;
    };
    if let Some(names) = postgres_output_names(source) {
        keep_query_names(source, &names);
    }
}

fn keep_query_names(query: &mut Query, original: &[Option<String>]) {
    let SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    if select.projection.len() != original.len() {
        return;
    }
    let mut taken: HashSet<String> = HashSet::new();
    for (position, (item, original)) in select.projection.iter_mut().zip(original).enumerate() {
        let expr = match &*item {
            SelectItem::ExprWithAlias { alias, .. } => {
                taken.insert(ident_name(alias));
                continue;
            }
            SelectItem::UnnamedExpr(expr) => expr,
            _ => continue,
        };
        let Some(original) = original else { continue };
        let now = figure_name(expr).unwrap_or_else(|| "?column?".into());
        let repeated = !taken.insert(original.clone());
        let is_cast = matches!(expr, Expr::Cast { .. });
        if now == *original && !repeated && !is_cast {
            continue;
        }
        let alias = if repeated || original == "?column?" {
            format!("{original}{NAME_MARK}{position}")
        } else {
            original.clone()
        };
        *item = SelectItem::ExprWithAlias {
            expr: expr.clone(),
            alias: Ident::with_quote('"', alias),
        };
    }
}

/// A set operation's columns are named by its first select.
fn leftmost_select(body: &SetExpr) -> Option<&datafusion::sql::sqlparser::ast::Select> {
    match body {
        SetExpr::Select(select) => Some(select),
        SetExpr::Query(query) => leftmost_select(&query.body),
        SetExpr::SetOperation { left, .. } => leftmost_select(left),
        _ => None,
    }
}

/// `plan` with its columns renamed to `names` where given and different.
pub fn with_output_names(plan: LogicalPlan, names: &[Option<String>]) -> Result<LogicalPlan> {
    let schema = plan.schema().clone();
    if names.len() != schema.fields().len() {
        return Ok(plan);
    }
    let renamed = schema
        .fields()
        .iter()
        .zip(names)
        .any(|(field, name)| name.as_ref().is_some_and(|name| name != field.name()));
    if !renamed {
        return Ok(plan);
    }
    let mut seen = HashSet::new();
    let columns = schema
        .iter()
        .zip(names)
        .enumerate()
        .map(|(position, ((qualifier, field), name))| {
            let column = PlanExpr::Column(Column::new(qualifier.cloned(), field.name()));
            let name = name.clone().unwrap_or_else(|| field.name().clone());
            let name = if seen.insert(name.clone()) {
                name
            } else {
                format!("{name}{NAME_MARK}{position}")
            };
            if &name == field.name() {
                column
            } else {
                column.alias(name)
            }
        })
        .collect::<Vec<_>>();
    LogicalPlanBuilder::from(plan).project(columns)?.build()
}

/// Postgres' name for a select-list expression, `None` for `?column?`.
pub(crate) fn figure_name(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Identifier(ident) => Some(ident_name(ident)),
        Expr::CompoundIdentifier(parts) => parts.last().map(ident_name),
        Expr::CompoundFieldAccess { root, access_chain } => match access_chain.last() {
            Some(AccessExpr::Dot(field)) => figure_name(field),
            _ => figure_name(root),
        },
        Expr::Nested(inner) | Expr::Collate { expr: inner, .. } => figure_name(inner),
        // A cast is named by what it casts when that has a name of its own (a column, a
        // function), else by its type: the outer one of nested casts.
        Expr::Cast {
            expr, data_type, ..
        } => match expr.as_ref() {
            Expr::Cast { .. }
            | Expr::TypedString(_)
            | Expr::Interval(_)
            | Expr::Case { .. }
            | Expr::Array(_)
            | Expr::Tuple(_) => Some(type_name(data_type)),
            inner => figure_name(inner).or_else(|| Some(type_name(data_type))),
        },
        Expr::TypedString(typed) => Some(type_name(&typed.data_type)),
        Expr::Interval(_) => Some("interval".into()),
        Expr::Function(function) => function.name.0.last().map(|part| match part {
            // `EXTRACT(...)`, as the planner writes it when parsing.
            ObjectNamePart::Identifier(ident) if ident.value == "pg_extract" => "extract".into(),
            ObjectNamePart::Identifier(ident) => ident_name(ident),
            other => other.to_string(),
        }),
        Expr::Case { .. } => Some("case".into()),
        Expr::Array(_) => Some("array".into()),
        Expr::Tuple(_) => Some("row".into()),
        // `NOT EXISTS` is an operator over it: `?column?`.
        Expr::Exists { negated, .. } => (!negated).then(|| "exists".into()),
        Expr::Subquery(query) => match postgres_output_names(query)?.first()? {
            Some(name) if name != "?column?" => Some(name.clone()),
            Some(_) => None,
            // Named by an alias inside.
            None => aliased_first_column(query),
        },
        Expr::Extract { .. } => Some("extract".into()),
        Expr::Substring {
            shorthand: true, ..
        } => Some("substr".into()),
        Expr::Substring { .. } => Some("substring".into()),
        Expr::Position { .. } => Some("position".into()),
        Expr::Overlay { .. } => Some("overlay".into()),
        Expr::Ceil { .. } => Some("ceil".into()),
        Expr::Floor { .. } => Some("floor".into()),
        Expr::AtTimeZone { .. } => Some("timezone".into()),
        Expr::Trim { trim_where, .. } => Some(
            match trim_where {
                Some(TrimWhereField::Leading) => "ltrim",
                Some(TrimWhereField::Trailing) => "rtrim",
                _ => "btrim",
            }
            .into(),
        ),
        _ => None,
    }
}

fn aliased_first_column(query: &Query) -> Option<String> {
    match leftmost_select(&query.body)?.projection.first()? {
        SelectItem::ExprWithAlias { alias, .. } => Some(ident_name(alias)),
        _ => None,
    }
}

/// An identifier as the catalog holds it: folded to lower case unless quoted.
fn ident_name(ident: &Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_lowercase(),
    }
}

/// The name Postgres gives a type in a cast's column name: its internal name (`int4`).
fn type_name(data_type: &DataType) -> String {
    use DataType as T;
    match data_type {
        T::Int(_) | T::Integer(_) | T::Int4(_) => "int4".into(),
        T::BigInt(_) | T::Int8(_) => "int8".into(),
        T::SmallInt(_) | T::Int2(_) => "int2".into(),
        T::Real | T::Float4 => "float4".into(),
        T::Float(info) => match info {
            datafusion::sql::sqlparser::ast::ExactNumberInfo::Precision(p)
            | datafusion::sql::sqlparser::ast::ExactNumberInfo::PrecisionAndScale(p, _)
                if *p <= 24 =>
            {
                "float4".into()
            }
            _ => "float8".into(),
        },
        T::Double(_) | T::DoublePrecision | T::Float8 => "float8".into(),
        T::Bool | T::Boolean => "bool".into(),
        T::Varchar(_) | T::CharacterVarying(_) | T::CharVarying(_) => "varchar".into(),
        T::Char(_) | T::Character(_) => "bpchar".into(),
        T::Numeric(_) | T::Decimal(_) | T::Dec(_) => "numeric".into(),
        T::Time(_, TimezoneInfo::WithTimeZone | TimezoneInfo::Tz) => "timetz".into(),
        T::Time(..) => "time".into(),
        T::Timestamp(_, TimezoneInfo::WithTimeZone | TimezoneInfo::Tz) => "timestamptz".into(),
        T::Timestamp(..) => "timestamp".into(),
        T::Interval { .. } => "interval".into(),
        T::JSON => "json".into(),
        T::JSONB => "jsonb".into(),
        T::Uuid => "uuid".into(),
        T::Array(element) => match element {
            datafusion::sql::sqlparser::ast::ArrayElemTypeDef::SquareBracket(inner, _)
            | datafusion::sql::sqlparser::ast::ArrayElemTypeDef::AngleBracket(inner)
            | datafusion::sql::sqlparser::ast::ArrayElemTypeDef::Parenthesis(inner) => {
                type_name(inner)
            }
            datafusion::sql::sqlparser::ast::ArrayElemTypeDef::None => "array".into(),
        },
        T::Custom(name, _) => match name.0.last() {
            Some(ObjectNamePart::Identifier(ident)) => ident_name(ident),
            _ => name.to_string().to_lowercase(),
        },
        other => {
            let text = other.to_string().to_lowercase();
            text.split('(').next().unwrap_or(&text).trim().to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn names(sql: &str) -> Vec<Option<String>> {
        let Statement::Query(query) = Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .unwrap()
            .remove(0)
        else {
            panic!("not a query: {sql}");
        };
        postgres_output_names(&query).expect("names")
    }

    fn named(values: &[&str]) -> Vec<Option<String>> {
        values.iter().map(|v| Some(v.to_string())).collect()
    }

    #[test]
    fn expressions_are_named_as_postgres_names_them() {
        assert_eq!(
            names(
                "SELECT a + 1, 1, 'x', true, 1::int, '1'::text, a::text, CAST(b AS float8), \
                 t.\"Mixed\", CASE WHEN a THEN 1 END, ARRAY[1], count(*), pg_catalog.now(), \
                 trim(x), ltrim(x), -a, a IS NULL, (a), interval '1 day', date '2020-01-01', \
                 '{1}'::int[], current_user, (SELECT max(x) FROM u), (SELECT 1 AS one), \
                 EXISTS (SELECT 1), NOT EXISTS (SELECT 1), coalesce(a, 1), ROW(1, 2), '1'::timestamp with time zone \
                 FROM t"
            ),
            named(&[
                "?column?",
                "?column?",
                "?column?",
                "?column?",
                "int4",
                "text",
                "a",
                "b",
                "Mixed",
                "case",
                "array",
                "count",
                "now",
                "btrim",
                "ltrim",
                "?column?",
                "?column?",
                "a",
                "interval",
                "date",
                "int4",
                "current_user",
                "max",
                "one",
                "exists",
                "?column?",
                "coalesce",
                "row",
                "timestamptz",
            ])
        );
    }

    #[test]
    fn aliases_keep_their_names_and_stars_are_not_matched() {
        assert_eq!(names("SELECT a AS x, b FROM t"), [None, Some("b".into())]);
        assert_eq!(
            names("SELECT a + 1 FROM t UNION SELECT 2"),
            [Some("?column?".into())]
        );
        let Statement::Query(query) =
            Parser::parse_sql(&PostgreSqlDialect {}, "SELECT *, 1 FROM t")
                .unwrap()
                .remove(0)
        else {
            panic!()
        };
        assert_eq!(postgres_output_names(&query), None);
    }
}
