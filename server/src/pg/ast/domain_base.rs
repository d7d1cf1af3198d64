//! The base type of a domain, which drivers find with a correlated recursive subquery:
//! asyncpg's type introspection asks, for every type it reads,
//!
//! ```sql
//! (WITH RECURSIVE typebases(oid, depth) AS (
//!     SELECT t2.typbasetype, 0 FROM pg_type t2 WHERE t2.oid = t.oid
//!     UNION ALL
//!     SELECT t2.typbasetype, tb.depth + 1 FROM pg_type t2, typebases tb
//!     WHERE tb.oid = t2.oid AND t2.typbasetype != 0
//! ) SELECT oid FROM typebases ORDER BY depth DESC LIMIT 1)
//! ```
//!
//! DataFusion cannot run a recursive query per outer row. Such a subquery (a recursive CTE
//! that starts from `typbasetype` of the `pg_type` row with a given oid, read back deepest
//! first) becomes `eddy_domain_base_type(oid)`, which follows `typbasetype` in `pg_type` to the
//! end of the chain. Eddy's domains are the built-in ones, so the chain is read from the
//! catalog's built-in types.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int32Array};
use datafusion::arrow::datatypes::{DataType, Int32Type};
use datafusion::error::Result;
use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, BinaryOperator, Expr, Query, SelectItem, SetExpr, SetOperator,
    Statement, TableFactor,
};
use datafusion_pg_catalog::pg_catalog::PgCatalogStaticTables;

use crate::pg::ast::catalog_rewrites::parse;

/// The function such subqueries become.
pub(crate) const DOMAIN_BASE_TYPE: &str = "eddy_domain_base_type";

