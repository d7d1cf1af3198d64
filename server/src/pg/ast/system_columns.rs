//! `tableoid`, the system column every Postgres relation has (pg_dump reads it on each catalog
//! to tell which catalog an object comes from). Eddy's catalog tables are DataFusion tables
//! with no hidden columns, and adding a visible one would change `SELECT *`; so a reference to
//! it in a query over `pg_catalog` tables becomes the catalog's OID (Postgres' own, as
//! `pg_class` gives it: [`crate::pg::catalog_oids`]).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, Expr, Ident, Query, Select, SetExpr, Statement, TableFactor,
    TableWithJoins, VisitMut, VisitorMut,
};

pub(crate) fn apply(statement: &mut Statement) {
    if !statement
        .to_string()
        .to_ascii_lowercase()
        .contains("tableoid")
    {
        return;
    }
    let _ = statement.visit(&mut TableOids);
}

struct TableOids;

impl VisitorMut for TableOids {
    type Break = ();

    // After the query's own subqueries: each select replaces the references of its scope only.
    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        replace_in_body(query.body.as_mut());
        ControlFlow::Continue(())
    }
}

fn replace_in_body(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => replace_in_select(select),
        SetExpr::SetOperation { left, right, .. } => {
            replace_in_body(left);
            replace_in_body(right);
        }
        _ => {}
    }
}

/// The `pg_catalog` tables a select reads, as (the name it is referred to by, the table).
fn catalog_tables(from: &[TableWithJoins]) -> Vec<(String, String)> {
    let factors = from
        .iter()
        .flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)));
    let mut tables = Vec::new();
    for factor in factors {
        let TableFactor::Table { name, alias, .. } = factor else {
            continue;
        };
        let parts: Vec<String> = name
            .0
            .iter()
            .filter_map(|p| p.as_ident().map(|i| i.value.to_ascii_lowercase()))
            .collect();
        let table = match parts.as_slice() {
            [table] if table.starts_with("pg_") => table.clone(),
            [schema, table] if schema == "pg_catalog" => table.clone(),
            _ => continue,
        };
        let reference = alias
            .as_ref()
            .map(|a| a.name.value.to_ascii_lowercase())
            .unwrap_or_else(|| table.clone());
        tables.push((reference, table));
    }
    tables
}

fn replace_in_select(select: &mut Select) {
    let tables = catalog_tables(&select.from);
    if tables.is_empty() {
        return;
    }
    let table_of = |expr: &Expr| -> Option<String> {
        match expr {
            Expr::Identifier(column) if is_tableoid(column) && tables.len() == 1 => {
                Some(tables[0].1.clone())
            }
            Expr::CompoundIdentifier(parts) if parts.len() == 2 && is_tableoid(&parts[1]) => {
                let reference = parts[0].value.to_ascii_lowercase();
                tables
                    .iter()
                    .find(|(name, _)| *name == reference)
                    .map(|(_, table)| table.clone())
            }
            _ => None,
        }
    };
    let mut replace = |expr: &mut Expr| {
        if let Some(table) = table_of(expr) {
            let oid = crate::pg::catalog_oids::catalog_oid(&table).unwrap_or(0);
            if let Some(oid) =
                crate::pg::ast::catalog_rewrites::parse(&format!("CAST({oid} AS INT)"))
            {
                *expr = oid;
            }
        }
        ControlFlow::<()>::Continue(())
    };
    for item in select.projection.iter_mut() {
        let _ = visit_expressions_mut(item, &mut replace);
    }
    if let Some(selection) = select.selection.as_mut() {
        let _ = visit_expressions_mut(selection, &mut replace);
    }
    for table in select.from.iter_mut() {
        for join in table.joins.iter_mut() {
            let _ = visit_expressions_mut(&mut join.join_operator, &mut replace);
        }
    }
}

fn is_tableoid(ident: &Ident) -> bool {
    ident.value.eq_ignore_ascii_case("tableoid")
}

#[cfg(test)]
mod tests {

    fn rewritten(sql: &str) -> String {
        crate::pg::ast::catalog_rewrites::rewritten_by(sql, super::apply)
    }

    #[test]
    fn a_catalogs_tableoid_is_its_oid_in_pg_class() {
        let text = rewritten(
            "SELECT x.tableoid, x.oid, n.nspname FROM pg_extension x \
             JOIN pg_namespace n ON n.oid = x.extnamespace",
        );
        assert!(
            text.starts_with("SELECT CAST(3079 AS INT), x.oid"),
            "{text}"
        );
    }

    #[test]
    fn a_bare_tableoid_with_one_catalog_and_in_a_subquery() {
        let text = rewritten(
            "SELECT tableoid, (SELECT c.tableoid FROM pg_catalog.pg_class c LIMIT 1) FROM pg_am",
        );
        assert!(text.contains("CAST(2601 AS INT)"), "{text}");
        assert!(text.contains("CAST(1259 AS INT)"), "{text}");
        assert!(!text.contains("tableoid"), "{text}");
    }

    #[test]
    fn user_tables_and_ambiguous_names_are_left_alone() {
        let sql = "SELECT tableoid FROM t";
        assert_eq!(rewritten(sql), sql);
        let sql = "SELECT tableoid FROM pg_am, pg_type";
        assert_eq!(rewritten(sql), sql);
    }
}
