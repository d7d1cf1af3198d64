//! `pg_catalog` comes first on every search path in Postgres: an unqualified name of a catalog
//! relation finds it whatever `search_path` says. DataFusion finds a relation in the current
//! schema only, so such names are qualified here.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, visit_relations_mut, Expr, FunctionArg, FunctionArgExpr,
    FunctionArguments, Ident, ObjectNamePart, Statement, Value,
};

/// `pg_catalog` tables of Eddy's own (the others the crate qualifies itself).
const EDDYS_CATALOG_TABLES: &[&str] = &["pg_stat_activity", "pg_indexes"];

fn is_eddys_catalog_table(name: &str) -> bool {
    EDDYS_CATALOG_TABLES
        .iter()
        .copied()
        .chain(crate::pg::empty_catalogs::names())
        .any(|table| name.eq_ignore_ascii_case(table))
}

pub(crate) fn apply(statement: &mut Statement) {
    qualify_eddy_catalog_tables(statement);
    qualify_regclass_names(statement);
}

fn qualify_eddy_catalog_tables(statement: &mut Statement) {
    let _ = visit_relations_mut(statement, |name| {
        let is_it = name.0.len() == 1
            && name.0[0]
                .as_ident()
                .is_some_and(|i| is_eddys_catalog_table(&i.value));
        if is_it {
            name.0
                .insert(0, ObjectNamePart::Identifier(Ident::new("pg_catalog")));
        }
        ControlFlow::<()>::Continue(())
    });
}

/// `'pg_class'::regclass`: the crate's rules turn it into a lookup of
/// `parse_ident('pg_class'::TEXT)` in the current schema; a catalog's name (`pg_` names are
/// reserved to the system in Postgres' own schemas) is looked up in `pg_catalog`.
fn qualify_regclass_names(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        let Expr::Function(function) = expr else {
            return ControlFlow::<()>::Continue(());
        };
        let is_it = function
            .name
            .0
            .last()
            .is_some_and(|n| n.to_string().eq_ignore_ascii_case("parse_ident"));
        let FunctionArguments::List(list) = &mut function.args else {
            return ControlFlow::Continue(());
        };
        if !is_it || list.args.len() != 1 {
            return ControlFlow::Continue(());
        }
        if let FunctionArg::Unnamed(FunctionArgExpr::Expr(arg)) = &mut list.args[0] {
            let literal = match arg {
                Expr::Cast { expr, .. } => expr.as_mut(),
                other => other,
            };
            if let Expr::Value(value) = literal {
                if let Value::SingleQuotedString(name) = &mut value.value {
                    if name.starts_with("pg_") && !name.contains('.') && !name.contains('"') {
                        *name = format!("pg_catalog.{name}");
                    }
                }
            }
        }
        ControlFlow::Continue(())
    });
}

#[cfg(test)]
mod tests {

    fn rewritten(sql: &str) -> String {
        crate::pg::ast::catalog_rewrites::rewritten_by(sql, super::apply)
    }

    #[test]
    fn catalog_names_are_found_in_pg_catalog() {
        assert_eq!(
            rewritten("SELECT parse_ident('pg_extension'::TEXT), parse_ident('t'::TEXT)"),
            "SELECT parse_ident('pg_catalog.pg_extension'::TEXT), parse_ident('t'::TEXT)"
        );
        assert_eq!(
            rewritten("SELECT * FROM pg_stat_activity"),
            "SELECT * FROM pg_catalog.pg_stat_activity"
        );
    }
}
