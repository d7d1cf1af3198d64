//! A select over a catalog table that is always empty in Eddy returns no rows, so its select
//! list is never evaluated; but DataFusion must still plan it, and pg_dump's lists hold
//! subqueries it cannot (`ARRAY(SELECT ... WHERE oid = ANY(outer.col))`, a correlated
//! `generate_series` in a FROM). Those subqueries are replaced by NULLs of their type.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, Expr, FunctionArguments, JoinOperator, Query, Select, SetExpr,
    Statement, TableFactor, VisitMut, VisitorMut,
};

/// Catalog tables that are always empty in Eddy: no sequences, column defaults, triggers, row
/// policies, inheritance, publications, subscriptions, event triggers, transforms or labels.
pub(crate) const EMPTY_CATALOGS: &[&str] = &[
    "pg_sequence",
    "pg_attrdef",
    "pg_trigger",
    "pg_policy",
    "pg_inherits",
    "pg_publication",
    "pg_publication_rel",
    "pg_publication_namespace",
    "pg_subscription",
    "pg_event_trigger",
    "pg_transform",
    "pg_seclabels",
];

pub(crate) fn is_empty_catalog(factor: &TableFactor) -> bool {
    match factor {
        TableFactor::Table { name, .. } => name.0.last().is_some_and(|last| {
            EMPTY_CATALOGS.contains(&last.to_string().to_ascii_lowercase().as_str())
        }),
        _ => false,
    }
}

pub(crate) fn apply(statement: &mut Statement) {
    let _ = statement.visit(&mut EmptySelects);
}

struct EmptySelects;

impl VisitorMut for EmptySelects {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let SetExpr::Select(select) = query.body.as_mut() {
            if yields_nothing(select) {
                null_subqueries(select);
            }
        }
        ControlFlow::Continue(())
    }
}

/// Whether the select's FROM has an always-empty catalog joined to the rest by inner joins
/// only (so no row comes out).
fn yields_nothing(select: &Select) -> bool {
    let [table] = select.from.as_slice() else {
        return false;
    };
    let inner_only = table.joins.iter().all(|join| {
        matches!(
            join.join_operator,
            JoinOperator::Join(_) | JoinOperator::Inner(_) | JoinOperator::CrossJoin(_)
        )
    });
    inner_only
        && std::iter::once(&table.relation)
            .chain(table.joins.iter().map(|j| &j.relation))
            .any(is_empty_catalog)
}

fn null_subqueries(select: &mut Select) {
    for item in select.projection.iter_mut() {
        let _ = visit_expressions_mut(item, |expr| {
            let replacement = match expr {
                Expr::Function(f)
                    if matches!(f.args, FunctionArguments::Subquery(_))
                        && f.name.to_string().eq_ignore_ascii_case("array") =>
                {
                    Some("CAST(NULL AS TEXT[])")
                }
                Expr::Subquery(_) | Expr::Exists { .. } => Some("NULL"),
                _ => None,
            };
            if let Some(null) = replacement.and_then(crate::pg::ast::catalog_rewrites::parse) {
                *expr = null;
            }
            ControlFlow::<()>::Continue(())
        });
    }
}

#[cfg(test)]
mod tests {
    use datafusion_pg_catalog::pg_catalog::PgCatalogStaticTables;

    fn rewritten(sql: &str) -> String {
        crate::pg::ast::catalog_rewrites::rewritten_by(sql, super::apply)
    }

    #[test]
    fn subqueries_over_no_rows_become_nulls() {
        assert_eq!(
            rewritten(
                "SELECT p.oid, array_to_string(ARRAY(SELECT r.rolname FROM pg_roles r \
                 WHERE r.oid = ANY(p.polroles)), ', ') FROM unnest(ARRAY[1]) AS s(o) \
                 JOIN pg_policy p ON s.o = p.polrelid"
            ),
            "SELECT p.oid, array_to_string(CAST(NULL AS TEXT[]), ', ') FROM UNNEST(ARRAY[1]) \
             AS s (o) JOIN pg_policy p ON s.o = p.polrelid"
        );
        // An outer join keeps the other side's rows.
        let sql = "SELECT (SELECT 1 FROM pg_am) FROM pg_class c LEFT JOIN pg_policy p ON true";
        assert_eq!(rewritten(sql), sql);
    }

    #[test]
    fn the_catalogs_taken_as_empty_are_empty() {
        let tables = PgCatalogStaticTables::try_new().unwrap();
        for (name, table) in [
            ("pg_sequence", &tables.pg_sequence),
            ("pg_attrdef", &tables.pg_attrdef),
            ("pg_trigger", &tables.pg_trigger),
            ("pg_policy", &tables.pg_policy),
            ("pg_inherits", &tables.pg_inherits),
            ("pg_publication", &tables.pg_publication),
            ("pg_publication_rel", &tables.pg_publication_rel),
            ("pg_publication_namespace", &tables.pg_publication_namespace),
            ("pg_subscription", &tables.pg_subscription),
            ("pg_event_trigger", &tables.pg_event_trigger),
        ] {
            assert!(super::EMPTY_CATALOGS.contains(&name));
            let rows: usize = table.data().iter().map(|b| b.num_rows()).sum();
            assert_eq!(rows, 0, "{name} has rows");
        }
    }
}