/// Replaces each domain-base subquery of `statement` (see the module's comment).
pub(crate) fn apply(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        if let Expr::Subquery(query) = expr {
            if let Some(oid) = domain_base_of(query) {
                if let Some(call) = parse(&format!("{DOMAIN_BASE_TYPE}({oid})")) {
                    *expr = call;
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// The oid whose base type the query finds, when it is such a recursive walk.
fn domain_base_of(query: &Query) -> Option<Expr> {
    let with = query.with.as_ref().filter(|with| with.recursive)?;
    let [cte] = with.cte_tables.as_slice() else {
        return None;
    };
    // The outer query reads the walk back once, the deepest step first.
    let SetExpr::Select(outer) = query.body.as_ref() else {
        return None;
    };
    let reads_cte = matches!(outer.from.as_slice(), [from] if from.joins.is_empty()
        && matches!(&from.relation, TableFactor::Table { name, .. }
            if name.to_string().eq_ignore_ascii_case(&cte.alias.name.value)));
    if !reads_cte || query.order_by.is_none() || query.limit_clause.is_none() {
        return None;
    }
    let SetExpr::SetOperation {
        op: SetOperator::Union,
        left,
        ..
    } = cte.query.body.as_ref()
    else {
        return None;
    };
    let SetExpr::Select(start) = left.as_ref() else {
        return None;
    };
    let [SelectItem::UnnamedExpr(first) | SelectItem::ExprWithAlias { expr: first, .. }, ..] =
        start.projection.as_slice()
    else {
        return None;
    };
    if last_name(first)? != "typbasetype" {
        return None;
    }
    let [from] = start.from.as_slice() else {
        return None;
    };
    let TableFactor::Table { name, .. } = &from.relation else {
        return None;
    };
    let table = name.0.last()?.to_string().to_ascii_lowercase();
    if table != "pg_type" || !from.joins.is_empty() {
        return None;
    }
    let Some(Expr::BinaryOp {
        left,
        op: BinaryOperator::Eq,
        right,
    }) = &start.selection
    else {
        return None;
    };
    match (last_name(left), last_name(right)) {
        (Some(l), _) if l == "oid" => Some(right.as_ref().clone()),
        (_, Some(r)) if r == "oid" => Some(left.as_ref().clone()),
        _ => None,
    }
}

fn last_name(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Identifier(ident) => Some(ident.value.to_ascii_lowercase()),
        Expr::CompoundIdentifier(parts) => parts.last().map(|i| i.value.to_ascii_lowercase()),
        _ => None,
    }
}

/// `typbasetype` of each built-in type, by oid.
fn base_types() -> &'static HashMap<i32, i32> {
    static BASES: OnceLock<HashMap<i32, i32>> = OnceLock::new();
    BASES.get_or_init(|| {
        let mut bases = HashMap::new();
        let Ok(tables) = PgCatalogStaticTables::try_new() else {
            return bases;
        };
        for batch in tables.pg_type.data() {
            let (Some(oids), Some(basetypes)) = (
                batch.column_by_name("oid"),
                batch.column_by_name("typbasetype"),
            ) else {
                continue;
            };
            let (Ok(oids), Ok(basetypes)) = (
                datafusion::arrow::compute::cast(oids, &DataType::Int32),
                datafusion::arrow::compute::cast(basetypes, &DataType::Int32),
            ) else {
                continue;
            };
            let oids = oids.as_primitive::<Int32Type>();
            let basetypes = basetypes.as_primitive::<Int32Type>();
            for i in 0..batch.num_rows() {
                if oids.is_valid(i) {
                    bases.insert(oids.value(i), basetypes.value(i));
                }
            }
        }
        bases
    })
}

/// `eddy_domain_base_type(oid)`: the end of the oid's `typbasetype` chain (0 for a type that
/// is not a domain, as the subquery gives), NULL for an oid `pg_type` does not have.
pub(crate) fn domain_base_type(oids: &ArrayRef, rows: usize) -> Result<ArrayRef> {
    let oids = datafusion::arrow::compute::cast(oids, &DataType::Int32)?;
    let oids = oids.as_primitive::<Int32Type>();
    let bases = base_types();
    let base = |oid: i32| -> Option<i32> {
        let mut base = *bases.get(&oid)?;
        // A chain of domains ends at a type with no base; the step limit guards a cycle.
        for _ in 0..bases.len() {
            match bases.get(&base) {
                Some(&next) if next != 0 => base = next,
                _ => break,
            }
        }
        Some(base)
    };
    Ok(Arc::new(
        (0..rows)
            .map(|i| oids.is_valid(i).then(|| base(oids.value(i))).flatten())
            .collect::<Int32Array>(),
    ))
}

#[cfg(test)]
mod tests {

    use super::*;

    fn rewritten(sql: &str) -> String {
        crate::pg::ast::catalog_rewrites::rewritten_by(sql, apply)
    }

    #[test]
    fn the_recursive_walk_to_a_domains_base_becomes_a_function() {
        let walk = "SELECT t.oid, (CASE WHEN t.typtype = 'd' THEN (WITH RECURSIVE typebases(oid, depth) AS (SELECT t2.typbasetype AS oid, 0 AS depth FROM pg_type t2 WHERE t2.oid = t.oid UNION ALL SELECT t2.typbasetype AS oid, tb.depth + 1 AS depth FROM pg_type t2, typebases tb WHERE tb.oid = t2.oid AND t2.typbasetype <> 0) SELECT oid FROM typebases ORDER BY depth DESC LIMIT 1) ELSE NULL END) AS basetype FROM pg_type AS t";
        assert_eq!(
            rewritten(walk),
            "SELECT t.oid, (CASE WHEN t.typtype = 'd' THEN eddy_domain_base_type(t.oid) ELSE NULL END) AS basetype FROM pg_type AS t"
        );
        // Another recursive subquery is left alone.
        let other = "SELECT (WITH RECURSIVE r (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r ORDER BY n DESC LIMIT 1)";
        assert_eq!(rewritten(other), other);
    }

    #[test]
    fn a_domain_resolves_to_its_base_type() {
        // information_schema.cardinal_number is a domain over integer (23); int4 has no base.
        let cardinal = *base_types()
            .iter()
            .find(|(_, base)| **base == 23)
            .map(|(oid, _)| oid)
            .expect("a built-in domain over integer");
        let oids: ArrayRef = Arc::new(Int32Array::from(vec![
            Some(cardinal),
            Some(23),
            Some(-5),
            None,
        ]));
        let bases = domain_base_type(&oids, 4).unwrap();
        let bases = bases.as_primitive::<Int32Type>();
        assert_eq!(bases.value(0), 23);
        assert_eq!(bases.value(1), 0);
        assert!(bases.is_null(2));
        assert!(bases.is_null(3));
    }
}
